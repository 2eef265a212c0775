import json, os, subprocess, sys, torch
from safetensors.torch import load_file, save_file
from transformers import GptOssConfig, GptOssForCausalLM, AutoModelForCausalLM, Mxfp4Config
torch.manual_seed(0)
cfg = GptOssConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   vocab_size=320, num_local_experts=4, num_experts_per_tok=2, layer_types=["sliding_attention", "full_attention"])
m = GptOssForCausalLM(cfg).to(torch.bfloat16)
os.makedirs("gpt-plain", exist_ok=True)
m.save_pretrained("gpt-plain")
sd = load_file("gpt-plain/model.safetensors")
q = {}
g = torch.Generator().manual_seed(1)
for k, v in sd.items():
    if k.endswith("mlp.experts.gate_up_proj") or k.endswith("mlp.experts.down_proj"):
        E, a, b = v.shape  # [E, in, out]: blocks hold [E, out, in/32, 16]
        q[k + "_blocks"] = torch.randint(0, 256, (E, b, a // 32, 16), generator=g, dtype=torch.uint8)
        q[k + "_scales"] = torch.randint(118, 126, (E, b, a // 32), generator=g, dtype=torch.uint8)
    else:
        q[k] = v
os.makedirs("gpt-mxfp4", exist_ok=True)
save_file(q, "gpt-mxfp4/model.safetensors", metadata={"format": "pt"})
c = json.load(open("gpt-plain/config.json"))
c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
json.dump(c, open("gpt-mxfp4/config.json", "w"), indent=2)
subprocess.run(["rm", "-rf", "gpt-ours"])
subprocess.run([sys.argv[1], "convert", "--dequantize", "--dtype", "BF16", "gpt-mxfp4", "gpt-ours"], check=True)
ids = torch.tensor([[1, 5, 17, 42, 99, 250, 3, 7]])
ours = AutoModelForCausalLM.from_pretrained("gpt-ours", dtype=torch.bfloat16)
ref = AutoModelForCausalLM.from_pretrained("gpt-mxfp4", dtype=torch.bfloat16, quantization_config=Mxfp4Config(dequantize=True))
with torch.no_grad():
    a = ours(ids).logits; b = ref(ids).logits
print("mxfp4: logits identical:", torch.equal(a, b), "max diff", (a.float() - b.float()).abs().max().item())
wa = ours.model.layers[0].mlp.experts.gate_up_proj; wb = ref.model.layers[0].mlp.experts.gate_up_proj
print("  gate_up_proj identical:", torch.equal(wa, wb), tuple(wa.shape), tuple(wb.shape))
