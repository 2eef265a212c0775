package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
)

// loadFileSize is the size of the file the load benchmarks read: 2 GiB, or
// 256 MiB with -short.
func loadFileSize() int64 {
	if testing.Short() {
		return 256 << 20
	}
	return 2 << 30
}

// Parameters shared by the ceiling and the library, as the library's
// defaults: four goroutines (at least four, one a processor), 16 MiB reads.
const loadChunk = 16 << 20

func loadWorkers() int { return max(4, runtime.GOMAXPROCS(0)) }

// preadCeiling reads bytes [off, off+len(dst)) of f into dst with workers
// goroutines, worker w reading chunks w, w+workers, ... with pread: the
// same byte ranges, in the same order, that ReadAll reads, with no
// allocation and nothing else done.
func preadCeiling(f *os.File, dst []byte, off int64, workers, chunk int) error {
	n := (len(dst) + chunk - 1) / chunk
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				b, e := i*chunk, min((i+1)*chunk, len(dst))
				if _, err := f.ReadAt(dst[b:e], off+int64(b)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// touched returns n bytes of memory backed by huge pages where the system
// allows (as the library asks for the memory it reads files into), and
// touched, so that no page fault is left.
func touched(n int) []byte {
	b := make([]byte, n)
	adviseHuge(b)
	for i := range b {
		b[i] = 1
	}
	return b
}

// keepFastest runs one round of a side, and keeps its time in best if it is
// the side's fastest yet.
func keepFastest(b *testing.B, best *time.Duration, run func() error) {
	b.Helper()
	start := time.Now()
	if err := run(); err != nil {
		b.Fatal(err)
	}
	if elapsed := time.Since(start); *best == 0 || elapsed < *best {
		*best = elapsed
	}
}

// loadFile creates the file the load benchmarks read (64 tensors of
// loadFileSize() bytes in all, non-zero), and opens it twice: with Open,
// and as a plain file for the ceiling. All three go when the benchmark
// ends.
func loadFile(b *testing.B) (path string, r *safetensors.Reader, f *os.File) {
	b.Helper()
	path = createFile(b, b.TempDir(), "load.safetensors", 64, loadFileSize(), false)
	b.Cleanup(func() { os.Remove(path) })
	r, err := safetensors.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	f, err = os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return path, r, f
}

// warm reads the whole file through the page cache.
func warm(b *testing.B, path string) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 16<<20)
	for off := int64(0); ; off += int64(len(buf)) {
		n, _ := f.ReadAt(buf, off)
		if n < len(buf) {
			return
		}
	}
}

// BenchmarkLoad reads a 2 GiB file of 64 tensors of 32 MiB (non-zero
// bytes), page cache warm, four ways in alternating rounds:
//
//   - ceiling: N goroutines reading the data section's 16 MiB chunks with
//     pread into a buffer allocated and touched beforehand;
//   - readall: Open with ReadAll, which now reads with N goroutines into
//     memory it allocates;
//   - readinto: Open with ReadInto, the same reads into the ceiling's
//     buffer (memory the caller keeps from file to file);
//   - loader: a Loader into a Buffer of 512 MiB kept from round to round,
//     each tensor handed over and dropped;
//   - sequential: what ReadAll did before, one ReadAt of the data section
//     into new memory;
//   - fresh: the ceiling's reads into memory allocated for the round, as
//     ReadAll must (the kernel zeroes each new page before the copy).
//
// Metrics: each side's fastest round, readall-x, readinto-x and loader-x
// (ceiling time / side time, 1 = as fast as the ceiling), readall-fresh-x (fresh time /
// readall time), speedup (sequential time / readall time).
func BenchmarkLoad(b *testing.B) {
	path, r, f := loadFile(b)
	off, size := int64(r.Header().DataOffset()), int(r.Header().DataLen())
	ceilBuf := touched(size)
	loaderBuf := touched(512 << 20)
	workers := loadWorkers()
	sides := []struct {
		name string
		run  func() error
	}{
		{"ceiling", func() error { return preadCeiling(f, ceilBuf, off, workers, loadChunk) }},
		{"readall", func() error {
			r, err := safetensors.Open(path, safetensors.ReadAll())
			if err != nil {
				return err
			}
			return r.Close()
		}},
		{"loader", func() error {
			l := &load.Loader{Buffer: loaderBuf}
			for _, err := range l.Load(context.Background(), r) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"sequential", func() error {
			buf := make([]byte, size)
			_, err := f.ReadAt(buf, off)
			return err
		}},
		{"fresh", func() error { return preadCeiling(f, make([]byte, size), off, workers, loadChunk) }},
		{"readinto", func() error {
			r, err := safetensors.Open(path, safetensors.ReadInto(ceilBuf))
			if err != nil {
				return err
			}
			return r.Close()
		}},
	}
	warm(b, path)
	b.SetBytes(int64(size))
	best := make([]time.Duration, len(sides))
	round := 0
	for b.Loop() {
		for k := range sides {
			i := (k + round) % len(sides)
			b.StopTimer()
			runtime.GC()
			debug.FreeOSMemory()
			b.StartTimer()
			keepFastest(b, &best[i], sides[i].run)
		}
		round++
	}
	gbps := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	for i, s := range sides {
		b.ReportMetric(gbps(best[i]), s.name+"-GB/s")
	}
	b.ReportMetric(best[0].Seconds()/best[1].Seconds(), "readall-x")
	b.ReportMetric(best[0].Seconds()/best[2].Seconds(), "loader-x")
	b.ReportMetric(best[0].Seconds()/best[5].Seconds(), "readinto-x")
	b.ReportMetric(best[4].Seconds()/best[1].Seconds(), "readall-fresh-x")
	b.ReportMetric(best[3].Seconds()/best[1].Seconds(), "speedup")
	b.ReportMetric(float64(workers), "goroutines")
}

// BenchmarkLoadMemoryLimit loads the 2 GiB file with a Loader of its own
// memory limited to M = 512 MiB, page cache warm, alternating with the
// pread ceiling, and reports the loader's throughput against the
// ceiling's (loader-x) and the growth of the process's peak resident set
// during the load against M (rss-over-limit-MiB: peak growth - M, which
// must stay small).
func BenchmarkLoadMemoryLimit(b *testing.B) {
	const limit = 512 << 20
	path, r, f := loadFile(b)
	off, size := int64(r.Header().DataOffset()), int(r.Header().DataLen())
	// The ceiling reads into a buffer of M bytes, the chunks of each
	// round of reads reusing it, as the loader reuses its memory.
	ceilBuf := touched(limit)
	workers := loadWorkers()
	ceiling := func() error {
		for b := 0; b < size; b += limit {
			n := min(limit, size-b)
			if err := preadCeiling(f, ceilBuf[:n], off+int64(b), workers, loadChunk); err != nil {
				return err
			}
		}
		return nil
	}
	var peakGrowth, base int64
	prepare := func() {
		runtime.GC()
		debug.FreeOSMemory()
		base = resetPeakRSS()
	}
	loader := func() error {
		l := &load.Loader{MemoryLimit: limit}
		for _, err := range l.Load(context.Background(), r) {
			if err != nil {
				return err
			}
		}
		if base > 0 {
			peakGrowth = max(peakGrowth, peakRSS()-base)
		}
		return nil
	}
	warm(b, path)
	b.SetBytes(int64(size))
	sides := []func() error{ceiling, loader}
	best := make([]time.Duration, 2)
	round := 0
	for b.Loop() {
		for k := range 2 {
			i := (k + round) % 2
			b.StopTimer()
			prepare()
			b.StartTimer()
			keepFastest(b, &best[i], sides[i])
		}
		round++
	}
	b.ReportMetric(best[0].Seconds()/best[1].Seconds(), "loader-x")
	b.ReportMetric(float64(peakGrowth)/(1<<20), "peak-rss-growth-MiB")
	b.ReportMetric(float64(peakGrowth-limit)/(1<<20), "rss-over-limit-MiB")
}

// BenchmarkLoadNoCache loads the 2 GiB file with NoCache into a Buffer of
// 256 MiB kept from round to round (as the ceiling's buffer is), from a
// cold start (the file dropped from the page cache first) and from a warm
// one (the whole file read through the cache right before), and compares
// each with the pread ceiling: cold-x (cold ceiling / cold load: the
// ceiling reads the file dropped from the cache), warm-x (warm ceiling /
// cold load) and warm-nocache-x (warm ceiling / warm load). Each round
// runs every side once, in an order that alternates from round to round;
// each side's fastest round counts.
//
// Memory, per byte of file, the Buffer counted as memory the load takes:
// mem-x is how much resident memory plus page cache ("Cached" of
// /proc/meminfo, which other processes move too) grew during a cold load
// (the Buffer, plus peak resident set growth, plus the change of Cached;
// at most 1.1 asked), warm-mem-x the same for a warm load, negative when
// the load drops more of the cache than it takes memory, and peak-mem-x
// bounds the peak of both during either load (the Buffer, plus peak
// resident set growth, plus the largest growth of Cached, sampled each 10
// ms). left-cached-x is the fraction of the file's pages that mincore
// finds cached after a load (0 asked). The largest of the rounds counts.
// Linux only.
func BenchmarkLoadNoCache(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("needs /proc/meminfo and posix_fadvise")
	}
	path, r, f := loadFile(b)
	off, size := int64(r.Header().DataOffset()), int(r.Header().DataLen())
	info, _ := f.Stat()
	drop := func() { dropFileCache(f) }
	ceilBuf := touched(size)
	workers := loadWorkers()
	ceiling := func() error { return preadCeiling(f, ceilBuf, off, workers, loadChunk) }
	loaderBuf := touched(256 << 20)
	growth := map[bool]int64{false: -1 << 62, true: -1 << 62} // by warm start
	var peak, cached, base int64
	var left float64
	var stopSampling func() int64
	// prepare readies a NoCache load, untimed: the memory as it starts.
	prepare := func() {
		runtime.GC()
		debug.FreeOSMemory()
		cached = meminfo("Cached:")
		base = resetPeakRSS()
		stopSampling = sampleCached(cached)
	}
	// measure measures the memory after a NoCache load, untimed.
	measure := func(warm bool) func() {
		return func() {
			cacheGrowth := stopSampling()
			rss := int64(len(loaderBuf)) + peakRSS() - base
			growth[warm] = max(growth[warm], rss+meminfo("Cached:")-cached)
			peak = max(peak, rss+max(cacheGrowth, 0))
			left = max(left, cachedFraction(b, f))
		}
	}
	noCache := func() error {
		l := &load.Loader{Buffer: loaderBuf, NoCache: true}
		for _, err := range l.Load(context.Background(), r) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	sides := []struct {
		name    string
		warm    bool // run right after the file was read whole through the cache
		prepare func()
		run     func() error
		measure func()
	}{
		{"cold", false, nil, ceiling, nil},
		{"warm", true, nil, ceiling, nil},
		{"nocache-cold", false, prepare, noCache, measure(false)},
		{"nocache-warm", true, prepare, noCache, measure(true)},
	}
	b.SetBytes(int64(size))
	best := make([]time.Duration, len(sides))
	round := 0
	for b.Loop() {
		for k := range sides {
			i := (k + round) % len(sides)
			b.StopTimer()
			if sides[i].warm {
				warm(b, path)
			} else {
				drop()
			}
			if sides[i].prepare != nil {
				sides[i].prepare()
			}
			b.StartTimer()
			keepFastest(b, &best[i], sides[i].run)
			if sides[i].measure != nil {
				b.StopTimer()
				sides[i].measure()
				b.StartTimer()
			}
		}
		round++
	}
	fileSize := float64(info.Size())
	b.ReportMetric(float64(growth[false])/fileSize, "mem-x")
	b.ReportMetric(float64(growth[true])/fileSize, "warm-mem-x")
	b.ReportMetric(float64(peak)/fileSize, "peak-mem-x")
	b.ReportMetric(left, "left-cached-x")
	b.ReportMetric(best[0].Seconds()/best[2].Seconds(), "cold-x")
	b.ReportMetric(best[1].Seconds()/best[2].Seconds(), "warm-x")
	b.ReportMetric(best[1].Seconds()/best[3].Seconds(), "warm-nocache-x")
	for i, s := range sides {
		b.ReportMetric(float64(size)/best[i].Seconds()/1e9, s.name+"-GB/s")
	}
}

// sampleCached reads "Cached" of /proc/meminfo each 10 ms until the
// function it returns is called, which returns the largest growth seen
// over base, that at its call included.
func sampleCached(base int64) (stop func() int64) {
	done := make(chan struct{})
	result := make(chan int64)
	go func() {
		largest := meminfo("Cached:") - base
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				largest = max(largest, meminfo("Cached:")-base)
			case <-done:
				result <- max(largest, meminfo("Cached:")-base)
				return
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

// meminfo reads a "kB" field of /proc/meminfo, in bytes.
func meminfo(field string) int64 { return procBytes("/proc/meminfo", field) }

// BenchmarkOpenIndexSingle opens a model directory holding one
// model.safetensors (256 tensors) with checkpoint.Open (OpenIndex before
// the checkpoint package, hence the name), and, alternating, does what it
// must cost at most: Open of the file plus a listing of the directory.
// x = checkpoint.Open time / (Open + listing) time, fastest rounds; at
// most 1 asked.
func BenchmarkOpenIndexSingle(b *testing.B) {
	dir := b.TempDir()
	file := createFile(b, dir, "model.safetensors", 256, 256<<20, true)
	for i := range 3 { // config.json and the like
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("other-%d.json", i)), []byte("{}"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	sides := []func() error{
		func() error {
			s, err := checkpoint.Open(context.Background(), dir)
			if err != nil {
				return err
			}
			return s.Close()
		},
		func() error {
			if _, err := os.ReadDir(dir); err != nil {
				return err
			}
			r, err := safetensors.Open(file)
			if err != nil {
				return err
			}
			return r.Close()
		},
	}
	best := make([]time.Duration, 2)
	round := 0
	for b.Loop() {
		for k := range 2 {
			i := (k + round) % 2
			keepFastest(b, &best[i], sides[i])
		}
		round++
	}
	b.ReportMetric(float64(best[0].Microseconds()), "openindex-µs")
	b.ReportMetric(float64(best[1].Microseconds()), "open+readdir-µs")
	b.ReportMetric(best[0].Seconds()/best[1].Seconds(), "x")
}
