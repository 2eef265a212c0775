"""Writes architectures.jsonl.gz: the header and configuration of a tiny
random-init checkpoint of every model type transformers can build on CPU.

    python generate.py OUT   (needs torch and transformers; about 8 minutes)

For each model type of transformers' CONFIG_MAPPING it takes the
configuration of AutoConfig.for_model(type), with its sizes (and those of
its sub-configurations: text_config, vision_config, ...) made small, builds
the first of AutoModelForCausalLM, AutoModelForMaskedLM,
AutoModelForSeq2SeqLM and AutoModel that takes it (or, failing that, the
configuration as it is, if the model has at most 30M parameters), and saves
it with save_pretrained. What the check package's tests need of each is
kept, one JSON object per line: the model type, the class, config.json as
saved, and each tensor's name, dtype and shape, with the value of the
tensors filled with one non-finite value (Gemma's clipping bounds, +Inf and
-Inf at init). The tests give the other tensors no values: the structure
and configuration checks read names, dtypes and shapes only.

The checkpoints themselves are written under OUT (several GB; a later run
reuses them) and are not kept in the repository. Made with transformers 5.24.0 and torch 2.15.0.
"""

import copy
import gzip
import json
import os
import signal
import sys

import torch
from safetensors import safe_open
from transformers import (AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM,
                          AutoModelForSeq2SeqLM, PretrainedConfig)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

VOCAB, HIDDEN, INTER, LAYERS, HEADS, KV, HEAD_DIM, EXPERTS = 99, 32, 37, 4, 4, 2, 8, 4
SMALL = {
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "d_model": HIDDEN, "n_embd": HIDDEN, "dim": HIDDEN,
    "intermediate_size": INTER, "ffn_dim": INTER, "d_ff": INTER, "encoder_ffn_dim": INTER,
    "decoder_ffn_dim": INTER, "n_inner": INTER, "hidden_dim": INTER,
    "moe_intermediate_size": 24, "shared_expert_intermediate_size": 24, "expert_intermediate_size": 24,
    "num_hidden_layers": LAYERS, "num_layers": LAYERS, "n_layer": LAYERS, "n_layers": LAYERS,
    "encoder_layers": LAYERS, "decoder_layers": LAYERS, "num_encoder_layers": LAYERS, "num_decoder_layers": LAYERS,
    "num_attention_heads": HEADS, "n_head": HEADS, "n_heads": HEADS, "num_heads": HEADS,
    "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
    "num_key_value_heads": KV, "head_dim": HEAD_DIM, "d_kv": HEAD_DIM,
    "num_experts": EXPERTS, "n_routed_experts": EXPERTS, "num_local_experts": EXPERTS,
    "num_experts_per_tok": 2, "moe_topk": 2, "n_group": 1, "topk_group": 1,
    "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 8, "global_head_dim": 16,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8,
}
AUTOS = (AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoModel)


def small_kwargs(c):
    """The keyword arguments that make configuration c and its sub-configurations small."""
    kw = {}
    for k, v in c.to_dict().items():
        try:
            sub = c.__dict__[k] if k in c.__dict__ else getattr(c, k, None)
        except Exception:
            sub = None
        if isinstance(sub, PretrainedConfig):
            kw[k] = dict(small_kwargs(sub), model_type=sub.model_type)
        elif k.endswith("token_id") and isinstance(v, int) and not isinstance(v, bool) and v >= VOCAB:
            kw[k] = VOCAB - 1
        elif k in SMALL and isinstance(v, int) and not isinstance(v, bool) and v > 0:
            kw[k] = SMALL[k] if k == "num_key_value_heads" else min(v, SMALL[k])
    return kw


def build(model_type):
    base = AutoConfig.for_model(model_type)
    errors = []
    for how, kw in (("small", small_kwargs(base)), ("default", {})):
        try:
            cfg = AutoConfig.for_model(model_type, **kw)
        except Exception as e:
            errors.append(f"{how}: {e}")
            continue
        for auto in AUTOS:
            if type(cfg) not in auto._model_mapping:
                continue
            try:
                with torch.device("meta"):
                    n = sum(p.numel() for p in auto.from_config(cfg).parameters())
                if n > 30_000_000:
                    errors.append(f"{how}: {n} parameters")
                    break
                torch.manual_seed(0)
                return auto.__name__, auto.from_config(cfg)
            except Exception as e:
                errors.append(f"{how} {auto.__name__}: {e}")
    raise RuntimeError("; ".join(errors)[:500])


def record(model_type, cls, out):
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    tensors = []
    for name in sorted(os.listdir(out)):
        if not name.endswith(".safetensors"):
            continue
        with safe_open(os.path.join(out, name), "pt") as st:
            for t in sorted(st.keys()):
                s = st.get_slice(t)
                entry = [t, s.get_dtype(), list(s.get_shape())]
                v = st.get_tensor(t)
                if v.is_floating_point() and v.numel() > 0 and bool(torch.isinf(v).all()):
                    signs = set(torch.sign(v.float()).flatten().tolist())
                    if len(signs) == 1:
                        entry.append("inf" if signs.pop() > 0 else "-inf")
                tensors.append(entry)
    return {"type": model_type, "class": cls, "config": config, "tensors": tensors}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError()))
    lines = []
    for mt in CONFIG_MAPPING_NAMES:
        dst = os.path.join(out, mt)
        done = os.path.join(dst, "auto_class")
        signal.alarm(90)
        try:
            if not os.path.exists(done):  # a checkpoint built by an earlier run is kept
                cls, model = build(mt)
                model.save_pretrained(dst)
                with open(done, "w") as f:
                    f.write(cls)
            with open(done) as f:
                lines.append(record(mt, f.read(), dst))
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            print(f"{mt}: not built: {str(e)[:200]}", file=sys.stderr)
        finally:
            signal.alarm(0)
    here = os.path.dirname(os.path.abspath(__file__))
    with gzip.open(os.path.join(here, "architectures.jsonl.gz"), "wt", compresslevel=9) as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")
    print(f"{len(lines)} architectures", file=sys.stderr)


if __name__ == "__main__":
    main()
