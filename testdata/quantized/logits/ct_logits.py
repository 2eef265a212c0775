import json, os, subprocess, sys, torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM
from transformers.utils.quantization_config import CompressedTensorsConfig
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.quantization import preset_name_to_scheme
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam
sd = load_file("plain/model.safetensors")  # the tiny llama of fp8_logits.py
ids = torch.tensor([[1, 5, 17, 42, 99, 250, 3, 7]])
for preset, fmt in [("W8A8", "int-quantized"), ("FP8_DYNAMIC", "float-quantized"), ("W4A16", "pack-quantized"), ("W4A16_ASYM", "pack-quantized"), ("NVFP4A16", "nvfp4-pack-quantized")]:
    scheme = preset_name_to_scheme(preset, ["Linear"]); a = scheme.weights
    comp = BaseCompressor.load_from_registry(fmt)
    q = {}
    for k, w in sd.items():
        if not (k.startswith("model.layers.") and k.endswith("proj.weight")):
            q[k] = w; continue
        if a.strategy == "channel": mn, mx = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
        elif a.strategy in ("group", "tensor_group"):
            g = w.unflatten(-1, (-1, a.group_size)); mn, mx = g.amin(-1), g.amax(-1)
        else: mn, mx = w.amin().reshape(1), w.amax().reshape(1)
        gs = generate_gparam(w.amin(), w.amax()) if a.strategy == "tensor_group" else None
        scale, zp = calculate_qparams(mn, mx, a, global_scale=gs)
        s = {"weight": w, "weight_scale": scale, "weight_zero_point": zp}
        if gs is not None: s["weight_global_scale"] = gs
        for kk, vv in comp.compress(s, scheme).items():
            q[k[:-len("weight")] + kk] = vv.contiguous()
    d = "ct-" + preset
    os.makedirs(d, exist_ok=True)
    save_file(q, d + "/model.safetensors", metadata={"format": "pt"})
    c = json.load(open("plain/config.json"))
    c["quantization_config"] = {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed", "version": "0.20.0",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": a.model_dump(mode="json"), "input_activations": None, "output_activations": None, "format": fmt}},
        "ignore": ["lm_head"], "kv_cache_scheme": None, "sparsity_config": {}}
    json.dump(c, open(d + "/config.json", "w"), indent=2)
    subprocess.run(["rm", "-rf", d + "-ours"])
    subprocess.run([sys.argv[1], "convert", "--dequantize", "--dtype", "BF16", d, d + "-ours"], check=True, capture_output=True)
    ours = AutoModelForCausalLM.from_pretrained(d + "-ours", dtype=torch.bfloat16)
    try:
        ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16, quantization_config=CompressedTensorsConfig(run_compressed=False))
    except Exception as e:
        print(preset, fmt, "transformers' load failed:", type(e).__name__, str(e)[:200]); continue
    with torch.no_grad():
        la, lb = ours(ids).logits, ref(ids).logits
    wa = ours.model.layers[0].mlp.down_proj.weight; wb = ref.model.layers[0].mlp.down_proj.weight
    print(preset, fmt, "logits identical:", torch.equal(la, lb), "max diff", (la.float()-lb.float()).abs().max().item(), "; down_proj identical:", torch.equal(wa, wb.to(wa.dtype)), wb.dtype)
