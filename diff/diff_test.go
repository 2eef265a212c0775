package diff

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
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
		f32(t, "values", []uint64{4}, 1, -2, 4, 5),
		f32(t, "shape", []uint64{2}, 1, 2),
		f32(t, "onlyA", []uint64{1}, 0),
		f32(t, "nan", []uint64{1}, nan),
		f32(t, "cast", []uint64{1}, 1.5),
	}, map[string]string{"format": "pt", "k": "1"})
	bf16, err := safetensors.TensorFromFloat32s("cast", safetensors.BF16, []uint64{1}, []float32{1.5}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	b := write(t, []safetensors.Tensor{
		f32(t, "same", []uint64{2}, 1, 2),
		f32(t, "values", []uint64{4}, 1, -2.5, 3, 5),
		f32(t, "shape", []uint64{1, 2}, 1, 2),
		f32(t, "onlyB", []uint64{1}, 0),
		f32(t, "nan", []uint64{1}, 0),
		bf16,
	}, map[string]string{"format": "pt", "k": "2", "new": "x"})
	r, err := Paths(t.Context(), a, b)
	require.NoError(t, err)
	assert.False(t, r.Equal())
	assert.Equal(t, []string{"onlyA"}, r.OnlyA)
	assert.Equal(t, []string{"onlyB"}, r.OnlyB)
	byName := map[string]Tensor{}
	for _, tn := range r.Tensors {
		byName[tn.Name] = tn
	}
	assert.Equal(t, Identical, byName["same"].Verdict)
	assert.Equal(t, uint64(2), byName["same"].Values)
	v := byName["values"]
	assert.Equal(t, Different, v.Verdict)
	assert.Equal(t, uint64(4), v.Values)
	assert.Equal(t, uint64(2), v.Differing)
	assert.Equal(t, uint64(2), v.Unequal)
	assert.Equal(t, 1.0, v.MaxAbs)   // |4 - 3|
	assert.Equal(t, 1.0/3, v.MaxRel) // 1 / 3 (and 0.5 / 2.5 = 0.2)
	assert.Equal(t, Incomparable, byName["shape"].Verdict)
	assert.Zero(t, byName["shape"].Values)
	assert.Equal(t, []uint64{1, 2}, byName["shape"].ShapeB)
	assert.Equal(t, Different, byName["nan"].Verdict)
	assert.True(t, math.IsInf(byName["nan"].MaxAbs, 1))
	c := byName["cast"]
	assert.Equal(t, safetensors.BF16, c.DTypeB)
	assert.Equal(t, Equal, c.Verdict, "1.5 is exact in BF16")
	assert.Zero(t, c.Differing)
	one, two := "1", "2"
	x := "x"
	assert.Equal(t, []Metadata{{Key: "k", A: &one, B: &two}, {Key: "new", B: &x}}, r.Metadata)

	r, err = Paths(t.Context(), a, a)
	require.NoError(t, err)
	assert.True(t, r.Equal())

	_, err = Paths(t.Context(), a, filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestShardedAgainstFile builds one model in both forms, a sharded
// checkpoint and a single file, with the same metadata: they are equal,
// whichever way the checkpoint is named, though its index has metadata of
// its own (total_parameters, total_size) that the file has not.
func TestShardedAgainstFile(t *testing.T) {
	ts := []safetensors.Tensor{f32(t, "a", []uint64{300}, make([]float32, 300)...), f32(t, "b", []uint64{300}, make([]float32, 300)...)}
	meta := map[string]string{"format": "pt"}
	dir := t.TempDir()
	require.NoError(t, checkpoint.Write(dir, ts, checkpoint.MaxShardSize(1500), checkpoint.FileMetadata(meta)))
	index := filepath.Join(dir, "model.safetensors.index.json")
	data, err := os.ReadFile(index)
	require.NoError(t, err)
	require.Contains(t, string(data), `"total_size": 2400`, "the index keeps its bookkeeping")
	file := write(t, ts, meta)
	for _, sharded := range []string{dir, index} {
		r, err := Paths(t.Context(), sharded, file)
		require.NoError(t, err)
		assert.True(t, r.Equal(), "%s against %s: %+v", sharded, file, r)
		assert.Empty(t, r.Metadata)
		assert.Len(t, r.Tensors, 2)
		r, err = Paths(t.Context(), file, sharded)
		require.NoError(t, err)
		assert.True(t, r.Equal(), "%s against %s: %+v", file, sharded, r)
	}

	// The model's metadata still counts: the file's differs.
	other := write(t, ts, map[string]string{"format": "np", "k": "v"})
	r, err := Paths(t.Context(), dir, other)
	require.NoError(t, err)
	assert.False(t, r.Equal())
	pt, np, v := "pt", "np", "v"
	assert.Equal(t, []Metadata{{Key: "format", A: &pt, B: &np}, {Key: "k", B: &v}}, r.Metadata)
}

// TestModelMetadata: a checkpoint's Metadata, which Paths compares, comes
// from its shards and its index: the index's bookkeeping is left out, its
// other keys are kept, and a key on which the shards disagree makes the
// model differ from a file.
func TestModelMetadata(t *testing.T) {
	dir := t.TempDir()
	a, b := f32(t, "a", []uint64{1}, 1), f32(t, "b", []uint64{1}, 2)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "s1.safetensors"), []safetensors.Tensor{a}, map[string]string{"format": "pt", "x": "1"}))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "s2.safetensors"), []safetensors.Tensor{b}, map[string]string{"format": "pt", "x": "2"}))
	index := filepath.Join(dir, "model.safetensors.index.json")
	require.NoError(t, os.WriteFile(index, []byte(`{"metadata": {"total_size": 8, "total_parameters": 2, "license": "mit"},
		"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}`), 0o644))
	sh, err := checkpoint.Open(t.Context(), index)
	require.NoError(t, err)
	defer sh.Close()
	assert.Equal(t, map[string]string{"total_size": "8", "total_parameters": "2", "license": "mit"}, sh.IndexMetadata(), "IndexMetadata is the index's")
	assert.Equal(t, map[string]string{
		"format":  "pt",
		"license": "mit",
		"x":       `differs within the checkpoint: s1.safetensors "1", s2.safetensors "2"`,
	}, sh.Metadata())

	file := write(t, []safetensors.Tensor{a, b}, map[string]string{"format": "pt", "x": "1", "license": "mit"})
	r, err := Paths(t.Context(), index, file)
	require.NoError(t, err)
	assert.False(t, r.Equal(), "the shards disagree on x")
	require.Len(t, r.Metadata, 1)
	assert.Equal(t, "x", r.Metadata[0].Key)

	// A single file keeps every key of its own, total_size included.
	single := write(t, []safetensors.Tensor{a}, map[string]string{"total_size": "4"})
	sf, err := checkpoint.Open(t.Context(), single)
	require.NoError(t, err)
	defer sf.Close()
	assert.Equal(t, map[string]string{"total_size": "4"}, sf.Metadata())

	// No metadata anywhere: nil.
	bare := write(t, []safetensors.Tensor{a}, nil)
	sb, err := checkpoint.Open(t.Context(), bare)
	require.NoError(t, err)
	defer sb.Close()
	assert.Nil(t, sb.Metadata())
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
	r, err := Paths(t.Context(), write(t, []safetensors.Tensor{ta}, nil), write(t, []safetensors.Tensor{tb}, nil))
	require.NoError(t, err)
	require.Len(t, r.Tensors, 1)
	got := r.Tensors[0]
	assert.Equal(t, Different, got.Verdict)
	assert.Equal(t, uint64(n), got.Values)
	assert.Equal(t, uint64(3), got.Differing)
	assert.Equal(t, float64(100-10%7), got.MaxAbs)
}
