package check

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestZeroByDesign checks which all-zero tensors are reported: a weight
// matrix of a block whose like in the other blocks holds values, a token
// table, a language model's head; not biases, norms, adapter matrices zero
// in every block, nor a zero-initialized output layer.
func TestZeroByDesign(t *testing.T) {
	tensor := func(name string, zero bool, shape ...uint64) safetensors.Tensor {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		vals := make([]float32, n)
		if !zero {
			for i := range vals {
				vals[i] = 0.01 * float32(i%7+1)
			}
		}
		x, err := safetensors.TensorFromFloat32s(name, safetensors.F32, shape, vals, safetensors.RoundNearestEven)
		require.NoError(t, err)
		return x
	}
	var ts []safetensors.Tensor
	for i := range 3 {
		b := fmt.Sprintf("model.layers.%d.", i)
		ts = append(ts,
			tensor(b+"self_attn.q_proj.weight", i == 1, 16, 16),
			tensor(b+"self_attn.q_proj.bias", true, 16),
			tensor(b+"self_attn.q_proj.lora_A.weight", false, 4, 16),
			tensor(b+"self_attn.q_proj.lora_B.weight", true, 16, 4),
			tensor(b+"input_layernorm.weight", i == 2, 16),
		)
	}
	ts = append(ts,
		tensor("model.embed_tokens.weight", false, 50, 16),
		tensor("lm_head.weight", true, 50, 16),
		tensor("proj_out.weight", true, 12, 16),
	)
	r, err := Run(t.Context(), memSourceOf(ts...))
	require.NoError(t, err)
	var zero []string
	for _, f := range r.Findings {
		if f.Kind == KindZero {
			zero = append(zero, f.Tensor)
			assert.Equal(t, Warning, f.Severity)
		}
	}
	assert.ElementsMatch(t, []string{"model.layers.1.self_attn.q_proj.weight", "lm_head.weight"}, zero)
	// 3 biases, 3 LoRA B, a norm, the output projection.
	assert.Equal(t, 8, r.ZeroByDesign)
	require.NotEmpty(t, r.Notes)
	assert.Contains(t, r.Notes[0], "8 tensors all zeros")
}
