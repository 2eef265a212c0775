#!/usr/bin/env python3
"""Builds, with the real Python libraries, one tiny model folder per case, then
records every folder's layout in layouts.jsonl.gz (see README.md).

Usage:
    HF_HUB_OFFLINE=1 python generate.py [--out DIR] [--only NAME,...] [--keep] [--no-expected]
    HF_HUB_OFFLINE=1 python generate.py --verify [--only NAME,...]

Everything is built from configs with random init on CPU; nothing is downloaded.
A record holds, per file (relative path, "/"-separated):
    {"json": text}                         .json/.txt/.md and other small text files
    {"safetensors": {"header": text, "size": n}}  any safetensors file (found by content)
    {"link": target}                       a symlink (Hugging Face cache snapshots)
    {"other": size}                        anything else (.bin pickles, ...)
and, per folder, "loader" and "expected": what the library's own loader opens
(weights and indexes per part) or the error it raises, with no variant, each
variant present, and an absent one ("nope"); run under strace (see README.md).
"""

import argparse
import copy
import gzip
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import warnings

# peft keeps target_modules in a set: fix string hashing so adapter_config.json is stable.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT_EXTS = {".json", ".txt", ".md", ".yaml", ".yml", ".py", ".jinja", ".refs", ".TAG", ""}
TEXT_MAX = 64 * 1024

CASES = []  # (name, library, libs used, builder)


def case(name, library, libs=()):
    def deco(fn):
        CASES.append((name, library, tuple(libs), fn))
        return fn

    return deco


def versions(libs):
    import importlib.metadata as md

    dist = {
        "transformers": "transformers",
        "diffusers": "diffusers",
        "timm": "timm",
        "peft": "peft",
        "sentence_transformers": "sentence-transformers",
        "open_clip": "open_clip_torch",
        "huggingface_hub": "huggingface_hub",
        "safetensors": "safetensors",
        "torch": "torch",
        "hf_xet": "hf-xet",
    }
    out = {}
    for lib in ("torch", "safetensors", "huggingface_hub") + tuple(libs):
        out[lib] = md.version(dist[lib])
    return out


# ---------------------------------------------------------------- recording


def safetensors_header(path):
    """Returns the header text when the file is a safetensors file, else None."""
    size = os.path.getsize(path)
    if size < 10:
        return None
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n < 2 or 8 + n > size:
            return None
        raw = f.read(n)
    if raw[:1] != b"{":
        return None
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text)
    except Exception:
        return None
    if not isinstance(obj, dict):
        return None
    for k, v in obj.items():
        if k == "__metadata__":
            continue
        if not isinstance(v, dict) or "dtype" not in v or "data_offsets" not in v:
            return None
    return text


def record_file(path, name):
    if os.path.islink(path):
        return {"link": os.readlink(path)}
    header = safetensors_header(path)
    if header is not None:
        return {"safetensors": {"header": header, "size": os.path.getsize(path)}}
    ext = "" if name.startswith(".") and "." not in name[1:] else os.path.splitext(name)[1]
    size = os.path.getsize(path)
    if ext in TEXT_EXTS and size <= TEXT_MAX:
        with open(path, "rb") as f:
            raw = f.read()
        try:
            return {"json": raw.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {"other": size}


def record_folder(root):
    files = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        # A symlinked directory is recorded as a link too.
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                files[rel] = {"link": os.readlink(full)}
                dirnames.remove(d)
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            files[rel] = record_file(full, fn)
    return dict(sorted(files.items()))


# ---------------------------------------------------------------- tiny models


def seed(n=0):
    torch.manual_seed(n)


def tiny_llama(tie=False):
    from transformers import LlamaConfig, LlamaForCausalLM

    seed()
    cfg = LlamaConfig(
        vocab_size=128,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=tie,
    )
    return LlamaForCausalLM(cfg)


def save_tf(model, d, variants=(), default=True, **kw):
    """Saves the default (float32) weights, then each variant in the same folder,
    as one does by hand to publish variants; the config.json left is the default's."""
    if default:
        model.save_pretrained(d, **kw)
    for v in variants:
        m = copy.deepcopy(model).to(DTYPES[v])
        m.save_pretrained(d, variant=v, **kw)
    if default and variants:
        model.config.save_pretrained(d)


DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def tiny_unet():
    from diffusers import UNet2DConditionModel

    seed()
    return UNet2DConditionModel(
        sample_size=8,
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16,
        norm_num_groups=4,
        attention_head_dim=2,
    )


def tiny_vae(latent=4):
    from diffusers import AutoencoderKL

    seed()
    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 16),
        latent_channels=latent,
        norm_num_groups=4,
        sample_size=16,
    )


def tiny_flux():
    from diffusers import FluxTransformer2DModel

    seed()
    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=16,
        axes_dims_rope=(2, 2, 4),
    )


def tiny_sd3():
    from diffusers import SD3Transformer2DModel

    seed()
    return SD3Transformer2DModel(
        sample_size=8,
        patch_size=2,
        in_channels=4,
        num_layers=1,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=16,
        caption_projection_dim=16,
        pooled_projection_dim=16,
        out_channels=4,
        pos_embed_max_size=16,
    )


def save_df(model, d, variants=(), default=True, **kw):
    """Default first, then each variant beside it (diffusers' own cleanup keeps
    them: it only removes stale shards whose name starts with the new weights name)."""
    if default:
        model.save_pretrained(d, **kw)
    for v in variants:
        copy.deepcopy(model).to(DTYPES[v]).save_pretrained(d, variant=v, **kw)


def tiny_clip_text(proj=False):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    seed()
    cfg = CLIPTextConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=16,
        projection_dim=16,
    )
    return (CLIPTextModelWithProjection if proj else CLIPTextModel)(cfg)


def tiny_t5_encoder():
    from transformers import T5Config, T5EncoderModel

    seed()
    return T5EncoderModel(
        T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=32, num_layers=1, num_heads=2, relative_attention_num_buckets=4)
    )


def clip_tokenizer():
    from transformers import CLIPTokenizer

    return CLIPTokenizer()


def t5_tokenizer():
    from transformers import T5TokenizerFast

    return T5TokenizerFast()


def tiny_safety_checker():
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker
    from transformers import CLIPConfig

    seed()
    return StableDiffusionSafetyChecker(CLIPConfig(
        text_config=dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=16),
        vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=16),
        projection_dim=16))


def sd_pipeline(full=False):
    """full=False: safety_checker and feature_extractor null; full=True: both present,
    as in the original Stable Diffusion 1.x repos (safety_checker's library is the
    pipeline module "stable_diffusion" in model_index.json)."""
    from diffusers import PNDMScheduler, StableDiffusionPipeline
    from transformers import CLIPImageProcessor

    sched = PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True)
    return StableDiffusionPipeline(
        vae=tiny_vae(),
        text_encoder=tiny_clip_text(),
        tokenizer=clip_tokenizer(),
        unet=tiny_unet(),
        scheduler=sched,
        safety_checker=tiny_safety_checker() if full else None,
        feature_extractor=CLIPImageProcessor(crop_size=32, size=32) if full else None,
        requires_safety_checker=full,
    )


def flux_pipeline():
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline

    return FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=tiny_vae(latent=4),
        text_encoder=tiny_clip_text(),
        tokenizer=clip_tokenizer(),
        text_encoder_2=tiny_t5_encoder(),
        tokenizer_2=t5_tokenizer(),
        transformer=tiny_flux(),
    )


def tiny_bert_dir(d):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    seed()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    m = BertModel(
        BertConfig(
            vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=32,
        )
    )
    m.save_pretrained(d)
    tok.save_pretrained(d)
    return d


# ---------------------------------------------------------------- transformers


@case("transformers-single", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(), d)


@case("transformers-tied-single", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(tie=True), d)


@case("transformers-sharded", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(), d, max_shard_size="8KB")


@case("transformers-variant-fp16-single", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(), d, variants=["fp16"])


@case("transformers-variant-fp16-sharded", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(), d, variants=["fp16"], max_shard_size="8KB")


@case("transformers-variant-only-fp16-single", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(), d, variants=["fp16"], default=False)


@case("transformers-variant-only-fp16-sharded", "transformers", ["transformers"])
def _(d):
    save_tf(tiny_llama(), d, variants=["fp16"], default=False, max_shard_size="4KB")


@case("transformers-resave-after-variant", "transformers", ["transformers"])
def _(d):
    # Library behaviour worth a fixture: a sharded default save after a sharded
    # variant save deletes the variant's shards (they match its stale-shard
    # pattern) but leaves model.safetensors.index.fp16.json behind, dangling.
    m = tiny_llama()
    save_tf(m, d, variants=["fp16"], default=False, max_shard_size="8KB")
    m.save_pretrained(d, max_shard_size="8KB")


@case("transformers-explicit-weights-name", "transformers", ["transformers"])
def _(d):
    # config.json "transformers_weights" names the weights file (read by
    # from_pretrained; never written by save_pretrained, so added by hand).
    save_tf(tiny_llama(), d)
    os.rename(os.path.join(d, "model.safetensors"), os.path.join(d, "weights-custom.safetensors"))
    p = os.path.join(d, "config.json")
    cfg = json.load(open(p))
    cfg["transformers_weights"] = "weights-custom.safetensors"
    with open(p, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- diffusers models

for _cls, _mk, _shard in (
    ("unet", tiny_unet, "20KB"),
    ("vae", tiny_vae, "20KB"),
    ("flux-transformer", tiny_flux, "20KB"),
):

    def _mkcase(mk=_mk, shard=_shard, cls=_cls):
        @case(f"diffusers-{cls}-single", "diffusers", ["diffusers"])
        def _(d):
            save_df(mk(), d)

        @case(f"diffusers-{cls}-single-fp16-bf16", "diffusers", ["diffusers"])
        def _(d):
            save_df(mk(), d, variants=["fp16", "bf16"])

        @case(f"diffusers-{cls}-sharded-fp16-bf16", "diffusers", ["diffusers"])
        def _(d):
            save_df(mk(), d, variants=["fp16", "bf16"], max_shard_size=shard)

        @case(f"diffusers-{cls}-variant-only-fp16", "diffusers", ["diffusers"])
        def _(d):
            save_df(mk(), d, variants=["fp16"], default=False)

    _mkcase()


@case("diffusers-flux-transformer-sharded-variant-only-bf16", "diffusers", ["diffusers"])
def _(d):
    save_df(tiny_flux(), d, variants=["bf16"], default=False, max_shard_size="10KB")


@case("diffusers-sd3-transformer-sharded", "diffusers", ["diffusers"])
def _(d):
    save_df(tiny_sd3(), d, max_shard_size="20KB")


@case("diffusers-unet-legacy-variant-shards", "diffusers", ["diffusers"])
def _(d):
    # The variant shard naming older diffusers wrote and this version still reads
    # (with a deprecation warning): diffusion_pytorch_model-00001-of-00003.fp16.safetensors
    # and diffusion_pytorch_model.safetensors.fp16.index.json. Made by renaming a
    # current save; see pipeline_loading_utils.variant_compatible_siblings.
    import re

    save_df(tiny_unet(), d, variants=["fp16"], default=False, max_shard_size="20KB")
    idx = os.path.join(d, "diffusion_pytorch_model.safetensors.index.fp16.json")
    index = json.load(open(idx))
    ren = {}
    for fn in sorted(os.listdir(d)):
        m = re.fullmatch(r"diffusion_pytorch_model\.fp16-(\d{5}-of-\d{5})\.safetensors", fn)
        if m:
            ren[fn] = f"diffusion_pytorch_model-{m.group(1)}.fp16.safetensors"
            os.rename(os.path.join(d, fn), os.path.join(d, ren[fn]))
    index["weight_map"] = {k: ren[v] for k, v in index["weight_map"].items()}
    os.remove(idx)
    with open(os.path.join(d, "diffusion_pytorch_model.safetensors.fp16.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


# ---------------------------------------------------------------- diffusers pipelines


@case("diffusers-sd-pipeline", "diffusers", ["diffusers", "transformers"])
def _(d):
    sd_pipeline().save_pretrained(d)


@case("diffusers-sd-pipeline-fp16", "diffusers", ["diffusers", "transformers"])
def _(d):
    p = sd_pipeline(full=True)
    p.save_pretrained(d)
    p.to(torch.float16).save_pretrained(d, variant="fp16")


@case("diffusers-sd-pipeline-mixed-variant", "diffusers", ["diffusers", "transformers"])
def _(d):
    # Only unet/ has an fp16 variant; from_pretrained(variant="fp16") loads unet's
    # variant and the default files of every other component.
    p = sd_pipeline()
    p.save_pretrained(d)
    copy.deepcopy(p.unet).half().save_pretrained(os.path.join(d, "unet"), variant="fp16")


@case("diffusers-flux-pipeline-sharded-bf16", "diffusers", ["diffusers", "transformers"])
def _(d):
    p = flux_pipeline()
    p.save_pretrained(d, max_shard_size="20KB")
    p.to(torch.bfloat16).save_pretrained(d, variant="bf16", max_shard_size="20KB")


# ---------------------------------------------------------------- sentence-transformers


def st_model(tmp, extra=()):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    seed()
    tr = Transformer(tiny_bert_dir(tmp))
    mods = [tr, Pooling(tr.get_embedding_dimension(), "mean")]
    if "dense" in extra:
        seed(1)
        mods.append(Dense(in_features=16, out_features=8, activation_function=torch.nn.Tanh()))
    if "normalize" in extra:
        mods.append(Normalize())
    return SentenceTransformer(modules=mods)


@case("sentence-transformers-pooling", "sentence_transformers", ["sentence_transformers", "transformers"])
def _(d):
    st_model(d + ".base").save(d)


@case("sentence-transformers-dense-normalize", "sentence_transformers", ["sentence_transformers", "transformers"])
def _(d):
    st_model(d + ".base", ("dense", "normalize")).save(d)


# ---------------------------------------------------------------- peft


def peft_save(cfg, d, extra_adapter=None):
    from peft import get_peft_model

    base = tiny_llama()
    base.name_or_path = "tiny-org/tiny-llama"
    seed(2)
    pm = get_peft_model(base, cfg)
    if extra_adapter is not None:
        pm.add_adapter("second", extra_adapter)
    pm.save_pretrained(d)


@case("peft-lora", "peft", ["peft", "transformers"])
def _(d):
    from peft import LoraConfig

    peft_save(LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"), d)


@case("peft-lora-modules-to-save", "peft", ["peft", "transformers"])
def _(d):
    from peft import LoraConfig

    peft_save(
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], modules_to_save=["lm_head"],
                   task_type="CAUSAL_LM"),
        d,
    )


@case("peft-ia3", "peft", ["peft", "transformers"])
def _(d):
    from peft import IA3Config

    peft_save(
        IA3Config(target_modules=["k_proj", "v_proj", "down_proj"], feedforward_modules=["down_proj"],
                  task_type="CAUSAL_LM"),
        d,
    )


@case("peft-prefix-tuning", "peft", ["peft", "transformers"])
def _(d):
    from peft import PrefixTuningConfig

    peft_save(PrefixTuningConfig(num_virtual_tokens=4, task_type="CAUSAL_LM"), d)


@case("peft-lora-two-adapters", "peft", ["peft", "transformers"])
def _(d):
    from peft import LoraConfig

    peft_save(
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], task_type="CAUSAL_LM"),
        d,
        extra_adapter=LoraConfig(r=4, lora_alpha=8, target_modules=["v_proj"], task_type="CAUSAL_LM"),
    )


# ---------------------------------------------------------------- timm / open_clip


@case("timm-vit-save-for-hf", "timm", ["timm"])
def _(d):
    import timm
    from timm.models._hub import save_for_hf

    seed()
    m = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=16, depth=1, num_heads=2,
        num_classes=10,
    )
    # push_to_hf_hub's default is safe_serialization="both" (save_for_hf's own is False).
    save_for_hf(m, d, safe_serialization="both")


OPEN_CLIP_CFG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1},
}


def open_clip_save(d, name="tiny-clip"):
    import open_clip
    from open_clip.push_to_hf_hub import save_for_hf
    from open_clip.tokenizer import HFTokenizer

    tmp = d + ".cfg"
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, f"{name}.json"), "w") as f:
        json.dump(OPEN_CLIP_CFG, f)
    open_clip.add_model_config(tmp)
    seed()
    model = open_clip.create_model(name, pretrained=None)
    tokdir = d + ".tok"
    clip_tokenizer().save_pretrained(tokdir)
    tok = HFTokenizer(tokdir, context_length=16)
    save_for_hf(model, tok, open_clip.get_model_config(name), d)


@case("open-clip-save-for-hf", "open_clip", ["open_clip", "transformers"])
def _(d):
    open_clip_save(d)


# ---------------------------------------------------------------- Hugging Face cache


def commit_for(name):
    return hashlib.sha1(name.encode()).hexdigest()


LFS_EXTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".model", ".msgpack", ".onnx", ".h5", ".gguf")


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def build_cache(cache_root, repo_id, src, commit, extra_files=None, shared_blobs=False):
    """Lays src/ out as huggingface_hub's hf_hub_download does, using its own
    helpers: blobs named by the ETag the Hub sends (sha256 of the content for LFS
    files, git blob sha1 for regular files), relative symlinks from
    snapshots/<commit>/<path> to ../(..)/blobs/<etag>, refs/main holding the commit."""
    from huggingface_hub.file_download import (
        _cache_commit_hash_for_specific_revision,
        _create_symlink,
        _get_pointer_path,
        repo_folder_name,
    )

    storage = os.path.join(cache_root, repo_folder_name(repo_id=repo_id, repo_type="model"))
    files = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            files.append((os.path.relpath(full, src).replace(os.sep, "/"), open(full, "rb").read()))
    for rel, data in sorted((extra_files or {}).items()):
        files.append((rel, data))
    for rel, data in files:
        lfs = rel.endswith(LFS_EXTS)
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        blob = os.path.join(storage, "blobs", etag)
        os.makedirs(os.path.dirname(blob), exist_ok=True)
        new = not os.path.exists(blob)
        if new:
            with open(blob, "wb") as f:
                f.write(data)
        pointer = _get_pointer_path(storage, commit, rel)
        os.makedirs(os.path.dirname(pointer), exist_ok=True)
        _create_symlink(blob, pointer, new_blob=False)
        if shared_blobs and lfs and new:
            # huggingface_hub >= 2.4 moves Xet-backed blobs to <cache>/blobs/<xx>/<xet hash>
            # and leaves models--*/blobs/<etag> as a relative symlink to it.
            import hf_xet
            from huggingface_hub.utils._shared_blobs import publish_blob_to_shared_store

            xet_hash = hf_xet.hash_files([blob])[0].hash
            ok = publish_blob_to_shared_store(
                blob_path=blob, xet_hash=xet_hash, cache_dir=cache_root, expected_size=len(data)
            )
            assert ok, "shared blob store publication failed"
    _cache_commit_hash_for_specific_revision(storage, "main", commit)
    # hf_hub_download tags the cache root (CACHEDIR.TAG standard).
    from huggingface_hub._local_folder import _create_cachedir_tag
    from pathlib import Path

    _create_cachedir_tag(Path(cache_root))
    return storage


GITATTRIBUTES = b"""*.bin filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.pth filter=lfs diff=lfs merge=lfs -text
"""


@case("hf-cache-single", "huggingface_hub", ["transformers"])
def _(d):
    src = d + ".src"
    save_tf(tiny_llama(), src)
    build_cache(d, "tiny-org/tiny-llama", src, commit_for("hf-cache-single"),
                extra_files={".gitattributes": GITATTRIBUTES, "README.md": b"# tiny-llama\n"})


@case("hf-cache-sharded", "huggingface_hub", ["transformers"])
def _(d):
    src = d + ".src"
    save_tf(tiny_llama(), src, max_shard_size="8KB")
    build_cache(d, "tiny-org/tiny-llama-sharded", src, commit_for("hf-cache-sharded"))


@case("hf-cache-pipeline", "huggingface_hub", ["diffusers", "transformers"])
def _(d):
    src = d + ".src"
    p = sd_pipeline()
    p.save_pretrained(src)
    p.to(torch.float16).save_pretrained(src, variant="fp16")
    build_cache(d, "tiny-org/tiny-sd", src, commit_for("hf-cache-pipeline"))


@case("hf-cache-shared-blobs", "huggingface_hub", ["transformers", "hf_xet"])
def _(d):
    src = d + ".src"
    save_tf(tiny_llama(), src, max_shard_size="8KB")
    build_cache(d, "tiny-org/tiny-llama-xet", src, commit_for("hf-cache-shared-blobs"), shared_blobs=True)


# ---------------------------------------------------------------- ground truth: what the loaders open

# Each folder is handed to its library's own loader, once with no variant, once per
# variant found in its file names, and once with a variant it lacks ("nope", only for
# loaders that take a variant). The loads run in one child process under
# `strace -f -e trace=openat`; marker files opened between loads split the trace per
# load. The files a successful load opened under the folder whose content is
# safetensors are its weights, the JSON files with a "weight_map" its indexes.

PROBE = "nope"

VARIANT_RES = [
    re.compile(r"^[^./]+\.([A-Za-z0-9_]+)\.(safetensors|bin)$"),                 # model.fp16.safetensors
    re.compile(r"^[^./]+\.([A-Za-z0-9_]+)-\d{5}-of-\d{5}\.(safetensors|bin)$"),  # model.fp16-00001-of-00002...
    re.compile(r"^[^./]+-\d{5}-of-\d{5}\.([A-Za-z0-9_]+)\.(safetensors|bin)$"),  # legacy diffusers shards
    re.compile(r"^[^./]+\.(?:safetensors|bin)\.index\.([A-Za-z0-9_]+)\.json$"),   # model.safetensors.index.fp16.json
    re.compile(r"^[^./]+\.(?:safetensors|bin)\.([A-Za-z0-9_]+)\.index\.json$"),   # legacy diffusers index
]


def variants_in(names):
    found = set()
    for n in names:
        base = n.rsplit("/", 1)[-1]
        for r in VARIANT_RES:
            m = r.match(base)
            if m and m.group(1) not in ("safetensors", "bin", "index"):
                found.add(m.group(1))
    return sorted(found)


def loader_for(library, d):
    """How the library loads the folder: (kind, description, model root relative to d, repo id)."""
    if library == "huggingface_hub":
        (storage,) = [n for n in sorted(os.listdir(d)) if n.startswith("models--")]
        repo = storage[len("models--"):].replace("--", "/", 1)
        with open(os.path.join(d, storage, "refs", "main")) as f:
            root = f"{storage}/snapshots/{f.read().strip()}"
        if os.path.exists(os.path.join(d, root, "model_index.json")):
            return "cache-df-pipe", f"diffusers.DiffusionPipeline.from_pretrained({repo!r}, cache_dir=DIR, variant=V)", root, repo
        arch = json.load(open(os.path.join(d, root, "config.json")))["architectures"][0]
        return "cache-tf", f"transformers.{arch}.from_pretrained({repo!r}, cache_dir=DIR, variant=V)", root, repo
    if library == "transformers":
        arch = json.load(open(os.path.join(d, "config.json")))["architectures"][0]
        return "tf", f"transformers.{arch}.from_pretrained(DIR, variant=V)", "", None
    if library == "diffusers":
        if os.path.exists(os.path.join(d, "model_index.json")):
            return "df-pipe", "diffusers.DiffusionPipeline.from_pretrained(DIR, variant=V)", "", None
        cls = json.load(open(os.path.join(d, "config.json")))["_class_name"]
        return "df-model", f"diffusers.{cls}.from_pretrained(DIR, variant=V)", "", None
    if library == "sentence_transformers":
        return "st", "sentence_transformers.SentenceTransformer(DIR)", "", None
    if library == "peft":
        return "peft", "peft.utils.load_peft_weights(DIR, subfolder=S) for each adapter folder S", "", None
    if library == "timm":
        return "timm", "timm.create_model('local-dir:' + DIR, pretrained=True)", "", None
    if library == "open_clip":
        return "open_clip", "open_clip.create_model('local-dir:' + DIR)", "", None
    raise KeyError(library)


VARIANT_LOADERS = ("tf", "df-model", "df-pipe", "cache-tf", "cache-df-pipe")


def run_load(kind, d, variant, repo):
    if kind == "tf":
        import transformers

        arch = json.load(open(os.path.join(d, "config.json")))["architectures"][0]
        getattr(transformers, arch).from_pretrained(d, **({"variant": variant} if variant else {}))
    elif kind == "df-model":
        import diffusers

        cls = json.load(open(os.path.join(d, "config.json")))["_class_name"]
        getattr(diffusers, cls).from_pretrained(d, variant=variant)
    elif kind == "df-pipe":
        from diffusers import DiffusionPipeline

        DiffusionPipeline.from_pretrained(d, variant=variant)
    elif kind == "st":
        from sentence_transformers import SentenceTransformer

        SentenceTransformer(d, device="cpu")
    elif kind == "peft":
        from peft.utils import load_peft_weights

        for dp, dn, fns in sorted(os.walk(d)):
            dn.sort()
            if "adapter_config.json" in fns:
                sub = os.path.relpath(dp, d)
                load_peft_weights(d, device="cpu", **({"subfolder": sub} if sub != "." else {}))
    elif kind == "timm":
        import timm

        timm.create_model("local-dir:" + d, pretrained=True)
    elif kind == "open_clip":
        import open_clip

        open_clip.create_model("local-dir:" + d)
    elif kind == "cache-tf":
        import transformers
        from huggingface_hub import hf_hub_download

        cfg = hf_hub_download(repo, "config.json", cache_dir=d)
        arch = json.load(open(cfg))["architectures"][0]
        getattr(transformers, arch).from_pretrained(repo, cache_dir=d, **({"variant": variant} if variant else {}))
    elif kind == "cache-df-pipe":
        from diffusers import DiffusionPipeline

        DiffusionPipeline.from_pretrained(repo, cache_dir=d, variant=variant)
    else:
        raise KeyError(kind)


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def load_child(jobfile, resultfile, markdir):
    """Runs in the child under strace: every job once, between marker opens."""
    import logging

    logging.disable(logging.CRITICAL)
    from diffusers.utils import logging as dlogging

    dlogging.disable_progress_bar()
    jobs = json.load(open(jobfile))
    results = []
    for j in jobs:
        open(os.path.join(markdir, f"begin-{j['id']}"), "w").close()
        res = {"id": j["id"], "ok": True}
        try:
            run_load(j["kind"], j["dir"], j["variant"], j["repo"])
        except Exception as ex:  # noqa: BLE001
            msg = first_line(str(ex)).replace(j["dir"], "DIR")
            res = {"id": j["id"], "ok": False, "error": f"{type(ex).__name__}: {msg}"}
        open(os.path.join(markdir, f"end-{j['id']}"), "w").close()
        results.append(res)
        print(j["id"], j["name"], j["variant"], "ok" if res["ok"] else res["error"][:160], file=sys.stderr, flush=True)
    with open(resultfile, "w") as f:
        json.dump(results, f)


def parse_strace(log, markdir):
    """{job id: [absolute paths opened for reading, in order]}."""
    opened, cur = {}, None
    pat = re.compile(r'openat\((?:AT_FDCWD|\d+), "((?:[^"\\]|\\.)*)", ([^)]*)\) = \d+')
    for line in open(log, errors="replace"):
        m = pat.search(line)
        if not m:
            continue
        p = m.group(1).encode().decode("unicode_escape")
        if p.startswith(markdir + "/"):
            tag = os.path.basename(p)
            cur = int(tag[6:]) if tag.startswith("begin-") else None
            if cur is not None:
                opened[cur] = []
            continue
        flags = m.group(2)
        if cur is not None and "O_DIRECTORY" not in flags and "O_WRONLY" not in flags and "O_RDWR" not in flags:
            opened[cur].append(p)
    return opened


def is_index(path):
    if not path.endswith(".json"):
        return False
    try:
        obj = json.load(open(path, encoding="utf-8"))
    except Exception:
        return False
    return isinstance(obj, dict) and isinstance(obj.get("weight_map"), dict)


def expected_for(items, out):
    """items: [(name, library, folder)]. Returns {name: (loader record, expected)}."""
    work = os.path.join(out, ".loads")
    markdir = os.path.join(work, "marks")
    os.makedirs(markdir)
    jobs, info = [], {}
    for name, library, d in items:
        kind, call, root, repo = loader_for(library, d)
        names = []
        for dp, dn, fns in os.walk(os.path.join(d, root)):
            names += [os.path.join(dp, fn) for fn in fns]
        variants = variants_in(names) if kind in VARIANT_LOADERS else []
        asks = [None] + variants + ([PROBE] if kind in VARIANT_LOADERS else [])
        loader = {"call": call}
        if repo:
            loader["repo_id"] = repo
            loader["model_root"] = root
        info[name] = (d, root, loader, [])
        for v in asks:
            info[name][3].append(len(jobs))
            jobs.append({"id": len(jobs), "name": name, "kind": kind, "dir": d, "variant": v, "repo": repo})
    jobfile, resultfile, log = (os.path.join(work, n) for n in ("jobs.json", "results.json", "strace.log"))
    with open(jobfile, "w") as f:
        json.dump(jobs, f)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONHASHSEED="0")
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat", "-e", "status=successful", "-s", "4096",
                    "-o", log, sys.executable, os.path.abspath(__file__), "--load-child", jobfile, resultfile,
                    markdir], check=True, env=env, cwd=out)
    results = {r["id"]: r for r in json.load(open(resultfile))}
    opened = parse_strace(log, markdir)
    shutil.rmtree(work)
    res = {}
    for name, (d, root, loader, ids) in info.items():
        exp = {}
        for i in ids:
            j, r = jobs[i], results[i]
            key = j["variant"] or "default"
            if not r["ok"]:
                exp[key] = {"ok": False, "error": r["error"]}
                continue
            parts, indexes = {}, {}
            for p in opened.get(i, []):
                ap = os.path.normpath(os.path.join(out, p))
                if not ap.startswith(d + "/") or not os.path.isfile(ap):
                    continue
                rel = os.path.relpath(ap, d).replace(os.sep, "/")
                inner = os.path.relpath(ap, os.path.join(d, root)).replace(os.sep, "/")
                part = inner.rsplit("/", 1)[0] if "/" in inner else ""
                if safetensors_header(ap) is not None:
                    parts.setdefault(part, set()).add(rel)
                elif is_index(ap):
                    indexes.setdefault(part, set()).add(rel)
            e = {"ok": True, "parts": {k: sorted(v) for k, v in sorted(parts.items())}}
            if indexes:
                e["indexes"] = {k: sorted(v) for k, v in sorted(indexes.items())}
            exp[key] = e
        res[name] = (loader, exp)
    return res


# ---------------------------------------------------------------- main


def verify(args):
    sys.path.insert(0, HERE)
    from rebuild import rebuild

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    only = set(filter(None, args.only.split(",")))
    recs = [json.loads(line) for line in gzip.open(args.record)]
    recs = [r for r in recs if not only or r["name"] in only]
    items = []
    for r in recs:
        d = os.path.join(args.out, r["name"])
        rebuild(r, d)
        items.append((r["name"], r["library"], d))
    got = expected_for(items, args.out)
    bad = 0
    for r in recs:
        loader, expected = got[r["name"]]
        if (loader, expected) != (r["loader"], r["expected"]):
            bad += 1
            print("MISMATCH", r["name"], json.dumps(expected), file=sys.stderr)
    print(f"verified {len(recs)} rebuilt folders, {bad} mismatches", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(args.out, ignore_errors=True)
    sys.exit(1 if bad else 0)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--load-child":
        load_child(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/layouts-out")
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", action="store_true", help="keep the built folders")
    ap.add_argument("--no-expected", action="store_true", help="skip running the loaders")
    ap.add_argument("--record", default=os.path.join(HERE, "layouts.jsonl.gz"))
    ap.add_argument("--verify", action="store_true",
                    help="rebuild the recorded folders (rebuild.py) and check the loaders find the recorded expected")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    # diffusers' legacy variant lookup splits the whole path on "." (see README).
    assert "." not in args.out, "--out must not contain a dot"
    if args.verify:
        return verify(args)
    only = set(filter(None, args.only.split(",")))
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    records, built = [], []
    for name, library, libs, fn in CASES:
        if only and name not in only:
            continue
        d = os.path.join(args.out, name)
        print("building", name, file=sys.stderr)
        fn(d)
        records.append(
            {"name": name, "library": library, "made_with": versions(libs), "files": record_folder(d)}
        )
        built.append((name, library, d))
    if not args.no_expected:
        print("loading", file=sys.stderr)
        got = expected_for(built, args.out)
        for r, (name, library, d) in zip(records, built):
            # The loaders must leave the folder as it was.
            assert record_folder(d) == r["files"], f"loading changed {name}"
            loader, expected = got[name]
            files = r.pop("files")
            r.update(loader=loader, expected=expected, files=files)
            for v, e in expected.items():
                got_ = json.dumps(e["parts"] if e["ok"] else e["error"], separators=(",", ":"))
                print(f"  {name} [{v}] {'ok' if e['ok'] else 'error'} {got_}", file=sys.stderr)
    if only:
        print(json.dumps(records, indent=1)[:20000])
        return
    with open(args.record, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            for r in records:
                gz.write((json.dumps(r, sort_keys=False, ensure_ascii=False) + "\n").encode("utf-8"))
    print(f"wrote {len(records)} records to {args.record} ({os.path.getsize(args.record)} bytes)", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(args.out, ignore_errors=True)


if __name__ == "__main__":
    main()
