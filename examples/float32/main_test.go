package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const model = "../../testdata/tiny-llama.safetensors"

func TestFloat32(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, model, "model.norm.weight", "model.layers.0.self_attn.q_proj.weight"))
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 4)
	assert.Equal(t, "model.norm.weight F32 [64]: [1.0000 1.0000 1.0000 1.0000] ...", string(lines[0]))
	assert.Equal(t, "  mean 1.00000, std 0.00000, min 1.00000, max 1.00000", string(lines[1]))
	assert.Regexp(t, `^model.layers.0.self_attn.q_proj.weight F32 \[64 64\]: \[-?0\.0\d+ `, string(lines[2]))
	assert.Regexp(t, `std 0\.0(19|20)\d+`, string(lines[3]), "the generator's 0.02")

	err := run(&out, model, "no.such.tensor")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
}
