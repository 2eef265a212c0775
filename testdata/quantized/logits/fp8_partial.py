import json, os, subprocess, sys, torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM, AutoModelForCausalLM, FineGrainedFP8Config
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=256, intermediate_size=400, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  vocab_size=320, head_dim=64)
m = LlamaForCausalLM(cfg).to(torch.bfloat16)
os.makedirs("plain", exist_ok=True)
m.save_pretrained("plain")
sd = load_file("plain/model.safetensors")
q = {}
B = 128
for k, v in sd.items():
    if k.startswith("model.layers.") and k.endswith("proj.weight"):
        o, i = v.shape
        w = v.float()
        s = torch.nn.functional.pad(w.abs(), (0, (-i) % B, 0, (-o) % B)).unflatten(0, (-1, B)).unflatten(-1, (-1, B)).amax(dim=(1, 3)) / 448
        qw = (w / s.repeat_interleave(B, 0).repeat_interleave(B, 1)[:o, :i]).to(torch.float8_e4m3fn)
        q[k] = qw
        q[k + "_scale_inv"] = s.float()
    else:
        q[k] = v
os.makedirs("fp8", exist_ok=True)
save_file(q, "fp8/model.safetensors", metadata={"format": "pt"})
c = json.load(open("plain/config.json"))
c["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [B, B]}
json.dump(c, open("fp8/config.json", "w"), indent=2)
subprocess.run(["rm", "-rf", "ours"])
subprocess.run([sys.argv[1], "convert", "--dequantize", "--dtype", "BF16", "fp8", "ours"], check=True)
ids = torch.tensor([[1, 5, 17, 42, 99, 250, 3, 7]])
ours = AutoModelForCausalLM.from_pretrained("ours", dtype=torch.bfloat16)
ref = AutoModelForCausalLM.from_pretrained("fp8", dtype=torch.bfloat16, quantization_config=FineGrainedFP8Config(dequantize=True, weight_block_size=(B, B)))
with torch.no_grad():
    a = ours(ids).logits
    b = ref(ids).logits
print("fp8 partial blocks (400): logits identical:", torch.equal(a, b), "max diff", (a.float() - b.float()).abs().max().item())
wa = ours.model.layers[0].mlp.down_proj.weight
wb = ref.model.layers[0].mlp.down_proj.weight
print("  down_proj weights identical:", torch.equal(wa, wb), wa.dtype, wb.dtype)
from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight
raw = load_file("fp8/model.safetensors")
k = "model.layers.0.mlp.down_proj.weight"
blockwise = _dequantize_fp8_weight(raw[k].clone(), raw[k + "_scale_inv"], [B, B], torch.float32).to(torch.bfloat16)
print("  ours == blockwise reference:", torch.equal(wa, blockwise), "; transformers' load == blockwise:", torch.equal(wb, blockwise),
      "; values its load gets wrong:", (wb != blockwise).sum().item(), "of", blockwise.numel())
