// Command write builds tensors from float32 values, as a training or
// quantization program would, and writes them to a safetensors file: the
// weights in BF16, rounded to nearest even as PyTorch does, a bias in F32,
// and metadata.
//
//	go run ./examples/write out.safetensors
package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/safetensors-go/safetensors"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: write OUT")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(w io.Writer, path string) error {
	const in, out = 8, 4
	weights := make([]float32, out*in)
	for i := range weights {
		weights[i] = float32(math.Sin(float64(i))) / in
	}
	bias := []float32{0.5, -0.25, 0, 1}

	weight, err := safetensors.TensorFromFloat32s("linear.weight", safetensors.BF16, []uint64{out, in}, weights, safetensors.RoundNearestEven)
	if err != nil {
		return err
	}
	b, err := safetensors.TensorFromFloat32s("linear.bias", safetensors.F32, []uint64{out}, bias, safetensors.RoundNearestEven)
	if err != nil {
		return err
	}
	// WriteFile lays the tensors out as the reference writer does, and
	// replaces the file atomically: a reader never sees half a file.
	if err := safetensors.WriteFile(path, []safetensors.Tensor{weight, b}, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s: 2 tensors, %d bytes\n", path, info.Size())
	return nil
}
