package safetensors_test

import (
	"fmt"

	"github.com/safetensors-go/safetensors"
)

// A tensor's digest depends on its name, dtype, shape and bytes alone, not
// on the file that holds it.
func ExampleTensor_Digest() {
	t := safetensors.Tensor{Name: "w", DType: safetensors.F32, Shape: []uint64{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	fmt.Println(t.Digest())
	// Output: bedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa
}

// A TensorHash computes the same digest from a tensor's bytes written in
// pieces, as they are read.
func ExampleNewTensorHash() {
	h := safetensors.NewTensorHash("w", safetensors.F32, []uint64{2})
	h.Write([]byte{1, 2, 3})
	h.Write([]byte{4, 5, 6, 7, 8})
	fmt.Println(h.Digest())
	// Output: bedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa
}
