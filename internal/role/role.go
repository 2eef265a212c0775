// Package role guesses what a tensor of a model is from its name, as the
// Hugging Face libraries name modules: a normalization layer, an embedding,
// an output head, a buffer saved beside the weights. It is the one place
// that knows these names, for the check package (which judges a model's
// structure and sizes by them) and quant (which leaves norms, embeddings and
// heads unquantized), so that the two agree on every tensor.
package role

import "strings"

// Module returns the name of the module that holds the parameter name,
// the component before the last: "input_layernorm" for
// "model.layers.0.input_layernorm.weight"; "" for a name of one component.
func Module(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return ""
	}
	return name[strings.LastIndexByte(name[:i], '.')+1 : i]
}

// IsNorm reports whether module, a module's own name (one component, in
// any case), is a normalization layer: its name holds "norm"
// ("input_layernorm", "attn_norm", "LayerNorm"), starts with "ln" (GPT-2's
// ln_1 and ln_f, RWKV's ln1) or ends with "_ln" (Whisper's attn_ln).
func IsNorm(module string) bool {
	m := strings.ToLower(module)
	return strings.Contains(m, "norm") || strings.HasPrefix(m, "ln") || strings.HasSuffix(m, "_ln")
}

// IsEmbedding reports whether module, a module's own name (one component,
// in any case), is an embedding table: its name holds "embed"
// ("embed_tokens", "word_embeddings", "embed_positions"), or it is GPT-2's
// wte or wpe.
func IsEmbedding(module string) bool {
	m := strings.ToLower(module)
	return strings.Contains(m, "embed") || m == "wte" || m == "wpe"
}

// InEmbedding reports whether a component of name is an embedding
// (IsEmbedding): the tensor is an embedding table ("wte.weight", a bare
// "pos_embed"), or part of an embeddings module ("embeddings.LayerNorm.weight").
func InEmbedding(name string) bool {
	for s := range strings.SplitSeq(name, ".") {
		if IsEmbedding(s) {
			return true
		}
	}
	return false
}

// IsConv1D reports whether module, a module's own name, is one of GPT-2's
// Conv1D layers (c_attn, c_fc, c_proj): weights laid out [in, out], unlike
// nn.Linear's [out, in].
func IsConv1D(module string) bool {
	switch strings.ToLower(module) {
	case "c_attn", "c_fc", "c_proj":
		return true
	}
	return false
}

// IsHead reports whether module, the whole name of a module, is a language
// model's output head: transformers' lm_head, GPT-NeoX's embed_out, BERT's
// cls.predictions.decoder, or the output of Meta's original checkpoints.
func IsHead(module string) bool {
	switch module {
	case "lm_head", "embed_out", "cls.predictions.decoder", "output":
		return true
	}
	return false
}

// IsBuffer reports whether a tensor is one of the buffers that older
// checkpoints saved beside the weights, whose values are not weights and
// whose dtype may differ: causal masks (GPT-2's attn.bias, GPT-NeoX's
// attention.bias, 4-D), masked_bias (-1e4 or -1e9), rotary inv_freq,
// position_ids.
func IsBuffer(name string, shape []uint64) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	switch last {
	case "masked_bias", "inv_freq", "position_ids":
		return true
	case "bias":
		return len(shape) == 4
	}
	return false
}
