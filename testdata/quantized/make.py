"""Makes the tiny quantized checkpoints of testdata/quantized and the
reference dequantizations beside them, with the reference code:

  fp8/      FP8 block-scaled (quant_method fp8, weight_block_size [128, 128]):
            partial blocks (150x300), whole blocks (256x128), an odd shape
            (130x7) and a BF16 norm kept as it is.
  fp8-64/   FP8 with 64x64 blocks, partial (100x70, 3x65).
  mxfp4/    gpt-oss's MXFP4: *_blocks and *_scales of two experts, with
            scales from 0 to 255, and an F32 bias kept as it is.
  mxfp4-tiles/ the same with experts of 96 and 70 rows: whole tiles of 32
            rows (the vector path) and a partial one, extremes inside.
  ct-*/     compressed-tensors 0.20's formats, each weight quantized with
            its presets' arguments (calculate_qparams) and compressed by its
            compressor: ct-int (int-quantized, W8A8, BF16), ct-float
            (float-quantized, FP8_DYNAMIC, F16), ct-w4 (pack-quantized, W4A16,
            group 128), ct-w4-asym (W4A16_ASYM, F32, packed zero points), ct-w8
            (pack-quantized W8A16, one scale a row, rows of 53 values: a partial
            int32 word),
            ct-nvfp4 (nvfp4-pack-quantized, NVFP4A16), ct-w3 (pack-quantized,
            W3A16 asymmetric, group 32: values and zero points across words),
            ct-naive (naive-quantized, W4A16_ASYM with groups of 32, F16: I8
            values and zero points), ct-mxfp4, ct-mxfp6, ct-mxfp8
            (mxfp4-pack-quantized, mxfp6-pack-quantized, mxfp8-quantized, with
            E8M0 scales set to 0, 1, 127, 200 and 254 besides the computed ones),
            ct-dense (dense: W8A16's weights kept as they are, beside their
            scales and zero points), ct-mixed (mixed-precision: a config group of
            W4A16 pack-quantized, one of FP8_DYNAMIC float-quantized, one of
            NVFP4A16), ct-fp8-block (float-quantized, FP8_BLOCK with blocks of
            16x32, partial), ct-int-block (int-quantized, W8A8 asymmetric with
            blocks of 8x16, partial, F16: I8 zero points a block), ct-mxfp4-inf
            (mxfp4-pack-quantized with E8M0 scales of 255, +Inf: NaN for a zero,
            which check reports).

Each folder has model.safetensors and config.json, and the reference
dequantized weights in want-BF16.safetensors and want-F32.safetensors:
FP8 from transformers' _dequantize_fp8_weight in float32 (then .to(bfloat16)
for BF16), MXFP4 from transformers' convert_moe_packed_tensors with the
output dtype, compressed-tensors from its compressor's decompress (in the
dtype it gives, then .to() the output's). Run with the Python of a venv that
has torch 2.x, transformers 5.24 and compressed-tensors 0.20.0 (CPU is
enough): python testdata/quantized/make.py
"""
import json
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, tensors, config, want):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    save_file(tensors, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    for dtype, tensors in want.items():
        save_file(tensors, os.path.join(d, "want-%s.safetensors" % dtype))


def fp8(name, block, shapes, seed):
    g = torch.Generator().manual_seed(seed)
    tensors, want = {}, {"BF16": {}, "F32": {}}
    for i, (out, inp) in enumerate(shapes):
        w = (torch.randn(out, inp, generator=g) * 3).to(torch.float8_e4m3fn)
        s = torch.rand(-(-out // block[0]), -(-inp // block[1]), generator=g) * 0.01 + 1e-4
        tensors["layers.%d.proj.weight" % i] = w
        tensors["layers.%d.proj.weight_scale_inv" % i] = s
        ref = _dequantize_fp8_weight(w.clone(), s, list(block), torch.float32)
        want["F32"]["layers.%d.proj.weight" % i] = ref
        want["BF16"]["layers.%d.proj.weight" % i] = ref.to(torch.bfloat16)
    norm = torch.randn(shapes[0][1], generator=g).to(torch.bfloat16)
    tensors["norm.weight"] = norm
    want["BF16"]["norm.weight"] = norm
    want["F32"]["norm.weight"] = norm.float()
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
              "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                      "weight_block_size": list(block)}}
    write(name, tensors, config, want)


def mxfp4(name, seed, shapes=None, extremes_at=0):
    g = torch.Generator().manual_seed(seed)
    tensors, want = {}, {"BF16": {}, "F32": {}}
    shapes = shapes or {"gate_up_proj": (2, 12, 3), "down_proj": (2, 6, 2)}
    for proj, (experts, rows, groups) in shapes.items():
        p = "model.layers.0.mlp.experts." + proj
        blocks = torch.randint(0, 256, (experts, rows, groups, 16), generator=g, dtype=torch.uint8)
        scales = torch.randint(110, 140, (experts, rows, groups), generator=g, dtype=torch.uint8)
        if proj == "gate_up_proj":  # the extremes: 2^-127, 2^-126, 2^0, 2^127, 2^128
            at = extremes_at
            scales.view(-1)[at:at + 6] = torch.tensor([0, 1, 127, 254, 255, 200], dtype=torch.uint8)
        tensors[p + "_blocks"] = blocks
        tensors[p + "_scales"] = scales
        bias = torch.randn(experts, rows, generator=g)
        tensors[p + "_bias"] = bias
        want["BF16"][p] = convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16)
        want["F32"][p] = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
        want["BF16"][p + "_bias"] = bias.to(torch.bfloat16)
        want["F32"][p + "_bias"] = bias
    config = {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"],
              "quantization_config": {"quant_method": "mxfp4",
                                      "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                 "model.embed_tokens", "lm_head"]}}
    write(name, tensors, config, want)


def compressed(name, preset, fmt, dtype, shapes, seed, **weights):
    mixed(name, [(preset, fmt, weights, shapes)], dtype, seed)


def mixed(name, groups, dtype, seed, mx_scales=None):
    """groups: (preset, format, weight arguments changed, shapes) of each
    config group, whose modules are model.layers.I.mlp.down_proj in turn;
    mx_scales: E8M0 exponents written over each weight's first scales."""
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import preset_name_to_scheme
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam, maybe_pad_tensor_for_block_quant

    g = torch.Generator().manual_seed(seed)
    tensors, want = {}, {"BF16": {}, "F32": {}}
    config_groups, formats, i = {}, set(), 0
    for gi, (preset, fmt, weights, shapes) in enumerate(groups):
        scheme = preset_name_to_scheme(preset, ["Linear"])
        if weights:  # the preset's weight arguments changed
            scheme.weights = scheme.weights.model_copy(update=weights)
        a = scheme.weights
        compressor = BaseCompressor.get_value_from_registry(fmt)
        modules = []
        for out, inp in shapes:
            m = "model.layers.%d.mlp.down_proj" % i
            modules.append(m)
            i += 1
            w = torch.randn(out, inp, generator=g).to(dtype)
            if a.strategy == "channel":
                mn, mx = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
            elif a.strategy in ("group", "tensor_group"):
                gw = w.unflatten(-1, (-1, a.group_size))
                mn, mx = gw.amin(-1), gw.amax(-1)
            elif a.strategy == "block":  # partial blocks padded with zeros, as the compressor pads
                bh, bw = a.block_structure
                wp = maybe_pad_tensor_for_block_quant(w, (bh, bw))
                blocks = wp.unflatten(0, (-1, bh)).unflatten(-1, (-1, bw))
                mn, mx = blocks.amin((1, 3)), blocks.amax((1, 3))
            else:
                mn, mx = w.amin().reshape(1), w.amax().reshape(1)
            gs = generate_gparam(w.amin(), w.amax()) if a.strategy == "tensor_group" else None
            scale, zp = calculate_qparams(mn, mx, a, global_scale=gs)
            sd = {"weight": w, "weight_scale": scale, "weight_zero_point": zp}
            if gs is not None:
                sd["weight_global_scale"] = gs
            c = dict(compressor.compress(sd, scheme))
            if mx_scales is not None:
                s = c["weight_scale"].clone()
                s.view(-1)[: len(mx_scales)] = torch.tensor(mx_scales, dtype=torch.uint8)
                c["weight_scale"] = s
            for k, v in c.items():
                tensors[m + "." + k] = v.contiguous()
            ref = compressor.decompress(dict(c), scheme)["weight"]
            want["BF16"][m + ".weight"] = ref.to(torch.bfloat16).contiguous()
            want["F32"][m + ".weight"] = ref.to(torch.float32).contiguous()
        config_groups["group_%d" % gi] = {"targets": ["re:" + "|".join(x.replace(".", "\\.") + "$" for x in modules)] if len(groups) > 1 else ["Linear"],
                                          "weights": a.model_dump(mode="json"), "input_activations": None,
                                          "output_activations": None, "format": fmt}
        formats.add(fmt)
    norm = torch.randn(groups[0][3][0][1], generator=g).to(torch.bfloat16)
    tensors["model.norm.weight"] = norm
    want["BF16"]["model.norm.weight"] = norm
    want["F32"]["model.norm.weight"] = norm.float()
    fmt = formats.pop() if len(formats) == 1 else "mixed-precision"
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
              "quantization_config": {"quant_method": "compressed-tensors", "format": fmt, "config_groups": config_groups,
                                      "ignore": ["lm_head"], "quantization_status": "compressed", "version": "0.20.0",
                                      "kv_cache_scheme": None, "sparsity_config": {}}}
    write(name, tensors, config, want)


if __name__ == "__main__":
    print("torch", torch.__version__, "transformers", transformers.__version__)
    fp8("fp8", (128, 128), [(150, 300), (256, 128), (130, 7)], 1)
    fp8("fp8-64", (64, 64), [(100, 70), (3, 65)], 2)
    mxfp4("mxfp4", 3)
    # Experts of 96 and 70 rows: whole tiles of 32 rows and a partial one,
    # the extremes inside a tile.
    mxfp4("mxfp4-tiles", 20, {"gate_up_proj": (2, 96, 3), "down_proj": (1, 70, 2)}, extremes_at=100)
    compressed("ct-int", "W8A8", "int-quantized", torch.bfloat16, [(37, 53), (24, 128)], 4)
    compressed("ct-float", "FP8_DYNAMIC", "float-quantized", torch.float16, [(37, 53), (24, 128)], 5)
    compressed("ct-w4", "W4A16", "pack-quantized", torch.bfloat16, [(40, 256), (24, 128)], 6)
    compressed("ct-w4-asym", "W4A16_ASYM", "pack-quantized", torch.float32, [(40, 256), (24, 128)], 7)
    compressed("ct-w8", "W8A16", "pack-quantized", torch.bfloat16, [(37, 53), (24, 128)], 8,
               strategy="channel", group_size=None)
    compressed("ct-nvfp4", "NVFP4A16", "nvfp4-pack-quantized", torch.bfloat16, [(40, 256), (24, 48)], 9)
    compressed("ct-w3", "W3A16", "pack-quantized", torch.bfloat16, [(37, 96), (24, 64)], 10,
               symmetric=False, group_size=32)
    compressed("ct-naive", "W4A16_ASYM", "naive-quantized", torch.float16, [(37, 96), (24, 64)], 11,
               group_size=32)
    mx = [0, 1, 127, 200, 254]
    mixed("ct-mxfp4", [("MXFP4A16", "mxfp4-pack-quantized", {}, [(40, 256), (24, 64)])], torch.bfloat16, 12, mx)
    mixed("ct-mxfp6", [("MXFP6A16", "mxfp6-pack-quantized", {}, [(40, 256), (24, 64)])], torch.bfloat16, 13, mx)
    mixed("ct-mxfp8", [("MXFP8A16", "mxfp8-quantized", {}, [(40, 256), (24, 64)])], torch.bfloat16, 14, mx)
    compressed("ct-dense", "W8A16", "dense", torch.float16, [(37, 53), (24, 128)], 15,
               strategy="channel", group_size=None)
    mixed("ct-mixed", [("W4A16", "pack-quantized", {}, [(40, 256)]), ("FP8_DYNAMIC", "float-quantized", {}, [(24, 128)]),
                       ("NVFP4A16", "nvfp4-pack-quantized", {}, [(16, 64)])], torch.bfloat16, 16)
    compressed("ct-fp8-block", "FP8_BLOCK", "float-quantized", torch.bfloat16, [(40, 100), (24, 64)], 17,
               block_structure=[16, 32])
    compressed("ct-int-block", "W8A8", "int-quantized", torch.float16, [(20, 50), (24, 64)], 18,
               strategy="block", block_structure=[8, 16], symmetric=False)
    mixed("ct-mxfp4-inf", [("MXFP4A16", "mxfp4-pack-quantized", {}, [(8, 64)])], torch.bfloat16, 19, [255, 0, 254, 255])
