package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
)

// createFile writes a file of n U64 tensors whose data section is total
// bytes (a multiple of 8n), and returns its path. With sparse, the data is a
// hole, which costs no disk; otherwise it is non-zero bytes.
func createFile(b *testing.B, dir, name string, n int, total int64, sparse bool) string {
	b.Helper()
	specs := make([]safetensors.TensorSpec, n)
	for i := range specs {
		specs[i] = safetensors.TensorSpec{
			Name:  fmt.Sprintf("model.layers.%d.mlp.weight", i),
			DType: safetensors.U64,
			Shape: []uint64{uint64(total / int64(n) / 8)},
		}
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w, err := safetensors.NewWriter(f, specs, nil)
	if err != nil {
		b.Fatal(err)
	}
	if sparse {
		if err := f.Truncate(int64(w.Header().DataOffset() + w.Header().DataLen())); err != nil {
			b.Fatal(err)
		}
		return path
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i*13 + 5)
	}
	for left := int64(w.Header().DataLen()); left > 0; left -= int64(len(chunk)) {
		if _, err := w.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkOpen opens and closes a 2 GiB file (sparse) and a 2 KiB file
// whose headers list the same 256 tensors, in alternating rounds, and
// reports each one's fastest time, their ratio per header byte ("x", large
// / small, 1 = Open costs what the header costs, whatever the size of the
// data; the large file's header is longer, its numbers having more digits),
// and how much the resident set grows while the 2 GiB file is open
// ("rss-growth-KiB", Linux only).
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	const n = 256
	large := createFile(b, dir, "large.safetensors", n, 2<<30, true)
	small := createFile(b, dir, "small.safetensors", n, 2<<10, true)
	paths := []string{large, small}
	var hdrLen [2]float64
	for i, p := range paths {
		r, err := safetensors.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		hdrLen[i] = float64(r.Header().Len)
		r.Close()
	}
	openLargeSmall(b, hdrLen, func(i int) (io.Closer, error) { return safetensors.Open(paths[i]) })
}

// openLargeSmall opens (and closes) a large (0) and a small (1) object in
// alternating rounds, and reports each one's fastest time, their ratio per
// header byte ("x"), and the growth of the resident set while the large
// one is open.
func openLargeSmall(b *testing.B, hdrLen [2]float64, open func(i int) (io.Closer, error)) {
	best := make([]time.Duration, 2)
	var growth int64
	round := 0
	for b.Loop() {
		for k := range 2 {
			i := (k + round) % 2
			before := statusBytes("VmRSS:")
			start := time.Now()
			c, err := open(i)
			elapsed := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				growth = max(growth, statusBytes("VmRSS:")-before)
			}
			c.Close()
			if best[i] == 0 || elapsed < best[i] {
				best[i] = elapsed
			}
		}
		round++
	}
	b.ReportMetric(float64(best[0].Microseconds()), "large-µs")
	b.ReportMetric(float64(best[1].Microseconds()), "small-µs")
	b.ReportMetric(hdrLen[0], "large-hdr-bytes")
	b.ReportMetric(hdrLen[1], "small-hdr-bytes")
	b.ReportMetric(best[0].Seconds()/hdrLen[0]/(best[1].Seconds()/hdrLen[1]), "x")
	b.ReportMetric(float64(growth)/1024, "rss-growth-KiB")
}

// BenchmarkReadMapped reads every byte of every tensor of a 1 GiB file
// through Open (summing it as uint64s through safetensors.View, so that
// every page is touched), and, as the ceiling, reads the same cached file
// with io.ReadFull into a buffer allocated beforehand. The sides alternate;
// the metrics are each side's fastest round and their ratio ("x", read time
// / mapped time, 1 = as fast as reading). With -short the file is 64 MiB.
func BenchmarkReadMapped(b *testing.B) {
	size := int64(1 << 30)
	if testing.Short() {
		size = 64 << 20
	}
	path := createFile(b, b.TempDir(), "data.safetensors", 64, size, false)
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, info.Size())
	for i := range buf {
		buf[i] = 1 // fault the buffer in before timing
	}

	readFull := func() error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.ReadFull(f, buf)
		return err
	}
	var sink uint64
	mapped := func() error {
		r, err := safetensors.Open(path)
		if err != nil {
			return err
		}
		defer r.Close()
		tensors, err := r.Tensors()
		if err != nil {
			return err
		}
		for _, t := range tensors {
			v, err := safetensors.View[uint64](t)
			if err != nil {
				return err
			}
			var sum uint64
			for _, x := range v {
				sum += x
			}
			sink += sum
		}
		return nil
	}
	// Warm the page cache.
	if err := readFull(); err != nil {
		b.Fatal(err)
	}

	b.SetBytes(info.Size())
	sides := []func() error{mapped, readFull}
	best := make([]time.Duration, 2)
	round := 0
	for b.Loop() {
		for k := range 2 {
			i := (k + round) % 2
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			if err := sides[i](); err != nil {
				b.Fatal(err)
			}
			if elapsed := time.Since(start); best[i] == 0 || elapsed < best[i] {
				best[i] = elapsed
			}
		}
		round++
	}
	b.ReportMetric(best[0].Seconds()*1000, "mapped-ms")
	b.ReportMetric(best[1].Seconds()*1000, "readfull-ms")
	b.ReportMetric(best[1].Seconds()/best[0].Seconds(), "x")
	_ = sink
}
