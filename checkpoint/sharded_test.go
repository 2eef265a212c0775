package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/safetensors-go/safetensors/load"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteLikeTransformers writes the fixture's tensors and compares the
// result with what transformers writes: the same shards, holding the same
// tensors, and the same index, byte for byte. Then it reads them back.
func TestWriteLikeTransformers(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)

	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	assert.Equal(t, string(fx.index), string(index))
	want := []string{"model.safetensors.index.json"}
	for file := range fx.shards {
		want = append(want, file)
	}
	assert.ElementsMatch(t, want, dirNames(t, dir), "no other file, no temporary file left")
	for file, names := range fx.shards {
		r, err := safetensors.Open(filepath.Join(dir, file))
		require.NoError(t, err)
		assert.ElementsMatch(t, names, r.Names(), file)
		assert.Equal(t, map[string]string{"format": "pt"}, r.Metadata(), "metadata goes to every shard")
		r.Close()
	}

	ctx := context.Background()
	c, err := Open(ctx, dir) // the directory, or the index file itself
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, map[string]string{"total_parameters": "2869", "total_size": "6860"}, c.IndexMetadata())
	assert.Equal(t, map[string]string{"format": "pt"}, c.Metadata(), "the files' metadata, less the index's bookkeeping")
	assert.Equal(t, "model.safetensors.index.json", c.Index())
	assert.Equal(t, dir, c.Dir())
	assert.Equal(t, filepath.Join(dir, "model.safetensors.index.json"), c.String())
	assert.Len(t, c.Files(), 7)
	assert.True(t, slices.IsSorted(c.Files()))
	var names []string
	for _, tensor := range fx.tensors {
		names = append(names, tensor.Name)
		got, err := c.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, tensor.DType, got.DType)
		assert.Equal(t, tensor.Shape, got.Shape)
		assert.True(t, bytes.Equal(tensor.Data, got.Data), tensor.Name)
		file, err := c.File(tensor.Name)
		require.NoError(t, err)
		assert.Contains(t, fx.shards[file], tensor.Name)
		info, err := c.Info(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, tensor.Name, info.Name)
		assert.Equal(t, uint64(len(tensor.Data)), info.DataOffsets[1]-info.DataOffsets[0])
		v, err := safetensors.View[uint8](safetensors.Tensor{DType: safetensors.U8, Data: got.Data})
		require.NoError(t, err, "typed access through the tensor")
		assert.Len(t, v, len(tensor.Data))
	}
	slices.Sort(names)
	assert.Equal(t, names, c.Names())
	all, err := c.Tensors()
	require.NoError(t, err)
	assert.Len(t, all, len(fx.tensors))
	require.NoError(t, c.Prefetch(names...))
	require.NoError(t, c.Prefetch())

	_, err = c.Tensor("missing")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
	assert.ErrorContains(t, err, "model.safetensors.index.json")
	_, err = c.File("missing")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
	_, err = c.Info("missing")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
	_, err = c.TensorReader("missing")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
	assert.True(t, errors.Is(c.Prefetch("missing"), safetensors.ErrTensorNotFound))
	_, err = c.Header("missing.safetensors")
	assert.ErrorContains(t, err, `no file "missing.safetensors"`)

	c2, err := Open(ctx, filepath.Join(dir, "model.safetensors.index.json"), Strict())
	require.NoError(t, err)
	assert.Equal(t, c.Names(), c2.Names())
	require.NoError(t, c2.Close())
	require.NoError(t, c2.Close(), "a second Close")
	_, err = c2.Tensor(names[0])
	assert.True(t, errors.Is(err, safetensors.ErrClosed), "%v", err)
}

func TestWriteSingleShard(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := t.TempDir()
	require.NoError(t, Write(dir, fx.tensors, MaxShardSize(1<<30)))
	assert.Equal(t, []string{"model.safetensors"}, dirNames(t, dir), "one shard: one file, no index, as transformers")
	r, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	assert.Len(t, r.Names(), len(fx.tensors))
	assert.Nil(t, r.Metadata(), "no FileMetadata, no metadata")
	r.Close()

	// The default MaxShardSize is 50 GB: one file.
	dir = t.TempDir()
	require.NoError(t, Write(dir, fx.tensors))
	assert.Equal(t, []string{"model.safetensors"}, dirNames(t, dir))

	// No tensors: no shard, and an index that lists none.
	dir = t.TempDir()
	require.NoError(t, Write(dir, nil, MaxShardSize(1000)))
	assert.Equal(t, []string{"model.safetensors.index.json"}, dirNames(t, dir))
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	assert.Empty(t, c.Names())
	assert.Empty(t, c.Files())
	c.Close()
}

// TestCreateConcurrent writes the tensors from several goroutines, in
// reverse order.
func TestCreateConcurrent(t *testing.T) {
	fx := loadShardedFixture(t)
	specs := make([]safetensors.TensorSpec, len(fx.tensors))
	for i, tensor := range fx.tensors {
		specs[i] = safetensors.TensorSpec{Name: tensor.Name, DType: tensor.DType, Shape: tensor.Shape}
	}
	dir := t.TempDir()
	w, err := Create(dir, specs, MaxShardSize(fx.maxSize))
	require.NoError(t, err)
	assert.Len(t, w.Files(), 7)
	file, err := w.File("lm_head.weight")
	require.NoError(t, err)
	assert.Equal(t, "model-00007-of-00007.safetensors", file)
	_, err = w.File("nope")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
	var wg sync.WaitGroup
	for i := len(fx.tensors) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, w.WriteTensor(fx.tensors[i].Name, bytes.NewReader(fx.tensors[i].Data)))
		}()
	}
	wg.Wait()
	assert.True(t, errors.Is(w.WriteTensor("nope", nil), safetensors.ErrTensorNotFound))
	err = w.WriteTensor(fx.tensors[0].Name, bytes.NewReader(fx.tensors[0].Data))
	assert.True(t, errors.Is(err, safetensors.ErrTensorWritten), "each tensor once: %v", err)
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "a second Close returns the first's result")
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	assert.Equal(t, string(fx.index), string(index))
}

// TestCreateFailure leaves a tensor unwritten: Close fails, and the
// directory keeps the checkpoint it had before, index included.
func TestCreateFailure(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	before := dirNames(t, dir)
	oldIndex, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)

	specs := []safetensors.TensorSpec{{Name: "a", DType: safetensors.F32, Shape: []uint64{300}}, {Name: "b", DType: safetensors.F32, Shape: []uint64{300}}}
	w, err := Create(dir, specs, MaxShardSize(1000))
	require.NoError(t, err)
	require.NoError(t, w.WriteTensor("a", bytes.NewReader(make([]byte, 1200))))
	closeErr := w.Close() // b is missing
	assert.True(t, errors.Is(closeErr, safetensors.ErrSizeMismatch), "%v", closeErr)
	assert.ElementsMatch(t, before, dirNames(t, dir), "no temporary file left, no shard replaced")
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	assert.Equal(t, oldIndex, index)
	assert.Equal(t, closeErr, w.Close(), "a second Close returns the first's result")

	// Abort leaves the old checkpoint too, and Close after it fails.
	w, err = Create(dir, specs, MaxShardSize(1000))
	require.NoError(t, err)
	require.NoError(t, w.WriteTensor("a", bytes.NewReader(make([]byte, 1200))))
	w.Abort()
	assert.ErrorIs(t, w.Close(), safetensors.ErrClosed)
	assert.ElementsMatch(t, before, dirNames(t, dir))

	for _, bad := range []Option{BaseName(""), BaseName("../model"), BaseName("a/b"), BaseName(`a\b`), BaseName(".."), MaxShardSize(0), MaxShardSize(-1)} {
		_, err := Create(t.TempDir(), specs, bad)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
	}
	_, err = Create(t.TempDir(), append(specs, specs[0]), MaxShardSize(1000))
	assert.True(t, errors.Is(err, safetensors.ErrInvalidHeader), "a name twice: %v", err)
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	_, err = Create(filepath.Join(blocker, "dir"), specs, MaxShardSize(1000))
	assert.Error(t, err, "a directory that cannot be created")
}

// TestOpenCorruptedIndex opens variants of the fixture's checkpoint that
// are broken in one way each.
func TestOpenCorruptedIndex(t *testing.T) {
	fx := loadShardedFixture(t)
	const shard1, shard7 = "model-00001-of-00007.safetensors", "model-00007-of-00007.safetensors"
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		is      []error
		says    string
	}{
		{"shard missing", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, shard7)))
		}, []error{ErrInvalidIndex, fs.ErrNotExist}, shard7},
		{"shard truncated", func(t *testing.T, dir string) {
			info, err := os.Stat(filepath.Join(dir, shard1))
			require.NoError(t, err)
			require.NoError(t, os.Truncate(filepath.Join(dir, shard1), info.Size()-1))
		}, []error{ErrInvalidIndex, safetensors.ErrIncompleteBuffer}, shard1},
		{"shard not safetensors", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, shard1), []byte("<html>404</html>"), 0o644))
		}, []error{ErrInvalidIndex}, shard1},
		{"tensor not in its shard", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["ghost.weight"] = shard1 })
		}, []error{ErrInvalidIndex}, `"ghost.weight" is not in its shard ` + shard1},
		{"tensor in another shard", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["model.layers.0.self_attn.k_proj.weight"] = shard1 })
		}, []error{ErrInvalidIndex}, `"model.layers.0.self_attn.k_proj.weight" is in shard model-00002-of-00007.safetensors, not in ` + shard1},
		{"tensor in two shards", func(t *testing.T, dir string) {
			head := fx.tensors[len(fx.tensors)-1]
			require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "extra.safetensors"), []safetensors.Tensor{head, {Name: "extra", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{1}}}, nil))
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["extra"] = "extra.safetensors" })
		}, []error{ErrInvalidIndex}, `"lm_head.weight" is in two shards`},
		{"total_size wrong", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { ix["metadata"].(map[string]any)["total_size"] = 6861 })
		}, []error{ErrInvalidIndex}, "total_size is 6861, but the tensors' sizes add up to 6860"},
		{"total_size not a number", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { ix["metadata"].(map[string]any)["total_size"] = "6860" })
		}, []error{ErrInvalidIndex}, "not a number"},
		{"path with ..", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["lm_head.weight"] = "../" + shard7 })
		}, []error{ErrInvalidIndex}, "not inside the index's folder"},
		{"absolute path", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["lm_head.weight"] = filepath.Join(dir, shard7) })
		}, []error{ErrInvalidIndex}, "not inside the index's folder"},
		{"not JSON", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte("{\"weight_map\": {"), 0o644))
		}, []error{ErrInvalidIndex}, "model.safetensors.index.json"},
		{"no weight_map", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { delete(ix, "weight_map") })
		}, []error{ErrInvalidIndex}, `no "weight_map"`},
		{"weight_map not strings", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["lm_head.weight"] = 7 })
		}, []error{ErrInvalidIndex}, "not a string"},
		{"a name twice", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "model.safetensors.index.json")
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			raw = bytes.Replace(raw, []byte(`"weight_map": {`), []byte(`"weight_map": {"model.norm.weight": "`+shard1+`",`), 1)
			require.NoError(t, os.WriteFile(path, raw, 0o644))
		}, []error{ErrInvalidIndex}, `"model.norm.weight" is listed twice`},
		{"data after the index", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, "model.safetensors.index.json"), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			f.WriteString("{}")
			f.Close()
		}, []error{ErrInvalidIndex}, "data after"},
		// Two indexes of no library's name: which is the model is not known.
		{"two indexes, neither model's", func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, "model.safetensors.index.json"), filepath.Join(dir, "a.safetensors.index.json")))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.safetensors.index.json"), fx.index, 0o644))
		}, []error{ErrNoModel}, "2 index files (a.safetensors.index.json, b.safetensors.index.json)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFixture(t, fx)
			tc.corrupt(t, dir)
			c, err := Open(context.Background(), dir)
			assert.Nil(t, c)
			require.Error(t, err)
			for _, target := range tc.is {
				assert.True(t, errors.Is(err, target), "%v is not %v", err, target)
			}
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "checkpoint: ")
		})
	}
}

// TestOpenSymlinkOut refuses a shard that is a symbolic link to a file
// outside the index's directory.
func TestOpenSymlinkOut(t *testing.T) {
	linktest.SkipWithout(t)
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	outside := filepath.Join(t.TempDir(), "elsewhere.safetensors")
	shard := filepath.Join(dir, "model-00007-of-00007.safetensors")
	require.NoError(t, os.Rename(shard, outside))
	require.NoError(t, os.Symlink(outside, shard))
	_, err := Open(context.Background(), dir)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.Contains(t, err.Error(), "model-00007-of-00007.safetensors")
}

// TestOpenUnlisted opens a checkpoint whose shard holds a tensor that the
// index does not list: no error, the tensor left out and named by
// Unlisted; under Strict, an error wrapping ErrUnlistedTensor, and no
// Checkpoint.
func TestOpenUnlisted(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	ctx := context.Background()
	c, err := Open(ctx, dir)
	require.NoError(t, err)
	assert.Nil(t, c.Unlisted(), "the index lists every tensor")
	require.NoError(t, c.Close())
	editIndex(t, dir, func(ix map[string]any) {
		delete(weightMap(ix), "model.norm.weight")                      // 64 bytes
		ix["metadata"].(map[string]any)["total_size"] = 6860 - 64 + 0.0 // a float, as some writers give
	})

	c, err = Open(ctx, dir, Strict())
	assert.True(t, errors.Is(err, ErrUnlistedTensor), "%v", err)
	assert.ErrorContains(t, err, `"model.norm.weight"`)
	assert.Nil(t, c, "an error never comes with a Checkpoint")

	c, err = Open(ctx, dir)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, []string{"model.norm.weight"}, c.Unlisted())
	assert.NotContains(t, c.Names(), "model.norm.weight")
	_, err = c.Tensor("model.norm.weight")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound))
	all, err := c.Tensors()
	require.NoError(t, err)
	assert.Len(t, all, len(fx.tensors)-1)
	_, err = c.Tensor("lm_head.weight")
	assert.NoError(t, err)
	// The file's header still shows it.
	file := "model-00006-of-00007.safetensors"
	h, err := c.Header(file)
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(h.Tensors, func(ti safetensors.TensorInfo) bool { return ti.Name == "model.norm.weight" }))
	sections, err := c.DataSections()
	require.NoError(t, err)
	for _, s := range sections {
		for _, ti := range s.Tensors {
			assert.NotEqual(t, "model.norm.weight", ti.Name, "a loader does not see it")
		}
	}
}

// TestSplitShards checks the split rule on the example of huggingface_hub's
// tests (test_multiple_shards): tensors of 6, 10, 30, 2 and 2 bytes in
// shards of at most 10 give [layer_1], [layer_3], [layer_2], [layer_4,
// layer_5]: layer_3 is too large and gets a shard of its own at once, before
// the shard that layer_2 started.
func TestSplitShards(t *testing.T) {
	var specs []safetensors.TensorSpec
	for i, n := range []uint64{6, 10, 30, 2, 2} {
		specs = append(specs, safetensors.TensorSpec{Name: fmt.Sprint("layer_", i+1), DType: safetensors.U8, Shape: []uint64{n}})
	}
	shards, total := splitShards(specs, 10)
	var got [][]string
	for _, s := range shards {
		var names []string
		for _, spec := range s {
			names = append(names, spec.Name)
		}
		got = append(got, names)
	}
	assert.Equal(t, [][]string{{"layer_1"}, {"layer_3"}, {"layer_2"}, {"layer_4", "layer_5"}}, got)
	assert.Equal(t, uint64(50), total)
}

// TestSplitInto splits random tensors into n shards and checks the split
// against every way to cut them into n runs: exactly n shards, none empty,
// the tensors in order, and the largest shard as small as any cut makes it.
func TestSplitInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 30))
	for iter := range 2000 {
		var specs []safetensors.TensorSpec
		var sizes []uint64
		for i := range 1 + rng.IntN(9) {
			size := rng.Uint64N(50)
			if rng.IntN(6) == 0 {
				size = 0
			}
			specs = append(specs, safetensors.TensorSpec{Name: fmt.Sprint("t", i), DType: safetensors.U8, Shape: []uint64{size}})
			sizes = append(sizes, size)
		}
		n := 1 + rng.IntN(len(specs))
		desc := fmt.Sprintf("iteration %d: %d shards of %v", iter, n, specs)
		shards, total := splitInto(specs, n)
		require.Len(t, shards, n, desc)
		var got []safetensors.TensorSpec
		var largest, sum uint64
		for _, shard := range shards {
			require.NotEmpty(t, shard, desc)
			got = append(got, shard...)
			var size uint64
			for _, spec := range shard {
				size += spec.Shape[0]
			}
			largest, sum = max(largest, size), sum+size
		}
		assert.Equal(t, specs, got, desc)
		assert.Equal(t, sum, total, desc)
		assert.Equal(t, bestLargest(sizes, n), largest, desc)
	}
}

// bestLargest returns the least largest shard of all the cuts of tensors
// of the given sizes into n non-empty runs, trying every cut.
func bestLargest(sizes []uint64, n int) uint64 {
	if n == 1 {
		var size uint64
		for _, s := range sizes {
			size += s
		}
		return size
	}
	best := uint64(math.MaxUint64)
	var first uint64
	for i := 0; len(sizes)-i-1 >= n-1; i++ { // the first run is sizes[:i+1]
		first += sizes[i]
		best = min(best, max(first, bestLargest(sizes[i+1:], n-1)))
	}
	return best
}

// TestWriteShards writes the fixture's tensors in a number of shards, and
// checks the files, their order and balance, and what the option refuses.
func TestWriteShards(t *testing.T) {
	fx := loadShardedFixture(t)
	specs := make([]safetensors.TensorSpec, len(fx.tensors))
	sizes := make([]uint64, len(fx.tensors))
	for i, tn := range fx.tensors {
		specs[i] = safetensors.TensorSpec{Name: tn.Name, DType: tn.DType, Shape: tn.Shape}
		sizes[i] = uint64(len(tn.Data))
	}
	for _, n := range []int{2, 3, len(fx.tensors)} {
		dir := t.TempDir()
		require.NoError(t, Write(dir, fx.tensors, Shards(n)))
		want := []string{"model.safetensors.index.json"}
		for i := range n {
			want = append(want, fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n))
		}
		slices.Sort(want)
		assert.Equal(t, want, dirNames(t, dir), "%d shards", n)

		c, err := Open(context.Background(), dir)
		require.NoError(t, err)
		// The tensors in the order given, shard after shard: each shard
		// holds the run of tensors after the previous shard's; and no shard
		// larger than the best cut allows.
		pos := make(map[string]int)
		for i, tn := range fx.tensors {
			pos[tn.Name] = i
		}
		next := 0
		var largest uint64
		for _, f := range c.Files() {
			h, err := c.Header(f)
			require.NoError(t, err)
			var in []int
			for _, info := range h.Tensors {
				in = append(in, pos[info.Name])
			}
			slices.Sort(in)
			for _, p := range in {
				assert.Equal(t, next, p, "%d shards: %s", n, f)
				next = p + 1
			}
			largest = max(largest, h.DataLen())
		}
		assert.Equal(t, len(fx.tensors), next)
		assert.Equal(t, bestLargest(sizes, n), largest, "%d shards", n)
		for _, tn := range fx.tensors {
			got, err := c.Tensor(tn.Name)
			require.NoError(t, err)
			assert.Equal(t, tn.Data, got.Data, tn.Name)
		}
		require.NoError(t, c.Close())
	}

	// One shard: a single file, as when the tensors fit in one.
	dir := t.TempDir()
	require.NoError(t, Write(dir, fx.tensors, Shards(1)))
	assert.Equal(t, []string{"model.safetensors"}, dirNames(t, dir))

	// Tensors kept in the given order: the first shard holds the first.
	dir = t.TempDir()
	w, err := Create(dir, specs, Shards(2))
	require.NoError(t, err)
	first, err := w.File(specs[0].Name)
	require.NoError(t, err)
	last, err := w.File(specs[len(specs)-1].Name)
	require.NoError(t, err)
	assert.Equal(t, []string{first, last}, w.Files())
	w.Abort()

	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{[]Option{Shards(0)}, "Shards(0): the number must be positive"},
		{[]Option{Shards(-2)}, "Shards(-2): the number must be positive"},
		{[]Option{Shards(len(specs) + 1)}, fmt.Sprintf("Shards(%d): %d tensors cannot fill %d shards", len(specs)+1, len(specs), len(specs)+1)},
		{[]Option{Shards(2), MaxShardSize(1000)}, "Shards(2) and MaxShardSize(1000) both given"},
	} {
		_, err := Create(t.TempDir(), specs, tc.opts...)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err = Open(context.Background(), t.TempDir(), Shards(2))
	assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
	assert.ErrorContains(t, err, "Shards applies to Create and Write only")
}

// TestOpenIndexChecks is what TestNewSharded checked, when the caller gave
// the index's bytes and a function that opened the shards: each shard
// opened once, the index's metadata, the tensors; indexes with or without
// total_parameters; a shard missing; an index that is not an object. The
// checkpoint is served over HTTP and opened by its index's URL.
func TestOpenIndexChecks(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	srv := serveDir(t, dir)
	ctx := context.Background()
	name := srv.base + "/model.safetensors.index.json"
	c, err := Open(ctx, name)
	require.NoError(t, err)
	asked := srv.requests()
	want := map[string]int{"model.safetensors.index.json": 1}
	for file := range fx.shards {
		want[file] = 1
	}
	assert.Equal(t, want, asked, "each shard opened once")
	assert.Equal(t, map[string]string{"total_parameters": "2869", "total_size": "6860"}, c.IndexMetadata())
	assert.Equal(t, slices.Sorted(maps.Keys(fx.shards)), c.Files())
	assert.Equal(t, name, c.String())
	for _, tensor := range fx.tensors {
		got, err := c.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, tensor.Data, got.Data, tensor.Name)
	}
	require.NoError(t, c.Close())

	// The index transformers 4 wrote, with no total_parameters; and
	// total_parameters, which counts parameters rather than tensor
	// elements, is not checked.
	for _, params := range []string{``, `"total_parameters": 1, `, `"total_parameters": "many", `} {
		index := bytes.Replace(fx.index, []byte(`"total_parameters": 2869,`), []byte(params), 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), index, 0o644))
		c, err := Open(ctx, name)
		require.NoError(t, err, params)
		assert.Len(t, c.Names(), len(fx.tensors))
		assert.Equal(t, "6860", c.IndexMetadata()["total_size"])
		require.NoError(t, c.Close())
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), fx.index, 0o644))

	require.NoError(t, os.Remove(filepath.Join(dir, "model-00003-of-00007.safetensors")))
	_, err = Open(ctx, name)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	assert.Contains(t, err.Error(), name+": shard model-00003-of-00007.safetensors")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`[]`), 0o644))
	_, err = Open(ctx, name)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.Contains(t, err.Error(), name)
}

// TestIndexMetadata reads an index's metadata of every JSON kind as
// strings, as a file's metadata reads; Metadata leaves out the index's
// bookkeeping.
func TestIndexMetadata(t *testing.T) {
	for _, tc := range []struct {
		metadata string
		want     map[string]string
		model    map[string]string
	}{
		{`{"total_parameters": 1234, "total_size": 0}`, map[string]string{"total_parameters": "1234", "total_size": "0"}, nil},
		{`{"format": "pt", "é\n": "a\"b", "f": 1.5e3, "neg": -0}`, map[string]string{"format": "pt", "é\n": `a"b`, "f": "1.5e3", "neg": "-0"},
			map[string]string{"format": "pt", "é\n": `a"b`, "f": "1.5e3", "neg": "-0"}},
		{`{"nested": {"a": [1, 2, {"b": null}]}, "t": true, "n": null, "s": ""}`,
			map[string]string{"nested": `{"a":[1,2,{"b":null}]}`, "t": "true", "n": "null", "s": ""},
			map[string]string{"nested": `{"a":[1,2,{"b":null}]}`, "t": "true", "n": "null", "s": ""}},
		{`{}`, map[string]string{}, nil},
		{`null`, nil, nil},
	} {
		dir := t.TempDir()
		writeJSON(t, filepath.Join(dir, "model.safetensors.index.json"), `{"metadata": `+tc.metadata+`, "weight_map": {}}`)
		c, err := Open(context.Background(), dir)
		require.NoError(t, err, tc.metadata)
		assert.Equal(t, tc.want, c.IndexMetadata(), tc.metadata)
		assert.Equal(t, tc.model, c.Metadata(), tc.metadata)
		c.Close()
	}
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "model.safetensors.index.json"), `{"weight_map": {}}`)
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	assert.Nil(t, c.IndexMetadata(), "no metadata")
	c.Close()
	writeJSON(t, filepath.Join(dir, "model.safetensors.index.json"), `{"metadata": [], "weight_map": {}}`)
	_, err = Open(context.Background(), dir)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "metadata not an object: %v", err)
}

// TestWriteMkdir writes into a directory that does not exist yet, as
// transformers' save_pretrained does.
func TestWriteMkdir(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := filepath.Join(t.TempDir(), "new", "model")
	require.NoError(t, Write(dir, fx.tensors, MaxShardSize(fx.maxSize)))
	info, err := os.Stat(dir)
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Zero(t, info.Mode().Perm()&^0o777, "mode %v", info.Mode())
		assert.NotZero(t, info.Mode().Perm()&0o700, "mode %v", info.Mode())
	}
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	assert.Len(t, c.Names(), len(fx.tensors))
	require.NoError(t, c.Close())

	// Invalid tensors create nothing.
	dir = filepath.Join(t.TempDir(), "never")
	_, err = Create(dir, []safetensors.TensorSpec{{Name: "a", DType: safetensors.F32, Shape: []uint64{1}}, {Name: "a", DType: safetensors.F32, Shape: []uint64{1}}}, MaxShardSize(1000))
	assert.Error(t, err)
	_, err = os.Stat(dir)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

// TestOpenFinds opens models laid out in every way Open finds one in a
// folder, and refuses folders where the model's file is ambiguous.
func TestOpenFinds(t *testing.T) {
	fx := loadShardedFixture(t)
	ctx := context.Background()
	one := []safetensors.Tensor{{Name: "w", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{7, 8}}}
	write := func(t *testing.T, dir, file string) {
		t.Helper()
		require.NoError(t, safetensors.WriteFile(filepath.Join(dir, file), one, map[string]string{"format": "pt", "file": file}))
	}
	// single checks that c is the single file named file.
	single := func(t *testing.T, c *Checkpoint, file string) {
		t.Helper()
		assert.Equal(t, []string{file}, c.Files())
		assert.Equal(t, "", c.Index())
		assert.Nil(t, c.IndexMetadata())
		assert.Equal(t, map[string]string{"format": "pt", "file": file}, c.Metadata())
		assert.Equal(t, []string{"w"}, c.Names())
		assert.Equal(t, filepath.Join(c.Dir(), file), c.String())
		got, err := c.Tensor("w")
		require.NoError(t, err)
		assert.Equal(t, []byte{7, 8}, got.Data)
		shard, err := c.File("w")
		require.NoError(t, err)
		assert.Equal(t, file, shard)
		h, err := c.Header(file)
		require.NoError(t, err)
		assert.Len(t, h.Tensors, 1)
		all, err := c.Tensors()
		require.NoError(t, err)
		assert.Len(t, all, 1)
		_, err = c.Tensor("missing")
		assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
		_, err = c.File("missing")
		assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
		assert.NoError(t, c.Prefetch("w"))
		assert.True(t, errors.Is(c.Prefetch("missing"), safetensors.ErrTensorNotFound))
		require.NoError(t, c.Close())
		_, err = c.Tensor("w")
		assert.True(t, errors.Is(err, safetensors.ErrClosed), "%v", err)
	}

	t.Run("model.safetensors", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "model.safetensors")
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		single(t, c, "model.safetensors")
		c, err = Open(ctx, filepath.Join(dir, "model.safetensors"), Strict(), ReadOptions(safetensors.ReadAll()))
		require.NoError(t, err)
		single(t, c, "model.safetensors")
	})
	t.Run("model.safetensors before the index", func(t *testing.T) {
		dir := writeFixture(t, fx)
		write(t, dir, "model.safetensors")
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		single(t, c, "model.safetensors")
		c, err = Open(ctx, filepath.Join(dir, "model.safetensors.index.json"))
		require.NoError(t, err, "the index given by name")
		assert.Len(t, c.Files(), 7)
		require.NoError(t, c.Close())
	})
	t.Run("model's index before others", func(t *testing.T) {
		dir := writeFixture(t, fx)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "other.safetensors.index.json"), []byte("not JSON"), 0o644))
		write(t, dir, "adapter_model.safetensors")
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		assert.Len(t, c.Files(), 7)
		require.NoError(t, c.Close())
	})
	t.Run("diffusers' index", func(t *testing.T) {
		dir := writeFixture(t, fx)
		require.NoError(t, os.Rename(filepath.Join(dir, "model.safetensors.index.json"), filepath.Join(dir, "diffusion_pytorch_model.safetensors.index.json")))
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		assert.Len(t, c.Files(), 7)
		assert.Equal(t, "diffusion_pytorch_model.safetensors.index.json", c.Index())
		require.NoError(t, c.Close())
	})
	t.Run("one other index", func(t *testing.T) {
		dir := writeFixture(t, fx)
		require.NoError(t, os.Rename(filepath.Join(dir, "model.safetensors.index.json"), filepath.Join(dir, "custom.safetensors.index.json")))
		write(t, dir, "a.safetensors") // an index comes before a file
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		assert.Len(t, c.Files(), 7)
		assert.Equal(t, "custom.safetensors.index.json", c.Index())
		require.NoError(t, c.Close())
	})
	t.Run("a library's file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "adapter_model.safetensors")
		write(t, dir, "other.safetensors") // the library's name comes first
		require.NoError(t, os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte("{}"), 0o644))
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		single(t, c, "adapter_model.safetensors")
	})
	t.Run("the libraries' order", func(t *testing.T) {
		dir := t.TempDir()
		for _, f := range []string{"open_clip_model.safetensors", "adapter_model.safetensors", "diffusion_pytorch_model.safetensors"} {
			write(t, dir, f)
			c, err := Open(ctx, dir)
			require.NoError(t, err)
			single(t, c, f)
		}
	})
	t.Run("one other file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "pytorch_lora_weights.safetensors")
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".hidden.safetensors"), nil, 0o644))
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.safetensors"), 0o755))
		c, err := Open(ctx, dir)
		require.NoError(t, err)
		single(t, c, "pytorch_lora_weights.safetensors")
	})
	t.Run("ambiguous", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.safetensors")
		write(t, dir, "b.safetensors")
		c, err := Open(ctx, dir)
		assert.Nil(t, c)
		assert.True(t, errors.Is(err, ErrNoModel), "%v", err)
		assert.Contains(t, err.Error(), "2 safetensors files (a.safetensors, b.safetensors)")
	})
	t.Run("nothing", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "model.safetensors"), 0o755)) // not a file
		require.NoError(t, os.Mkdir(filepath.Join(dir, "model.safetensors.index.json"), 0o755))
		_, err := Open(ctx, dir)
		assert.True(t, errors.Is(err, ErrNoModel), "%v", err)
		assert.Contains(t, err.Error(), "none of model.safetensors, model.safetensors.index.json, diffusion_pytorch_model.safetensors")
		assert.Contains(t, err.Error(), dir)
	})
	t.Run("invalid single file", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("<html>"), 0o644))
		_, err := Open(ctx, dir)
		assert.True(t, errors.Is(err, safetensors.ErrHeaderTooSmall), "%v", err)
		assert.Contains(t, err.Error(), "model.safetensors")
	})
}

// TestOpenHubCache opens a sharded checkpoint laid out as the Hugging Face
// cache keeps it: a snapshot directory of links to ../../blobs. Its shards
// lead out of the snapshot but stay inside the model's cache directory,
// which Open allows there and nowhere else; a link out of the model's
// cache directory is still refused.
func TestOpenHubCache(t *testing.T) {
	linktest.SkipWithout(t)
	fx := loadShardedFixture(t)
	cache := t.TempDir()
	_, snapshot := hubSnapshot(t, writeFixture(t, fx), cache)
	ctx := context.Background()

	c, err := Open(ctx, snapshot)
	require.NoError(t, err)
	defer c.Close()
	for _, want := range fx.tensors {
		got, err := c.Tensor(want.Name)
		require.NoError(t, err)
		assert.Equal(t, want.Data, got.Data, want.Name)
	}
	want := byName("", fx.tensors)
	var loaded int
	for tn, err := range (&load.Loader{}).Load(ctx, c) {
		require.NoError(t, err)
		loaded++
		assert.Equal(t, want[tn.Name], tn.Data, tn.Name)
	}
	assert.Equal(t, len(fx.tensors), loaded)
	sections, err := c.DataSections()
	require.NoError(t, err)
	for _, s := range sections {
		assert.Equal(t, snapshot, filepath.Dir(s.Name), "named in the snapshot, not by the blob")
		if s.Path != "" {
			assert.Equal(t, snapshot, filepath.Dir(s.Path))
		}
	}

	// A directory that only looks like a snapshot gets no wider root.
	plain := filepath.Join(cache, "other", "snapshots", "rev")
	require.NoError(t, os.MkdirAll(plain, 0o755))
	for _, name := range dirNames(t, snapshot) {
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "..", "models--org--tiny", "snapshots", "0123abcd", name), filepath.Join(plain, name)))
	}
	_, err = Open(ctx, plain)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)

	// A shard leading out of the model's cache directory is refused.
	outside := filepath.Join(t.TempDir(), "elsewhere.safetensors")
	shard := filepath.Join(snapshot, "model-00007-of-00007.safetensors")
	blob, err := filepath.EvalSymlinks(shard)
	require.NoError(t, err)
	require.NoError(t, os.Rename(blob, outside))
	require.NoError(t, os.Remove(shard))
	require.NoError(t, os.Symlink(outside, shard))
	_, err = Open(ctx, snapshot)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.Contains(t, err.Error(), "model-00007-of-00007.safetensors")
}

// TestOpenLFSShards: a clone made without Git LFS has pointer files for
// shards. The error leads with what the shard is and what to do, not with
// the index, which is right; it still matches ErrInvalidIndex.
func TestOpenLFSShards(t *testing.T) {
	dir := t.TempDir()
	index := `{"metadata": {"total_size": 16}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(index), 0o644))
	pointer := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 5000000\n"
	for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(pointer), 0o644))
	}
	_, err := Open(context.Background(), dir)
	require.Error(t, err)
	assert.ErrorIs(t, err, safetensors.ErrNotSafetensors)
	assert.ErrorIs(t, err, ErrInvalidIndex)
	assert.Regexp(t, `^checkpoint: open \S*model-0000[12]-of-00002\.safetensors: safetensors: a Git LFS pointer, not the file it points to \(oid sha256:4d7a2146\w+, 5000000 bytes\): run 'git lfs pull'.* \(a shard that \S*model\.safetensors\.index\.json lists\)$`, err.Error())
}
