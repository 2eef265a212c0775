"""Writes libraries.jsonl.gz: the JSON files and safetensors headers of small
random-init checkpoints saved by Python ML libraries other than transformers
(diffusers, timm, peft, sentence-transformers, open_clip), for the tests of
the Go package check.

    HF_HUB_OFFLINE=1 python generate.py [--scratch DIR] [--only LIB,...]
    HF_HUB_OFFLINE=1 python generate.py --heldout OUT.jsonl.gz [--scratch DIR]

Needs torch, transformers, diffusers, timm, peft, sentence-transformers,
open_clip_torch and safetensors; made with torch 2.15.0 (CPU), transformers
5.24, diffusers 0.42.1, timm 1.0.31, peft 0.21.2, sentence-transformers
6.2.0, open_clip 3.3.0, safetensors 0.8.0. On 2 CPU cores a first run
takes about 20 minutes: 13 to count the parameters of each of timm's 1371
models on the meta device (to pick the smallest of each module), 6 to build
and save the models and read their headers back. The checkpoints are
written under the scratch folder (default libraries-out in the temporary
directory; several GB) with the parameter counts, and a later run reuses
each finished one; the held-out set takes about 7 minutes more.

Every model is built from a configuration (no download), with fixed seeds,
and saved with its library's own save function:

- diffusers: each model class of diffusers' top level that builds on CPU,
  with its constructor's defaults made small (2 layers and 2 attention
  heads where a layer or head count is an argument; channel lists divided
  so that the narrowest is 32), or a hand-written small configuration
  where the defaults do not build or stay large; at most 40M parameters.
  ModelMixin.save_pretrained. Two pipelines (StableDiffusionPipeline,
  FluxPipeline) of tiny components, saved with
  DiffusionPipeline.save_pretrained: their record of part "" holds
  model_index.json and no tensors, and each component folder with a JSON
  file is a part (the scheduler's holds scheduler_config.json only; the
  tokenizers' folders are left out). A component's library and class are
  those model_index.json names: the text encoders' library is
  "transformers" (CLIPTextModel, T5EncoderModel).
- timm: one or two of the smallest models (at most 40M parameters and
  buffers) of each module of timm.models, test_* models first, at their
  real default sizes; timm.models._hub.save_for_hf(safe_serialization=True),
  which writes model.safetensors and the config.json of timm's hub code.
- peft: one adapter of each PEFT method of peft 0.21 that saves on a tiny
  LlamaForCausalLM (2 layers, hidden size 32), PeftModel.save_pretrained
  (adapter_config.json, adapter_model.safetensors). LoRA-family methods
  initialise one factor to zero; "peft/lora-trained" is a LoRA whose
  lora_B is random, as after training.
- sentence-transformers: SentenceTransformer / CrossEncoder / SparseEncoder
  .save of a tiny BERT with Pooling, Dense, Normalize, LayerNorm, Router
  modules; each module folder is a part ("" is the root: modules.json,
  config_sentence_transformers.json, sentence_bert_config.json and the
  Transformer's config.json and weights).
- open_clip: small versions of model configurations (edited config dicts),
  open_clip.push_to_hf_hub.save_for_hf(safe_serialization=True), which
  writes open_clip_model.safetensors and open_clip_config.json.

Each line of the output is one part of one model, keys sorted:
library, model, part, class, files (every JSON file the save wrote in the
part's folder, parsed, tokenizer files excepted) and tensors (the
safetensors header of the part's file(s) in header order, [name, dtype,
shape] with a fourth element "zero", "inf", "-inf", "nan" when every value
is that, "nonfinite" when some are not finite).

--heldout builds the same classes with other sizes (3 layers, 3 heads,
wider channels where the class allows; the second smallest model of each
timm module; other ranks) and another seed, for tests that must not have
seen them.
"""

import argparse
import gzip
import inspect
import json
import os
import re
import shutil
import signal
import struct
import tempfile
import sys
import time
import traceback
import warnings

if os.environ.get("PYTHONHASHSEED") != "0":  # peft writes target_modules from a set
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

torch.set_num_threads(2)
MAX_PARAMS = 40_000_000
H = False  # held-out sizes
BUILDERS = []  # (library, model id, function(dir) -> {part: class})


def builder(library, model):
    def deco(fn):
        BUILDERS.append((library, model, fn))
        return fn

    return deco


def seed(n=0):
    torch.manual_seed(n + (1000 if H else 0))


def nparams(m):
    return sum(p.numel() for p in m.parameters()) + sum(b.numel() for b in m.buffers())


# ============================================================ records

TOKENIZER_FILES = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json"}


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n), object_pairs_hook=lambda kv: kv)  # a list of pairs keeps the order


def flag(v):
    if v.numel() == 0:
        return None
    if v.dtype == torch.bool:
        return None if bool(v.any()) else "zero"
    if not v.is_floating_point() and not v.is_complex():
        return None if bool((v != 0).any()) else "zero"
    v = v.float()
    fin = torch.isfinite(v)
    if bool(fin.all()):
        return None if bool((v != 0).any()) else "zero"
    if bool(torch.isnan(v).all()):
        return "nan"
    if bool((v == float("inf")).all()):
        return "inf"
    if bool((v == float("-inf")).all()):
        return "-inf"
    return "nonfinite"


def tensors_of(path):
    out = []
    with safe_open(path, "pt") as st:
        for name, info in header(path):
            if name == "__metadata__":
                continue
            info = dict(info)
            entry = [name, info["dtype"], info["shape"]]
            f = flag(st.get_tensor(name))
            if f:
                entry.append(f)
            out.append(entry)
    return out


def records(library, model, d, classes):
    recs = []
    for root, dirs, files in sorted(os.walk(d)):
        dirs.sort()
        part = os.path.relpath(root, d).replace(os.sep, "/")
        part = "" if part == "." else part
        jsons = {f: json.load(open(os.path.join(root, f))) for f in sorted(files)
                 if f.endswith(".json") and f not in TOKENIZER_FILES and not f.startswith(".")}
        tensors = []
        for f in sorted(files):
            if f.endswith(".safetensors"):
                tensors += tensors_of(os.path.join(root, f))
        if not jsons and not tensors:
            continue
        c = classes.get(part, "")  # a part's class, or [library, class]
        lib, cls = (c[0], c[1]) if isinstance(c, list) else (library, c)
        recs.append({"library": lib, "model": model, "part": part, "class": cls, "files": jsons,
                     "tensors": tensors})
    return recs


# ============================================================ diffusers models

def df_shrink(cls, wide=False, narrow=False):
    """Small keyword arguments for a diffusers model class, from its constructor's defaults; narrow also
    divides the widths given as one number (hidden sizes, feed-forward sizes) by 8."""
    L = 3 if H else 2
    kw = {}
    for k, p in inspect.signature(cls.__init__).parameters.items():
        v = p.default
        if v is inspect.Parameter.empty or isinstance(v, bool):
            continue
        if narrow and isinstance(v, int) and v >= 256 and v % 64 == 0 and \
                re.search(r"hidden|dim$|width|channels$|intermediate|ffn|embed|inner|size$", k) and \
                not re.search(r"vocab|max|len|sample_size|patch|freq|num_|codebook|position", k):
            kw[k] = v // 8
            continue
        if re.search(r"(^|_)(num_\w*layers|n_layers|depth|layers_per_block|num_\w*blocks)$", k) and \
                isinstance(v, int) and v >= 2:
            kw[k] = L
        elif k in ("num_attention_heads", "num_heads", "n_heads") and isinstance(v, int) and v > 2:
            kw[k] = 3 if H else 2
        elif isinstance(v, (tuple, list)) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v) \
                and re.search(r"channels|dims?$", k) and "axes" not in k and min(v) >= 64:
            f = min(v) // (64 if wide else 32)
            kw[k] = type(v)(x // f for x in v)
    return kw


# Hand-written small configurations, for classes whose defaults do not build or stay large (the
# generic shrink's arguments are applied first, these override them); "L" stands for the layer count.
DF_HAND = {
    "AudioLDM2ProjectionModel": dict(text_encoder_dim=32, text_encoder_1_dim=24, langauge_model_dim=16),
    "AutoencoderKL": dict(block_out_channels=(32, 64), down_block_types=("DownEncoderBlock2D",) * 2,
                          up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4),
    "VQModel": dict(block_out_channels=(32, 64), down_block_types=("DownEncoderBlock2D",) * 2,
                    up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=3),
    "AutoencoderKLTemporalDecoder": dict(block_out_channels=(32, 64), down_block_types=("DownEncoderBlock2D",) * 2,
                                         latent_channels=4),
    "AsymmetricAutoencoderKL": dict(down_block_out_channels=(32, 64), up_block_out_channels=(32, 64),
                                    down_block_types=("DownEncoderBlock2D",) * 2,
                                    up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4),
    "AutoencoderKLHunyuanImage": dict(in_channels=3, out_channels=3, latent_channels=8,
                                      block_out_channels=(32, 64, 64, 64), layers_per_block=1,
                                      spatial_compression_ratio=8, sample_size=64, scaling_factor=1.0,
                                      downsample_match_channel=True, upsample_match_channel=True),
    "AutoencoderKLWan": dict(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1),
    "AutoencoderKLQwenImage": dict(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1),
    "AutoencoderKLQwenImage21": dict(base_dim=8, z_dim=4, dim_mult=[1, 2, 2, 2], num_res_blocks=1),
    "AutoencoderOobleck": dict(encoder_hidden_size=8, decoder_channels=8, decoder_input_channels=4,
                               audio_channels=2, channel_multiples=[1, 2], downsampling_ratios=[2, 2]),
    "ChromaTransformer2DModel": dict(approximator_hidden_dim=32, approximator_layers=2, joint_attention_dim=64),
    "ConsistencyDecoderVAE": dict(encoder_block_out_channels=(32, 64), decoder_block_out_channels=(32, 64),
                                  encoder_down_block_types=("DownEncoderBlock2D",) * 2,
                                  decoder_down_block_types=("ResnetDownsampleBlock2D",) * 2,
                                  decoder_up_block_types=("ResnetUpsampleBlock2D",) * 2,
                                  encoder_layers_per_block=1, decoder_layers_per_block=1, latent_channels=4,
                                  decoder_norm_num_groups=32, encoder_norm_num_groups=32),
    "ControlNetUnionModel": dict(block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 cross_attention_dim=32, attention_head_dim=2, layers_per_block=1,
                                 conditioning_embedding_out_channels=(16, 32), transformer_layers_per_block=1),
    "EasyAnimateTransformer3DModel": dict(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                          out_channels=4, time_embed_dim=32, text_embed_dim=32, num_layers="L",
                                          sample_width=16, sample_height=16, patch_size=2),
    "HiDreamImageTransformer2DModel": dict(patch_size=2, in_channels=4, out_channels=4, num_layers="L",
                                           num_single_layers="L", attention_head_dim=8, num_attention_heads=4,
                                           caption_channels=[8, 4], text_emb_dim=8, num_routed_experts=2,
                                           num_activated_experts=2, axes_dims_rope=(4, 2, 2),
                                           max_resolution=(32, 32), llama_layers=(0, 1)),
    "HunyuanDiT2DModel": dict(sample_size=16, num_layers="L", patch_size=2, attention_head_dim=8,
                              num_attention_heads=3, in_channels=4, cross_attention_dim=32,
                              cross_attention_dim_t5=32, pooled_projection_dim=16, hidden_size=24,
                              text_len=8, text_len_t5=8, activation_fn="gelu-approximate"),
    "HunyuanDiT2DControlNetModel": dict(sample_size=16, patch_size=2, attention_head_dim=8,
                                        num_attention_heads=3, in_channels=4, cross_attention_dim=32,
                                        cross_attention_dim_t5=32, pooled_projection_dim=16, hidden_size=24,
                                        text_len=8, text_len_t5=8, activation_fn="gelu-approximate",
                                        transformer_num_layers=4),
    "Kandinsky3UNet": dict(in_channels=4, time_embedding_dim=4, groups=2, attention_head_dim=4, layers_per_block=1,
                           block_out_channels=(32, 64), cross_attention_dim=4, encoder_hid_dim=32),
    "LatteTransformer3DModel": dict(sample_size=8, num_layers="L", patch_size=2, attention_head_dim=8,
                                    num_attention_heads=3, caption_channels=32, in_channels=4,
                                    cross_attention_dim=24, out_channels=8, attention_bias=True,
                                    activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                    norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6),
    "Lumina2Transformer2DModel": dict(sample_size=16, patch_size=2, in_channels=4, hidden_size=24,
                                      num_layers="L", num_refiner_layers=1, num_attention_heads=3,
                                      num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None, norm_eps=1e-5,
                                      scaling_factor=1.0, axes_dim_rope=(4, 2, 2), axes_lens=(128, 128, 128),
                                      cap_feat_dim=8),
    "LuminaNextDiT2DModel": dict(sample_size=16, patch_size=2, in_channels=4, hidden_size=16, num_layers="L",
                                 num_attention_heads=4, num_kv_heads=2, multiple_of=16, ffn_dim_multiplier=None,
                                 norm_eps=1e-5, learn_sigma=True, qk_norm=True, cross_attention_dim=32,
                                 scaling_factor=1.0),
    "MochiTransformer3DModel": dict(patch_size=2, num_attention_heads=2, attention_head_dim=8, num_layers="L",
                                    pooled_projection_dim=16, in_channels=12, out_channels=None, qk_norm="rms_norm",
                                    text_embed_dim=16, time_embed_dim=4, activation_fn="swiglu",
                                    max_sequence_length=16),
    "OmniGenTransformer2DModel": dict(hidden_size=16, num_attention_heads=4, num_key_value_heads=4,
                                      intermediate_size=32, num_layers="L", in_channels=4, time_step_dim=4,
                                      rope_scaling={"long_factor": list(range(1, 3)),
                                                    "short_factor": list(range(1, 3))}),
    "PRXTransformer2DModel": dict(in_channels=4, patch_size=2, context_in_dim=32, hidden_size=48,
                                  mlp_ratio=2.0, num_heads=3, depth="L", axes_dim=[8, 8]),
    "StableAudioProjectionModel": dict(text_encoder_dim=32, conditioning_dim=16, min_value=0, max_value=32),
    "Transformer2DModel": dict(num_attention_heads=2, attention_head_dim=8, in_channels=8, num_layers="L",
                               cross_attention_dim=16, norm_num_groups=4),
    "TransformerTemporalModel": dict(num_attention_heads=2, attention_head_dim=8, in_channels=16, num_layers="L",
                                     norm_num_groups=4),
    "UniDiffuserModel": dict(text_dim=32, clip_img_dim=32, num_text_tokens=8, num_attention_heads=2,
                             attention_head_dim=8, in_channels=4, out_channels=4, num_layers="L",
                             norm_num_groups=32, sample_size=16, patch_size=2, block_type="unidiffuser",
                             pre_layer_norm=False, use_timestep_embedding=False, norm_elementwise_affine=True,
                             use_patch_pos_embed=False, ff_final_dropout=True, use_data_type_embedding=False),
    "UniDiffuserTextDecoder": dict(prefix_length=8, prefix_inner_dim=16, prefix_hidden_dim=16, vocab_size=64,
                                   n_positions=32, n_embd=16, n_layer="L", n_head=2, n_inner=32),
    "WanVACETransformer3DModel": dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                      in_channels=16, out_channels=16, text_dim=32, freq_dim=256, ffn_dim=32,
                                      num_layers="L", cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                      rope_max_seq_len=32, vace_layers=[0, 1], vace_in_channels=48),
    "ZImageTransformer2DModel": dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=16,
                                     n_layers="L", n_refiner_layers=1, n_heads=1, n_kv_heads=1, norm_eps=1e-5,
                                     qk_norm=True, cap_feat_dim=16, rope_theta=256.0, t_scale=1000.0,
                                     axes_dims=[8, 4, 4], axes_lens=[256, 32, 32]),
    "ZImageControlNetModel": dict(all_patch_size=(2,), all_f_patch_size=(1,), dim=16, n_refiner_layers=1,
                                  n_heads=1, n_kv_heads=1, control_layers_places=[0], control_in_dim=16),
    "DreamLiteTransformer2DModel": dict(num_attention_heads=2, attention_head_dim=8, in_channels=8, num_layers="L",
                                        norm_num_groups=4, cross_attention_dim=16),
    "T5FilmDecoder": dict(input_dims=32, targets_length=16, d_model=64, num_layers="L", num_heads=2, d_kv=32,
                          d_ff=128),
    "AutoencoderKLMochi": dict(encoder_block_out_channels=(32, 32, 32, 32), decoder_block_out_channels=(32, 32, 32, 32),
                               layers_per_block=(1, 1, 1, 1, 1)),
    "UVit2DModel": dict(hidden_size=32, cond_embed_dim=32, micro_cond_encode_dim=2, micro_cond_embed_dim=10,
                        encoder_hidden_size=32, vocab_size=32, codebook_size=32, in_channels=32,
                        block_out_channels=32, num_res_blocks="L", downsample=True, upsample=True,
                        block_num_heads=1, num_hidden_layers="L", num_attention_heads=1),
    "Ideogram4PromptEnhancerHead": None,
    "Ideogram4Transformer2DModel": None,
}
DF_SKIP = {"ModelMixin", "MultiAdapter", "MultiControlNetModel", "FluxMultiControlNetModel",
           "HunyuanDiT2DMultiControlNetModel", "QwenImageMultiControlNetModel", "SD3MultiControlNetModel",
           "RFD4ProteinaAutoencoder"}


def df_kwargs(cls):
    """Candidate keyword arguments for cls, in order of preference."""
    L = 3 if H else 2
    hand = DF_HAND.get(cls.__name__)
    cands = []
    for wide in ((True, False) if H else (False,)):
        base = df_shrink(cls, wide)
        if hand is not None:
            kw = dict(base, **{k: (L if v == "L" else v) for k, v in hand.items()})
            cands.append(kw)
        cands.append(base)
    cands += [dict(df_shrink(cls, False, True), **{k: v for k, v in c.items() if k in hand}) for c in cands[:1]] \
        if hand else [df_shrink(cls, False, True)]
    if H:  # the held-out set falls back to the main set's sizes with 3 layers, then 2 heads
        cands += [dict(c, **{k: 2 for k in ("num_attention_heads", "num_heads", "n_heads") if k in c})
                  for c in list(cands)]
    return cands


def build_df(cls):
    errs = []
    for kw in df_kwargs(cls):
        try:
            with torch.device("meta"):
                n = nparams(cls(**kw))
            if n > MAX_PARAMS:
                errs.append(f"{n / 1e6:.0f}M parameters")
                continue
            seed()
            return cls(**kw)
        except Exception as e:
            errs.append(f"{type(e).__name__}: {str(e)[:120]}")
    raise RuntimeError("; ".join(dict.fromkeys(errs)))


def df_entries():
    import diffusers

    names = sorted(n for n in dir(diffusers) if isinstance(getattr(diffusers, n, None), type)
                   and issubclass(getattr(diffusers, n), diffusers.ModelMixin) and n not in DF_SKIP)
    for n in names:
        def _mk(n=n):
            @builder("diffusers", f"diffusers/{n}")
            def _(d):
                m = build_df(getattr(diffusers, n))
                m.save_pretrained(d)
                return {"": n}

        _mk()


df_entries()


# ============================================================ diffusers pipelines

def clip_text(proj=False):
    import transformers as T

    seed()
    cfg = T.CLIPTextConfig(vocab_size=1000, hidden_size=32, intermediate_size=37, num_hidden_layers=3 if H else 2,
                           num_attention_heads=4, max_position_embeddings=77, projection_dim=32)
    return (T.CLIPTextModelWithProjection if proj else T.CLIPTextModel)(cfg)


def t5_enc():
    import transformers as T

    seed()
    return T.T5EncoderModel(T.T5Config(vocab_size=1000, d_model=32, d_kv=8, d_ff=37, num_layers=3 if H else 2,
                                       num_heads=4, relative_attention_num_buckets=8))


def pipe_vae():
    import diffusers as D

    seed()
    return D.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                           up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64),
                           layers_per_block=1, latent_channels=4, sample_size=32)


def save_pipe(p, d):
    p.save_pretrained(d)
    idx = json.load(open(os.path.join(d, "model_index.json")))
    classes = {"": type(p).__name__}
    for k, v in idx.items():
        if isinstance(v, list) and len(v) == 2 and v[1]:
            classes[k] = v  # [library, class], as model_index.json names them
    return classes


@builder("diffusers", "pipe/StableDiffusionPipeline")
def _(d):
    import diffusers as D
    from transformers import CLIPTokenizer

    seed()
    unet = D.UNet2DConditionModel(sample_size=32, in_channels=4, out_channels=4, block_out_channels=(32, 64),
                                  layers_per_block=2, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                  up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                  attention_head_dim=(2, 4), norm_num_groups=32)
    p = D.StableDiffusionPipeline(vae=pipe_vae(), text_encoder=clip_text(), tokenizer=CLIPTokenizer(), unet=unet,
                                  scheduler=D.PNDMScheduler(skip_prk_steps=True), safety_checker=None,
                                  feature_extractor=None, requires_safety_checker=False)
    return save_pipe(p, d)


@builder("diffusers", "pipe/FluxPipeline")
def _(d):
    import diffusers as D
    from transformers import CLIPTokenizer, T5TokenizerFast

    seed()
    tr = D.FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=3 if H else 2,
                                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                  pooled_projection_dim=32, axes_dims_rope=(4, 4, 8))
    p = D.FluxPipeline(scheduler=D.FlowMatchEulerDiscreteScheduler(), vae=pipe_vae(), text_encoder=clip_text(),
                       tokenizer=CLIPTokenizer(), text_encoder_2=t5_enc(), tokenizer_2=T5TokenizerFast(),
                       transformer=tr)
    return save_pipe(p, d)


# ============================================================ timm

def timm_choice():
    """Per module of timm.models, the test_* models and the smallest others (at most MAX_PARAMS)."""
    import timm
    from timm.models import _registry as R

    cache = os.path.join(SCRATCH, "timm_counts.json")
    counts = json.load(open(cache)) if os.path.exists(cache) else {}
    by_mod = {}
    for n in timm.list_models():
        by_mod.setdefault(R._model_to_module.get(n, "?"), []).append(n)
    signal.signal(signal.SIGALRM, _timeout)
    pick = []
    for mod in sorted(by_mod):
        sized = []
        for n in by_mod[mod]:
            if n not in counts:
                signal.alarm(20)
                try:
                    with torch.device("meta"):
                        counts[n] = nparams(timm.create_model(n, pretrained=False))
                except BaseException as e:
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    counts[n] = None
                finally:
                    signal.alarm(0)
            if counts[n] is not None and counts[n] <= MAX_PARAMS:
                sized.append((counts[n], n))
        sized.sort()
        tests = [n for c, n in sized if n.startswith("test_")]
        others = [n for c, n in sized if not n.startswith("test_")]
        k = 1 if H else 0
        if tests:
            pick += [tests[min(k, len(tests) - 1)]]
        if len(others) > k:
            pick += [others[k]]
        elif others and not H:
            pick += [others[0]]
    json.dump(counts, open(cache, "w"), indent=0, sort_keys=True)
    return pick


TIMM_REAL = ["resnet18", "resnet50", "efficientnet_b0", "mobilenetv3_small_100", "mixnet_s", "semnasnet_100",
             "edgenext_xx_small", "hgnetv2_b0", "ghostnet_100", "mobilenetv4_conv_small", "tinynet_e",
             "hardcorenas_a", "crossvit_tiny_240", "maxvit_nano_rw_256", "convnext_atto",
             "swin_tiny_patch4_window7_224", "vit_tiny_patch16_224", "deit_tiny_patch16_224", "levit_128s",
             "regnetx_002", "regnety_004", "densenet121", "efficientvit_b0", "mobilevit_xxs", "coatnet_nano_rw_224",
             "poolformer_s12", "cspresnet50", "dla34", "dpn48b", "repvgg_a0", "rexnet_100", "resnext26ts",
             "nf_resnet26", "gernet_s", "hrnet_w18_small", "xception41", "inception_v3", "vgg11_bn", "mnasnet_100",
             "fbnetc_100", "lcnet_050", "tf_efficientnetv2_b0", "eva02_tiny_patch14_224", "beit_base_patch16_224"]
TIMM_REAL_H = {"resnet18": "resnet34", "resnet50": "resnet26", "efficientnet_b0": "efficientnet_b1",
               "mobilenetv3_small_100": "mobilenetv3_small_075", "regnetx_002": "regnetx_004",
               "convnext_atto": "convnext_femto", "vit_tiny_patch16_224": "vit_small_patch16_224",
               "deit_tiny_patch16_224": "deit_small_patch16_224", "levit_128s": "levit_128",
               "densenet121": "densenet169", "swin_tiny_patch4_window7_224": "swin_s3_tiny_224",
               "hgnetv2_b0": "hgnetv2_b1", "ghostnet_100": "ghostnet_050", "tinynet_e": "tinynet_d",
               "hardcorenas_a": "hardcorenas_b", "mixnet_s": "mixnet_m", "edgenext_xx_small": "edgenext_x_small",
               "mobilenetv4_conv_small": "mobilenetv4_conv_medium", "regnety_004": "regnety_002",
               "vgg11_bn": "vgg11", "repvgg_a0": "repvgg_a1", "lcnet_050": "lcnet_075"}


def timm_entries():
    import timm

    names = list(dict.fromkeys(timm_choice() + [TIMM_REAL_H.get(n, n) if H else n for n in TIMM_REAL]))
    avail = set(timm.list_models())
    for n in names:
        if n not in avail:
            print(f"timm/{n}: not a timm model", file=sys.stderr)
            continue

        def _mk(n=n):
            @builder("timm", f"timm/{n}")
            def _(d):
                from timm.models._hub import save_for_hf

                seed()
                m = timm.create_model(n, pretrained=False)
                if nparams(m) > MAX_PARAMS * 2:
                    raise RuntimeError(f"{nparams(m) / 1e6:.0f}M parameters")
                save_for_hf(m, d, safe_serialization=True)
                return {"": type(m).__name__}

        _mk()


# ============================================================ peft

def tiny_llama():
    import transformers as T

    seed()
    m = T.LlamaForCausalLM(T.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=48,
                                         num_hidden_layers=3 if H else 2, num_attention_heads=4,
                                         num_key_value_heads=2, max_position_embeddings=64))
    m.name_or_path = "tiny-org/tiny-llama"
    return m


def peft_specs():
    """name -> keyword arguments of a peft config class (or a config instance)."""
    import peft

    r = 8 if H else 4
    tm = ["q_proj", "v_proj"] if not H else ["q_proj", "k_proj", "v_proj", "o_proj"]
    ct = {"task_type": "CAUSAL_LM"}
    S = {
        "lora": ("LoraConfig", dict(r=r, lora_alpha=2 * r, target_modules=tm, **ct)),
        "lora-trained": ("LoraConfig", dict(r=r, lora_alpha=2 * r, target_modules=tm, **ct)),
        "lora-all-linear": ("LoraConfig", dict(r=r, target_modules="all-linear", **ct)),
        "lora-dora": ("LoraConfig", dict(r=r, target_modules=tm, use_dora=True, **ct)),
        "lora-rank-pattern": ("LoraConfig", dict(r=r, target_modules=tm + ["down_proj"],
                                                  rank_pattern={"down_proj": 2, "v_proj": r * 2},
                                                  alpha_pattern={"down_proj": 4}, **ct)),
        "lora-modules-to-save": ("LoraConfig", dict(r=r, target_modules=tm, modules_to_save=["lm_head"], **ct)),
        "lora-embedding": ("LoraConfig", dict(r=r, target_modules=["embed_tokens", "q_proj"], **ct)),
        "lora-trainable-tokens": ("LoraConfig", dict(r=r, target_modules=tm, trainable_token_indices=[1, 2, 3], **ct)),
        "loha": ("LoHaConfig", dict(r=r, target_modules=tm, **ct)),
        "lokr": ("LoKrConfig", dict(r=r, target_modules=tm, **ct)),
        "adalora": ("AdaLoraConfig", dict(init_r=r, target_r=2, target_modules=tm, total_step=10, **ct)),
        "ia3": ("IA3Config", dict(target_modules=["k_proj", "v_proj", "down_proj"], feedforward_modules=["down_proj"],
                                  **ct)),
        "oft": ("OFTConfig", dict(r=0, oft_block_size=4 if H else 8, target_modules=tm, **ct)),
        "boft": ("BOFTConfig", dict(boft_block_size=4, target_modules=tm, **ct)),
        "vera": ("VeraConfig", dict(r=r, target_modules=tm, **ct)),
        "fourierft": ("FourierFTConfig", dict(n_frequency=16 if H else 8, target_modules=tm, **ct)),
        "ln-tuning": ("LNTuningConfig", dict(**ct)),
        "hra": ("HRAConfig", dict(r=r, target_modules=tm, **ct)),
        "miss": ("MissConfig", dict(r=r, target_modules=tm, **ct)),
        "vblora": ("VBLoRAConfig", dict(r=r, num_vectors=16, vector_length=8, target_modules=tm, **ct)),
        "c3a": ("C3AConfig", dict(block_size=8 if H else 16, target_modules=tm, **ct)),
        "randlora": ("RandLoraConfig", dict(r=r, target_modules=tm, **ct)),
        "shira": ("ShiraConfig", dict(r=r, target_modules=tm, **ct)),
        "road": ("RoadConfig", dict(target_modules=tm, group_size=8, **ct)),
        "delora": ("DeloraConfig", dict(r=r, target_modules=tm, **ct)),
        "waveft": ("WaveFTConfig", dict(n_frequency=16 if H else 8, target_modules=tm, **ct)),
        "gralora": ("GraloraConfig", dict(r=r, target_modules=tm, **ct)),
        "lily": ("LilyConfig", dict(r=r, target_modules=tm, **ct)),
        "osf": ("OSFConfig", dict(target_modules=tm, **ct)),
        "tinylora": ("TinyLoraConfig", dict(target_modules=tm, **ct)),
        "unilora": ("UniLoraConfig", dict(target_modules=tm, **ct)),
        "pvera": ("PveraConfig", dict(r=r, target_modules=tm, **ct)),
        "lora-bdlora": ("LoraConfig", dict(r=r, target_modules=tm, use_bdlora={"target_modules_bd_a": tm[:len(tm) // 2],
                                                                              "target_modules_bd_b": tm[len(tm) // 2:],
                                                                              "nblocks": 2}, **ct)),
        "hira": ("HiraConfig", dict(r=r, target_modules=tm, **ct)),

        "lora-kasa": ("LoraConfig", dict(r=r, target_modules=tm, kasa_config={}, **ct)),
        "glora": ("GloraConfig", dict(r=r, target_modules=tm, **ct)),
        "psoft": ("PsoftConfig", dict(r=r, target_modules=tm, **ct)),
        "frod": ("FrodConfig", dict(target_modules=tm, **ct)),
        "deft": ("DeftConfig", dict(target_modules=tm, **ct)),
        "beft": ("BeftConfig", dict(target_modules=tm, **ct)),
        "adamss": ("AdamssConfig", dict(r=r, target_modules=tm, **ct)),
        "peanut": ("PeanutConfig", dict(target_modules=tm, **ct)),
        "shadow": ("ShadowConfig", dict(target_modules=tm, **ct)),
        "trainable-tokens": ("TrainableTokensConfig", dict(target_modules=["embed_tokens"],
                                                           token_indices=[1, 2, 3, 5] if H else [1, 2, 3])),
        "prefix-tuning": ("PrefixTuningConfig", dict(num_virtual_tokens=6 if H else 4, **ct)),
        "prompt-tuning": ("PromptTuningConfig", dict(num_virtual_tokens=6 if H else 4, **ct)),
        "p-tuning": ("PromptEncoderConfig", dict(num_virtual_tokens=6 if H else 4, encoder_hidden_size=16, **ct)),
        "multitask-prompt-tuning": ("MultitaskPromptTuningConfig", dict(num_virtual_tokens=4, num_tasks=2, **ct)),
        "adaption-prompt": ("AdaptionPromptConfig", dict(adapter_len=4, adapter_layers=1, **ct)),
        "cpt": ("CPTConfig", dict(cpt_token_ids=[1, 2, 3], cpt_mask=[1, 1, 1], cpt_tokens_type_mask=[1, 2, 3],
                                  **ct)),
        "cartridge": ("CartridgeConfig", dict(num_virtual_tokens=4, **ct)),
        "poly": ("PolyConfig", dict(r=r, target_modules=tm, n_tasks=2, n_skills=2, **ct)),
    }
    return {k: v for k, v in S.items() if v is not None and hasattr(peft, v[0])}


def peft_entries():
    import peft

    for name, (cfgname, kw) in peft_specs().items():
        def _mk(name=name, cfgname=cfgname, kw=kw):
            @builder("peft", f"peft/{name}")
            def _(d):
                cfg = getattr(peft, cfgname)(**kw)
                base = tiny_llama()
                seed(2)
                pm = peft.get_peft_model(base, cfg)
                if name == "lora-trained":
                    seed(3)
                    with torch.no_grad():
                        for n, p in pm.named_parameters():
                            if "lora_B" in n:
                                p.normal_(0, 0.02)
                pm.save_pretrained(d)
                if not any(f.endswith(".safetensors") for f in os.listdir(d)):
                    raise RuntimeError("no safetensors file saved")
                return {"": type(pm.base_model).__name__ if not cfg.is_prompt_learning else
                        type(pm).__name__}

        _mk()

    @builder("peft", "peft/lora-two-adapters")
    def _(d):
        base = tiny_llama()
        seed(2)
        pm = peft.get_peft_model(base, peft.LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM"))
        pm.add_adapter("second", peft.LoraConfig(r=4, target_modules=["v_proj"], task_type="CAUSAL_LM"))
        pm.save_pretrained(d)
        return {"": "LoraModel", "second": "LoraModel"}


# ============================================================ sentence-transformers

def bert_dir(d, mlm=False):
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    seed()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]
    BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(d)
    cfg = BertConfig(vocab_size=64, hidden_size=HID(), num_hidden_layers=3 if H else 2, num_attention_heads=2,
                     intermediate_size=37, max_position_embeddings=64)
    (BertForMaskedLM if mlm else BertModel)(cfg).save_pretrained(d)
    return d


def HID():
    return 24 if H else 16


def st_classes(d):
    classes = {}

    def walk(folder, prefix):
        mj = os.path.join(folder, "modules.json")
        if not os.path.exists(mj):
            return
        for m in json.load(open(mj)):
            p = (prefix + "/" + m["path"]).strip("/") if m["path"] else prefix
            classes[p] = m["type"].rsplit(".", 1)[-1]
            if m["path"]:
                walk(os.path.join(folder, m["path"]), p)

    walk(d, "")
    rc = None
    for root, _, files in os.walk(d):
        if "router_config.json" in files:
            rc = json.load(open(os.path.join(root, "router_config.json")))
            rel = os.path.relpath(root, d).replace(os.sep, "/")
            for k, t in (rc.get("types") or {}).items():
                classes[(rel + "/" + k).strip("./")] = t.rsplit(".", 1)[-1]
    return classes


def st_build(d, extra=()):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, LayerNorm, Normalize, Pooling, Transformer

    tr = Transformer(bert_dir(d + ".base"))
    mods = [tr, Pooling(tr.get_embedding_dimension(), "cls" if "cls" in extra else "mean")]
    if "dense" in extra:
        seed(1)
        mods.append(Dense(in_features=HID(), out_features=8, activation_function=torch.nn.Tanh()))
    if "layernorm" in extra:
        mods.append(LayerNorm(8 if "dense" in extra else HID()))
    if "normalize" in extra:
        mods.append(Normalize())
    SentenceTransformer(modules=mods).save(d)
    shutil.rmtree(d + ".base")
    return st_classes(d)


def st_entries():
    for name, extra in (("pooling", ()), ("dense-normalize", ("dense", "normalize")),
                        ("cls-dense-layernorm", ("cls", "dense", "layernorm"))):
        def _mk(name=name, extra=extra):
            @builder("sentence-transformers", f"st/{name}")
            def _(d):
                return st_build(d, extra)

        _mk()

    @builder("sentence-transformers", "st/router")
    def _(d):
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Router, Transformer

        tr = Transformer(bert_dir(d + ".base"))
        seed(3)
        router = Router.for_query_document(query_modules=[Dense(HID(), HID())], document_modules=[Dense(HID(), 8)])
        SentenceTransformer(modules=[tr, Pooling(HID(), "mean"), router]).save(d)
        shutil.rmtree(d + ".base")
        return st_classes(d)

    @builder("sentence-transformers", "st/sparse-splade")
    def _(d):
        from sentence_transformers import SparseEncoder
        from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

        mlm = MLMTransformer(bert_dir(d + ".base", mlm=True))
        SparseEncoder(modules=[mlm, SpladePooling(pooling_strategy="max")]).save(d)
        shutil.rmtree(d + ".base")
        return st_classes(d)

    @builder("sentence-transformers", "st/cross-encoder")
    def _(d):
        from sentence_transformers import CrossEncoder

        ce = CrossEncoder(bert_dir(d + ".base"), num_labels=1)
        ce.save(d)
        shutil.rmtree(d + ".base")
        c = st_classes(d)
        c.setdefault("", type(ce).__name__)
        return c


# ============================================================ open_clip

def oc_cfgs():
    L = 3 if H else 2
    W = 48 if H else 32
    text = {"context_length": 16, "vocab_size": 64, "width": W, "heads": 2, "layers": L}
    return {
        "vit-clip": {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": L, "width": W, "head_width": 16,
                                                     "patch_size": 8}, "text_cfg": text},
        "vit-clip-quickgelu": {"embed_dim": 16, "quick_gelu": True,
                               "vision_cfg": {"image_size": 32, "layers": L, "width": W, "head_width": 16,
                                              "patch_size": 16}, "text_cfg": text},
        "resnet-clip": {"embed_dim": 16, "vision_cfg": {"image_size": 64, "layers": [1, L, 1, 1], "width": 16,
                                                        "head_width": 16}, "text_cfg": text},
        "timm-convnext-clip": {"embed_dim": 16,
                               "vision_cfg": {"timm_model_name": "convnext_femto" if H else "convnext_atto",
                                              "timm_model_pretrained": False, "timm_pool": "", "timm_proj": "linear",
                                              "image_size": 32}, "text_cfg": text},
        "coca": {"embed_dim": 16, "multimodal_cfg": {"context_length": 16, "vocab_size": 64, "width": W, "heads": 2,
                                                      "layers": L, "attn_pooler_heads": 2, "dim_head": 16,
                                                      "n_queries": 8},
                 "vision_cfg": {"image_size": 32, "layers": L, "width": W, "patch_size": 8, "head_width": 16,
                                "attentional_pool": True, "attn_pooler_heads": 2, "output_tokens": True},
                 "text_cfg": dict(text, embed_cls=True, output_tokens=True), "custom_text": True},
        "siglip-vit": {"embed_dim": W, "init_logit_bias": -10, "custom_text": True,
                       "vision_cfg": {"image_size": 32, "timm_model_name": "vit_tiny_patch16_224",
                                      "timm_model_pretrained": False, "timm_pool": "map", "timm_proj": "none"},
                       "text_cfg": {"context_length": 16, "vocab_size": 64, "width": W, "heads": 2, "layers": L,
                                    "no_causal_mask": True, "proj_bias": True, "pool_type": "last",
                                    "norm_kwargs": {"eps": 1e-6}}},
    }


def oc_entries():
    for name in oc_cfgs():
        def _mk(name=name):
            @builder("open_clip", f"open_clip/{name}")
            def _(d):
                import open_clip
                from open_clip.push_to_hf_hub import save_for_hf
                from open_clip.tokenizer import HFTokenizer
                from transformers import CLIPTokenizer

                cfgdir = d + ".cfg"
                os.makedirs(cfgdir, exist_ok=True)
                cfg = oc_cfgs()[name]
                cname = "tiny-" + name + ("-h" if H else "")
                json.dump(cfg, open(f"{cfgdir}/{cname}.json", "w"))
                open_clip.add_model_config(cfgdir)
                seed()
                model = open_clip.create_model(cname, pretrained=None)
                CLIPTokenizer().save_pretrained(cfgdir + "/tok")
                save_for_hf(model, HFTokenizer(cfgdir + "/tok", context_length=16), open_clip.get_model_config(cname),
                            d, safe_serialization=True)
                shutil.rmtree(cfgdir)
                return {"": type(model).__name__}

        _mk()


# ============================================================ main

def _timeout(*_):
    raise TimeoutError("took too long")


LIBS = ["timm", "peft", "diffusers", "sentence-transformers", "open_clip"]


def main():
    global H, SCRATCH
    ap = argparse.ArgumentParser()
    ap.add_argument("--heldout", metavar="OUT.jsonl.gz")
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "libraries-out"))
    ap.add_argument("--only", default=",".join(LIBS))
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    H = bool(a.heldout)
    SCRATCH = os.path.join(a.scratch, "heldout" if H else "main")
    os.makedirs(SCRATCH, exist_ok=True)
    out = a.heldout or os.path.join(os.path.dirname(os.path.abspath(__file__)), "libraries.jsonl.gz")
    only = a.only.split(",")

    for lib, entries in (("timm", timm_entries), ("peft", peft_entries), ("sentence-transformers", st_entries),
                         ("open_clip", oc_entries)):
        if lib in only:
            entries()
    signal.signal(signal.SIGALRM, _timeout)

    # The existing output's records are kept until their library is rebuilt (a model's library is that of its
    # part "": a pipeline's text encoders are "transformers"), so that an interrupted run loses nothing.
    lines, kept = {}, {}
    if os.path.exists(out):
        with gzip.open(out, "rt") as f:
            for line in f:
                r = json.loads(line)
                kept.setdefault(r["model"], []).append(r)
    for model, recs in kept.items():
        lines[(next((r["library"] for r in recs if r["part"] == ""), recs[0]["library"]), model)] = recs
    skipped, t0 = [], time.time()
    for lib in LIBS:
        if lib not in only:
            continue
        lines = {k: v for k, v in lines.items() if k[0] != lib}
        for library, model, fn in BUILDERS:
            if library != lib:
                continue
            d = os.path.join(SCRATCH, model.replace("/", "__"))
            done = os.path.join(SCRATCH, model.replace("/", "__") + ".done.json")
            t = time.time()
            signal.alarm(a.timeout)
            try:
                if not os.path.exists(done):
                    shutil.rmtree(d, ignore_errors=True)
                    classes = fn(d)
                    json.dump(classes, open(done, "w"))
                    print(f"{model}: built in {time.time() - t:.1f}s", file=sys.stderr, flush=True)
                lines[(library, model)] = records(library, model, d, json.load(open(done)))
            except BaseException as e:
                if isinstance(e, KeyboardInterrupt):
                    raise
                msg = f"{type(e).__name__}: {str(e)[:300]}".replace("\n", " ")
                skipped.append((model, msg))
                print(f"{model}: skipped: {msg}", file=sys.stderr, flush=True)
                if os.environ.get("DEBUG"):
                    traceback.print_exc()
            finally:
                signal.alarm(0)
        write(out, lines)
    counts = {}
    for (library, _), _r in lines.items():
        counts[library] = counts.get(library, 0) + 1
    print(f"models per library: {json.dumps(counts, sort_keys=True)}; "
          f"{sum(len(r) for r in lines.values())} records; {time.time() - t0:.0f}s", file=sys.stderr)
    for m, msg in skipped:
        print(f"skipped {m}: {msg}", file=sys.stderr)


def write(out, lines):
    tmp = out + ".tmp"
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as f:
            for key in sorted(lines):
                for r in lines[key]:
                    f.write((json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n").encode())
    os.replace(tmp, out)


SCRATCH = ""

if __name__ == "__main__":
    main()
