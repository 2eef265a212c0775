package quant_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/quant"
)

func ExampleQuantize() {
	x := []float32{-0.5, -0.25, 0.1, 0.5}
	q, scale, err := quant.Quantize(nil, x)
	if err != nil {
		panic(err)
	}
	fmt.Println(q, scale)
	fmt.Println(quant.Dequantize(nil, q, scale))
	// Output:
	// [-127 -64 25 127] 0.003937008
	// [-0.5 -0.2519685 0.098425195 0.5]
}

func ExampleCompressWeight() {
	// A [2, 3] BF16 weight: one scale per row, 1/127.5 rounded to BF16 for
	// the first and BF16's epsilon for the row of zeros.
	w, err := safetensors.TensorFromFloat32s("proj.weight", safetensors.BF16, []uint64{2, 3},
		[]float32{1, -0.5, 0.25, 0, 0, 0}, safetensors.RoundNearestEven)
	if err != nil {
		panic(err)
	}
	q, scale, err := quant.CompressWeight(w, quant.PerChannel)
	if err != nil {
		panic(err)
	}
	scales, _ := scale.Float32s()
	values, _ := safetensors.Values[int8](q, nil)
	fmt.Println(q.Name, q.DType, values)
	fmt.Println(scale.Name, scale.DType, scale.Shape, scales)
	// Output:
	// proj.weight I8 [127 -64 32 0 0 0]
	// proj.weight_scale BF16 [2 1] [0.007873535 0.0078125]
}

func ExampleWriteModel() {
	src, err := os.MkdirTemp("", "model")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(src)
	// A model directory: one Linear weight, one norm, and its config.json.
	up, _ := safetensors.TensorFromFloat32s("model.layers.0.mlp.up_proj.weight", safetensors.BF16, []uint64{2, 2},
		[]float32{1, -2, 0.5, 4}, safetensors.RoundNearestEven)
	norm, _ := safetensors.TensorFromFloat32s("model.norm.weight", safetensors.BF16, []uint64{2},
		[]float32{1, 1}, safetensors.RoundNearestEven)
	if err := safetensors.WriteFile(filepath.Join(src, "model.safetensors"), []safetensors.Tensor{up, norm}, nil); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(src, "config.json"), []byte(`{"model_type": "llama"}`), 0o644); err != nil {
		panic(err)
	}
	dst := src + "-w8a8"
	defer os.RemoveAll(dst)
	sum, err := quant.WriteModel(context.Background(), src, dst, quant.PerChannel)
	if err != nil {
		panic(err)
	}
	fmt.Println("quantized:", sum.Quantized)
	fmt.Println("kept:", sum.Kept)
	r, err := safetensors.Open(filepath.Join(dst, "model.safetensors"))
	if err != nil {
		panic(err)
	}
	defer r.Close()
	q, _ := r.Tensor("model.layers.0.mlp.up_proj.weight")
	w, _ := quant.DecompressWeight(q, must(r.Tensor("model.layers.0.mlp.up_proj.weight_scale")))
	values, _ := w.Float32s()
	fmt.Println(q.DType, values) // within scale/2 of the weights
	// Output:
	// quantized: [model.layers.0.mlp.up_proj.weight]
	// kept: [model.norm.weight]
	// I8 [1.0078125 -2 0.50390625 4]
}

func must(t safetensors.Tensor, err error) safetensors.Tensor {
	if err != nil {
		panic(err)
	}
	return t
}
