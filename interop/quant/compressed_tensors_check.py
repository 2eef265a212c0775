"""Checks `safetensors quantize` against the compressed-tensors library itself.

Not run in CI (it needs torch, about 3 GB): run it by hand with

    python3 -m venv VENV && VENV/bin/pip install compressed-tensors==0.20.0 torch transformers
    VENV/bin/python interop/quant/compressed_tensors_check.py

from the repository root. For each of a few tiny models built with
transformers (random weights in BF16, F16 and F32, a row of zeros, a tensor of
zeros) and each strategy, it

  1. has `go run ./cmd/safetensors quantize` write the int-quantized directory;
  2. computes the scales with compressed-tensors' calculate_qparams from each
     Linear weight's per-row (or whole-tensor) minimum and maximum, as its
     min-max observer does, and compresses the weights with the library's
     int-quantized compressor: the I8 weights and the scales must equal Go's
     bit for bit;
  3. has transformers load Go's directory through compressed-tensors
     (CompressedTensorsConfig(dequantize=True)): the weights it decompresses
     must equal the library's own dequantization of its own compression, bit
     for bit;
  4. has update_config rewrite the source's config.json with the same ignore
     list: the text must equal the config.json Go wrote, byte for byte;
  5. checks that the weights Go quantized are exactly those of the model's
     nn.Linear modules that the ignore list does not name.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file

import compressed_tensors
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (
    QuantizationConfig,
    QuantizationScheme,
    QuantizationStatus,
)
from compressed_tensors.quantization.quant_scheme import INT8_W8A8
from compressed_tensors.quantization.utils.helpers import calculate_qparams
from compressed_tensors.compressors.naive_quantized.base import IntQuantizationCompressor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scheme(strategy):
    s = dict(INT8_W8A8)
    s["weights"] = s["weights"].model_copy(update={"strategy": strategy})
    return QuantizationScheme(targets=["Linear"], **s)


def qconfig(strategy, ignore):
    return QuantizationConfig(
        config_groups={"group_0": scheme(strategy)},
        ignore=ignore,
        format="int-quantized",
        quantization_status=QuantizationStatus.COMPRESSED,
    )


def models():
    torch.manual_seed(0)
    llama = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    qwen = transformers.Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    phi3 = transformers.Phi3Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, pad_token_id=0)
    neox = transformers.GPTNeoXConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4)
    falcon = transformers.FalconConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_kv_heads=2,
        new_decoder_architecture=True)
    for name, cfg, cls in [("llama", llama, transformers.LlamaForCausalLM),
                           ("qwen2", qwen, transformers.Qwen2ForCausalLM),
                           ("phi3", phi3, transformers.Phi3ForCausalLM),
                           ("gpt_neox", neox, transformers.GPTNeoXForCausalLM),
                           ("falcon", falcon, transformers.FalconForCausalLM)]:
        for dtype in [torch.bfloat16, torch.float16, torch.float32]:
            m = cls(cfg).to(dtype)
            with torch.no_grad():
                for n, p in m.named_parameters():
                    p.normal_(0, 0.05)
                linears = [mod.weight for mod in m.modules() if isinstance(mod, torch.nn.Linear)]
                linears[0][3].zero_()  # a row of zeros: the dtype's eps
                linears[0][5, 7] = 3.0  # an outlier
                linears[1].zero_()
            yield f"{name}-{str(dtype).split('.')[-1]}", m


def main():
    failures = 0
    work = tempfile.mkdtemp()
    try:
        for name, model in models():
            src = os.path.join(work, name)
            model.save_pretrained(src)
            sd = load_file(os.path.join(src, "model.safetensors"))
            for strategy in ["channel", "tensor"]:
                dst = os.path.join(work, f"{name}-{strategy}-q")
                subprocess.run(["go", "run", "./cmd/safetensors", "quantize", "--per", strategy, src, dst],
                               cwd=REPO, check=True, stdout=subprocess.DEVNULL)
                go = load_file(os.path.join(dst, "model.safetensors"))
                args = scheme(strategy).weights
                n = 0
                refs = {}
                goconfig = json.load(open(os.path.join(dst, "config.json")))
                ignore = goconfig["quantization_config"]["ignore"]
                linear = {n + ".weight" for n, mod in model.named_modules()
                          if isinstance(mod, torch.nn.Linear) and n not in ignore}
                quantized = {k for k, v in go.items() if v.dtype == torch.int8}
                if quantized != linear & set(sd):
                    failures += 1
                    print(f"FAIL {name} {strategy}: quantized {sorted(quantized ^ (linear & set(sd)))} differ from the Linear layers")
                for key, w in sd.items():
                    if key not in quantized:
                        assert go[key].dtype == w.dtype and torch.equal(go[key], w), key
                        continue
                    if strategy == "channel":
                        lo, hi = w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
                    else:
                        lo, hi = w.amin().reshape(1), w.amax().reshape(1)
                    scale, zp = calculate_qparams(lo, hi, args)
                    out = IntQuantizationCompressor.compress({"weight": w, "weight_scale": scale, "weight_zero_point": zp}, scheme(strategy))
                    ok = (go[key].dtype == torch.int8 and torch.equal(go[key], out["weight"])
                          and go[key + "_scale"].dtype == scale.dtype and torch.equal(go[key + "_scale"], scale))
                    deq = IntQuantizationCompressor.decompress({"weight": go[key], "weight_scale": go[key + "_scale"]}, scheme(strategy))["weight"]
                    ref = IntQuantizationCompressor.decompress(out, scheme(strategy))["weight"]
                    refs[key] = ref
                    ok = ok and torch.equal(deq, ref)
                    n += 1
                    if not ok:
                        failures += 1
                        print(f"FAIL {name} {strategy} {key}")
                # config.json as update_config rewrites the source's
                ref_dir = os.path.join(work, "ref")
                os.makedirs(ref_dir, exist_ok=True)
                shutil.copy(os.path.join(src, "config.json"), ref_dir)
                ModelCompressor(quantization_config=qconfig(strategy, ignore)).update_config(ref_dir)
                want = open(os.path.join(ref_dir, "config.json"), "rb").read()
                got = open(os.path.join(dst, "config.json"), "rb").read()
                if want != got:
                    failures += 1
                    print(f"FAIL {name} {strategy} config.json differs")
                # the library loads Go's directory through transformers and
                # decompresses it: the weights must be the library's own
                # dequantization of its own compression
                loaded = transformers.AutoModelForCausalLM.from_pretrained(
                    dst, quantization_config=transformers.CompressedTensorsConfig(dequantize=True))
                lsd = loaded.state_dict()
                for key in refs:
                    if key not in lsd:
                        continue  # tied or renamed by the loader
                    if not torch.equal(lsd[key], refs[key]):
                        failures += 1
                        print(f"FAIL {name} {strategy} {key}: loaded weight differs")
                print(f"ok   {name} {strategy}: {n} weights equal bit for bit, config.json equal, "
                      "loaded and decompressed by transformers equal")
    finally:
        shutil.rmtree(work)
    print(f"compressed-tensors {compressed_tensors.__version__}, torch {torch.__version__}, transformers {transformers.__version__}")
    if failures:
        print(f"{failures} failures")
        sys.exit(1)


if __name__ == "__main__":
    main()
