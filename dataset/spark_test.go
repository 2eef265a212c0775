package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigEndian reports whether the host stores multi-byte numbers big end
// first, where safetensors.View gives no view of them.
var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// The datasets in testdata/spark were written by the real safetensors-spark
// connector through PySpark (see testdata/README.md). NAME.truth.json lists
// every sample its shards hold, read by an independent Python script:
// key, and per column dtype, shape and the SHA-256 of the bytes.

type sparkTruth struct {
	Mode    string   `json:"mode"`
	Sep     *string  `json:"sep"`
	Columns []string `json:"columns"`
	Samples []struct {
		Key  string                        `json:"key"`
		Cols map[string][3]json.RawMessage `json:"cols"`
	} `json:"samples"`
	ManifestSamples int64 `json:"manifest_samples"`
}

type sparkExpect struct {
	Mode    string            `json:"mode"`
	Options map[string]any    `json:"options"`
	Rows    []json.RawMessage `json:"rows"`
}

// sparkDatasets returns the names of the connector's datasets.
func sparkDatasets(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join("..", "testdata", "spark", "*.truth.json"))
	require.NoError(t, err)
	var names []string
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(filepath.Base(m), ".truth.json"))
	}
	require.Len(t, names, 17)
	return names
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v))
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// sparkOpenOptions returns the options that open a connector dataset: the
// separator it was written with, and the columns where the separator is
// empty.
func sparkOpenOptions(exp sparkExpect, truth sparkTruth) []Option {
	var opts []Option
	if sep, ok := exp.Options["kv_separator"]; ok {
		opts = append(opts, Separator(sep.(string)))
		if sep == "" {
			opts = append(opts, Columns(truth.Columns...))
		}
	}
	return opts
}

// TestSparkDatasets reads every dataset the connector wrote and compares
// every sample, key, dtype, shape and byte with what its shards hold, and
// the manifest's figures with the file as written.
func TestSparkDatasets(t *testing.T) {
	for _, name := range sparkDatasets(t) {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join("..", "testdata", "spark", name)
			var truth sparkTruth
			var exp sparkExpect
			readJSON(t, base+".truth.json", &truth)
			readJSON(t, base+".expect.json", &exp)
			for _, readAll := range []bool{false, true} {
				opts := sparkOpenOptions(exp, truth)
				if readAll {
					opts = append(opts, ReadOptions(safetensors.ReadAll()))
				}
				d, err := Open(base, opts...)
				require.NoError(t, err)
				checkAgainstTruth(t, d, truth)
				checkManifestAsWritten(t, d, base)
				checkLookups(t, d, base, exp, truth)
				require.NoError(t, d.Close())
			}
		})
	}
}

func checkAgainstTruth(t *testing.T, d *Dataset, truth sparkTruth) {
	t.Helper()
	switch {
	case len(truth.Samples) == 0:
		assert.Zero(t, d.Mode())
	case truth.Mode == "batch":
		assert.Equal(t, Batch, d.Mode())
	default:
		assert.Equal(t, KeyValue, d.Mode())
	}
	var names []string
	for _, c := range d.Columns() {
		names = append(names, c.Name)
	}
	if len(truth.Samples) > 0 {
		assert.Equal(t, truth.Columns, names, "the columns, sorted")
	}
	assert.Equal(t, truth.ManifestSamples, d.Manifest().TotalSamples)
	i := 0
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		require.Less(t, i, len(truth.Samples), "more samples than the shards hold")
		want := truth.Samples[i]
		assert.Equal(t, want.Key, smp.Key, "sample %d", i)
		require.Len(t, smp.Tensors, len(names))
		for j, tn := range smp.Tensors {
			w := want.Cols[names[j]]
			var dtype, digest string
			var shape []uint64
			require.NoError(t, json.Unmarshal(w[0], &dtype))
			require.NoError(t, json.Unmarshal(w[1], &shape))
			require.NoError(t, json.Unmarshal(w[2], &digest))
			assert.Equal(t, dtype, tn.DType.String(), "sample %d column %s", i, names[j])
			assert.Equal(t, shape, append([]uint64{}, tn.Shape...), "sample %d column %s", i, names[j])
			assert.Equal(t, digest, sha(tn.Data), "sample %d column %s", i, names[j])
		}
		i++
	}
	assert.Equal(t, len(truth.Samples), i, "the samples")
}

// checkManifestAsWritten compares the parsed manifest with the file, read
// as plain JSON.
func checkManifestAsWritten(t *testing.T, d *Dataset, dir string) {
	t.Helper()
	var raw struct {
		FormatVersion      string `json:"format_version"`
		SafetensorsVersion string `json:"safetensors_version"`
		TotalSamples       int64  `json:"total_samples"`
		TotalBytes         int64  `json:"total_bytes"`
		Shards             []struct {
			Path    string `json:"shard_path"`
			Samples int64  `json:"samples_count"`
			Bytes   int64  `json:"bytes"`
		} `json:"shards"`
		Schema map[string]struct {
			DType string  `json:"dtype"`
			Shape []int64 `json:"shape"`
		} `json:"schema"`
	}
	readJSON(t, filepath.Join(dir, ManifestName), &raw)
	m := d.Manifest()
	assert.Equal(t, raw.FormatVersion, m.FormatVersion)
	assert.Equal(t, raw.SafetensorsVersion, m.SafetensorsVersion)
	assert.Equal(t, raw.TotalSamples, m.TotalSamples)
	assert.Equal(t, raw.TotalBytes, m.TotalBytes)
	require.Len(t, m.Shards, len(raw.Shards))
	for i, s := range raw.Shards {
		assert.Equal(t, Shard{Path: s.Path, Samples: s.Samples, Bytes: s.Bytes}, m.Shards[i])
		info, err := os.Stat(filepath.Join(dir, s.Path))
		require.NoError(t, err)
		assert.Equal(t, info.Size(), s.Bytes)
	}
	require.Len(t, m.Schema, len(raw.Schema))
	for k, v := range raw.Schema {
		assert.Equal(t, v.DType, m.Schema[k].DType, k)
		assert.Equal(t, v.Shape, append([]int64{}, m.Schema[k].Shape...), k)
	}
}

// checkLookups finds every tensor of every shard by name: through the
// index where the dataset has one, and through the shards' headers in a
// copy without it. A name in two shards is found in the later.
func checkLookups(t *testing.T, d *Dataset, dir string, exp sparkExpect, truth sparkTruth) {
	t.Helper()
	want := make(map[string]string) // tensor name → SHA-256, the later shard's
	for _, s := range d.Manifest().Shards {
		r, err := safetensors.Open(filepath.Join(dir, s.Path))
		require.NoError(t, err)
		for _, ti := range r.Header().Tensors {
			tn, err := r.Tensor(ti.Name)
			require.NoError(t, err)
			want[ti.Name] = sha(tn.Data) + " " + s.Path
		}
		r.Close()
	}
	lookup := func(d *Dataset) {
		for name, w := range want {
			tn, err := d.Tensor(name)
			require.NoError(t, err, name)
			shard, err := d.Shard(name)
			require.NoError(t, err)
			assert.Equal(t, w, sha(tn.Data)+" "+shard, name)
		}
		_, err := d.Tensor("no such tensor")
		assert.ErrorIs(t, err, safetensors.ErrTensorNotFound)
	}
	lookup(d)
	if _, err := os.Stat(filepath.Join(dir, IndexName)); err != nil {
		return
	}
	// The same dataset without its index.
	tmp := t.TempDir()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tmp, e.Name()), data, 0o644))
	}
	d2, err := Open(tmp, sparkOpenOptions(exp, truth)...)
	require.NoError(t, err)
	defer d2.Close()
	lookup(d2)
}

// TestSparkEmptySeparator opens the dataset written with the empty
// separator without naming its columns: each tensor is a sample of its
// own, keyed by its full name, and lookups by name work.
func TestSparkEmptySeparator(t *testing.T) {
	base := filepath.Join("..", "testdata", "spark", "kv_sep_empty")
	var truth sparkTruth
	readJSON(t, base+".truth.json", &truth)
	d, err := Open(base, Separator(""))
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, KeyValue, d.Mode())
	require.Len(t, d.Columns(), 1)
	assert.Equal(t, "", d.Columns()[0].Name)
	var keys []string
	for smp, err := range d.Samples(context.Background()) {
		require.NoError(t, err)
		keys = append(keys, smp.Key)
		require.Len(t, smp.Tensors, 1)
		tn, err := d.Tensor(smp.Key)
		require.NoError(t, err)
		assert.Equal(t, tn.Data, smp.Tensors[0].Data)
	}
	var want []string
	for _, s := range truth.Samples {
		want = append(want, s.Key+truth.Columns[0])
	}
	assert.Equal(t, want, keys)
	// With the default separator, the names do not split: Open says so.
	_, err = Open(base)
	assert.ErrorIs(t, err, ErrInvalidDataset)
	assert.ErrorContains(t, err, "Separator")
	_ = slices.Clone(keys)
}

// TestSparkUnaligned reads the connector's unaligned tensors through every
// API: values decode the same as from the bytes; a zero-copy view works
// where the data is aligned (on a little-endian host) and otherwise says
// there is none; sample copies are aligned.
func TestSparkUnaligned(t *testing.T) {
	unaligned := 0
	check := func(t *testing.T, tn safetensors.Tensor, copied bool) {
		if tn.DType != safetensors.F32 && tn.DType != safetensors.F64 {
			return
		}
		vals, err := tn.Float32s()
		require.NoError(t, err)
		want := make([]float32, len(vals))
		for i := range want {
			if tn.DType == safetensors.F32 {
				want[i] = math.Float32frombits(binary.LittleEndian.Uint32(tn.Data[4*i:]))
			} else {
				want[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(tn.Data[8*i:])))
			}
		}
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(vals))
		var verr error
		if tn.DType == safetensors.F32 {
			_, verr = safetensors.View[float32](tn)
		} else {
			_, verr = safetensors.View[float64](tn)
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(tn.Data)))
		isAligned := addr%uintptr(tn.DType.Bits()/8) == 0
		if copied {
			assert.True(t, isAligned, "a sample's copy is aligned")
		} else if !isAligned {
			unaligned++
		}
		if bigEndian {
			// No view of multi-byte elements on a big-endian host,
			// aligned or not; Float32s decoded them above.
			assert.ErrorIs(t, verr, safetensors.ErrNoView)
		} else if isAligned {
			assert.NoError(t, verr)
		} else {
			assert.ErrorIs(t, verr, safetensors.ErrNoView)
		}
	}
	for _, name := range []string{"batch_tail_write", "batch_two_tasks", "kv_index", "kv_vary_shapes"} {
		d, err := Open(filepath.Join("..", "testdata", "spark", name))
		require.NoError(t, err)
		for smp, err := range d.Samples(context.Background()) {
			require.NoError(t, err)
			for _, tn := range smp.Tensors {
				check(t, tn, true)
				got, err := d.Tensor(tn.Name)
				require.NoError(t, err)
				if d.Mode() == KeyValue {
					check(t, got, false)
				}
			}
		}
		for ts, err := range d.Batches() {
			if d.Mode() == KeyValue {
				assert.ErrorIs(t, err, ErrWrongMode)
				break
			}
			require.NoError(t, err)
			for _, tn := range ts {
				check(t, tn, false)
			}
		}
		d.Close()
	}
	assert.Positive(t, unaligned, "the connector's shards have unaligned tensors")
}
