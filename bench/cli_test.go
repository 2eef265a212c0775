//go:build linux

package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/safetensors-go/safetensors"
)

// buildCLI builds cmd/safetensors into dir and returns the binary's path.
func buildCLI(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "safetensors")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/safetensors-go/safetensors/cmd/safetensors")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// createF32File writes a file of F32 tensors of 64 MiB each, size bytes of
// data in all, with non-zero values, and returns its path.
func createF32File(b *testing.B, path string, size int64) {
	b.Helper()
	const tensorBytes = 64 << 20
	specs := make([]safetensors.TensorSpec, size/tensorBytes)
	for i := range specs {
		specs[i] = safetensors.TensorSpec{Name: fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), DType: safetensors.F32, Shape: []uint64{4096, tensorBytes / 4 / 4096}}
	}
	fw, err := safetensors.CreateFile(path, specs, map[string]string{"format": "pt"})
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	vals := unsafe.Slice((*float32)(unsafe.Pointer(&chunk[0])), len(chunk)/4)
	for i := range vals {
		vals[i] = float32(i%1000-500) * 1e-4
	}
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := fw.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		b.Fatal(err)
	}
}

// copyFile copies in to out through a 1 MiB buffer, with read and write
// calls, and syncs out, as convert does with its output.
func copyFile(in, out string, buf []byte) error {
	src, err := os.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(out)
	if err != nil {
		return err
	}
	defer dst.Close()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return dst.Sync()
}

// BenchmarkConvertCLI runs `safetensors convert --dtype BF16` on a 2 GiB F32
// file and, in alternating rounds, copies the same file with read and write
// calls of 1 MiB (the same bytes, unconverted), syncing the output as
// convert does. The input is read once before timing, so that both sides
// read it from the page cache. The metrics are each side's fastest round,
// their ratio ("x", copy time / convert time, 1 = as fast as copying), and
// the convert process's peak resident set ("convert-peak-RSS-MiB"). With
// -short the file is 128 MiB.
func BenchmarkConvertCLI(b *testing.B) {
	size := int64(2 << 30)
	if testing.Short() {
		size = 128 << 20
	}
	dir := b.TempDir()
	bin := buildCLI(b, dir)
	in := filepath.Join(dir, "f32.safetensors")
	createF32File(b, in, size)
	buf := make([]byte, 1<<20)
	if err := copyFile(in, filepath.Join(dir, "warm"), buf); err != nil {
		b.Fatal(err)
	}

	var peakKiB int64
	sides := []func() error{
		func() error {
			cmd := exec.Command(bin, "convert", "--dtype", "BF16", in, filepath.Join(dir, "bf16.safetensors"))
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			peakKiB = max(peakKiB, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
			return nil
		},
		func() error { return copyFile(in, filepath.Join(dir, "copy"), buf) },
	}
	best := make([]time.Duration, len(sides))
	round := 0
	b.SetBytes(size)
	for b.Loop() {
		for k := range sides {
			i := (k + round) % len(sides)
			start := time.Now()
			if err := sides[i](); err != nil {
				b.Fatal(err)
			}
			if d := time.Since(start); best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
		round++
	}
	b.ReportMetric(best[0].Seconds(), "convert-s")
	b.ReportMetric(best[1].Seconds(), "copy-s")
	b.ReportMetric(best[1].Seconds()/best[0].Seconds(), "x")
	b.ReportMetric(float64(peakKiB)/1024, "convert-peak-RSS-MiB")
}
