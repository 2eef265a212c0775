package dataset

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// f32Tensor returns a tensor of the column, of the shape, whose values
// count up from first.
func f32Tensor(column string, shape []uint64, first float32) safetensors.Tensor {
	n := uint64(1)
	for _, d := range shape {
		n *= d
	}
	data := make([]byte, 0, 4*n)
	for i := range n {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(first+float32(i)))
	}
	return safetensors.Tensor{Name: column, DType: safetensors.F32, Shape: shape, Data: data}
}

// varyColumns are a column without a shape, one of shape [2] and a scalar
// one that takes only scalars.
var varyColumns = []Column{
	{Name: "w", DType: safetensors.F32},
	{Name: "emb", DType: safetensors.F32, Shape: []uint64{2}},
	{Name: "label", DType: safetensors.I64, Shape: []uint64{}},
}

// TestKVTensors writes samples whose "w" varies in shape from key to key
// (a scalar, an empty tensor, ranks 1 to 3), some through WriteKV, which
// gives "w" as a scalar, and one replaced by a sample of another shape;
// the shards, the manifest's schema, the index and the reader give each
// tensor its own shape and bytes.
func TestKVTensors(t *testing.T) {
	type sample struct {
		key   string
		shape []uint64 // w's; nil through WriteKV
	}
	samples := []sample{
		{"a", nil}, // the shard starts with the columns' shapes
		{"b", []uint64{3, 3}},
		{"c", []uint64{}},
		{"d", []uint64{1, 3}},
		{"e", []uint64{0, 3}},
		{"d", []uint64{2, 2, 2}}, // replaces d, with another shape
		{"f", nil},
		{"g", []uint64{5}},
	}
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, varyColumns, TensorIndex(), DuplicatesStrategy(DuplicatesLastWins))
	require.NoError(t, err)
	want := map[string]safetensors.Tensor{} // tensor name → the tensor
	for i, s := range samples {
		wt := f32Tensor("w", s.shape, float32(10*i))
		if s.shape == nil {
			wt = f32Tensor("w", []uint64{}, float32(10*i))
		}
		emb := f32Tensor("emb", []uint64{2}, float32(-i))
		label := safetensors.Tensor{Name: "label", DType: safetensors.I64, Shape: []uint64{}, Data: binary.LittleEndian.AppendUint64(nil, uint64(i))}
		if s.shape == nil {
			require.NoError(t, w.WriteKV(s.key, wt.Data, emb.Data, label.Data))
		} else {
			// In any order.
			require.NoError(t, w.WriteKVTensors(s.key, label, wt, emb))
		}
		for _, tn := range []safetensors.Tensor{wt, emb, label} {
			tn.Name = s.key + "__" + tn.Name
			want[tn.Name] = tn
		}
	}
	require.NoError(t, w.Close())

	m := readManifest(t, dir)
	assert.Equal(t, int64(len(samples)), m.TotalSamples, "every sample given counts, the replaced one too")
	require.Len(t, m.Shards, 1)
	require.Len(t, m.Schema, len(want))
	for name, tn := range want {
		assert.Equal(t, ColumnSchema{DType: tn.DType.String(), Shape: toInt64s(tn.Shape)}, m.Schema[name], name)
	}

	r, err := safetensors.Open(filepath.Join(dir, m.Shards[0].Path))
	require.NoError(t, err)
	assert.ElementsMatch(t, slices.Collect(mapKeys(want)), r.Names())
	for name, tn := range want {
		got, err := r.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, tn.Shape, append([]uint64{}, got.Shape...), name)
		assert.Equal(t, tn.Data, append([]byte{}, got.Data...), name)
	}
	require.NoError(t, r.Close())

	rows := readIndexRows(t, dir)
	require.Len(t, rows, len(want))
	for _, row := range rows {
		tn := want[row.TensorKey]
		shape := make([]int32, len(tn.Shape))
		for i, d := range tn.Shape {
			shape[i] = int32(d)
		}
		assert.Equal(t, indexRow{TensorKey: row.TensorKey, FileName: m.Shards[0].Path, Shape: shape, DType: tn.DType.String()}, row)
	}

	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	var keys []string
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		keys = append(keys, smp.Key)
		for _, tn := range smp.Tensors {
			assert.Equal(t, want[tn.Name].Shape, append([]uint64{}, tn.Shape...), tn.Name)
			assert.Equal(t, want[tn.Name].Data, tn.Data, tn.Name)
		}
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e", "f", "g"}, keys, "the shard's keys, in its header's order")
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestKVTensorsRollOver writes samples of varying shapes, and scalars
// through WriteKV, over two shards.
func TestKVTensorsRollOver(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60 MiB")
	}
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, varyColumns[:1], TargetShardSizeMB(50))
	require.NoError(t, err)
	want := map[string][]uint64{}
	for i := range 60 {
		key := fmt.Sprintf("k%02d", i)
		if i%7 == 3 {
			require.NoError(t, w.WriteKV(key, make([]byte, 4)))
			want[key+"__w"] = []uint64{}
			continue
		}
		shape := []uint64{uint64(1<<18 - i), 1}
		require.NoError(t, w.WriteKVTensors(key, f32Tensor("w", shape, float32(i))))
		want[key+"__w"] = shape
	}
	require.NoError(t, w.Close())
	m := readManifest(t, dir)
	require.Len(t, m.Shards, 2)
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	n := 0
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		tn := smp.Tensors[0]
		assert.Equal(t, want[tn.Name], append([]uint64{}, tn.Shape...), tn.Name)
		if len(tn.Shape) == 2 {
			i := 0
			fmt.Sscanf(smp.Key, "k%d", &i)
			assert.Equal(t, f32Tensor("w", tn.Shape, float32(i)).Data, tn.Data, tn.Name)
		}
		n++
	}
	assert.Equal(t, 60, n)
}

// TestRefusedSample gives samples that the Writer refuses, between good
// ones, in a shard whose shapes vary: each is refused with
// ErrInvalidSample, and the dataset is what the good samples alone make.
func TestRefusedSample(t *testing.T) {
	emb := f32Tensor("emb", []uint64{2}, 1)
	label := safetensors.Tensor{Name: "label", DType: safetensors.I64, Shape: []uint64{}, Data: make([]byte, 8)}
	good := func(i int) []safetensors.Tensor {
		return []safetensors.Tensor{f32Tensor("w", []uint64{uint64(i + 1)}, float32(i)), emb, label}
	}
	huge := safetensors.Tensor{Name: "w", DType: safetensors.F32, Shape: []uint64{1 << 20, 1 << 10}}
	refused := map[string][]safetensors.Tensor{
		"too few":             {emb, label},
		"too many":            append(good(0), label),
		"no such column":      {f32Tensor("x", []uint64{1}, 0), emb, label},
		"a column twice":      {emb, emb, label},
		"another dtype":       {{Name: "w", DType: safetensors.I32, Shape: []uint64{1}, Data: make([]byte, 4)}, emb, label},
		"emb's shape":         {f32Tensor("w", []uint64{1}, 0), f32Tensor("emb", []uint64{3}, 0), label},
		"label's shape":       {f32Tensor("w", []uint64{1}, 0), emb, {Name: "label", DType: safetensors.I64, Shape: []uint64{1}, Data: make([]byte, 8)}},
		"short data":          {{Name: "w", DType: safetensors.F32, Shape: []uint64{3}, Data: make([]byte, 8)}, emb, label},
		"a dimension > int32": {{Name: "w", DType: safetensors.F32, Shape: []uint64{1 << 31, 0}}, emb, label},
		"over 512 MiB":        {huge, emb, label},
		"a huge header":       {{Name: "w", DType: safetensors.F32, Shape: make([]uint64, 3_000_000)}, emb, label},
	}
	write := func(dir string, withRefused bool) *Writer {
		w, err := Create(dir, KeyValue, varyColumns, TensorIndex())
		require.NoError(t, err)
		for i := range 4 {
			if withRefused {
				for what, ts := range refused {
					err := w.WriteKVTensors("bad", ts...)
					require.ErrorIs(t, err, ErrInvalidSample, what)
					assert.Contains(t, err.Error(), `"bad"`, what)
				}
				assert.ErrorIs(t, w.WriteKV("bad", make([]byte, 5), emb.Data, label.Data), ErrInvalidSample)
				assert.ErrorIs(t, w.WriteSample(emb.Data), ErrInvalidSample)
			}
			require.NoError(t, w.WriteKVTensors(fmt.Sprint("k", i), good(i)...))
		}
		require.NoError(t, w.Close())
		return w
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := write(dirA, true), write(dirB, false)
	ma, mb := a.Manifest(), b.Manifest()
	assert.Equal(t, mb.Schema, ma.Schema)
	assert.Equal(t, mb.TotalSamples, ma.TotalSamples)
	assert.Equal(t, mb.TotalBytes, ma.TotalBytes)
	require.Len(t, ma.Shards, 1)
	shard := func(dir string, m Manifest) []byte {
		data, err := os.ReadFile(filepath.Join(dir, m.Shards[0].Path))
		require.NoError(t, err)
		return data
	}
	assert.Equal(t, shard(dirB, mb), shard(dirA, ma), "the same shard, byte for byte")
	assert.Equal(t, readIndexRows(t, dirB)[0].TensorKey, readIndexRows(t, dirA)[0].TensorKey)
	assert.Len(t, readIndexRows(t, dirA), 12)

	// In Batch mode, WriteKVTensors is refused.
	w, err := Create(t.TempDir(), Batch, testColumns, BatchSize(2))
	require.NoError(t, err)
	assert.ErrorIs(t, w.WriteKVTensors("k", good(0)...), ErrInvalidSample)
	w.Abort()
}

// TestFailureIsSticky fails a dataset with a duplicate key: everything is
// removed, and every later call returns the same error.
func TestFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, varyColumns[:1])
	require.NoError(t, err)
	require.NoError(t, w.WriteKVTensors("a", f32Tensor("w", []uint64{2}, 0)))
	failed := w.WriteKVTensors("a", f32Tensor("w", []uint64{3}, 0))
	require.ErrorIs(t, failed, ErrDuplicateKey)
	for _, err := range []error{
		w.WriteKVTensors("b", f32Tensor("w", []uint64{1}, 0)),
		w.WriteKV("c", make([]byte, 4)),
		w.WriteKVTensors("bad"), // would be refused, but the dataset failed first
		w.Close(),
		w.Close(),
	} {
		assert.Equal(t, failed, err)
	}
	assert.Empty(t, files(t, dir), "nothing left")
}

// TestSparkVaryShapes writes what the connector was given for
// kv_vary_shapes, read from its shards, with WriteKVTensors, and compares
// what Go wrote with what the connector wrote: the manifest, laid out the
// same but for the shards' names and sizes and the order of the schema's
// entries (the connector's is a hash map's), each tensor's bytes, and the
// index's rows.
func TestSparkVaryShapes(t *testing.T) {
	base := filepath.Join("..", "testdata", "spark", "kv_vary_shapes")
	src, err := Open(base)
	require.NoError(t, err)
	defer src.Close()
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, []Column{{Name: "w", DType: safetensors.F32}}, TensorIndex(), TaskID(22))
	require.NoError(t, err)
	want := map[string]string{} // tensor name → SHA-256
	for smp, err := range src.Samples(context.Background()) {
		require.NoError(t, err)
		ts := make([]safetensors.Tensor, len(smp.Tensors))
		for i, tn := range smp.Tensors {
			want[tn.Name] = sha(tn.Data)
			ts[i] = tn
			ts[i].Name = tn.Name[len(smp.Key)+2:] // the column
		}
		require.NoError(t, w.WriteKVTensors(smp.Key, ts...))
	}
	require.NoError(t, w.Close())
	require.Len(t, want, 12)

	// The manifests, with the shard's name and the sizes made alike, and
	// the schema's entries apart.
	entry := regexp.MustCompile(`\n    "[^"\n]*" : \{\n      "dtype" : "[A-Z0-9]+",\n      "shape" : \[[ 0-9,]*\]\n    \},?`)
	normalize := func(dir string) (string, []string) {
		data, err := os.ReadFile(filepath.Join(dir, ManifestName))
		require.NoError(t, err)
		s := regexp.MustCompile(`"shard_path" : "[^"]*"`).ReplaceAllString(string(data), `"shard_path" : "SHARD"`)
		s = regexp.MustCompile(`"(total_bytes|bytes)" : [0-9]+`).ReplaceAllString(s, `"$1" : N`)
		var entries []string
		for _, e := range entry.FindAllString(s, -1) {
			entries = append(entries, strings.TrimSuffix(e, ","))
		}
		slices.Sort(entries)
		return entry.ReplaceAllString(s, ""), entries
	}
	sparkRest, sparkEntries := normalize(base)
	goRest, goEntries := normalize(dir)
	require.Len(t, sparkEntries, 12)
	assert.Equal(t, sparkEntries, goEntries, "the schema's entries, byte for byte")
	assert.Equal(t, sparkRest, goRest, "the rest of the manifest, byte for byte")
	assert.Equal(t, src.Manifest().Schema, w.Manifest().Schema)
	assert.Equal(t, src.Manifest().TotalSamples, w.Manifest().TotalSamples)

	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	for name, digest := range want {
		tn, err := d.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, digest, sha(tn.Data), name)
		st, err := src.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, st.Shape, tn.Shape, name)
	}

	// The index: the connector's rows, but for the shard's name.
	parts, err := filepath.Glob(filepath.Join(base, IndexName, "part-*.parquet"))
	require.NoError(t, err)
	var sparkRows []indexRow
	for _, p := range parts {
		rows, err := parquet.ReadFile[indexRow](p)
		require.NoError(t, err)
		sparkRows = append(sparkRows, rows...)
	}
	goRows := readIndexRows(t, dir)
	for _, rows := range [][]indexRow{sparkRows, goRows} {
		for i := range rows {
			rows[i].FileName = "SHARD"
		}
	}
	assert.ElementsMatch(t, sparkRows, goRows)
	assert.Len(t, goRows, 12)
}
