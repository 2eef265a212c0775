package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "linear.safetensors")
	var out bytes.Buffer
	require.NoError(t, run(&out, path))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("wrote %s: 2 tensors, %d bytes\n", path, info.Size()), out.String())

	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	h := r.Header()
	assert.Equal(t, uint64(32*2+4*4), h.DataLen(), "a 4x8 BF16 weight and 4 F32 biases")
	assert.Equal(t, uint64(info.Size()), h.DataOffset()+h.DataLen())
	assert.Equal(t, map[string]string{"format": "pt"}, r.Metadata())
	w, err := r.Tensor("linear.weight")
	require.NoError(t, err)
	assert.Equal(t, safetensors.BF16, w.DType)
	vals, err := w.Float32s()
	require.NoError(t, err)
	for i, v := range vals {
		want := float32(math.Sin(float64(i))) / 8
		assert.InDelta(t, want, v, math.Abs(float64(want))/256+1e-12, "BF16 keeps 8 significant bits")
	}
	b, err := r.Tensor("linear.bias")
	require.NoError(t, err)
	bias, err := safetensors.Values[float32](b, nil)
	require.NoError(t, err)
	assert.Equal(t, []float32{0.5, -0.25, 0, 1}, bias)
}
