package diff_test

import (
	"bytes"
	"fmt"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/diff"
)

func ExamplePaths() {
	r, err := diff.Paths("../testdata/models/llama", "../testdata/models/mistral")
	if err != nil {
		panic(err)
	}
	t := r.Tensors[0]
	fmt.Println(r.Equal(), len(r.Tensors), t.Name, t.Identical, t.Differing > 0)
	// Output:
	// false 30 lm_head.weight false true
}

// Compare compares any two Sources, here files held in memory, and the
// metadata given.
func ExampleCompare() {
	open := func(values []float32, extra ...safetensors.Tensor) *safetensors.Reader {
		w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{uint64(len(values))}, values, safetensors.RoundNearestEven)
		if err != nil {
			panic(err)
		}
		var file bytes.Buffer
		if err := safetensors.Write(&file, append([]safetensors.Tensor{w}, extra...), nil); err != nil {
			panic(err)
		}
		r, err := safetensors.NewReader(file.Bytes())
		if err != nil {
			panic(err)
		}
		return r
	}
	bias := safetensors.Tensor{Name: "bias", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{7}}
	a := open([]float32{1, 2, 4})
	b := open([]float32{1, 2, 5}, bias)
	r := diff.Compare(a, b, map[string]string{"format": "pt"}, map[string]string{"format": "pt"})
	fmt.Println("only in b:", r.OnlyB)
	for _, t := range r.Tensors {
		fmt.Printf("%s: identical %v, %d differing, max abs %g, max rel %g\n", t.Name, t.Identical, t.Differing, t.MaxAbs, t.MaxRel)
	}
	fmt.Println("equal:", r.Equal())
	// Output:
	// only in b: [bias]
	// w: identical false, 1 differing, max abs 1, max rel 0.2
	// equal: false
}
