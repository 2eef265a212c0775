package quant

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestWriteModelBlocks: a weight of several blocks of rows, quantized and
// written a block at a time, is what CompressWeight gives, for either
// strategy, with progress counted block by block; a NaN in a later block
// fails the write, which leaves nothing.
func TestWriteModelBlocks(t *testing.T) {
	const cols = 1024
	rows := 2*blockBytes/cols + 3 // three blocks, the last of 3 rows
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(math.Sin(float64(i))) * float32(1+i/cols%5)
	}
	w, err := safetensors.TensorFromFloat32s("model.layers.0.mlp.up_proj.weight", safetensors.BF16, []uint64{uint64(rows), cols}, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	norm, err := safetensors.TensorFromFloat32s("model.norm.weight", safetensors.BF16, []uint64{2}, []float32{1, 1}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	src := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, safetensors.WriteFile(src, []safetensors.Tensor{w, norm}, nil))
	for _, s := range []Strategy{PerChannel, PerTensor} {
		dst := filepath.Join(t.TempDir(), "q")
		var calls []uint64
		_, err := WriteModel(t.Context(), src, dst, s, Progress(func(done, _ uint64) { calls = append(calls, done) }))
		require.NoError(t, err)
		assert.Len(t, calls, 4, "%v: a call per block, and one for the norm", s)
		assert.Equal(t, uint64(len(w.Data)+len(norm.Data)), calls[len(calls)-1])
		wantQ, wantScale, err := CompressWeight(w, s)
		require.NoError(t, err)
		r, err := safetensors.Open(filepath.Join(dst, "model.safetensors"))
		require.NoError(t, err)
		q, err := r.Tensor(w.Name)
		require.NoError(t, err)
		scale, err := r.Tensor(ScaleName(w.Name))
		require.NoError(t, err)
		assert.Equal(t, wantQ.Data, q.Data, s)
		assert.Equal(t, wantScale.Data, scale.Data, s)
		assert.Equal(t, wantScale.Shape, scale.Shape, s)
		require.NoError(t, r.Close())
	}

	// A NaN in the last block.
	vals[len(vals)-1] = float32(math.NaN())
	bad, err := safetensors.TensorFromFloat32s(w.Name, safetensors.BF16, w.Shape, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteFile(src, []safetensors.Tensor{bad, norm}, nil))
	parent := t.TempDir()
	_, err = WriteModel(t.Context(), src, filepath.Join(parent, "q"), PerChannel)
	require.ErrorIs(t, err, ErrNotFinite)
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
