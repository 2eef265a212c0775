// Package spark checks the dataset package's index against Apache Spark's
// own Parquet reader and writer, through PySpark: Spark reads the index Go
// wrote, and Go reads an index Spark wrote, as the safetensors-spark
// connector writes it. The tests run where SAFETENSORS_SPARK_PYTHON names a
// Python with pyspark installed (.ci/run installs the pinned version in a
// cached virtual environment), and are skipped elsewhere.
package spark

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/dataset"
)

var columns = []dataset.Column{
	{Name: "embedding", DType: safetensors.F32, Shape: []uint64{4}},
	{Name: "label", DType: safetensors.I64},
}

// write writes a dataset of 10 samples in the given mode.
func write(t *testing.T, mode dataset.Mode, index bool) string {
	t.Helper()
	dir := t.TempDir()
	opts := []dataset.Option{dataset.TaskID(5)}
	if index {
		opts = append(opts, dataset.TensorIndex())
	}
	if mode == dataset.Batch {
		opts = append(opts, dataset.BatchSize(4))
	}
	w, err := dataset.Create(dir, mode, columns, opts...)
	require.NoError(t, err)
	for i := range 10 {
		var emb []byte
		for j := range 4 {
			emb = binary.LittleEndian.AppendUint32(emb, math.Float32bits(float32(i*4+j)))
		}
		label := binary.LittleEndian.AppendUint64(nil, uint64(i))
		if mode == dataset.Batch {
			require.NoError(t, w.WriteSample(emb, label))
		} else {
			require.NoError(t, w.WriteKV(fmt.Sprintf("id-%d", i), emb, label))
		}
	}
	require.NoError(t, w.Close())
	return dir
}

// writeVarying writes a key-value dataset of 10 samples whose "tokens"
// column gives no shape: each key's tensor has its own, of rank 0 to 2.
func writeVarying(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	w, err := dataset.Create(dir, dataset.KeyValue, []dataset.Column{
		{Name: "tokens", DType: safetensors.I32},
		{Name: "label", DType: safetensors.I64},
	}, dataset.TensorIndex(), dataset.TaskID(5))
	require.NoError(t, err)
	for i := range 10 {
		shape := [][]uint64{{}, {uint64(i)}, {uint64(i % 3), 2}}[i%3]
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		tokens := safetensors.Tensor{Name: "tokens", DType: safetensors.I32, Shape: shape, Data: make([]byte, 4*n)}
		label := safetensors.Tensor{Name: "label", DType: safetensors.I64, Data: binary.LittleEndian.AppendUint64(nil, uint64(i))}
		require.NoError(t, w.WriteKVTensors(fmt.Sprintf("id-%d", i), tokens, label))
	}
	require.NoError(t, w.Close())
	return dir
}

// indexRow is a row of the index: tensor_key, file_name, shape, dtype.
type indexRow struct {
	Key, File string
	Shape     []int32
	DType     string
}

func (r indexRow) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{r.Key, r.File, r.Shape, r.DType})
}

func (r *indexRow) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 4 {
		return fmt.Errorf("a row of %d fields", len(v))
	}
	for i, p := range []any{&r.Key, &r.File, &r.Shape, &r.DType} {
		if err := json.Unmarshal(v[i], p); err != nil {
			return err
		}
	}
	return nil
}

// headerRows returns the rows an index of the dataset must hold: one per
// tensor of each shard, from the shards' own headers.
func headerRows(t *testing.T, dir string) []indexRow {
	t.Helper()
	d, err := dataset.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	var rows []indexRow
	for _, s := range d.Manifest().Shards {
		r, err := safetensors.Open(filepath.Join(dir, s.Path))
		require.NoError(t, err)
		for _, ti := range r.Header().Tensors {
			shape := make([]int32, len(ti.Shape))
			for i, d := range ti.Shape {
				shape[i] = int32(d)
			}
			rows = append(rows, indexRow{ti.Name, s.Path, shape, ti.DType.String()})
		}
		r.Close()
	}
	return rows
}

// runSpark runs spark_index.py with the request and returns its result.
func runSpark(t *testing.T, req any) map[string]map[string]json.RawMessage {
	t.Helper()
	py := os.Getenv("SAFETENSORS_SPARK_PYTHON")
	if py == "" {
		t.Skip("SAFETENSORS_SPARK_PYTHON does not name a Python with pyspark (.ci/run sets it)")
	}
	tmp := t.TempDir()
	reqPath, resPath := filepath.Join(tmp, "request.json"), filepath.Join(tmp, "result.json")
	data, err := json.Marshal(req)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(reqPath, data, 0o644))
	cmd := exec.Command(py, "spark_index.py", reqPath, resPath)
	cmd.Env = append(os.Environ(), "SPARK_LOCAL_IP=127.0.0.1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var res map[string]map[string]json.RawMessage
	data, err = os.ReadFile(resPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &res))
	return res
}

// TestSpark has Spark's Parquet reader read the indexes Go wrote, in both
// modes and with shapes that vary from key to key, and the Go package read
// indexes that Spark wrote.
func TestSpark(t *testing.T) {
	goBatch, goKV, goVary := write(t, dataset.Batch, true), write(t, dataset.KeyValue, true), writeVarying(t)
	// Datasets without an index, for Spark to write one; it leaves out one
	// tensor, so that a lookup that the index cannot answer shows that the
	// Go package read it.
	sparkBatch, sparkKV := write(t, dataset.Batch, false), write(t, dataset.KeyValue, false)
	type writeReq struct {
		Dir  string     `json:"dir"`
		Rows []indexRow `json:"rows"`
	}
	var writes []writeReq
	for _, dir := range []string{sparkBatch, sparkKV} {
		rows := headerRows(t, dir)
		writes = append(writes, writeReq{dir, rows[:len(rows)-1]})
	}
	res := runSpark(t, map[string]any{"read": []string{goBatch, goKV, goVary}, "write": writes})

	for _, dir := range []string{goBatch, goKV, goVary} {
		var got struct {
			Schema [][2]string `json:"schema"`
			Rows   []indexRow  `json:"rows"`
		}
		require.NoError(t, json.Unmarshal(res["read"][dir], &got))
		assert.Equal(t, [][2]string{{"tensor_key", "string"}, {"file_name", "string"}, {"shape", "array<int>"}, {"dtype", "string"}}, got.Schema)
		assert.ElementsMatch(t, headerRows(t, dir), got.Rows, "Spark reads every row of Go's index")
	}

	for _, w := range writes {
		entries, err := os.ReadDir(filepath.Join(w.Dir, dataset.IndexName))
		require.NoError(t, err)
		var parts int
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".parquet" && e.Name()[0] != '.' {
				parts++
			}
		}
		assert.Positive(t, parts, "Spark wrote part files")
		d, err := dataset.Open(w.Dir)
		require.NoError(t, err)
		latest := make(map[string]string) // a name in several shards is found in the later
		for _, r := range w.Rows {
			latest[r.Key] = r.File // the rows are in the manifest's order of shards
		}
		for _, r := range w.Rows {
			shard, err := d.Shard(r.Key)
			require.NoError(t, err, r.Key)
			assert.Equal(t, latest[r.Key], shard, r.Key)
			tn, err := d.Tensor(r.Key)
			require.NoError(t, err)
			assert.Equal(t, r.DType, tn.DType.String())
		}
		all := headerRows(t, w.Dir)
		left := all[len(all)-1]
		shard, err := d.Shard(left.Key)
		if d.Mode() == dataset.KeyValue {
			assert.ErrorIs(t, err, safetensors.ErrTensorNotFound, "%s is not in Spark's index: the lookup went through it", left.Key)
		} else {
			require.NoError(t, err)
			assert.NotEqual(t, left.File, shard, "%s of the last shard is not in Spark's index: the lookup went through it", left.Key)
		}
		require.NoError(t, d.Close())
	}
}
