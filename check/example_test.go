package check_test

import (
	"bytes"
	"fmt"
	"math"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/check"
)

func ExampleModel() {
	// A model directory: its weights and the config.json beside them.
	r, err := check.Model("../testdata/models/llama", check.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d tensors, %s configuration checked, %d errors, %d warnings\n", r.Tensors, r.Family, r.Errors(), r.Warnings())
	for _, f := range r.Findings {
		fmt.Println(f)
	}
	// Output:
	// 30 tensors, llama configuration checked, 0 errors, 0 warnings
}

// Run checks tensors from any Source, here a file held in memory, with a
// configuration given as bytes.
func ExampleRun() {
	nan := float32(math.NaN())
	w, err := safetensors.TensorFromFloat32s("model.layers.0.mlp.up_proj.weight", safetensors.F32, []uint64{2, 2}, []float32{1, nan, 3, nan}, safetensors.RoundNearestEven)
	if err != nil {
		panic(err)
	}
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{w}, nil); err != nil {
		panic(err)
	}
	src, err := safetensors.NewReader(file.Bytes())
	if err != nil {
		panic(err)
	}
	r, err := check.Run(src, check.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Errors(), "error(s)")
	for _, f := range r.Findings {
		fmt.Println(f.Kind, f.Count, *f.First)
	}
	// Output:
	// 1 error(s)
	// nan 2 1
}
