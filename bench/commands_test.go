//go:build linux

package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/check"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/quant"
	"golang.org/x/sys/unix"
)

// The benchmarks of the commands that read a model's values (validate
// --values, stats, check, quantize, convert), each on a file in the page
// cache, against the plain parallel pass over the same bytes: the file
// mapped afresh (safetensors.Open) and its values summed as float32 by
// GOMAXPROCS goroutines, each a contiguous share of each tensor
// (parallelSum), the file closed; in alternating rounds, each side's
// fastest kept. "x" is the command's speed over the pass's (pass time /
// command time: 1 = as fast as the pass); for the commands that write
// (quantize, convert), over the pass made while their output's bytes are
// written and synced (readWriteSide). Each runs on two layouts: 16
// tensors of 64 MiB, and one tensor of 1 GiB, which must also keep every
// core busy; F32 and BF16. With -short the files are 64 MiB.

// modelSize is the size of the data of the files of the command
// benchmarks.
func modelSize() int64 {
	if testing.Short() {
		return 64 << 20
	}
	return 1 << 30
}

// modelLayouts are the layouts of the command benchmarks: tensors of the
// data, each of the same size.
var modelLayouts = []struct {
	name    string
	tensors int64
}{{"16-tensors", 16}, {"1-tensor", 1}}

var (
	modelsMu  sync.Mutex
	modelsDir string              // removed by TestMain
	models    = map[string]bool{} // the files written, by path
	cliOnce   sync.Once
	cliPath   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if modelsDir != "" {
		os.RemoveAll(modelsDir)
	}
	os.Exit(code)
}

// benchDir returns a directory that lives as long as the process.
func benchDir(b *testing.B) string {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if modelsDir == "" {
		dir, err := os.MkdirTemp("", "safetensors-bench-")
		if err != nil {
			b.Fatal(err)
		}
		modelsDir = dir
	}
	return modelsDir
}

// cli returns the path of the command, built once (buildCLI), or the one
// $SAFETENSORS_CLI names, for a machine without the go command.
func cli(b *testing.B) string {
	cliOnce.Do(func() {
		if p := os.Getenv("SAFETENSORS_CLI"); p != "" {
			cliPath = p
			return
		}
		cliPath = buildCLI(b, benchDir(b))
	})
	return cliPath
}

// model returns the path of a file of size bytes of data in n tensors of
// dtype d, [rows, 4096] weights named as a model's projections, holding
// small non-zero values, written once per process and read before it is
// returned, so that it is in the page cache.
func model(b *testing.B, d safetensors.DType, n, size int64) string {
	b.Helper()
	path := filepath.Join(benchDir(b), fmt.Sprintf("%v-%d-%d.safetensors", d, n, size))
	modelsMu.Lock()
	done := models[path]
	modelsMu.Unlock()
	if !done {
		elem := int64(d.Bits() / 8)
		const cols = 4096
		rows := size / n / elem / cols
		specs := make([]safetensors.TensorSpec, n)
		for i := range specs {
			specs[i] = safetensors.TensorSpec{Name: fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), DType: d, Shape: []uint64{uint64(rows), cols}}
		}
		fw, err := safetensors.CreateFile(path, specs, map[string]string{"format": "pt"})
		if err != nil {
			b.Fatal(err)
		}
		vals := make([]float32, 1<<18)
		for i := range vals {
			vals[i] = float32(math.Sin(float64(i)))*0.02 + 0.001
		}
		chunk, err := safetensors.TensorFromFloat32s("c", d, []uint64{uint64(len(vals))}, vals, safetensors.RoundNearestEven)
		if err != nil {
			b.Fatal(err)
		}
		for left := n * rows * cols * elem; left > 0; left -= int64(len(chunk.Data)) {
			if _, err := fw.Write(chunk.Data[:min(left, int64(len(chunk.Data)))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := fw.Close(); err != nil {
			b.Fatal(err)
		}
		modelsMu.Lock()
		models[path] = true
		modelsMu.Unlock()
	}
	warm(b, path)
	return path
}

// fileSum is the plain parallel pass over the file's values: mapped,
// summed by parallelSum, closed.
func fileSum(path string) (float32, error) {
	r, err := safetensors.Open(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	ts, err := r.Tensors()
	if err != nil {
		return 0, err
	}
	return parallelSum(ts), nil
}

// writeCeiling writes n bytes to the file path in calls of 1 MiB from
// buf, syncs and closes it: what a command that writes n bytes must do
// beyond reading. With kick, it starts the writeback of the file's dirty
// pages every 8 MiB (sync_file_range SYNC_FILE_RANGE_WRITE), as the
// library's files do (internal/atomicfile), so that the device writes
// while the file is being written.
func writeCeiling(path string, n int64, buf []byte, kick bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var done int64
	for ; n > 0; n -= int64(len(buf)) {
		k, err := f.Write(buf[:min(n, int64(len(buf)))])
		if err != nil {
			return err
		}
		if done += int64(k); kick && done%(8<<20) == 0 {
			unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		}
	}
	return f.Sync()
}

// readWriteSide is the combined ceiling of a command that reads the file
// at path and writes n bytes: the plain parallel pass over path (fileSum)
// and, at the same time, on one more goroutine, writeCeiling of n bytes
// to out, starting the writeback as it goes; done when both are. Both
// are as fast as they can be: nothing makes a write wait for the reads
// whose results it holds, as a command's must, nor a read for a write,
// and the reads leave the cores to the writes whenever these need them.
// It is what a command that reads path and writes n bytes could do with
// no computation of its own, a fairer ceiling than either alone (the
// writes and the sync take longer than the pass here), and than the
// two one after the other, which a command overlapping them passes.
func readWriteSide(path, out string, n int64, buf []byte) side {
	return side{name: "readwrite", run: func() error {
		errc := make(chan error, 1)
		go func() { errc <- writeCeiling(out, n, buf, true) }()
		_, err := fileSum(path)
		return cmp.Or(<-errc, err)
	}, clean: func() { os.RemoveAll(out) }}
}

// side is one side of raceSides: run is timed, clean (if not nil) is run
// after it, untimed.
type side struct {
	name  string
	run   func() error
	clean func()
}

// raceSides times the sides in alternating rounds, each side's fastest
// round kept, and reports each side's GB/s over size bytes, "x", the first
// side's speed over the last's, and "x-NAME", its speed over each other's.
func raceSides(b *testing.B, size int64, sides ...side) {
	best := make([]time.Duration, len(sides))
	round := 0
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for k := range sides {
			i := (k + round) % len(sides)
			start := time.Now()
			if err := sides[i].run(); err != nil {
				b.Fatalf("%s: %v", sides[i].name, err)
			}
			if d := time.Since(start); best[i] == 0 || d < best[i] {
				best[i] = d
			}
			if sides[i].clean != nil {
				sides[i].clean()
			}
		}
		round++
	}
	for i, s := range sides {
		b.ReportMetric(float64(size)/best[i].Seconds()/1e9, s.name+"-GB/s")
	}
	last := len(sides) - 1
	b.ReportMetric(best[last].Seconds()/best[0].Seconds(), "x")
	for i := 1; i < last; i++ {
		b.ReportMetric(best[i].Seconds()/best[0].Seconds(), "x-"+sides[i].name)
	}
}

// benchModels runs bench for each dtype and layout, on its file.
func benchModels(b *testing.B, bench func(b *testing.B, d safetensors.DType, path string, size int64)) {
	for _, d := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		for _, l := range modelLayouts {
			b.Run(d.String()+"/"+l.name, func(b *testing.B) {
				size := modelSize()
				bench(b, d, model(b, d, l.tensors, size), size)
			})
		}
	}
}

// sumSide is the ceiling side: the plain parallel pass over path.
func sumSide(path string) side {
	return side{name: "sum", run: func() error { _, err := fileSum(path); return err }}
}

// runCLI runs the command with args, its output discarded; status 0 or
// 1 (findings) is success.
func runCLI(b *testing.B, args ...string) func() error {
	bin := cli(b)
	return func() error {
		cmd := exec.Command(bin, args...)
		if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
			return err
		}
		return nil
	}
}

// BenchmarkValidateValues runs `safetensors validate --values` (the
// binary, built once: its values go through the command's own readValues)
// against the plain parallel pass over the same file.
func BenchmarkValidateValues(b *testing.B) {
	benchModels(b, func(b *testing.B, _ safetensors.DType, path string, size int64) {
		raceSides(b, size, side{name: "validate", run: runCLI(b, "validate", "--values", path)}, sumSide(path))
	})
}

// BenchmarkStatsModel runs `safetensors stats` (the binary, as
// BenchmarkValidateValues does) against the plain parallel pass over the
// same file.
func BenchmarkStatsModel(b *testing.B) {
	benchModels(b, func(b *testing.B, _ safetensors.DType, path string, size int64) {
		raceSides(b, size, side{name: "stats", run: runCLI(b, "stats", path)}, sumSide(path))
	})
}

// BenchmarkCheckModel runs check.Model, what `safetensors check` runs,
// against the plain parallel pass over the same file.
func BenchmarkCheckModel(b *testing.B) {
	benchModels(b, func(b *testing.B, _ safetensors.DType, path string, size int64) {
		raceSides(b, size, side{name: "check", run: func() error {
			_, err := check.Model(context.Background(), path)
			return err
		}}, sumSide(path))
	})
}

// BenchmarkQuantizeModel runs quant.WriteModel per channel, what
// `safetensors quantize` runs, writing a new directory (removed after each
// round, untimed), against the combined ceiling, "readwrite": the plain
// parallel pass over the same file while a file of the size of the
// quantized weights is written and synced, as WriteModel must
// (readWriteSide); "x" is quantize's speed over it. "x-sum" and "x-write"
// compare it with each half alone: the pass, and the write and sync
// (writeCeiling, as fast as it goes: with the writeback started as it
// goes).
func BenchmarkQuantizeModel(b *testing.B) {
	benchModels(b, func(b *testing.B, d safetensors.DType, path string, size int64) {
		dir := b.TempDir()
		out, ceil := filepath.Join(dir, "q"), filepath.Join(dir, "ceiling")
		n := size / int64(d.Bits()/8) // the int8 weights
		buf := make([]byte, 1<<20)
		raceSides(b, size,
			side{name: "quantize", run: func() error {
				_, err := quant.WriteModel(context.Background(), path, out, quant.PerChannel)
				return err
			}, clean: func() { os.RemoveAll(out) }},
			sumSide(path),
			side{name: "write", run: func() error {
				return writeCeiling(ceil, n, buf, true)
			}, clean: func() { os.RemoveAll(ceil) }},
			readWriteSide(path, ceil, n, buf))
	})
}

// BenchmarkConvertModel runs checkpoint.Convert, what `safetensors
// convert` runs: F32 to BF16, BF16 to F16 (removed after each round,
// untimed), against the combined ceiling of its output's size and each of
// its halves, as BenchmarkQuantizeModel does.
func BenchmarkConvertModel(b *testing.B) {
	benchModels(b, func(b *testing.B, d safetensors.DType, path string, size int64) {
		dir := b.TempDir()
		out, ceil := filepath.Join(dir, "out.safetensors"), filepath.Join(dir, "ceiling")
		to := safetensors.BF16
		if d == safetensors.BF16 {
			to = safetensors.F16
		}
		n := size / int64(d.Bits()/8) * int64(to.Bits()/8)
		buf := make([]byte, 1<<20)
		raceSides(b, size,
			side{name: "convert", run: func() error {
				_, err := checkpoint.Convert(context.Background(), path, out, to)
				return err
			}, clean: func() { os.Remove(out) }},
			sumSide(path),
			side{name: "write", run: func() error {
				return writeCeiling(ceil, n, buf, true)
			}, clean: func() { os.Remove(ceil) }},
			readWriteSide(path, ceil, n, buf))
	})
}
