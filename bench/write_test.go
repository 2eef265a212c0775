package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
)

// BenchmarkStreamWrite writes a 2 GiB tensor to a file in 1 MiB chunks,
// through a safetensors.Writer and, as the ceiling, with plain os.File.Write
// calls of the same bytes. The two sides alternate, the order swapped each
// round, and the metrics are each side's fastest round ("ours-s", "plain-s"),
// their ratio ("x", plain time / our time, 1 = as fast as plain writes), and
// the largest growth of the peak resident set during one of our writes
// ("peak-rss-MiB", Linux only). With -short it writes 64 MiB instead.
func BenchmarkStreamWrite(b *testing.B) {
	const chunk = 1 << 20
	size := 2 << 30
	if testing.Short() {
		size = 64 << 20 // for CI, which only checks that it runs
	}
	dir := b.TempDir()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	specs := []safetensors.TensorSpec{{Name: "weight", DType: safetensors.U8, Shape: []uint64{uint64(size)}}}

	ours := func(path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w, err := safetensors.NewWriter(f, specs, nil)
		if err != nil {
			return err
		}
		for range size / chunk {
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return w.Close()
	}
	plain := func(path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// The same header bytes, so that both files are the same.
		var hdr bytes.Buffer
		if _, err := safetensors.NewWriter(&hdr, specs, nil); err != nil {
			return err
		}
		if _, err := f.Write(hdr.Bytes()); err != nil {
			return err
		}
		for range size / chunk {
			if _, err := f.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}

	b.SetBytes(int64(size))
	best := [2]time.Duration{}
	var peakGrowth int64
	round := 0
	for b.Loop() {
		for k := range 2 {
			side := (k + round) % 2
			path := filepath.Join(dir, "out"+strconv.Itoa(side))
			b.StopTimer()
			runtime.GC()
			base := resetPeakRSS()
			b.StartTimer()
			start := time.Now()
			var err error
			if side == 0 {
				err = ours(path)
			} else {
				err = plain(path)
			}
			elapsed := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if side == 0 && base > 0 {
				peakGrowth = max(peakGrowth, peakRSS()-base)
			}
			if best[side] == 0 || elapsed < best[side] {
				best[side] = elapsed
			}
			os.Remove(path)
			b.StartTimer()
		}
		round++
	}
	b.ReportMetric(best[0].Seconds(), "ours-s")
	b.ReportMetric(best[1].Seconds(), "plain-s")
	b.ReportMetric(best[1].Seconds()/best[0].Seconds(), "x")
	if peakGrowth > 0 {
		b.ReportMetric(float64(peakGrowth)/(1<<20), "peak-rss-MiB")
	}
}

// resetPeakRSS resets the process's peak resident set size to the current
// one and returns it in bytes, or 0 where /proc does not allow it.
func resetPeakRSS() int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0
	}
	return statusBytes("VmRSS:")
}

// peakRSS returns the peak resident set size in bytes since the last reset.
func peakRSS() int64 { return statusBytes("VmHWM:") }

// statusBytes reads a "kB" field of /proc/self/status, in bytes.
func statusBytes(field string) int64 { return procBytes("/proc/self/status", field) }

// procBytes reads a "kB" field of a file of /proc, in bytes, or returns 0
// where there is none.
func procBytes(path, field string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(s.Text(), field+" %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}
