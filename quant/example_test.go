package quant_test

import (
	"fmt"

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
