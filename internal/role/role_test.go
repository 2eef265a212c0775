package role

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestModule(t *testing.T) {
	for name, want := range map[string]string{
		"model.layers.0.input_layernorm.weight": "input_layernorm",
		"ln_f.bias":                             "ln_f",
		"weight":                                "",
		"a..weight":                             "",
		"":                                      "",
	} {
		assert.Equal(t, want, Module(name), name)
	}
}

func TestIsNorm(t *testing.T) {
	for _, m := range []string{"input_layernorm", "LayerNorm", "attn_norm", "norm", "ln", "ln_1", "ln_f", "ln1", "LN2", "attn_ln", "pre_LN", "final_layer_norm", "q_norm"} {
		assert.True(t, IsNorm(m), m)
	}
	for _, m := range []string{"", "q_proj", "linear", "mlp", "lm_head", "kernel", "l_n"} {
		assert.False(t, IsNorm(m), m)
	}
}

func TestIsEmbedding(t *testing.T) {
	for _, m := range []string{"embed_tokens", "word_embeddings", "Embedding", "embed_positions", "wte", "WPE", "pos_embed"} {
		assert.True(t, IsEmbedding(m), m)
	}
	for _, m := range []string{"", "lm_head", "wte_proj", "swpe", "tokens"} {
		assert.False(t, IsEmbedding(m), m)
	}
	assert.True(t, InEmbedding("bert.embeddings.LayerNorm.weight"))
	assert.True(t, InEmbedding("transformer.wte.weight"))
	assert.True(t, InEmbedding("pos_embed"))
	assert.False(t, InEmbedding("model.layers.0.mlp.up_proj.weight"))
	assert.False(t, InEmbedding("transformer.wte_proj.weight"), "wte is a whole component")
}

func TestIsConv1D(t *testing.T) {
	for _, m := range []string{"c_attn", "c_fc", "C_PROJ"} {
		assert.True(t, IsConv1D(m), m)
	}
	for _, m := range []string{"c_attn_x", "q_proj", ""} {
		assert.False(t, IsConv1D(m), m)
	}
}

func TestIsHead(t *testing.T) {
	for _, m := range []string{"lm_head", "embed_out", "cls.predictions.decoder", "output"} {
		assert.True(t, IsHead(m), m)
	}
	// The whole module's name: a head's name inside another module, or a
	// module named output inside a block, is not the model's head.
	for _, m := range []string{"model.lm_head", "layers.0.attention.output", "LM_HEAD", "decoder", ""} {
		assert.False(t, IsHead(m), m)
	}
}

func TestIsBuffer(t *testing.T) {
	assert.True(t, IsBuffer("h.0.attn.bias", []uint64{1, 1, 1024, 1024}))
	assert.True(t, IsBuffer("h.0.attn.masked_bias", nil))
	assert.True(t, IsBuffer("model.layers.0.self_attn.rotary_emb.inv_freq", []uint64{32}))
	assert.True(t, IsBuffer("embeddings.position_ids", []uint64{1, 512}))
	assert.True(t, IsBuffer("position_ids", []uint64{1, 512}))
	assert.False(t, IsBuffer("h.0.attn.c_attn.bias", []uint64{96}))
	assert.False(t, IsBuffer("h.0.attn.c_attn.weight", []uint64{1, 1, 32, 96}))
}
