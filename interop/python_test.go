package interop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/dataset"
)

// The Python implementations: safetensors with NumPy, huggingface_hub's
// splitting rule and pyarrow, through python/interop.py in the virtual
// environment that interop/run sets up (INTEROP_PYTHON names its python).

// numpyDTypes are the safetensors dtypes that NumPy has; safetensors.numpy
// has no mapping for the others (BF16, the F8, F6 and F4 types), which
// NumPy lacks.
var numpyDTypes = []safetensors.DType{
	safetensors.BOOL, safetensors.U8, safetensors.I8, safetensors.U16, safetensors.I16, safetensors.U32,
	safetensors.I32, safetensors.U64, safetensors.I64, safetensors.F16, safetensors.F32, safetensors.F64,
	safetensors.C64,
}

// runPython runs python/interop.py cmd with req as JSON on its standard
// input, and decodes its standard output into resp.
func runPython(t *testing.T, cmd string, req, resp any) {
	t.Helper()
	python := need(t, "INTEROP_PYTHON", "the Python environment with safetensors, numpy, huggingface_hub and pyarrow")
	in, err := json.Marshal(req)
	require.NoError(t, err)
	c := exec.Command(python, filepath.Join("python", "interop.py"), cmd)
	c.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	require.NoError(t, err, "python interop.py %s: %s", cmd, stderr.String())
	require.NoError(t, json.Unmarshal(out, resp), "python interop.py %s", cmd)
}

// pyTensor is a tensor as interop.py reads and writes them.
type pyTensor struct {
	Name  string   `json:"name"`
	DType string   `json:"dtype"`
	Shape []uint64 `json:"shape"`
	Data  []byte   `json:"data"` // base64 in JSON
}

// numpyTensors returns random tensors of the dtypes NumPy has, and random
// metadata, nil, empty or not.
func numpyTensors(g *gen) ([]safetensors.Tensor, map[string]string) {
	var tensors []safetensors.Tensor
	seen := map[string]bool{"__metadata__": true}
	for range pick(g, []int{0, 1, 2, 3, 5, 13}) {
		name := randomName(g)
		for seen[name] {
			name += pick(g, nameParts)
		}
		seen[name] = true
		dtype := pick(g, numpyDTypes)
		var shape []uint64
		for range pick(g, []int{0, 1, 1, 2, 2, 3}) {
			shape = append(shape, pick(g, []uint64{0, 1, 2, 3, 5, 8}))
		}
		size, _ := byteSize(dtype.String(), shape)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(g.n(256))
			if dtype == safetensors.BOOL {
				data[i] &= 1
			}
		}
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: dtype, Shape: shape, Data: data})
	}
	var metadata map[string]string
	switch g.n(3) {
	case 0:
	case 1:
		metadata = map[string]string{}
	default:
		metadata = map[string]string{"format": "np"}
		for range g.n(3) {
			metadata[randomName(g)] = randomName(g)
		}
	}
	return tensors, metadata
}

func toPy(tensors []safetensors.Tensor) []pyTensor {
	out := make([]pyTensor, len(tensors))
	for i, t := range tensors {
		out[i] = pyTensor{t.Name, t.DType.String(), append([]uint64{}, t.Shape...), t.Data}
	}
	return out
}

// sortedPy returns tensors sorted by name, as Reader.Names gives them.
func sortedPy(tensors []pyTensor) []pyTensor {
	out := slices.Clone(tensors)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i := range out {
		out[i].Shape = append([]uint64{}, out[i].Shape...)
		if out[i].Data == nil {
			out[i].Data = []byte{}
		}
	}
	return out
}

// TestPythonWritesGoReads writes random tensors with safetensors.numpy's
// save_file: every entry point reads them as given, and the bytes are what
// Write writes for the same tensors.
func TestPythonWritesGoReads(t *testing.T) {
	need(t, "INTEROP_PYTHON", "the Python environment")
	s := seed(t)
	g := &gen{r: rand.New(rand.NewPCG(s, 0x9e7)), wild: 1}
	dir := t.TempDir()
	type file struct {
		Path     string             `json:"path"`
		Tensors  []pyTensor         `json:"tensors"`
		Metadata *map[string]string `json:"metadata"`
	}
	var files []file
	var sets [][]safetensors.Tensor
	for i := range max(count(t, 4000)/20, 1) {
		tensors, metadata := numpyTensors(g)
		f := file{Path: filepath.Join(dir, fmt.Sprintf("%05d.safetensors", i)), Tensors: toPy(tensors)}
		if metadata != nil {
			f.Metadata = &metadata
		}
		files = append(files, f)
		sets = append(sets, tensors)
	}
	var resp struct{ OK bool }
	runPython(t, "save", map[string]any{"files": files}, &resp)
	require.True(t, resp.OK)

	for i, f := range files {
		data, err := os.ReadFile(f.Path)
		require.NoError(t, err)
		msg := fmt.Sprintf("%s (INTEROP_SEED=%d): %q", f.Path, s, data)
		if len(f.Tensors) == 0 && f.Metadata != nil && len(*f.Metadata) == 0 {
			// The reference writer's invalid JSON for no tensors and
			// empty metadata, which the reference rejects too.
			_, err := safetensors.NewReader(data)
			assert.ErrorIs(t, err, safetensors.ErrInvalidHeader, msg)
			continue
		}
		for _, e := range readers {
			r, err := e.read(f.Path, data)
			require.NoError(t, err, "%s: %s", e.name, msg)
			if f.Metadata == nil {
				assert.Nil(t, r.Metadata(), msg)
			} else {
				assert.Equal(t, *f.Metadata, r.Metadata(), msg)
			}
			var got []pyTensor
			for _, name := range r.Names() {
				tn, err := r.Tensor(name)
				require.NoError(t, err)
				got = append(got, pyTensor{tn.Name, tn.DType.String(), append([]uint64{}, tn.Shape...), append([]byte{}, tn.Data...)})
			}
			if got == nil {
				got = []pyTensor{}
			}
			assert.Equal(t, sortedPy(f.Tensors), got, "%s: %s", e.name, msg)
			require.NoError(t, r.Close())
		}

		// The same bytes as Write, but for the order of two or more
		// metadata keys, which the reference writes in hash-map order.
		var buf bytes.Buffer
		var md map[string]string
		if f.Metadata != nil {
			md = *f.Metadata
		}
		require.NoError(t, safetensors.Write(&buf, sets[i], md))
		if len(md) < 2 {
			assert.Equal(t, buf.Bytes(), data, msg)
		} else {
			assert.Equal(t, buf.Len(), len(data), msg)
			end := metadataEnd(t, buf.Bytes())
			assert.Equal(t, buf.Bytes()[end:], data[end:], msg)
		}
	}
	t.Logf("INTEROP_SEED=%d: %d files written by safetensors.numpy", s, len(files))
}

// TestGoWritesPythonReads writes random tensors with Write: safe_open and
// load_file read them as given, metadata included.
func TestGoWritesPythonReads(t *testing.T) {
	need(t, "INTEROP_PYTHON", "the Python environment")
	s := seed(t)
	g := &gen{r: rand.New(rand.NewPCG(s, 0x60)), wild: 1}
	dir := t.TempDir()
	var paths []string
	var sets [][]safetensors.Tensor
	var metas []map[string]string
	for i := range max(count(t, 4000)/20, 1) {
		tensors, metadata := numpyTensors(g)
		path := filepath.Join(dir, fmt.Sprintf("%05d.safetensors", i))
		require.NoError(t, safetensors.WriteFile(path, tensors, metadata))
		paths = append(paths, path)
		sets = append(sets, tensors)
		metas = append(metas, metadata)
	}
	var resp struct {
		Files []struct {
			Path     string `json:"path"`
			SafeOpen struct {
				Metadata *map[string]string `json:"metadata"`
				Keys     []string           `json:"keys"`
				Tensors  []pyTensor         `json:"tensors"`
			} `json:"safe_open"`
			LoadFile []pyTensor `json:"load_file"`
		} `json:"files"`
	}
	runPython(t, "load", map[string]any{"paths": paths}, &resp)
	require.Len(t, resp.Files, len(paths))
	for i, f := range resp.Files {
		msg := fmt.Sprintf("%s (INTEROP_SEED=%d)", paths[i], s)
		want := sortedPy(toPy(sets[i]))
		if metas[i] == nil {
			assert.Nil(t, f.SafeOpen.Metadata, msg)
		} else if assert.NotNil(t, f.SafeOpen.Metadata, msg) {
			assert.Equal(t, metas[i], *f.SafeOpen.Metadata, msg)
		}
		keys := make([]string, len(want))
		for j, w := range want {
			keys[j] = w.Name
		}
		assert.ElementsMatch(t, keys, f.SafeOpen.Keys, msg)
		assert.Equal(t, want, sortedPy(f.SafeOpen.Tensors), "safe_open: %s", msg)
		assert.Equal(t, want, sortedPy(f.LoadFile), "load_file: %s", msg)
	}
	t.Logf("INTEROP_SEED=%d: %d files read by safe_open and load_file", s, len(paths))
}

// splitCase is one tensor list to split, as interop.py takes it.
type splitCase struct {
	Base         string      `json:"base"`
	MaxShardSize int64       `json:"max_shard_size"`
	Tensors      []splitSpec `json:"tensors"`
}

type splitSpec struct {
	Name  string   `json:"name"`
	DType string   `json:"dtype"`
	Shape []uint64 `json:"shape"`
	Bytes uint64   `json:"bytes"`
}

// TestShardsAsHub splits random tensor lists with huggingface_hub's
// split_state_dict_into_shards_factory (each tensor's size its nbytes, as
// transformers counts storage) and with checkpoint.Create and Write: the
// same shard files, each tensor in the same one, the same total size.
func TestShardsAsHub(t *testing.T) {
	need(t, "INTEROP_PYTHON", "the Python environment")
	s := seed(t)
	g := &gen{r: rand.New(rand.NewPCG(s, 0x5a4d)), wild: 1}
	var cases []splitCase
	var specs [][]safetensors.TensorSpec
	for range max(count(t, 4000)/40, 1) {
		// Small tensors, written for real, or large ones (up to GBs),
		// only laid out.
		large := g.p(0.3)
		c := splitCase{Tensors: []splitSpec{}}
		c.Base = pick(g, []string{"model", "diffusion_pytorch_model", "adapter_model"})
		var sp []safetensors.TensorSpec
		var total uint64
		for i := range pick(g, []int{0, 1, 2, 3, 5, 8, 20, 40}) {
			dtype := safetensors.DType(0)
			for !dtypeOK(dtype) {
				dtype = safetensors.DType(1 + g.n(64))
			}
			var shape []uint64
			for {
				shape = shape[:0]
				for range 1 + g.n(3) {
					d := pick(g, []uint64{0, 1, 2, 4, 8, 16, 64})
					if large {
						d = pick(g, []uint64{1, 64, 1024, 4096, 11008})
					}
					shape = append(shape, d)
				}
				if _, ok := byteSize(dtype.String(), shape); ok {
					break
				}
			}
			size, _ := byteSize(dtype.String(), shape)
			total += size
			name := fmt.Sprintf("model.layers.%d.%s", i, pick(g, []string{"weight", "bias", "q_proj.weight"}))
			sp = append(sp, safetensors.TensorSpec{Name: name, DType: dtype, Shape: slices.Clone(shape)})
			c.Tensors = append(c.Tensors, splitSpec{name, dtype.String(), slices.Clone(shape), size})
		}
		c.MaxShardSize = max(1, int64(g.u64(0, max(total, 1))))
		if g.p(0.2) {
			c.MaxShardSize = int64(max(1, pick(g, []uint64{1, total, total + 1, 5 << 30})))
		}
		cases = append(cases, c)
		specs = append(specs, sp)
	}
	var resp struct {
		Cases []struct {
			IsSharded         bool                `json:"is_sharded"`
			Metadata          map[string]uint64   `json:"metadata"`
			FilenameToTensors map[string][]string `json:"filename_to_tensors"`
			TensorToFilename  map[string]string   `json:"tensor_to_filename"`
			Filenames         []string            `json:"filenames"`
		} `json:"cases"`
	}
	runPython(t, "split", map[string]any{"cases": cases}, &resp)
	require.Len(t, resp.Cases, len(cases))
	written := 0
	for i, hub := range resp.Cases {
		c := cases[i]
		msg := fmt.Sprintf("case %d (INTEROP_SEED=%d): %d tensors, max_shard_size %d", i, s, len(c.Tensors), c.MaxShardSize)
		dir := t.TempDir()
		w, err := checkpoint.Create(dir, specs[i], checkpoint.BaseName(c.Base), checkpoint.MaxShardSize(c.MaxShardSize))
		require.NoError(t, err, msg)
		files := w.Files()
		if files == nil {
			files = []string{}
		}
		want := hub.Filenames
		if want == nil {
			want = []string{}
		}
		assert.Equal(t, want, files, msg)
		where := map[string]string{}
		for _, sp := range specs[i] {
			f, err := w.File(sp.Name)
			require.NoError(t, err)
			where[sp.Name] = f
		}
		assert.Equal(t, hub.TensorToFilename, where, msg)
		w.Abort()

		var total uint64
		for _, ts := range c.Tensors {
			total += ts.Bytes
		}
		assert.Equal(t, hub.Metadata["total_size"], total, msg)
		if total > 1<<20 {
			continue
		}

		// Written for real by checkpoint.Write: the index says the same.
		written++
		tensors := make([]safetensors.Tensor, len(specs[i]))
		for j, sp := range specs[i] {
			tensors[j] = safetensors.Tensor{Name: sp.Name, DType: sp.DType, Shape: sp.Shape, Data: make([]byte, c.Tensors[j].Bytes)}
		}
		dir = t.TempDir()
		require.NoError(t, checkpoint.Write(dir, tensors, checkpoint.BaseName(c.Base), checkpoint.MaxShardSize(c.MaxShardSize)), msg)
		raw, err := os.ReadFile(filepath.Join(dir, c.Base+".safetensors.index.json"))
		if len(hub.Filenames) == 0 {
			// No tensors: huggingface_hub gives no shard and says it is
			// not sharded, so its savers write nothing; checkpoint.Write
			// writes an index that lists no tensor.
			continue
		}
		if !hub.IsSharded {
			assert.ErrorIs(t, err, os.ErrNotExist, "an index for one shard: %s", msg)
			assert.FileExists(t, filepath.Join(dir, c.Base+".safetensors"), msg)
			continue
		}
		require.NoError(t, err, msg)
		var index struct {
			Metadata  map[string]uint64 `json:"metadata"`
			WeightMap map[string]string `json:"weight_map"`
		}
		require.NoError(t, json.Unmarshal(raw, &index), msg)
		assert.Equal(t, hub.Metadata["total_size"], index.Metadata["total_size"], msg)
		assert.Equal(t, hub.TensorToFilename, index.WeightMap, msg)
		for _, f := range hub.Filenames {
			assert.FileExists(t, filepath.Join(dir, f), msg)
		}
	}
	t.Logf("INTEROP_SEED=%d: %d tensor lists split, %d of them written", s, len(cases), written)
}

// TestIndexWithPyarrow reads the dataset's Parquet index with pyarrow's
// read_table: the connector's column types, and one row for each tensor of
// each shard.
func TestIndexWithPyarrow(t *testing.T) {
	need(t, "INTEROP_PYTHON", "the Python environment")
	for _, mode := range []dataset.Mode{dataset.Batch, dataset.KeyValue} {
		dir := write(t, mode)
		var resp struct {
			Schema []struct{ Name, Type string }
			Rows   []struct {
				TensorKey string  `json:"tensor_key"`
				FileName  string  `json:"file_name"`
				Shape     []int32 `json:"shape"`
				DType     string  `json:"dtype"`
			}
		}
		runPython(t, "parquet", map[string]any{"path": filepath.Join(dir, dataset.IndexName)}, &resp)
		require.Len(t, resp.Schema, 4)
		for i, want := range [][2]string{{"tensor_key", "string"}, {"file_name", "string"}, {"shape", "list<int32>"}, {"dtype", "string"}} {
			f := resp.Schema[i]
			assert.Equal(t, want[0], f.Name)
			assert.Equal(t, want[1], f.Type, f.Name)
		}
		want := map[string]string{}
		m, err := os.ReadFile(filepath.Join(dir, dataset.ManifestName))
		require.NoError(t, err)
		var manifest dataset.Manifest
		require.NoError(t, json.Unmarshal(m, &manifest))
		for _, sh := range manifest.Shards {
			r, err := safetensors.Open(filepath.Join(dir, sh.Path))
			require.NoError(t, err)
			for _, ti := range r.Header().Tensors {
				want[sh.Path+"|"+ti.Name] = fmt.Sprintf("%s %v", ti.DType, ti.Shape)
			}
			require.NoError(t, r.Close())
		}
		got := map[string]string{}
		for _, row := range resp.Rows {
			shape := make([]uint64, len(row.Shape))
			for i, d := range row.Shape {
				shape[i] = uint64(d)
			}
			got[row.FileName+"|"+row.TensorKey] = fmt.Sprintf("%s %v", row.DType, shape)
		}
		assert.Equal(t, want, got, "%v", mode)
		assert.Len(t, resp.Rows, len(want), "%v", mode)
	}
}
