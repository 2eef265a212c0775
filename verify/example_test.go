package verify_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/verify"
)

// Verify a model's folder: with no cache blob, server digest, git commit
// or signature to check its files against, only its structure is known
// good, which Report.Err says.
func ExampleModel() {
	dir, _ := os.MkdirTemp("", "model")
	defer os.RemoveAll(dir)
	safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Tensor{{Name: "w", DType: safetensors.F32, Shape: []uint64{2}, Data: make([]byte, 8)}}, nil)

	r, err := verify.Model(context.Background(), dir)
	if err != nil {
		fmt.Println(err) // the model could not be read
		return
	}
	for _, f := range r.Files {
		fmt.Println(f.Name, f.Status(), f.SHA256) // as sha256sum prints it
	}
	fmt.Println(r.Err())
	// Output:
	// model.safetensors unchecked 92da6b40730224cf538a6874cca076624e1ddfd20c256e016e5cae9649b8274c
	// verify: no reference to check against: model.safetensors: only the structure was checked (no cache blob, LFS pointer, server digest or signature)
}
