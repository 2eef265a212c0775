package diff_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/diff"
)

func ExamplePaths() {
	r, err := diff.Paths(context.Background(), "../testdata/models/llama", "../testdata/models/mistral")
	if err != nil {
		panic(err)
	}
	t := r.Tensors[0]
	fmt.Println(r.Equal(), len(r.Tensors), t.Name, t.Identical, t.Differing > 0)
	// Output:
	// false 30 lm_head.weight false true
}

// Compare compares any two safetensors.TensorSources, here files held in
// memory, and the metadata given.
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
	r, err := diff.Compare(context.Background(), a, b, map[string]string{"format": "pt"}, map[string]string{"format": "pt"})
	if err != nil {
		panic(err)
	}
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

// Paths compares a sharded checkpoint's metadata as a single file of the
// same model has it: the checkpoint's Metadata, its shards', without the
// index's total_size and total_parameters, which IndexMetadata holds.
func Example_checkpointMetadata() {
	dir, err := os.MkdirTemp("", "model")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for _, name := range []string{"a", "b"} {
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: safetensors.U8, Shape: []uint64{4}, Data: []byte{1, 2, 3, 4}})
	}
	// Shards of at most 4 bytes: two shards and an index.
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(4), checkpoint.FileMetadata(map[string]string{"format": "pt"})); err != nil {
		panic(err)
	}
	sh, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		panic(err)
	}
	defer sh.Close()
	fmt.Println("index:", sh.IndexMetadata())
	fmt.Println("model:", sh.Metadata())
	// A single file of the same tensors and metadata is the same model.
	file := filepath.Join(dir, "single.safetensors")
	if err := safetensors.WriteFile(file, tensors, map[string]string{"format": "pt"}); err != nil {
		panic(err)
	}
	r, err := diff.Paths(context.Background(), filepath.Join(dir, "model.safetensors.index.json"), file)
	if err != nil {
		panic(err)
	}
	fmt.Println("equal:", r.Equal())
	// Output:
	// index: map[total_parameters:8 total_size:8]
	// model: map[format:pt]
	// equal: true
}
