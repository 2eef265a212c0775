// Command stream writes a safetensors file larger than it holds in memory,
// a chunk at a time, and reads it back the same way: what a converter or a
// checkpoint writer does with tensors of many gigabytes. Memory use stays at
// one chunk whatever the size.
//
//	go run ./examples/stream out.safetensors 1024   # MiB
package main

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"

	"github.com/safetensors-go/safetensors"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: stream OUT MIB")
		os.Exit(2)
	}
	mib, err := strconv.Atoi(os.Args[2])
	if err != nil || mib < 1 {
		fmt.Fprintln(os.Stderr, "MIB must be a positive number")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1], mib); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// chunk is the size of each write and read.
const chunk = 1 << 20

func run(w io.Writer, path string, mib int) error {
	// The header lists every tensor's offsets, so the tensors are declared
	// first; their bytes follow, in the order of Header().Tensors.
	specs := []safetensors.TensorSpec{
		{Name: "embed.weight", DType: safetensors.BF16, Shape: []uint64{uint64(mib) * chunk / 2 / 1024, 1024}},
		{Name: "step", DType: safetensors.I64, Shape: []uint64{}},
	}
	fw, err := safetensors.CreateFile(path, specs, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	defer fw.Abort() // removes the temporary file unless Close succeeded
	buf := make([]byte, chunk)
	written := crc32.NewIEEE()
	for _, t := range fw.Header().Tensors {
		for left := t.DataOffsets[1] - t.DataOffsets[0]; left > 0; {
			n := min(left, chunk)
			fill(buf[:n], left)
			written.Write(buf[:n])
			if _, err := fw.Write(buf[:n]); err != nil {
				return err
			}
			left -= n
		}
	}
	if err := fw.Close(); err != nil { // syncs, then renames into place
		return err
	}

	// Reading back: Open maps the file, and Chunks walks a tensor's bytes
	// without copying them; Prefetch asks the kernel to read ahead.
	r, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	read := crc32.NewIEEE()
	for _, info := range r.Header().Tensors {
		t, err := r.Tensor(info.Name)
		if err != nil {
			return err
		}
		if err := r.Prefetch(info.Name); err != nil {
			return err
		}
		s, err := t.Slice() // no indices: the whole tensor
		if err != nil {
			return err
		}
		for part := range s.Chunks() {
			read.Write(part)
		}
	}
	fmt.Fprintf(w, "wrote and read %d MiB of tensors in %d KiB chunks; checksums %s\n", mib, chunk>>10, match(written.Sum32(), read.Sum32()))
	return nil
}

// fill puts non-zero bytes that depend on their position in buf.
func fill(buf []byte, seed uint64) {
	for i := range buf {
		buf[i] = byte(seed>>3) ^ byte(i*7+1)
	}
}

func match(a, b uint32) string {
	if a == b {
		return "match"
	}
	return fmt.Sprintf("differ: %08x != %08x", a, b)
}
