package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// Quantization says how a model's weights are stored: here a tiny
// checkpoint in DeepSeek-V3's FP8 layout, F8_E4M3 weights beside F32
// scales of 128x128 blocks.
func ExampleCheckpoint_Quantization() {
	ctx := context.Background()
	c, err := checkpoint.Open(ctx, filepath.Join("..", "testdata", "quantized", "fp8"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	q, err := c.Quantization(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, blocks of %v, %.2f bits per parameter\n", q.Method, q.BlockSize, q.BitsPerParameter())
	for _, w := range q.Weights {
		fmt.Println(w.Name, w.Shape, w.Tensors())
	}
	// Output:
	// fp8, blocks of [128 128], 8.00 bits per parameter
	// layers.0.proj.weight [150 300] [layers.0.proj.weight layers.0.proj.weight_scale_inv]
	// layers.1.proj.weight [256 128] [layers.1.proj.weight layers.1.proj.weight_scale_inv]
	// layers.2.proj.weight [130 7] [layers.2.proj.weight layers.2.proj.weight_scale_inv]
}

// Convert refuses a quantized model, rather than recast its weights or
// their scales; with Dequantize, it writes it as a plain model.
func ExampleDequantize() {
	dir, err := os.MkdirTemp("", "dequantize")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join("..", "testdata", "quantized", "mxfp4")
	_, err = checkpoint.Convert(context.Background(), src, filepath.Join(dir, "bf16"), safetensors.BF16)
	fmt.Println(errors.Is(err, checkpoint.ErrQuantized))
	c, err := checkpoint.Convert(context.Background(), src, filepath.Join(dir, "bf16"), safetensors.BF16, checkpoint.Dequantize())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d weights dequantized, %d tensors written\n", c.Dequantized, c.Tensors)
	// Output:
	// true
	// 2 weights dequantized, 4 tensors written
}
