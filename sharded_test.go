package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardedFixture is testdata/sharded: tensors.json, and what the Hugging
// Face libraries make of it (make_index.py): the index's bytes and each
// shard's tensors.
type shardedFixture struct {
	maxSize int64
	tensors []Tensor
	index   []byte
	shards  map[string][]string
}

func loadShardedFixture(t *testing.T) shardedFixture {
	t.Helper()
	dir := filepath.Join("testdata", "sharded")
	raw, err := os.ReadFile(filepath.Join(dir, "tensors.json"))
	require.NoError(t, err)
	var spec struct {
		MaxShardSize int64 `json:"max_shard_size"`
		Tensors      []struct {
			Name  string   `json:"name"`
			DType DType    `json:"dtype"`
			Shape []uint64 `json:"shape"`
		} `json:"tensors"`
	}
	require.NoError(t, json.Unmarshal(raw, &spec))
	fx := shardedFixture{maxSize: spec.MaxShardSize}
	for i, s := range spec.Tensors {
		size, err := byteSize(s.DType, s.Shape)
		require.NoError(t, err)
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		fx.tensors = append(fx.tensors, Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: data})
	}
	fx.index, err = os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	raw, err = os.ReadFile(filepath.Join(dir, "shards.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &fx.shards))
	return fx
}

// writeFixture writes the fixture's checkpoint into a new directory.
func writeFixture(t *testing.T, fx shardedFixture) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, WriteSharded(dir, "model", fx.tensors, fx.maxSize, map[string]string{"format": "pt"}))
	return dir
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestShardedLikeTransformers writes the fixture's tensors and compares the
// result with what transformers writes: the same shards, holding the same
// tensors, and the same index, byte for byte. Then it reads them back.
func TestShardedLikeTransformers(t *testing.T) {
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
		r, err := Open(filepath.Join(dir, file))
		require.NoError(t, err)
		assert.ElementsMatch(t, names, r.Names(), file)
		assert.Equal(t, map[string]string{"format": "pt"}, r.Metadata(), "metadata goes to every shard")
		r.Close()
	}

	s, err := OpenIndex(dir) // the directory, or the index file itself
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, map[string]string{"total_parameters": "2869", "total_size": "6860"}, s.Metadata())
	assert.Len(t, s.Shards(), 7)
	var names []string
	for _, tensor := range fx.tensors {
		names = append(names, tensor.Name)
		got, err := s.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, tensor.DType, got.DType)
		assert.Equal(t, tensor.Shape, got.Shape)
		assert.True(t, bytes.Equal(tensor.Data, got.Data), tensor.Name)
		file, err := s.Shard(tensor.Name)
		require.NoError(t, err)
		assert.Contains(t, fx.shards[file], tensor.Name)
		v, err := View[uint8](Tensor{DType: U8, Data: got.Data})
		require.NoError(t, err, "typed access through the tensor")
		assert.Len(t, v, len(tensor.Data))
	}
	slices.Sort(names)
	assert.Equal(t, names, s.Names())
	all, err := s.Tensors()
	require.NoError(t, err)
	assert.Len(t, all, len(fx.tensors))
	require.NoError(t, s.Prefetch(names...))

	_, err = s.Tensor("missing")
	assert.True(t, errors.Is(err, ErrTensorNotFound), "%v", err)
	_, err = s.Shard("missing")
	assert.True(t, errors.Is(err, ErrTensorNotFound), "%v", err)
	assert.True(t, errors.Is(s.Prefetch("missing"), ErrTensorNotFound))

	s2, err := OpenIndex(filepath.Join(dir, "model.safetensors.index.json"), Strict())
	require.NoError(t, err)
	assert.Equal(t, s.Names(), s2.Names())
	require.NoError(t, s2.Close())
	_, err = s2.Tensor(names[0])
	assert.True(t, errors.Is(err, ErrClosed), "%v", err)
}

func TestShardedSingleShard(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := t.TempDir()
	require.NoError(t, WriteSharded(dir, "model", fx.tensors, 1<<30, nil))
	assert.Equal(t, []string{"model.safetensors"}, dirNames(t, dir), "one shard: one file, no index, as transformers")
	r, err := Open(filepath.Join(dir, "model.safetensors"))
	require.NoError(t, err)
	assert.Len(t, r.Names(), len(fx.tensors))
	r.Close()

	// No tensors: no shard, and an index that lists none.
	dir = t.TempDir()
	require.NoError(t, WriteSharded(dir, "model", nil, 1000, nil))
	assert.Equal(t, []string{"model.safetensors.index.json"}, dirNames(t, dir))
	s, err := OpenIndex(dir)
	require.NoError(t, err)
	assert.Empty(t, s.Names())
	s.Close()
}

// TestCreateShardedConcurrent writes the tensors from several goroutines,
// in reverse order.
func TestCreateShardedConcurrent(t *testing.T) {
	fx := loadShardedFixture(t)
	specs := make([]TensorSpec, len(fx.tensors))
	for i, tensor := range fx.tensors {
		specs[i] = TensorSpec{Name: tensor.Name, DType: tensor.DType, Shape: tensor.Shape}
	}
	dir := t.TempDir()
	w, err := CreateSharded(dir, "model", specs, fx.maxSize, nil)
	require.NoError(t, err)
	assert.Len(t, w.Shards(), 7)
	file, err := w.Shard("lm_head.weight")
	require.NoError(t, err)
	assert.Equal(t, "model-00007-of-00007.safetensors", file)
	var wg sync.WaitGroup
	for i := len(fx.tensors) - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, w.WriteTensor(fx.tensors[i].Name, bytes.NewReader(fx.tensors[i].Data)))
		}()
	}
	wg.Wait()
	assert.True(t, errors.Is(w.WriteTensor("nope", nil), ErrTensorNotFound))
	err = w.WriteTensor(fx.tensors[0].Name, bytes.NewReader(fx.tensors[0].Data))
	assert.True(t, errors.Is(err, ErrTensorWritten), "each tensor once: %v", err)
	require.NoError(t, w.Close())
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	assert.Equal(t, string(fx.index), string(index))
}

// TestCreateShardedFailure leaves a tensor unwritten: Close fails, and the
// directory keeps the checkpoint it had before, index included.
func TestCreateShardedFailure(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	before := dirNames(t, dir)
	oldIndex, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)

	specs := []TensorSpec{{Name: "a", DType: F32, Shape: []uint64{300}}, {Name: "b", DType: F32, Shape: []uint64{300}}}
	w, err := CreateSharded(dir, "model", specs, 1000, nil)
	require.NoError(t, err)
	require.NoError(t, w.WriteTensor("a", bytes.NewReader(make([]byte, 1200))))
	err = w.Close() // b is missing
	assert.True(t, errors.Is(err, ErrSizeMismatch), "%v", err)
	assert.ElementsMatch(t, before, dirNames(t, dir), "no temporary file left, no shard replaced")
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	require.NoError(t, err)
	assert.Equal(t, oldIndex, index)

	for _, bad := range []struct {
		base string
		max  int64
	}{{"", 10}, {"../model", 10}, {"a/b", 10}, {"model", 0}} {
		_, err := CreateSharded(t.TempDir(), bad.base, specs, bad.max, nil)
		assert.Error(t, err, "%q %d", bad.base, bad.max)
	}
	_, err = CreateSharded(t.TempDir(), "model", append(specs, specs[0]), 1000, nil)
	assert.True(t, errors.Is(err, ErrInvalidHeader), "a name twice: %v", err)
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	_, err = CreateSharded(filepath.Join(blocker, "dir"), "model", specs, 1000, nil)
	assert.Error(t, err, "a directory that cannot be created")
}

// editIndex rewrites the checkpoint's index through edit.
func editIndex(t *testing.T, dir string, edit func(index map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var index map[string]any
	require.NoError(t, d.Decode(&index))
	edit(index)
	raw, err = json.Marshal(index)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
}

func weightMap(index map[string]any) map[string]any { return index["weight_map"].(map[string]any) }

// TestOpenIndexCorrupted opens variants of the fixture's checkpoint that
// are broken in one way each.
func TestOpenIndexCorrupted(t *testing.T) {
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
		}, []error{ErrInvalidIndex, ErrIncompleteBuffer}, shard1},
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
			require.NoError(t, WriteFile(filepath.Join(dir, "extra.safetensors"), []Tensor{head, {Name: "extra", DType: U8, Shape: []uint64{1}, Data: []byte{1}}}, nil))
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
		}, []error{ErrInvalidIndex}, "not inside the index's directory"},
		{"absolute path", func(t *testing.T, dir string) {
			editIndex(t, dir, func(ix map[string]any) { weightMap(ix)["lm_head.weight"] = filepath.Join(dir, shard7) })
		}, []error{ErrInvalidIndex}, "not inside the index's directory"},
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
		{"two indexes, neither model's", func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, "model.safetensors.index.json"), filepath.Join(dir, "a.safetensors.index.json")))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.safetensors.index.json"), fx.index, 0o644))
		}, []error{ErrInvalidIndex}, "2 files named *.safetensors.index.json (a.safetensors.index.json, b.safetensors.index.json)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFixture(t, fx)
			tc.corrupt(t, dir)
			s, err := OpenIndex(dir)
			assert.Nil(t, s)
			require.Error(t, err)
			for _, target := range tc.is {
				assert.True(t, errors.Is(err, target), "%v is not %v", err, target)
			}
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// TestOpenIndexSymlinkOut refuses a shard that is a symbolic link to a file
// outside the index's directory.
func TestOpenIndexSymlinkOut(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	outside := filepath.Join(t.TempDir(), "elsewhere.safetensors")
	shard := filepath.Join(dir, "model-00007-of-00007.safetensors")
	require.NoError(t, os.Rename(shard, outside))
	require.NoError(t, os.Symlink(outside, shard))
	_, err := OpenIndex(dir)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.Contains(t, err.Error(), "model-00007-of-00007.safetensors")
}

// TestOpenIndexUnlisted opens a checkpoint whose shard holds a tensor that
// the index does not list: no error, the tensor left out and named by
// Unlisted; under Strict, an error wrapping ErrUnlistedTensor, and no
// Sharded.
func TestOpenIndexUnlisted(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	s, err := OpenIndex(dir)
	require.NoError(t, err)
	assert.Nil(t, s.Unlisted(), "the index lists every tensor")
	require.NoError(t, s.Close())
	editIndex(t, dir, func(ix map[string]any) {
		delete(weightMap(ix), "model.norm.weight")                      // 64 bytes
		ix["metadata"].(map[string]any)["total_size"] = 6860 - 64 + 0.0 // a float, as some writers give
	})

	s, err = OpenIndex(dir, Strict())
	assert.True(t, errors.Is(err, ErrUnlistedTensor), "%v", err)
	assert.ErrorContains(t, err, `"model.norm.weight"`)
	assert.Nil(t, s, "an error never comes with a Sharded")

	s, err = OpenIndex(dir)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, []string{"model.norm.weight"}, s.Unlisted())
	assert.NotContains(t, s.Names(), "model.norm.weight")
	_, err = s.Tensor("model.norm.weight")
	assert.True(t, errors.Is(err, ErrTensorNotFound))
	all, err := s.Tensors()
	require.NoError(t, err)
	assert.Len(t, all, len(fx.tensors)-1)
	_, err = s.Tensor("lm_head.weight")
	assert.NoError(t, err)
}

func TestAppendIndex(t *testing.T) {
	assert.Equal(t, "{\n  \"metadata\": {\n    \"total_parameters\": 0,\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n", string(appendIndex(nil, 0, 0, nil)))
	// Python: json.dumps(index, indent=2, sort_keys=True) + "\n".
	assert.Equal(t, "{\n  \"metadata\": {\n    \"total_parameters\": 3,\n    \"total_size\": 12\n  },\n  \"weight_map\": {\n    \"a\": \"x-00001.safetensors\",\n    \"\\u00e9\\\"\": \"x-00002.safetensors\"\n  }\n}\n",
		string(appendIndex(nil, 3, 12, map[string]string{"é\"": "x-00002.safetensors", "a": "x-00001.safetensors"})))
}

// TestSplitShards checks the split rule on the example of huggingface_hub's
// tests (test_multiple_shards): tensors of 6, 10, 30, 2 and 2 bytes in
// shards of at most 10 give [layer_1], [layer_3], [layer_2], [layer_4,
// layer_5]: layer_3 is too large and gets a shard of its own at once, before
// the shard that layer_2 started.
func TestSplitShards(t *testing.T) {
	var specs []TensorSpec
	for i, n := range []uint64{6, 10, 30, 2, 2} {
		specs = append(specs, TensorSpec{Name: fmt.Sprint("layer_", i+1), DType: U8, Shape: []uint64{n}})
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

// TestNewSharded opens the fixture's checkpoint from memory, as a remote
// checkpoint is opened: the shards through a function, the index by a
// name that errors give.
func TestNewSharded(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	files := make(map[string][]byte)
	for file := range fx.shards {
		data, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		files[file] = data
	}
	var mu sync.Mutex
	var asked []string
	open := func(shard string) (*Reader, error) {
		mu.Lock()
		asked = append(asked, shard)
		mu.Unlock()
		data, ok := files[shard]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return NewReader(data)
	}
	const name = "https://example.com/m/model.safetensors.index.json"
	s, err := NewSharded(name, fx.index, open)
	require.NoError(t, err)
	assert.ElementsMatch(t, slices.Collect(maps.Keys(fx.shards)), asked, "each shard opened once")
	assert.Equal(t, map[string]string{"total_parameters": "2869", "total_size": "6860"}, s.Metadata())
	for _, tensor := range fx.tensors {
		got, err := s.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, tensor.Data, got.Data, tensor.Name)
	}
	require.NoError(t, s.Close())

	// The index transformers 4 wrote, with no total_parameters; and
	// total_parameters, which counts parameters rather than tensor
	// elements, is not checked.
	for _, params := range []string{``, `"total_parameters": 1, `, `"total_parameters": "many", `} {
		index := bytes.Replace(fx.index, []byte(`"total_parameters": 2869,`), []byte(params), 1)
		s, err := NewSharded(name, index, open)
		require.NoError(t, err, params)
		assert.Len(t, s.Names(), len(fx.tensors))
		assert.Equal(t, "6860", s.Metadata()["total_size"])
		require.NoError(t, s.Close())
	}

	delete(files, "model-00003-of-00007.safetensors")
	_, err = NewSharded(name, fx.index, open)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	assert.Contains(t, err.Error(), name+": shard model-00003-of-00007.safetensors")

	_, err = NewSharded(name, []byte(`{"weight_map": {"a": "x.safetensors"}}`), func(string) (*Reader, error) { return nil, nil })
	assert.True(t, errors.Is(err, ErrInvalidIndex), "an open that returns nothing: %v", err)
	_, err = NewSharded(name, []byte(`[]`), open)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.Contains(t, err.Error(), name)
}

// TestShardedMetadata reads an index's metadata of every JSON kind as
// strings, as a file's metadata reads.
func TestShardedMetadata(t *testing.T) {
	for _, tc := range []struct {
		metadata string
		want     map[string]string
	}{
		{`{"total_parameters": 1234, "total_size": 0}`, map[string]string{"total_parameters": "1234", "total_size": "0"}},
		{`{"format": "pt", "é\n": "a\"b", "f": 1.5e3, "neg": -0}`, map[string]string{"format": "pt", "é\n": `a"b`, "f": "1.5e3", "neg": "-0"}},
		{`{"nested": {"a": [1, 2, {"b": null}]}, "t": true, "n": null, "s": ""}`,
			map[string]string{"nested": `{"a":[1,2,{"b":null}]}`, "t": "true", "n": "null", "s": ""}},
		{`{}`, map[string]string{}},
		{`null`, nil},
	} {
		index := []byte(`{"metadata": ` + tc.metadata + `, "weight_map": {}}`)
		s, err := NewSharded("index.json", index, nil)
		require.NoError(t, err, tc.metadata)
		assert.Equal(t, tc.want, s.Metadata(), tc.metadata)
	}
	s, err := NewSharded("index.json", []byte(`{"weight_map": {}}`), nil)
	require.NoError(t, err)
	assert.Nil(t, s.Metadata(), "no metadata")
	_, err = NewSharded("index.json", []byte(`{"metadata": [], "weight_map": {}}`), nil)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "metadata not an object: %v", err)
}

// TestCreateShardedMkdir writes into a directory that does not exist yet,
// as transformers' save_pretrained does.
func TestCreateShardedMkdir(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := filepath.Join(t.TempDir(), "new", "model")
	require.NoError(t, WriteSharded(dir, "model", fx.tensors, fx.maxSize, nil))
	info, err := os.Stat(dir)
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Zero(t, info.Mode().Perm()&^0o777, "mode %v", info.Mode())
		assert.NotZero(t, info.Mode().Perm()&0o700, "mode %v", info.Mode())
	}
	s, err := OpenIndex(dir)
	require.NoError(t, err)
	assert.Len(t, s.Names(), len(fx.tensors))
	require.NoError(t, s.Close())

	// Invalid tensors create nothing.
	dir = filepath.Join(t.TempDir(), "never")
	_, err = CreateSharded(dir, "model", []TensorSpec{{Name: "a", DType: F32, Shape: []uint64{1}}, {Name: "a", DType: F32, Shape: []uint64{1}}}, 1000, nil)
	assert.Error(t, err)
	_, err = os.Stat(dir)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

// TestOpenIndexFinds opens models laid out in every way OpenIndex accepts,
// and refuses directories where the model's file is ambiguous.
func TestOpenIndexFinds(t *testing.T) {
	fx := loadShardedFixture(t)
	one := []Tensor{{Name: "w", DType: U8, Shape: []uint64{2}, Data: []byte{7, 8}}}
	write := func(t *testing.T, dir, file string) {
		t.Helper()
		require.NoError(t, WriteFile(filepath.Join(dir, file), one, map[string]string{"format": "pt", "file": file}))
	}
	// single checks that s is the single file named file.
	single := func(t *testing.T, s *Sharded, file string) {
		t.Helper()
		assert.Equal(t, []string{file}, s.Shards())
		assert.Equal(t, map[string]string{"format": "pt", "file": file}, s.Metadata())
		assert.Equal(t, []string{"w"}, s.Names())
		got, err := s.Tensor("w")
		require.NoError(t, err)
		assert.Equal(t, []byte{7, 8}, got.Data)
		shard, err := s.Shard("w")
		require.NoError(t, err)
		assert.Equal(t, file, shard)
		h, err := s.Header(file)
		require.NoError(t, err)
		assert.Len(t, h.Tensors, 1)
		all, err := s.Tensors()
		require.NoError(t, err)
		assert.Len(t, all, 1)
		_, err = s.Tensor("missing")
		assert.True(t, errors.Is(err, ErrTensorNotFound), "%v", err)
		_, err = s.Shard("missing")
		assert.True(t, errors.Is(err, ErrTensorNotFound), "%v", err)
		assert.NoError(t, s.Prefetch("w"))
		assert.True(t, errors.Is(s.Prefetch("missing"), ErrTensorNotFound))
		require.NoError(t, s.Close())
		_, err = s.Tensor("w")
		assert.True(t, errors.Is(err, ErrClosed), "%v", err)
	}

	t.Run("model.safetensors", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "model.safetensors")
		s, err := OpenIndex(dir)
		require.NoError(t, err)
		single(t, s, "model.safetensors")
		s, err = OpenIndex(filepath.Join(dir, "model.safetensors"), Strict(), ReadAll())
		require.NoError(t, err)
		single(t, s, "model.safetensors")
	})
	t.Run("model.safetensors before the index", func(t *testing.T) {
		dir := writeFixture(t, fx)
		write(t, dir, "model.safetensors")
		s, err := OpenIndex(dir)
		require.NoError(t, err)
		single(t, s, "model.safetensors")
		s, err = OpenIndex(filepath.Join(dir, "model.safetensors.index.json"))
		require.NoError(t, err, "the index given by name")
		assert.Len(t, s.Shards(), 7)
		require.NoError(t, s.Close())
	})
	t.Run("model's index before others", func(t *testing.T) {
		dir := writeFixture(t, fx)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "other.safetensors.index.json"), []byte("not JSON"), 0o644))
		write(t, dir, "adapter_model.safetensors")
		s, err := OpenIndex(dir)
		require.NoError(t, err)
		assert.Len(t, s.Shards(), 7)
		require.NoError(t, s.Close())
	})
	t.Run("one other index", func(t *testing.T) {
		dir := writeFixture(t, fx)
		require.NoError(t, os.Rename(filepath.Join(dir, "model.safetensors.index.json"), filepath.Join(dir, "diffusion_pytorch_model.safetensors.index.json")))
		s, err := OpenIndex(dir)
		require.NoError(t, err)
		assert.Len(t, s.Shards(), 7)
		require.NoError(t, s.Close())
	})
	t.Run("one other file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "adapter_model.safetensors")
		require.NoError(t, os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte("{}"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".hidden.safetensors"), nil, 0o644))
		s, err := OpenIndex(dir)
		require.NoError(t, err)
		single(t, s, "adapter_model.safetensors")
	})
	t.Run("ambiguous", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.safetensors")
		write(t, dir, "b.safetensors")
		_, err := OpenIndex(dir)
		assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
		assert.Contains(t, err.Error(), "2 files named *.safetensors")
	})
	t.Run("nothing", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "model.safetensors"), 0o755)) // not a file
		_, err := OpenIndex(dir)
		assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
		assert.Contains(t, err.Error(), "no model.safetensors, model.safetensors.index.json")
	})
	t.Run("invalid single file", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("<html>"), 0o644))
		_, err := OpenIndex(dir)
		assert.True(t, errors.Is(err, ErrHeaderTooSmall), "%v", err)
		assert.Contains(t, err.Error(), "model.safetensors")
	})
}

// hubSnapshot moves the files of dir into a model's directory of the
// Hugging Face cache under cache (models--org--tiny), as blobs, and returns
// its snapshot directory, whose files are links to them.
func hubSnapshot(t *testing.T, dir, cache string) string {
	repo := filepath.Join(cache, "models--org--tiny")
	snapshot := filepath.Join(repo, "snapshots", "0123abcd")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "blobs"), 0o755))
	require.NoError(t, os.MkdirAll(snapshot, 0o755))
	for i, name := range dirNames(t, dir) {
		blob := fmt.Sprintf("blob%02d", i)
		require.NoError(t, os.Rename(filepath.Join(dir, name), filepath.Join(repo, "blobs", blob)))
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", blob), filepath.Join(snapshot, name)))
	}
	return snapshot
}

// TestOpenIndexHubCache opens a sharded checkpoint laid out as the Hugging
// Face cache keeps it: a snapshot directory of links to ../../blobs. Its
// shards lead out of the snapshot but stay inside the model's cache
// directory, which OpenIndex allows there and nowhere else; a link out of
// the model's cache directory is still refused.
func TestOpenIndexHubCache(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	fx := loadShardedFixture(t)
	cache := t.TempDir()
	snapshot := hubSnapshot(t, writeFixture(t, fx), cache)

	s, err := OpenIndex(snapshot)
	require.NoError(t, err)
	defer s.Close()
	for _, want := range fx.tensors {
		got, err := s.Tensor(want.Name)
		require.NoError(t, err)
		assert.Equal(t, want.Data, got.Data, want.Name)
	}
	want := make(map[string][]byte)
	for _, tn := range fx.tensors {
		want[tn.Name] = tn.Data
	}
	var loaded int
	for tn, err := range (&Loader{}).Load(context.Background(), s) {
		require.NoError(t, err)
		loaded++
		assert.Equal(t, want[tn.Name], tn.Data, tn.Name)
	}
	assert.Equal(t, len(fx.tensors), loaded)

	// A directory that only looks like a snapshot gets no wider root.
	plain := filepath.Join(cache, "other", "snapshots", "rev")
	require.NoError(t, os.MkdirAll(plain, 0o755))
	for _, name := range dirNames(t, snapshot) {
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "..", "models--org--tiny", "snapshots", "0123abcd", name), filepath.Join(plain, name)))
	}
	_, err = OpenIndex(plain)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)

	// A shard leading out of the model's cache directory is refused.
	outside := filepath.Join(t.TempDir(), "elsewhere.safetensors")
	shard := filepath.Join(snapshot, "model-00007-of-00007.safetensors")
	blob, err := filepath.EvalSymlinks(shard)
	require.NoError(t, err)
	require.NoError(t, os.Rename(blob, outside))
	require.NoError(t, os.Remove(shard))
	require.NoError(t, os.Symlink(outside, shard))
	_, err = OpenIndex(snapshot)
	assert.True(t, errors.Is(err, ErrInvalidIndex), "%v", err)
	assert.Contains(t, err.Error(), "model-00007-of-00007.safetensors")
}
