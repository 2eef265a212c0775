package dataset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmptyDataset closes a writer that was given no sample: the manifest
// has no shard and an empty schema, and no index, as from the connector.
func TestEmptyDataset(t *testing.T) {
	for _, mode := range []Mode{Batch, KeyValue} {
		dir := t.TempDir()
		opts := []Option{TensorIndex()}
		if mode == Batch {
			opts = append(opts, BatchSize(4))
		}
		w, err := Create(dir, mode, testColumns, opts...)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		assert.Equal(t, []string{ManifestName}, files(t, dir))
		data, err := os.ReadFile(filepath.Join(dir, ManifestName))
		require.NoError(t, err)
		assert.Contains(t, string(data), `"shards" : [ ],`)
		assert.Contains(t, string(data), `"schema" : { }`)
		d, err := Open(dir)
		require.NoError(t, err)
		assert.Zero(t, d.Mode())
		assert.Empty(t, d.Columns())
		for range d.Samples(context.Background()) {
			t.Error("a sample in an empty dataset")
		}
		d.Close()
	}
}

// TestEmptySeparator writes key-value tensors named key + column, and
// reads them back with the columns named, and without.
func TestEmptySeparator(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, testColumns, Separator(""), TensorIndex())
	require.NoError(t, err)
	for i := range 5 {
		label, image := sample(i)
		require.NoError(t, w.WriteKV(fmt.Sprint("k", i), label, image))
	}
	require.NoError(t, w.Close())
	assert.Contains(t, w.Manifest().Schema, "k3image")

	d, err := Open(dir, Separator(""), Columns("label", "image"))
	require.NoError(t, err)
	n := 0
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		i := int(smp.Key[1] - '0')
		label, image := sample(i)
		assert.Equal(t, image, smp.Tensors[0].Data)
		assert.Equal(t, label, smp.Tensors[1].Data)
		n++
	}
	assert.Equal(t, 5, n)
	d.Close()

	// Without the columns, each tensor is a sample, keyed by its name.
	d, err = Open(dir, Separator(""))
	require.NoError(t, err)
	defer d.Close()
	n = 0
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		require.Len(t, smp.Tensors, 1)
		got, err := d.Tensor(smp.Key)
		require.NoError(t, err)
		assert.Equal(t, got.Data, smp.Tensors[0].Data)
		n++
	}
	assert.Equal(t, 10, n)
	_, image := sample(4)
	got, err := d.Tensor("k4image")
	require.NoError(t, err)
	assert.Equal(t, image, got.Data)
}

// TestLeftBehind gives Create a directory with what a killed writer
// leaves: it refuses it and names the files.
func TestLeftBehind(t *testing.T) {
	for _, name := range []string{
		"part-00000-0000-0b8c1a34-5a5e-4b7a-9d1c-0123456789ab.safetensors",
		".part-00000-0001-0b8c1a34-5a5e-4b7a-9d1c-0123456789ab.safetensors.tmp1x2y",
		".part-batch.tmp0011223344556677",
		".tensor_index-spill.tmp0011223344556677",
		"." + ManifestName + ".tmp0011223344556677",
		"._tensor_index.parquet.tmp01234567",
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		_, err := Create(dir, KeyValue, testColumns)
		assert.ErrorIs(t, err, ErrExists, name)
		assert.ErrorContains(t, err, name)
		assert.Equal(t, []string{name}, files(t, dir), "nothing removed, nothing added")
	}
	// Other files do not matter.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), nil, 0o644))
	w, err := Create(dir, KeyValue, testColumns)
	require.NoError(t, err)
	w.Abort()
	assert.Equal(t, []string{"README"}, files(t, dir))
}

// TestErrorsNameTarget makes a shard fail to be written: the error names
// the shard, not a temporary file.
func TestErrorsNameTarget(t *testing.T) {
	for _, mode := range []Mode{Batch, KeyValue} {
		dir := filepath.Join(t.TempDir(), "ds")
		var opts []Option
		if mode == Batch {
			opts = append(opts, BatchSize(2))
		}
		w, err := Create(dir, mode, testColumns, opts...)
		require.NoError(t, err)
		if err := os.RemoveAll(dir); err != nil {
			// Windows keeps a folder in which a file is open, here the
			// writer's spill file: the shard's file fails to be created
			// as it would in a folder removed.
			require.Equal(t, "windows", runtime.GOOS, "%v", err)
			restore := atomicfile.SetHooks(atomicfile.Hooks{CreateTemp: func(name string) (atomicfile.Temp, error) {
				return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
			}})
			defer restore()
		}
		label, image := sample(0)
		if mode == Batch {
			err = w.WriteSample(label, image)
		} else {
			require.NoError(t, w.WriteKV("k", label, image))
			err = w.Close()
		}
		require.Error(t, err)
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.Contains(t, err.Error(), filepath.Join(dir, "part-00000-0000-"), mode)
		assert.NotContains(t, err.Error(), ".tmp", mode)
		w.Abort() // closes the spill file
	}
}

// TestBatchMemory writes a few samples of a batch of 1 GiB: the shard is
// not held in memory.
func TestBatchMemory(t *testing.T) {
	dir := t.TempDir()
	cols := []Column{{Name: "x", DType: safetensors.U8, Shape: []uint64{1 << 10}}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w, err := Create(dir, Batch, cols, BatchSize(1<<20))
	require.NoError(t, err)
	x := make([]byte, 1<<10)
	for i := range 100 {
		x[0] = byte(i)
		require.NoError(t, w.WriteSample(x))
	}
	require.NoError(t, w.Close())
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "allocated while writing a batch of 1 GiB")
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, int64(100), d.Manifest().TotalSamples)
	i := 0
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		assert.Equal(t, byte(i), smp.Tensors[0].Data[0])
		i++
	}
	assert.Equal(t, 100, i)
}

// TestSamplesAreCopies reads samples that stay valid after Close, and
// opens with the core's read options.
func TestSamplesAreCopies(t *testing.T) {
	dir := writeSmall(t)
	for _, opts := range [][]Option{nil, {ReadOptions(safetensors.ReadAll())}} {
		d, err := Open(dir, opts...)
		require.NoError(t, err)
		var kept []Sample
		for smp, err := range d.Samples(context.Background()) {
			require.NoError(t, err)
			kept = append(kept, smp)
		}
		require.NoError(t, d.Close())
		require.Len(t, kept, 6)
		for i, smp := range kept {
			label, image := sample(i)
			assert.Equal(t, image, smp.Tensors[0].Data)
			assert.Equal(t, label, smp.Tensors[1].Data)
		}
	}
	d, err := Open(dir, ReadOptions(func() safetensors.ReadOption {
		return safetensors.ReadAll()
	}()), Separator("__"))
	require.NoError(t, err)
	require.NoError(t, d.Close())
	assert.False(t, strings.Contains(dir, ".."))
}

// TestManifestEscapes writes keys that JSON escapes: the manifest parses,
// and Open finds every tensor of the schema.
func TestManifestEscapes(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, KeyValue, testColumns)
	require.NoError(t, err)
	keys := []string{`quote"d`, `back\slash`, "tab\there", "é<&>", "\u2028"}
	for i, k := range keys {
		label, image := sample(i)
		require.NoError(t, w.WriteKV(k, label, image))
	}
	require.NoError(t, w.Close())
	m := readManifest(t, dir)
	assert.Len(t, m.Schema, 2*len(keys))
	assert.Contains(t, m.Schema, `quote"d__image`)
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	for i, k := range keys {
		_, image := sample(i)
		got, err := d.Tensor(k + "__image")
		require.NoError(t, err)
		assert.Equal(t, image, got.Data)
	}
}

// TestManifestAfterAbort asks an aborted writer for its manifest: no
// panic, and the shards it removed.
func TestManifestAfterAbort(t *testing.T) {
	w, err := Create(t.TempDir(), KeyValue, testColumns)
	require.NoError(t, err)
	label, image := sample(0)
	require.NoError(t, w.WriteKV("k", label, image))
	require.NoError(t, w.flushKV())
	assert.Len(t, w.Manifest().Schema, 2)
	w.Abort()
	assert.NotPanics(t, func() { w.Manifest() })
}

// TestBatchColumnsWithSeparator writes a batch dataset whose columns' names
// hold the separator: it opens in batch mode.
func TestBatchColumnsWithSeparator(t *testing.T) {
	dir := t.TempDir()
	cols := []Column{{Name: "a__x", DType: safetensors.U8}, {Name: "b__y", DType: safetensors.U8, Shape: []uint64{2}}}
	w, err := Create(dir, Batch, cols, BatchSize(3))
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, w.WriteSample([]byte{byte(i)}, []byte{byte(i), 1}))
	}
	require.NoError(t, w.Close())
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, Batch, d.Mode())
	n := 0
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		assert.Equal(t, []byte{byte(n)}, smp.Tensors[0].Data)
		n++
	}
	assert.Equal(t, 3, n)
}

// TestOneKeyWithSeparator: a key-value dataset of one key, whose shard
// batch mode could have written too, opens as key-value when the
// separator is given, as batch otherwise.
func TestOneKeyWithSeparator(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	w, err := Create(dir, KeyValue, []Column{{Name: "id", DType: safetensors.I32, Shape: []uint64{1}}}, Separator("/"))
	require.NoError(t, err)
	require.NoError(t, w.WriteKV("user7", []byte{7, 0, 0, 0}))
	require.NoError(t, w.Close())
	d, err := Open(dir, Separator("/"))
	require.NoError(t, err)
	assert.Equal(t, KeyValue, d.Mode())
	assert.Equal(t, "id", d.Columns()[0].Name)
	require.NoError(t, d.Close())
	d, err = Open(dir)
	require.NoError(t, err)
	assert.Equal(t, Batch, d.Mode())
	require.NoError(t, d.Close())
}

// TestSamplesCancel cancels the context of Samples: the next sample is
// not read, and the iteration ends with the context's error.
func TestSamplesCancel(t *testing.T) {
	dir := writeSmall(t)
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for _, err := range d.Samples(ctx) {
		if err != nil {
			last = err
			break
		}
		n++
		if n == 3 {
			cancel()
		}
	}
	assert.Equal(t, 3, n, "no sample after the cancellation")
	assert.ErrorIs(t, last, context.Canceled)

	n = 0
	for _, err := range d.Samples(ctx) {
		assert.ErrorIs(t, err, context.Canceled)
		n++
	}
	assert.Equal(t, 1, n, "a done context: only its error")
}
