package diff

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

func f32(t *testing.T, name string, shape []uint64, vals ...float32) safetensors.Tensor {
	tn, err := safetensors.TensorFromFloat32s(name, safetensors.F32, shape, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	return tn
}

func write(t *testing.T, ts []safetensors.Tensor, meta map[string]string) string {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, safetensors.WriteFile(path, ts, meta))
	return path
}

func TestPaths(t *testing.T) {
	nan := float32(math.NaN())
	a := write(t, []safetensors.Tensor{
		f32(t, "same", []uint64{2}, 1, 2),
		f32(t, "values", []uint64{4}, 1, -2, 4, nan),
		f32(t, "shape", []uint64{2}, 1, 2),
		f32(t, "onlyA", []uint64{1}, 0),
		f32(t, "nan", []uint64{1}, nan),
		f32(t, "cast", []uint64{1}, 1.5),
	}, map[string]string{"format": "pt", "k": "1"})
	bf16, err := safetensors.TensorFromFloat32s("cast", safetensors.BF16, []uint64{1}, []float32{1.5}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	b := write(t, []safetensors.Tensor{
		f32(t, "same", []uint64{2}, 1, 2),
		f32(t, "values", []uint64{4}, 1, -2.5, 3, nan),
		f32(t, "shape", []uint64{1, 2}, 1, 2),
		f32(t, "onlyB", []uint64{1}, 0),
		f32(t, "nan", []uint64{1}, 0),
		bf16,
	}, map[string]string{"format": "pt", "k": "2", "new": "x"})
	r, err := Paths(a, b)
	require.NoError(t, err)
	assert.False(t, r.Equal())
	assert.Equal(t, []string{"onlyA"}, r.OnlyA)
	assert.Equal(t, []string{"onlyB"}, r.OnlyB)
	byName := map[string]Tensor{}
	for _, tn := range r.Tensors {
		byName[tn.Name] = tn
	}
	assert.True(t, byName["same"].Identical)
	v := byName["values"]
	assert.True(t, v.Compared)
	assert.Equal(t, uint64(2), v.Differing)
	assert.Equal(t, 1.0, v.MaxAbs)  // |4 - 3|
	assert.Equal(t, 0.25, v.MaxRel) // 1 / 4 (and 0.5 / 2.5 = 0.2)
	assert.False(t, byName["shape"].Compared)
	assert.Equal(t, []uint64{1, 2}, byName["shape"].ShapeB)
	assert.True(t, math.IsInf(byName["nan"].MaxAbs, 1))
	c := byName["cast"]
	assert.Equal(t, safetensors.BF16, c.DTypeB)
	assert.True(t, c.Compared)
	assert.Zero(t, c.Differing, "1.5 is exact in BF16")
	one, two := "1", "2"
	x := "x"
	assert.Equal(t, []Metadata{{Key: "k", A: &one, B: &two}, {Key: "new", B: &x}}, r.Metadata)

	r, err = Paths(a, a)
	require.NoError(t, err)
	assert.True(t, r.Equal())

	_, err = Paths(a, filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestShardedAgainstFile(t *testing.T) {
	ts := []safetensors.Tensor{f32(t, "a", []uint64{300}, make([]float32, 300)...), f32(t, "b", []uint64{300}, make([]float32, 300)...)}
	dir := t.TempDir()
	require.NoError(t, safetensors.WriteSharded(dir, "model", ts, 1500, nil))
	file := write(t, ts, nil)
	r, err := Paths(dir, file)
	require.NoError(t, err)
	assert.Empty(t, r.OnlyA)
	assert.Empty(t, r.OnlyB)
	for _, tn := range r.Tensors {
		assert.True(t, tn.Identical, tn.Name)
	}
	// The index's metadata (total_parameters, total_size) against none.
	require.Len(t, r.Metadata, 2)
	assert.Equal(t, "total_parameters", r.Metadata[0].Key)
	assert.Equal(t, "600", *r.Metadata[0].A)
	assert.Equal(t, "total_size", r.Metadata[1].Key)
	assert.Equal(t, "2400", *r.Metadata[1].A)
	assert.Nil(t, r.Metadata[1].B)
}

// TestChunks compares tensors larger than a chunk: differences in every
// chunk, the last one partial, are all counted.
func TestChunks(t *testing.T) {
	n := 3*diffChunk + 5
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i%7), float32(i%7)
	}
	b[10], b[diffChunk+1], b[n-1] = 100, -3, 2.5
	ta := f32(t, "w", []uint64{uint64(n)}, a...)
	tb := f32(t, "w", []uint64{uint64(n)}, b...)
	r, err := Paths(write(t, []safetensors.Tensor{ta}, nil), write(t, []safetensors.Tensor{tb}, nil))
	require.NoError(t, err)
	require.Len(t, r.Tensors, 1)
	got := r.Tensors[0]
	assert.True(t, got.Compared)
	assert.Equal(t, uint64(3), got.Differing)
	assert.Equal(t, float64(100-10%7), got.MaxAbs)
}
