"""Writes the tiny models the check package's tests read, with transformers.

    python generate.py   (in this directory; needs torch and transformers)

Each directory holds a model of one family, as save_pretrained writes it
(model.safetensors and config.json), built by transformers' own modeling code
with three layers and tiny dimensions, and every parameter then drawn from
N(0, 0.02) in float16 so that no tensor is all zeros. The tests plant defects
in copies of them. Generated with transformers 5.23.0 and torch 2.15.0.
"""

import json
import os
import shutil

import torch
import transformers as T

small = dict(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=3,
             num_attention_heads=4)
MODELS = {
    "llama": (T.LlamaConfig(**small, num_key_value_heads=2), T.LlamaForCausalLM),
    "mistral": (T.MistralConfig(**small, num_key_value_heads=2), T.MistralForCausalLM),
    "qwen2": (T.Qwen2Config(**small, num_key_value_heads=2, tie_word_embeddings=True), T.Qwen2ForCausalLM),
    "qwen3": (T.Qwen3Config(**small, num_key_value_heads=2, head_dim=8), T.Qwen3ForCausalLM),
    "gemma": (T.GemmaConfig(**small, num_key_value_heads=1, head_dim=8), T.GemmaForCausalLM),
    "gemma2": (T.Gemma2Config(**small, num_key_value_heads=2, head_dim=8), T.Gemma2ForCausalLM),
    "phi3": (T.Phi3Config(**small, num_key_value_heads=2, pad_token_id=0), T.Phi3ForCausalLM),
    "gpt2": (T.GPT2Config(vocab_size=32, n_embd=16, n_layer=3, n_head=4, n_positions=20), T.GPT2LMHeadModel),
    "gpt_neox": (T.GPTNeoXConfig(**small), T.GPTNeoXForCausalLM),
    "falcon": (T.FalconConfig(vocab_size=32, hidden_size=16, num_hidden_layers=3, num_attention_heads=4), T.FalconForCausalLM),
    "falcon-new": (T.FalconConfig(vocab_size=32, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                                  num_kv_heads=2, new_decoder_architecture=True, ffn_hidden_size=40), T.FalconForCausalLM),
    "falcon-mha": (T.FalconConfig(vocab_size=32, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                                  multi_query=False, bias=True), T.FalconForCausalLM),
    "bert": (T.BertConfig(**small, max_position_embeddings=20), T.BertForMaskedLM),
}

torch.manual_seed(0)
here = os.path.dirname(os.path.abspath(__file__))
for name, (cfg, cls) in MODELS.items():
    model = cls(cfg).to(torch.float16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    out = os.path.join(here, name)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out)
    for extra in os.listdir(out):
        if extra not in ("model.safetensors", "config.json"):
            os.remove(os.path.join(out, extra))
