package dataset

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var shardName = regexp.MustCompile(`^part-00007-\d{4}-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.safetensors$`)

// image and label are the columns of the tests' samples: an F32 [2, 3] and
// an I64 scalar. sample makes sample i of them.
var testColumns = []Column{
	{Name: "label", DType: safetensors.I64},
	{Name: "image", DType: safetensors.F32, Shape: []uint64{2, 3}},
}

func sample(i int) (label, image []byte) {
	label = binary.LittleEndian.AppendUint64(nil, uint64(i))
	for j := range 6 {
		image = binary.LittleEndian.AppendUint32(image, math.Float32bits(float32(i)+float32(j)/10))
	}
	return label, image
}

func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	require.NoError(t, err)
	var m Manifest
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestBatch(t *testing.T) {
	for _, tc := range []struct {
		tail    Tail
		shards  []int64 // samples per shard
		samples int     // samples read back
	}{
		{TailDrop, []int64{4, 4}, 8},
		{TailPad, []int64{4, 4, 4}, 12},
		{TailWrite, []int64{4, 4, 2}, 10},
	} {
		t.Run(fmt.Sprint(tc.tail), func(t *testing.T) {
			dir := t.TempDir()
			w, err := Create(dir, Batch, testColumns, BatchSize(4), TailStrategy(tc.tail), TaskID(7), TensorIndex())
			require.NoError(t, err)
			for i := range 10 {
				label, image := sample(i)
				require.NoError(t, w.WriteSample(label, image))
			}
			require.NoError(t, w.Close())

			m := readManifest(t, dir)
			assert.Equal(t, w.Manifest(), m)
			assert.Equal(t, "1.0", m.FormatVersion)
			assert.Equal(t, "1.0", m.SafetensorsVersion)
			assert.Equal(t, map[string]ColumnSchema{"image": {DType: "F32", Shape: []int64{4, 2, 3}}, "label": {DType: "I64", Shape: []int64{4}}}, m.Schema,
				"the first shard's shapes, batch dimension included, as the connector writes them")
			var counts []int64
			var total int64
			for i, s := range m.Shards {
				assert.Regexp(t, shardName, s.Path)
				assert.Equal(t, fmt.Sprintf("%04d", i), s.Path[11:15], "shard numbers count up")
				info, err := os.Stat(filepath.Join(dir, s.Path))
				require.NoError(t, err)
				assert.Equal(t, info.Size(), s.Bytes)
				counts = append(counts, s.Samples)
				total += s.Bytes
			}
			assert.Equal(t, tc.shards, counts)
			assert.Equal(t, total, m.TotalBytes)
			assert.ElementsMatch(t, append(slices.Collect(func(yield func(string) bool) {
				for _, s := range m.Shards {
					yield(s.Path)
				}
			}), ManifestName, IndexName), files(t, dir), "no temporary file left")

			d, err := Open(dir)
			require.NoError(t, err)
			defer d.Close()
			assert.Equal(t, Batch, d.Mode())
			n := 0
			for s, err := range d.Samples(context.Background()) {
				require.NoError(t, err)
				require.Len(t, s.Tensors, 2)
				assert.Equal(t, "image", s.Tensors[0].Name, "columns sorted by name")
				label, image := sample(n)
				if n >= 10 { // padding
					label, image = make([]byte, 8), make([]byte, 24)
				}
				assert.Equal(t, image, s.Tensors[0].Data, "sample %d", n)
				assert.Equal(t, label, s.Tensors[1].Data, "sample %d", n)
				assert.Equal(t, []uint64{2, 3}, s.Tensors[0].Shape)
				n++
			}
			assert.Equal(t, tc.samples, n)
			nb := 0
			for ts, err := range d.Batches() {
				require.NoError(t, err)
				assert.Equal(t, []uint64{uint64(tc.shards[nb]), 2, 3}, ts[0].Shape)
				nb++
			}
			assert.Equal(t, len(tc.shards), nb)

			rows := readIndexRows(t, dir)
			require.Len(t, rows, 2*len(tc.shards))
			assert.ElementsMatch(t, []indexRow{ // the shard's tensors in file order
				{TensorKey: "image", FileName: m.Shards[0].Path, Shape: []int32{4, 2, 3}, DType: "F32"},
				{TensorKey: "label", FileName: m.Shards[0].Path, Shape: []int32{4}, DType: "I64"},
			}, rows[:2])
		})
	}
}

// readIndexRows reads the rows of the index directory's part files.
func readIndexRows(t *testing.T, dir string) []indexRow {
	t.Helper()
	parts, err := filepath.Glob(filepath.Join(dir, IndexName, "part-*.parquet"))
	require.NoError(t, err)
	require.Len(t, parts, 1)
	assert.FileExists(t, filepath.Join(dir, IndexName, "_SUCCESS"))
	rows, err := parquet.ReadFile[indexRow](parts[0])
	require.NoError(t, err)
	return rows
}

func TestKeyValue(t *testing.T) {
	for _, index := range []bool{false, true} {
		t.Run(fmt.Sprint("index=", index), func(t *testing.T) {
			dir := t.TempDir()
			var opts []Option
			if index {
				opts = append(opts, TensorIndex())
			}
			w, err := Create(dir, KeyValue, testColumns, opts...)
			require.NoError(t, err)
			for i := range 20 {
				label, image := sample(i)
				require.NoError(t, w.WriteKV(fmt.Sprintf("user%02d", i), label, image))
			}
			require.NoError(t, w.Close())
			m := readManifest(t, dir)
			require.Len(t, m.Shards, 1)
			assert.Equal(t, int64(20), m.TotalSamples)

			r, err := safetensors.Open(filepath.Join(dir, m.Shards[0].Path))
			require.NoError(t, err)
			assert.Contains(t, r.Names(), "user07__image")
			assert.Contains(t, r.Names(), "user07__label")
			r.Close()

			d, err := Open(dir)
			require.NoError(t, err)
			defer d.Close()
			assert.Equal(t, KeyValue, d.Mode())
			n := 0
			for s, err := range d.Samples(context.Background()) {
				require.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("user%02d", n), s.Key)
				label, image := sample(n)
				assert.Equal(t, image, s.Tensors[0].Data)
				assert.Equal(t, label, s.Tensors[1].Data)
				n++
			}
			assert.Equal(t, 20, n)
			tensor, err := d.Tensor("user13__image")
			require.NoError(t, err)
			_, image := sample(13)
			assert.Equal(t, image, tensor.Data)
			shard, err := d.Shard("user13__label")
			require.NoError(t, err)
			assert.Equal(t, m.Shards[0].Path, shard)
			_, err = d.Tensor("nobody__image")
			assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound), "%v", err)
			for _, err := range d.Batches() {
				assert.ErrorIs(t, err, ErrWrongMode)
			}
			require.NoError(t, d.Close())
			_, err = d.Tensor("user13__image")
			assert.ErrorIs(t, err, safetensors.ErrClosed)
			for _, err := range d.Samples(context.Background()) {
				assert.ErrorIs(t, err, safetensors.ErrClosed)
			}
		})
	}
}

// TestKeyValueRollOver writes samples of 1 MiB with a target of 50 MB: the
// shards roll over before they would pass it, and a lookup through the
// index reads only the shard that holds the key.
func TestKeyValueRollOver(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 120 MiB")
	}
	dir := t.TempDir()
	cols := []Column{{Name: "blob", DType: safetensors.U8, Shape: []uint64{1 << 20}}}
	w, err := Create(dir, KeyValue, cols, TargetShardSizeMB(50), TensorIndex(), Separator("/"))
	require.NoError(t, err)
	blob := make([]byte, 1<<20)
	for i := range 120 {
		blob[0] = byte(i)
		require.NoError(t, w.WriteKV(fmt.Sprint("k", i), blob))
	}
	require.NoError(t, w.Close())
	m := readManifest(t, dir)
	require.Len(t, m.Shards, 3)
	for _, s := range m.Shards {
		assert.LessOrEqual(t, s.Bytes, int64(51<<20), "the target and one sample at most")
	}
	// As in the connector: a shard is written once its samples, with 200
	// bytes a tensor, reach the target.
	assert.Equal(t, []int64{50, 50, 20}, []int64{m.Shards[0].Samples, m.Shards[1].Samples, m.Shards[2].Samples})

	_, err = Open(dir) // the separator is "/", not "__"
	assert.ErrorIs(t, err, ErrInvalidDataset)
	d, err := Open(dir, Separator("/"))
	require.NoError(t, err)
	defer d.Close()
	tensor, err := d.Tensor("k100/blob")
	require.NoError(t, err)
	assert.Equal(t, byte(100), tensor.Data[0])
	d.mu.Lock()
	opened := len(d.readers)
	d.mu.Unlock()
	assert.Equal(t, 1, opened, "only the shard holding the key")
}

func TestDuplicates(t *testing.T) {
	label, image := sample(1)
	label2, image2 := sample(2)

	// DuplicatesFail fails the whole dataset, as the connector's job.
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, testColumns, TargetShardSizeMB(50))
	require.NoError(t, err)
	blob := make([]byte, 1<<20)
	for i := range 60 { // a shard written
		binary.LittleEndian.PutUint64(blob, uint64(i))
		require.NoError(t, w.WriteKV(fmt.Sprint("k", i), label, image))
	}
	require.NoError(t, w.WriteKV("a", label, image))
	assert.ErrorIs(t, w.WriteKV("a", label2, image2), ErrDuplicateKey)
	assert.ErrorIs(t, w.WriteKV("b", label2, image2), ErrDuplicateKey, "sticky")
	assert.ErrorIs(t, w.Close(), ErrDuplicateKey)
	assert.Empty(t, files(t, dir), "nothing committed")

	dir = t.TempDir()
	w, err = Create(dir, KeyValue, testColumns, DuplicatesStrategy(DuplicatesLastWins))
	require.NoError(t, err)
	require.NoError(t, w.WriteKV("a", label, image))
	require.NoError(t, w.WriteKV("b", label, image))
	require.NoError(t, w.WriteKV("a", label2, image2))
	require.NoError(t, w.Close())
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, int64(3), d.Manifest().TotalSamples, "every row counted, as by the connector")
	assert.Len(t, d.Manifest().Schema, 4)
	got, err := d.Tensor("a__image")
	require.NoError(t, err)
	assert.Equal(t, image2, got.Data, "the last one wins")
	var keys []string
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		keys = append(keys, smp.Key)
	}
	assert.ElementsMatch(t, []string{"a", "b"}, keys)
}

// TestDuplicateAfterRollOver gives a key again after its shard is written:
// it lands in the next shard, where lookups find it, with the index and
// without.
func TestDuplicateAfterRollOver(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 90 MiB")
	}
	cols := []Column{{Name: "blob", DType: safetensors.U8, Shape: []uint64{30 << 20}}}
	for _, index := range []bool{true, false} {
		dir := t.TempDir()
		opts := []Option{TargetShardSizeMB(50)}
		if index {
			opts = append(opts, TensorIndex())
		}
		w, err := Create(dir, KeyValue, cols, opts...)
		require.NoError(t, err)
		blob := make([]byte, 30<<20)
		require.NoError(t, w.WriteKV("a", blob))
		require.NoError(t, w.WriteKV("b", blob)) // rolls over: "a" is written
		blob[0] = 1
		require.NoError(t, w.WriteKV("a", blob))
		require.NoError(t, w.Close())
		d, err := Open(dir)
		require.NoError(t, err)
		got, err := d.Tensor("a__blob")
		require.NoError(t, err)
		assert.Equal(t, byte(1), got.Data[0], "index %v: the later shard's", index)
		m := readManifest(t, dir)
		assert.Len(t, m.Schema, 2, "a name in two shards is in the schema once")
		assert.Equal(t, int64(3), m.TotalSamples)
		d.Close()
	}
}

func TestOptions(t *testing.T) {
	for i, c := range []struct {
		mode Mode
		cols []Column
		opts []Option
	}{
		{},
		{Batch, testColumns, nil},
		{Batch, testColumns, []Option{BatchSize(4), Separator("/")}},
		{Batch, testColumns, []Option{BatchSize(4), TailStrategy(9)}},
		{Batch, testColumns, []Option{BatchSize(0)}},
		{KeyValue, testColumns, []Option{BatchSize(4)}},
		{KeyValue, testColumns, []Option{TailStrategy(TailWrite)}},
		{KeyValue, testColumns, []Option{TargetShardSizeMB(49)}},
		{KeyValue, testColumns, []Option{TargetShardSizeMB(1001)}},
		{KeyValue, testColumns, []Option{DuplicatesStrategy(5)}},
		{KeyValue, nil, nil},
		{KeyValue, []Column{{Name: "a", DType: safetensors.F32}, {Name: "a", DType: safetensors.F32}}, nil},
		{KeyValue, []Column{{Name: "", DType: safetensors.F32}}, nil},
		{KeyValue, []Column{{Name: "a", DType: safetensors.F8_E4M3}}, nil},
		{KeyValue, []Column{{Name: "a", DType: safetensors.F32, Shape: []uint64{1 << 31}}}, nil},
		{KeyValue, testColumns, []Option{TaskID(100000)}},
		{KeyValue, testColumns, []Option{TaskID(-1)}},
		{KeyValue, testColumns, []Option{Columns("label")}},
		{KeyValue, testColumns, []Option{ReadOptions(safetensors.ReadAll())}},
		{Batch, testColumns, []Option{BatchSize(4), Separator("")}},
		{Batch, testColumns, []Option{BatchSize(4), DuplicatesStrategy(DuplicatesLastWins)}},
		{Batch, testColumns, []Option{BatchSize(1 << 26)}}, // shards of 2 GiB
		{KeyValue, []Column{{Name: "a", DType: safetensors.U8, Shape: []uint64{600 << 20}}}, nil},
	} {
		_, err := Create(t.TempDir(), c.mode, c.cols, c.opts...)
		// A mode or columns that cannot make a dataset, or an option.
		want := safetensors.ErrInvalidOption
		if c.opts == nil && c.mode != Batch {
			want = ErrInvalidColumns
		}
		assert.ErrorIs(t, err, want, "case %d: %v", i, err)
	}
	// Open refuses the options of Create.
	small := writeSmall(t)
	for _, o := range []Option{BatchSize(2), TailStrategy(TailPad), TargetShardSizeMB(50), DuplicatesStrategy(DuplicatesLastWins), TensorIndex(), RoundToNearest(), TaskID(1)} {
		_, err := Open(small, o)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
		assert.ErrorContains(t, err, "an option of Create, not of Open")
	}

	w, err := Create(t.TempDir(), Batch, testColumns, BatchSize(2))
	require.NoError(t, err)
	label, image := sample(0)
	assert.ErrorIs(t, w.WriteSample(label), ErrInvalidSample)
	assert.ErrorIs(t, w.WriteSample(label, image[1:]), ErrInvalidSample)
	assert.ErrorIs(t, w.WriteKV("k", label, image), ErrInvalidSample)
	assert.ErrorIs(t, w.WriteFloat32s(nil, nil), ErrInvalidSample, "label is I64")
	w.Abort()

	dir := t.TempDir()
	w, err = Create(dir, Batch, testColumns, BatchSize(2))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, err = Create(dir, Batch, testColumns, BatchSize(2))
	assert.ErrorIs(t, err, ErrExists)
	assert.ErrorIs(t, w.Close(), safetensors.ErrClosed)
}

// TestFailureLeavesNothing makes a write fail after shards were written,
// and aborts another writer: nothing is left in either directory.
func TestFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	cols := []Column{{Name: "x", DType: safetensors.U8}, {Name: "y__x", DType: safetensors.U8}}
	w, err := Create(dir, KeyValue, cols, TensorIndex(), TargetShardSizeMB(50))
	require.NoError(t, err)
	require.NoError(t, w.WriteKV("a", []byte{1}, []byte{2}))
	// "a__y" + "__x" is "a__y__x", the name of a's column y__x.
	require.NoError(t, w.WriteKV("a__y", []byte{1}, []byte{2}))
	assert.ErrorIs(t, w.Close(), ErrDuplicateKey)
	assert.Empty(t, files(t, dir))

	dir = t.TempDir()
	w, err = Create(dir, Batch, testColumns, BatchSize(1), TensorIndex())
	require.NoError(t, err)
	for i := range 3 {
		label, image := sample(i)
		require.NoError(t, w.WriteSample(label, image))
	}
	assert.Len(t, files(t, dir), 4, "3 shards and the index's spill")
	w.Abort()
	assert.Empty(t, files(t, dir))
	assert.ErrorIs(t, w.Close(), safetensors.ErrClosed)
}

func TestFloat32s(t *testing.T) {
	cols := []Column{{Name: "h", DType: safetensors.F16, Shape: []uint64{3}}, {Name: "b", DType: safetensors.BF16, Shape: []uint64{3}},
		{Name: "f", DType: safetensors.F32, Shape: []uint64{3}}, {Name: "d", DType: safetensors.F64, Shape: []uint64{3}}}
	vals := []float32{1.0009766, -3.3333333, float32(math.NaN())}
	for _, nearest := range []bool{false, true} {
		dir := t.TempDir()
		var opts []Option
		if nearest {
			opts = append(opts, RoundToNearest())
		}
		w, err := Create(dir, KeyValue, cols, opts...)
		require.NoError(t, err)
		require.NoError(t, w.WriteKVFloat32s("k", vals, vals, vals, vals))
		require.NoError(t, w.Close())
		d, err := Open(dir)
		require.NoError(t, err)
		r := safetensors.Truncate
		if nearest {
			r = safetensors.RoundNearestEven
		}
		h, err := d.Tensor("k__h")
		require.NoError(t, err)
		if nearest {
			assert.Equal(t, safetensors.F32sToF16Bytes(nil, vals, r), h.Data)
		} else {
			assert.Equal(t, appendSparkF16(nil, vals), h.Data)
		}
		b, err := d.Tensor("k__b")
		require.NoError(t, err)
		assert.Equal(t, safetensors.F32sToBF16Bytes(nil, vals, r), b.Data)
		assert.Equal(t, uint16(0xc055), binary.LittleEndian.Uint16(b.Data[2:]), "-3.333 truncated is 0xc055, rounded 0xc055 too")
		f, err := d.Tensor("k__f")
		require.NoError(t, err)
		got, err := safetensors.Values[float32](f, nil)
		require.NoError(t, err)
		assert.Equal(t, vals[:2], got[:2])
		d.Close()
	}
}

// writeSmall writes a batch dataset of 3 shards of 2 samples, with an
// index, and returns its directory.
func writeSmall(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	w, err := Create(dir, Batch, testColumns, BatchSize(2), TensorIndex())
	require.NoError(t, err)
	for i := range 6 {
		label, image := sample(i)
		require.NoError(t, w.WriteSample(label, image))
	}
	require.NoError(t, w.Close())
	return dir
}

func editManifest(t *testing.T, dir string, edit func(m *Manifest)) {
	t.Helper()
	m := readManifest(t, dir)
	edit(&m)
	data, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644))
}

func TestOpenCorrupted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		says    string
	}{
		{"shard missing", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, readManifest(t, dir).Shards[1].Path)))
		}, "shard part-"},
		{"shard longer", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, readManifest(t, dir).Shards[2].Path), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			f.Write([]byte{0})
			f.Close()
		}, "the manifest says"},
		{"shard not safetensors", func(t *testing.T, dir string) {
			m := readManifest(t, dir)
			require.NoError(t, os.WriteFile(filepath.Join(dir, m.Shards[0].Path), make([]byte, m.Shards[0].Bytes), 0o644))
		}, "shard part-"},
		{"totals", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.TotalSamples++ })
		}, "total_samples 7"},
		{"sample count", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Shards[0].Samples++; m.TotalSamples++ })
		}, `has no separator`}, // not a batch shard, then
		{"schema dtype", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Schema["label"] = ColumnSchema{DType: "I32", Shape: []int64{}} })
		}, `schema entry "label" is I32 [], the shards hold I64`},
		{"schema unknown dtype", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Schema["label"] = ColumnSchema{DType: "Q7"} })
		}, `dtype "Q7"`},
		{"path escapes", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.Shards[0].Path = "../" + m.Shards[0].Path })
		}, "not inside the dataset's directory"},
		{"shard twice", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) {
				m.Shards[1] = m.Shards[0]
				m.TotalBytes += m.Shards[0].Bytes - readManifest(t, dir).Shards[1].Bytes
			})
		}, "listed twice"},
		{"version", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *Manifest) { m.FormatVersion = "2.0" })
		}, `format_version "2.0"`},
		{"not JSON", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestName), []byte("{"), 0o644))
		}, ManifestName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeSmall(t)
			tc.corrupt(t, dir)
			d, err := Open(dir)
			assert.Nil(t, d)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.says)
			if tc.name != "shard missing" {
				assert.ErrorIs(t, err, ErrInvalidDataset)
			}
		})
	}
	_, err := Open(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestCorruptIndex gives a lookup an index that is not Parquet: an error,
// not a panic.
func TestCorruptIndex(t *testing.T) {
	dir := writeSmall(t)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, IndexName)))
	for _, content := range [][]byte{[]byte("PAR1 not really PAR1"), make([]byte, 100)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, IndexName), content, 0o644))
		d, err := Open(dir)
		require.NoError(t, err, "the index is read on first lookup")
		_, err = d.Tensor("image")
		assert.ErrorIs(t, err, ErrInvalidDataset)
		d.Close()
	}
	// Without an index, lookups read the shards' headers.
	require.NoError(t, os.Remove(filepath.Join(dir, IndexName)))
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	shard, err := d.Shard("image")
	require.NoError(t, err)
	assert.Equal(t, d.Manifest().Shards[2].Path, shard, "the last shard that holds it")
}

// TestDuplicatesMany replaces samples again and again, in a shard that
// grows its key table past replaced samples and in the shards after a
// roll over, and checks each key's last value against a map.
func TestDuplicatesMany(t *testing.T) {
	dir := t.TempDir()
	cols := []Column{{Name: "v", DType: safetensors.U32, Shape: []uint64{1 << 10}}}
	w, err := Create(dir, KeyValue, cols, DuplicatesStrategy(DuplicatesLastWins), TargetShardSizeMB(50))
	require.NoError(t, err)
	want := make(map[string]uint32)
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 4<<10)
	const rows = 20_000 // 4 KiB and 200 bytes a row: a shard each 12,500 or so
	for i := range rows {
		key := fmt.Sprint("k", rng.IntN(3000))
		binary.LittleEndian.PutUint32(value[4:], uint32(i))
		require.NoError(t, w.WriteKV(key, value))
		want[key] = uint32(i)
	}
	require.NoError(t, w.Close())
	m := readManifest(t, dir)
	require.Len(t, m.Shards, 2)
	assert.Equal(t, int64(rows), m.TotalSamples)
	assert.Len(t, m.Schema, len(want), "a name in two shards is in the schema once")
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	inShard := make(map[string]int)
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		inShard[smp.Shard]++
	}
	assert.Equal(t, len(inShard), 2)
	for key, v := range want {
		got, err := d.Tensor(key + "__v")
		require.NoError(t, err)
		assert.Equal(t, v, binary.LittleEndian.Uint32(got.Data[4:]), "key %s", key)
	}
}
