"""Checks `safetensors convert --dequantize` against compressed-tensors' own
decompressors, on checkpoints other than testdata/quantized's.

Not run in CI (compressed-tensors needs torch, about 3 GB): run it by hand with

    python3 -m venv VENV && VENV/bin/pip install compressed-tensors==0.20.0 torch transformers
    VENV/bin/python interop/quant/ct_dequantize_check.py

from the repository root. For every format for which compressed-tensors 0.20
registers a decompressor, and strategies, bit widths, dtypes and shapes that
testdata/quantized's fixtures do not have (random seeds, partial words and
blocks, odd group counts), it quantizes random weights with the preset's
arguments (calculate_qparams), compresses them with the format's compressor,
writes the checkpoint with its config.json, has `go run ./cmd/safetensors
convert --dequantize --dtype BF16|F32` dequantize it, and compares each weight
with the compressor's decompress (then .to() the dtype) bit for bit, NaNs
included (an E8M0 scale of 255 is +Inf, whose products with a zero PyTorch
writes 0xffff in BF16); a model of several formats (mixed-precision) too. It
then checks that 0.20 has no decompressor for the sparse formats, and that the
command refuses them naming the format.
"""

import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

import compressed_tensors
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.quantization import preset_name_to_scheme
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam, maybe_pad_tensor_for_block_quant

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (preset, format, weight arguments changed, model dtype, shapes, E8M0 scales written over the first)
CASES = [
    ("W8A8", "int-quantized", {"strategy": "tensor"}, torch.bfloat16, [(33, 70)], None),
    ("W8A8", "int-quantized", {"strategy": "group", "group_size": 16}, torch.float32, [(9, 48)], None),
    ("FP8", "float-quantized", {}, torch.float16, [(17, 40)], None),
    ("FP8_BLOCK", "float-quantized", {"block_structure": [32, 8]}, torch.bfloat16, [(70, 30)], None),
    ("W8A8", "naive-quantized", {"strategy": "block", "block_structure": [4, 4], "symmetric": False}, torch.bfloat16, [(10, 10)], None),
    ("W2A16", "pack-quantized", {"group_size": 32}, torch.bfloat16, [(12, 96)], None),
    ("W5A16", "pack-quantized", {"strategy": "channel", "group_size": None, "symmetric": False}, torch.float16, [(41, 77)], None),
    ("W6A16", "pack-quantized", {"group_size": 16}, torch.float32, [(5, 80)], None),
    ("W7A16", "pack-quantized", {"strategy": "tensor", "group_size": None}, torch.bfloat16, [(6, 45)], None),
    ("W4A16_ASYM", "pack-quantized", {"group_size": 64}, torch.bfloat16, [(39, 192)], None),
    ("NVFP4A16", "nvfp4-pack-quantized", {}, torch.float16, [(8, 160)], None),
    ("MXFP4A16", "mxfp4-pack-quantized", {}, torch.float32, [(7, 96)], [255, 3, 253, 128]),
    ("MXFP6A16", "mxfp6-pack-quantized", {}, torch.float16, [(5, 160)], [0, 254, 126]),
    ("MXFP8A16", "mxfp8-quantized", {}, torch.float32, [(6, 96)], [255, 250, 100]),
    ("W8A16", "dense", {"strategy": "channel", "group_size": None}, torch.bfloat16, [(12, 20)], None),
]


def quantized(preset, fmt, weights, dtype, shapes, mx, g, first):
    scheme = preset_name_to_scheme(preset, ["Linear"])
    if weights:
        scheme.weights = scheme.weights.model_copy(update=weights)
    a = scheme.weights
    comp = BaseCompressor.get_value_from_registry(fmt)
    tensors, want = {}, {}
    for i, (out, inp) in enumerate(shapes):
        m = "model.layers.%d.mlp.up_proj" % (first + i)
        w = (torch.randn(out, inp, generator=g) * 0.3).to(dtype)
        if a.strategy == "channel":
            mn, mx_ = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
        elif a.strategy in ("group", "tensor_group"):
            gw = w.unflatten(-1, (-1, a.group_size))
            mn, mx_ = gw.amin(-1), gw.amax(-1)
        elif a.strategy == "block":
            bh, bw = a.block_structure
            b = maybe_pad_tensor_for_block_quant(w, (bh, bw)).unflatten(0, (-1, bh)).unflatten(-1, (-1, bw))
            mn, mx_ = b.amin((1, 3)), b.amax((1, 3))
        else:
            mn, mx_ = w.amin().reshape(1), w.amax().reshape(1)
        gs = generate_gparam(w.amin(), w.amax()) if a.strategy == "tensor_group" else None
        scale, zp = calculate_qparams(mn, mx_, a, global_scale=gs)
        sd = {"weight": w, "weight_scale": scale, "weight_zero_point": zp}
        if gs is not None:
            sd["weight_global_scale"] = gs
        c = dict(comp.compress(sd, scheme))
        if mx is not None:
            s = c["weight_scale"].clone()
            s.view(-1)[: len(mx)] = torch.tensor(mx, dtype=torch.uint8)
            c["weight_scale"] = s
        for k, v in c.items():
            tensors[m + "." + k] = v.contiguous()
        want[m + ".weight"] = comp.decompress(dict(c), scheme)["weight"]
    group = {"targets": ["Linear"], "weights": a.model_dump(mode="json"), "input_activations": None,
             "output_activations": None, "format": fmt}
    return tensors, want, group


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    ia = a.view(torch.int16 if a.element_size() == 2 else torch.int32)
    ib = b.view(torch.int16 if b.element_size() == 2 else torch.int32)
    return torch.equal(ia, ib)


def check(name, tensors, want, groups, fmt, tmp):
    src = os.path.join(tmp, name)
    os.makedirs(src)
    save_file(tensors, os.path.join(src, "model.safetensors"))
    config = {"model_type": "llama", "quantization_config": {
        "quant_method": "compressed-tensors", "format": fmt, "config_groups": groups, "ignore": ["lm_head"],
        "quantization_status": "compressed", "version": compressed_tensors.__version__}}
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(config, f)
    bad = 0
    for dtype, t in [("BF16", torch.bfloat16), ("F32", torch.float32)]:
        out = os.path.join(tmp, name + "-" + dtype)
        subprocess.run(["go", "run", "./cmd/safetensors", "convert", "--dequantize", "--dtype", dtype, src, out],
                       cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        got = load_file(os.path.join(out, "model.safetensors"))
        assert sorted(got) == sorted(want), (name, sorted(got))
        for k, ref in want.items():
            if not same(ref.to(t), got[k]):
                bad += 1
                print("FAIL", name, dtype, k)
    print(name, "ok" if bad == 0 else "FAILED")
    return bad


def main():
    print("compressed-tensors", compressed_tensors.__version__, "torch", torch.__version__)
    g = torch.Generator().manual_seed(2026)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (preset, fmt, weights, dtype, shapes, mx) in enumerate(CASES):
            tensors, want, group = quantized(preset, fmt, weights, dtype, shapes, mx, g, 0)
            bad += check("%d-%s-%s" % (i, preset, fmt), tensors, want, {"group_0": group}, fmt, tmp)
        # mixed-precision: a format a config group, its targets a module each
        tensors, want, groups = {}, {}, {}
        for i, (preset, fmt, weights, dtype) in enumerate([("W3A16", "pack-quantized", {"group_size": 32}, torch.bfloat16),
                                                           ("MXFP8A16", "mxfp8-quantized", {}, torch.bfloat16),
                                                           ("W8A8", "int-quantized", {}, torch.bfloat16)]):
            t, w, group = quantized(preset, fmt, weights, dtype, [(10 + i, 64)], None, g, i)
            group["targets"] = ["re:model\\.layers\\.%d\\.mlp\\.up_proj$" % i]
            tensors.update(t)
            want.update(w)
            groups["group_%d" % i] = group
        bad += check("mixed", tensors, want, groups, "mixed-precision", tmp)
        # The sparse formats: no decompressor in 0.20, refused by the command.
        for fmt in ["sparse-bitmask", "sparse-24-bitmask", "marlin-24"]:
            try:
                BaseCompressor.get_value_from_registry(fmt)
                print("FAIL", fmt, "has a decompressor in", compressed_tensors.__version__)
                bad += 1
            except KeyError:
                pass
            src = os.path.join(tmp, fmt)
            t, _, group = quantized("W8A8", "int-quantized", {}, torch.bfloat16, [(4, 32)], None, g, 0)
            os.makedirs(src)
            save_file(t, os.path.join(src, "model.safetensors"))
            with open(os.path.join(src, "config.json"), "w") as f:
                json.dump({"quantization_config": {"quant_method": "compressed-tensors", "format": fmt,
                                                   "config_groups": {"group_0": group}}}, f)
            r = subprocess.run(["go", "run", "./cmd/safetensors", "convert", "--dequantize", "--dtype", "BF16", src,
                                os.path.join(tmp, fmt + "-out")], cwd=REPO, capture_output=True, text=True)
            if r.returncode == 0 or fmt not in r.stderr:
                print("FAIL", fmt, "not refused by name:", r.returncode, r.stderr)
                bad += 1
            else:
                print(fmt, "refused:", r.stderr.strip().split(": ", 2)[-1][:100])
    if bad:
        sys.exit("%d failures" % bad)


if __name__ == "__main__":
    main()
