package diff_test

import (
	"fmt"

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
