package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/dataset"
)

// BenchmarkDatasetKV writes 1 million samples of one F32 [16] embedding (64
// bytes) in key-value mode, and, in alternating rounds, the same tensors
// (names, shapes, bytes, shards) with the core package's CreateFile and
// Write alone. The metrics are each side's fastest round, their ratio
// ("x", core time / dataset time, 1 = as fast as the core writer), and the
// growth of the peak resident set during each side's write
// ("dataset-peak-rss-MiB", "core-peak-rss-MiB"; Linux). With -short,
// 100,000 samples.
func BenchmarkDatasetKV(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	cols := []dataset.Column{{Name: "emb", DType: safetensors.F32, Shape: []uint64{16}}}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user%07d", i)
	}
	value := make([]byte, 64)
	for i := range value {
		value[i] = byte(i*7 + 1)
	}
	base := b.TempDir()
	round := 0
	var shards []dataset.Shard
	var peak [2]int64

	writeDataset := func() error {
		dir := filepath.Join(base, fmt.Sprint("ds", round))
		defer os.RemoveAll(dir)
		w, err := dataset.Create(dir, dataset.KeyValue, cols)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := w.WriteKV(k, value); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		if shards == nil { // the first, untimed write: the manifest's schema is large to read
			shards = w.Manifest().Shards
		}
		return nil
	}
	writeCore := func() error {
		dir := filepath.Join(base, fmt.Sprint("core", round))
		if err := os.Mkdir(dir, 0o777); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		next := 0
		chunk := make([]byte, 0, 1<<20)
		for i, s := range shards {
			specs := make([]safetensors.TensorSpec, s.Samples)
			for j := range specs {
				specs[j] = safetensors.TensorSpec{Name: keys[next+j] + "__emb", DType: safetensors.F32, Shape: []uint64{16}}
			}
			next += int(s.Samples)
			fw, err := safetensors.CreateFile(filepath.Join(dir, fmt.Sprint(i, ".safetensors")), specs, nil)
			if err != nil {
				return err
			}
			for range s.Samples {
				if len(chunk)+len(value) > cap(chunk) {
					if _, err := fw.Write(chunk); err != nil {
						return err
					}
					chunk = chunk[:0]
				}
				chunk = append(chunk, value...)
			}
			if _, err := fw.Write(chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
			if err := fw.Close(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := writeDataset(); err != nil { // learns the shards, warms up
		b.Fatal(err)
	}
	sides := []func() error{writeDataset, writeCore}
	best := make([]time.Duration, 2)
	b.ReportAllocs()
	for b.Loop() {
		for k := range sides {
			i := (k + round) % 2
			runtime.GC()
			debug.FreeOSMemory()
			before := resetPeakRSS()
			start := time.Now()
			if err := sides[i](); err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			if before > 0 {
				peak[i] = max(peak[i], peakRSS()-before)
			}
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
		round++
	}
	b.ReportMetric(best[0].Seconds(), "dataset-s")
	b.ReportMetric(best[1].Seconds(), "core-s")
	b.ReportMetric(best[1].Seconds()/best[0].Seconds(), "x")
	b.ReportMetric(float64(len(shards)), "shards")
	if peak[0] > 0 {
		b.ReportMetric(float64(peak[0])/(1<<20), "dataset-peak-rss-MiB")
		b.ReportMetric(float64(peak[1])/(1<<20), "core-peak-rss-MiB")
	}
}
