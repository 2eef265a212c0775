package check_test

import (
	"fmt"

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
