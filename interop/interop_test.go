package interop

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/dataset"
)

var columns = []dataset.Column{
	{Name: "embedding", DType: safetensors.BF16, Shape: []uint64{8}},
	{Name: "label", DType: safetensors.I32},
}

// write writes a dataset of 10 samples in the given mode, with an index.
func write(t *testing.T, mode dataset.Mode) string {
	t.Helper()
	dir := t.TempDir()
	opts := []dataset.Option{dataset.TensorIndex(), dataset.TaskID(3)}
	if mode == dataset.Batch {
		opts = append(opts, dataset.BatchSize(4), dataset.TailStrategy(dataset.TailWrite))
	}
	w, err := dataset.Create(dir, mode, columns, opts...)
	require.NoError(t, err)
	for i := range 10 {
		emb := make([]float32, 8)
		for j := range emb {
			emb[j] = float32(math.Sin(float64(i*8 + j)))
		}
		label := binary.LittleEndian.AppendUint32(nil, uint32(i))
		if mode == dataset.Batch {
			require.NoError(t, w.WriteSample(safetensors.F32sToBF16Bytes(nil, emb, safetensors.Truncate), label))
		} else {
			require.NoError(t, w.WriteKV(fmt.Sprintf("id-%d", i), safetensors.F32sToBF16Bytes(nil, emb, safetensors.Truncate), label))
		}
	}
	require.NoError(t, w.Close())
	return dir
}

func manifestSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile(filepath.Join("..", "testdata", "dataset_manifest.schema.json"))
	require.NoError(t, err)
	return s
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	v, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	return v
}

// TestManifestSchema validates the manifests of both modes against the
// schema, and shows that the schema rejects broken ones.
func TestManifestSchema(t *testing.T) {
	schema := manifestSchema(t)
	for _, mode := range []dataset.Mode{dataset.Batch, dataset.KeyValue} {
		dir := write(t, mode)
		assert.NoError(t, schema.Validate(readJSON(t, filepath.Join(dir, dataset.ManifestName))), "%v", mode)
	}
	dir := write(t, dataset.Batch)
	raw, err := os.ReadFile(filepath.Join(dir, dataset.ManifestName))
	require.NoError(t, err)
	for _, broken := range []func(m map[string]any){
		func(m map[string]any) { delete(m, "schema") },
		func(m map[string]any) { m["format_version"] = "2.0" },
		func(m map[string]any) { m["shards"].([]any)[0].(map[string]any)["shard_path"] = "../x.safetensors" },
		func(m map[string]any) { m["schema"].(map[string]any)["label"].(map[string]any)["dtype"] = "F8_E4M3" },
		func(m map[string]any) { m["extra"] = true },
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		broken(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		require.NoError(t, err)
		assert.Error(t, schema.Validate(v))
	}
}

// TestIndexWithArrow reads _tensor_index.parquet with Apache Arrow: the
// connector's column types, and one row for each tensor of each shard, as
// the shards' own headers give them.
func TestIndexWithArrow(t *testing.T) {
	for _, mode := range []dataset.Mode{dataset.Batch, dataset.KeyValue} {
		dir := write(t, mode)
		// The index is a directory of part files, as Spark writes it.
		parts, err := filepath.Glob(filepath.Join(dir, dataset.IndexName, "part-*.parquet"))
		require.NoError(t, err)
		require.Len(t, parts, 1)
		pf, err := file.OpenParquetFile(parts[0], false)
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(context.Background())
		require.NoError(t, err)

		schema := tbl.Schema()
		require.Equal(t, 4, schema.NumFields())
		for i, want := range []struct {
			name string
			typ  arrow.DataType
		}{
			{"tensor_key", arrow.BinaryTypes.String},
			{"file_name", arrow.BinaryTypes.String},
			{"shape", arrow.ListOf(arrow.PrimitiveTypes.Int32)},
			{"dtype", arrow.BinaryTypes.String},
		} {
			f := schema.Field(i)
			assert.Equal(t, want.name, f.Name)
			if lt, ok := f.Type.(*arrow.ListType); ok { // the element's name and nullability vary between writers
				assert.True(t, arrow.TypeEqual(arrow.PrimitiveTypes.Int32, lt.Elem()), "%s is %v", f.Name, f.Type)
				continue
			}
			assert.True(t, arrow.TypeEqual(want.typ, f.Type), "%s is %v, want %v", f.Name, f.Type, want.typ)
		}

		// The rows, against the shards' headers.
		want := map[string]string{}
		m, err := os.ReadFile(filepath.Join(dir, dataset.ManifestName))
		require.NoError(t, err)
		var manifest dataset.Manifest
		require.NoError(t, json.Unmarshal(m, &manifest))
		for _, s := range manifest.Shards {
			r, err := safetensors.Open(filepath.Join(dir, s.Path))
			require.NoError(t, err)
			for _, ti := range r.Header().Tensors {
				want[s.Path+"|"+ti.Name] = fmt.Sprintf("%s %v", ti.DType, ti.Shape)
			}
			r.Close()
		}
		got := map[string]string{}
		tr := array.NewTableReader(tbl, 0)
		for tr.Next() {
			rec := tr.RecordBatch()
			keys := rec.Column(0).(*array.String)
			files := rec.Column(1).(*array.String)
			shapes := rec.Column(2).(*array.List)
			dims := shapes.ListValues().(*array.Int32)
			dtypes := rec.Column(3).(*array.String)
			for i := range int(rec.NumRows()) {
				start, end := shapes.ValueOffsets(i)
				shape := make([]uint64, 0, end-start)
				for j := start; j < end; j++ {
					shape = append(shape, uint64(dims.Value(int(j))))
				}
				got[files.Value(i)+"|"+keys.Value(i)] = fmt.Sprintf("%s %v", dtypes.Value(i), shape)
			}
		}
		tr.Release()
		tbl.Release()
		pf.Close()
		assert.Equal(t, want, got, "%v", mode)
		assert.Len(t, got, 2*map[dataset.Mode]int{dataset.Batch: 3, dataset.KeyValue: 10}[mode])
	}
}
