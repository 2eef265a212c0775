// Command float32 reads tensors of a safetensors file as float32 values,
// whatever their dtype (F32, F16, BF16, F64, F8, integers), and prints the
// first few with the tensor's statistics.
//
//	go run ./examples/float32 testdata/tiny-llama.safetensors model.norm.weight lm_head.weight
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/safetensors-go/safetensors"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: float32 FILE TENSOR...")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1], os.Args[2:]...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(w io.Writer, path string, names ...string) error {
	// Open maps the file: it reads and checks the header, and the tensors'
	// bytes are read from the page cache only when they are touched.
	r, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, name := range names {
		t, err := r.Tensor(name)
		if err != nil {
			return err
		}
		// For an F32 tensor, View gives the values without a copy; Float32s
		// decodes any real dtype into a new slice.
		vals, err := safetensors.View[float32](t)
		if err != nil {
			if vals, err = t.Float32s(); err != nil {
				return err
			}
		}
		s, err := t.Stats()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %v %v: %.4f ...\n", t.Name, t.DType, t.Shape, vals[:min(4, len(vals))])
		fmt.Fprintf(w, "  mean %.5f, std %.5f, min %.5f, max %.5f\n", s.Mean, s.StdDev, s.Min, s.Max)
	}
	return nil
}
