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
	"runtime"
	"strings"
	"sync"
	"testing"

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

// readWriteSide is the combined ceiling of a command that reads a file
// and writes n bytes: read, the plain parallel pass over the file (sumSide
// or byteSumSide), and, at the same time, on one more goroutine, writeCeiling of n bytes
// to out, starting the writeback as it goes; done when both are. Both
// are as fast as they can be: nothing makes a write wait for the reads
// whose results it holds, as a command's must, nor a read for a write,
// and the reads leave the cores to the writes whenever these need them.
// It is what a command that reads path and writes n bytes could do with
// no computation of its own, a fairer ceiling than either alone (the
// writes and the sync take longer than the pass here), and than the
// two one after the other, which a command overlapping them passes.
func readWriteSide(read side, out string, n int64, buf []byte) side {
	return side{name: "readwrite", run: func() error {
		errc := make(chan error, 1)
		go func() { errc <- writeCeiling(out, n, buf, true) }()
		err := read.run()
		return cmp.Or(<-errc, err)
	}, clean: func() { os.RemoveAll(out) }}
}

// side is one side of raceSides: run is timed; prepare and clean (if not
// nil) are run before and after it, untimed.
type side struct {
	name    string
	run     func() error
	prepare func()
	clean   func()
}

// raceSides times the sides in alternating rounds, each side's fastest
// round kept, and reports each side's GB/s over size bytes, "x", the first
// side's speed over the last's, and "x-NAME", its speed over each other's.
func raceSides(b *testing.B, size int64, sides ...side) {
	best, _ := raceBest(b, size, sides)
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
			readWriteSide(sumSide(path), ceil, n, buf))
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
			readWriteSide(sumSide(path), ceil, n, buf))
	})
}

// quantizedModel returns the folder of a quantized model of size bytes of
// weights in 16 tensors, written once per process and read into the page
// cache: for checkpoint.MethodFP8, F8_E4M3 weights [rows, 4096] beside
// their F32 weight_scale_inv, blocks of 128x128; for
// checkpoint.MethodMXFP4, gpt-oss's experts' "_blocks" [4, rows, 128, 16]
// beside their E8M0 "_scales" [4, rows, 128]; config.json with the
// quantization_config.
func quantizedModel(b *testing.B, method string, size int64) string {
	b.Helper()
	dir := filepath.Join(benchDir(b), fmt.Sprintf("%s-%d", method, size))
	path := filepath.Join(dir, "model.safetensors")
	modelsMu.Lock()
	done := models[path]
	modelsMu.Unlock()
	if !done {
		const n = 16
		var specs []safetensors.TensorSpec
		config := `{"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}}`
		if method == checkpoint.MethodFP8 {
			config = `{"model_type": "llama", "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`
			rows := uint64(size / n / 4096)
			for i := range n {
				w := fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i)
				specs = append(specs, safetensors.TensorSpec{Name: w, DType: safetensors.F8_E4M3, Shape: []uint64{rows, 4096}},
					safetensors.TensorSpec{Name: w + "_scale_inv", DType: safetensors.F32, Shape: []uint64{(rows + 127) / 128, 32}})
			}
		} else {
			rows := uint64(size / n / 4 / 128 / 16)
			for i := range n {
				p := fmt.Sprintf("model.layers.%d.mlp.experts.gate_up_proj", i)
				specs = append(specs, safetensors.TensorSpec{Name: p + "_blocks", DType: safetensors.U8, Shape: []uint64{4, rows, 128, 16}},
					safetensors.TensorSpec{Name: p + "_scales", DType: safetensors.U8, Shape: []uint64{4, rows, 128}})
			}
		}
		// Bytes that are finite F8_E4M3 values, F32 scales of about 0.01
		// (0x3c23d70a), and E8M0 exponents of about 2^0 (0x7f).
		writeModel(b, dir, config, specs, func(t safetensors.TensorInfo, data []byte) {
			for i := range data {
				switch {
				case t.DType == safetensors.F32:
					data[i] = [4]byte{0x0a, 0xd7, 0x23, 0x3c}[i%4]
				case strings.HasSuffix(t.Name, "_scales"):
					data[i] = byte(0x7a + i%10)
				default:
					data[i] = byte(i*7) &^ 0x80 % 0x7e
				}
			}
		})
	}
	warm(b, path)
	return dir
}

// writeModel writes, in the folder dir, config.json and model.safetensors
// of the tensors specs, each tensor's bytes a repetition of 1 MiB that
// fill sets for it, and records the file as written (models).
func writeModel(b *testing.B, dir, config string, specs []safetensors.TensorSpec, fill func(t safetensors.TensorInfo, data []byte)) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o666); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "model.safetensors")
	fw, err := safetensors.CreateFile(path, specs, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 1<<20)
	for _, t := range fw.Header().Tensors {
		fill(t, data)
		for left := t.DataOffsets[1] - t.DataOffsets[0]; left > 0; left -= min(left, uint64(len(data))) {
			if _, err := fw.Write(data[:min(left, uint64(len(data)))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
	modelsMu.Lock()
	models[path] = true
	modelsMu.Unlock()
}

// byteSumSide is sumSide for files of any dtype: byteSum over path.
func byteSumSide(path string) side {
	return side{name: "sum", run: func() error { _, err := byteSum(path); return err }}
}

// byteSum is the plain parallel pass over the bytes of the file's
// tensors, of any dtype: mapped, each tensor's bytes summed by GOMAXPROCS
// goroutines, each a contiguous share, closed.
func byteSum(path string) (uint64, error) {
	r, err := safetensors.Open(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	ts, err := r.Tensors()
	if err != nil {
		return 0, err
	}
	workers := runtime.GOMAXPROCS(0)
	sums := make([]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s uint64
			for _, t := range ts {
				n := len(t.Data)
				for _, x := range t.Data[n*w/workers : n*(w+1)/workers] {
					s += uint64(x)
				}
			}
			sums[w] = s
		}()
	}
	wg.Wait()
	var s uint64
	for _, x := range sums {
		s += x
	}
	return s, nil
}

// BenchmarkDequantizeModel runs checkpoint.Convert with Dequantize, what
// `safetensors convert --dequantize --dtype BF16` runs, on an FP8
// block-scaled and an MXFP4 model (the output removed after each round,
// untimed), against the combined ceiling of its output's size, as
// BenchmarkQuantizeModel does, with the pass over the file's bytes
// whatever their dtype (byteSumSide): "x" over both at once, "x-sum" and
// "x-write" over each alone.
func BenchmarkDequantizeModel(b *testing.B) {
	for _, method := range []string{checkpoint.MethodFP8, checkpoint.MethodMXFP4} {
		b.Run(method, func(b *testing.B) {
			size := modelSize()
			dir := quantizedModel(b, method, size)
			outSize := 2 * size // one BF16 value a byte
			if method == checkpoint.MethodMXFP4 {
				outSize = 4 * size // two a byte
			}
			raceDequantize(b, dir, outSize)
		})
	}
}

// raceDequantize races checkpoint.Convert with Dequantize to BF16 of the
// model in dir, whose output takes outSize bytes (removed after each
// round, untimed), against the pass over its file's bytes, the writes of
// a file of outSize bytes, and both at once (readWriteSide).
func raceDequantize(b *testing.B, dir string, outSize int64) {
	path := filepath.Join(dir, "model.safetensors")
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	tmp := b.TempDir()
	out, ceil := filepath.Join(tmp, "out"), filepath.Join(tmp, "ceiling")
	buf := make([]byte, 1<<20)
	raceSides(b, info.Size(),
		side{name: "dequantize", run: func() error {
			_, err := checkpoint.Convert(context.Background(), dir, out, safetensors.BF16, checkpoint.Dequantize())
			return err
		}, clean: func() { os.RemoveAll(out) }},
		byteSumSide(path),
		side{name: "write", run: func() error {
			return writeCeiling(ceil, outSize, buf, true)
		}, clean: func() { os.RemoveAll(ceil) }},
		readWriteSide(byteSumSide(path), ceil, outSize, buf))
}
