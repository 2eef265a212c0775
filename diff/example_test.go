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
	fmt.Println(r.Equal(), len(r.Tensors), t.Name, t.Verdict, t.Differing > 0)
	// Output:
	// false 30 lm_head.weight different true
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
		fmt.Printf("%s: %v, %d of %d values differ, max abs %g, max rel %g\n", t.Name, t.Verdict, t.Differing, t.Values, t.MaxAbs, t.MaxRel)
	}
	fmt.Println("equal:", r.Equal())
	// Output:
	// only in b: [bias]
	// w: different, 1 of 3 values differ, max abs 1, max rel 0.2
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

// Tolerance compares a model with its conversion to BF16: exactly, the
// values differ; within BF16's rounding (a relative error of at most
// 2^-8 of the BF16 value), they are close.
func ExampleTolerance() {
	values := []float32{0.1, -0.2, 0.3, 1e-3, 4}
	file := func(dtype safetensors.DType) *safetensors.Reader {
		w, err := safetensors.TensorFromFloat32s("w", dtype, []uint64{uint64(len(values))}, values, safetensors.RoundNearestEven)
		if err != nil {
			panic(err)
		}
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, []safetensors.Tensor{w}, nil); err != nil {
			panic(err)
		}
		r, err := safetensors.NewReader(buf.Bytes())
		if err != nil {
			panic(err)
		}
		return r
	}
	a, b := file(safetensors.F32), file(safetensors.BF16)
	for _, opts := range [][]diff.Option{nil, {diff.Tolerance(0, 1.0/256)}} {
		r, err := diff.Compare(context.Background(), a, b, nil, nil, opts...)
		if err != nil {
			panic(err)
		}
		t := r.Tensors[0]
		fmt.Printf("%v against %v: %v, %d of %d values beyond the tolerance, max rel diff %.2g; equal: %v\n",
			t.DTypeA, t.DTypeB, t.Verdict, t.Differing, t.Values, t.MaxRel, r.Equal())
	}
	// Output:
	// F32 against BF16: different, 4 of 5 values beyond the tolerance, max rel diff 0.0026; equal: false
	// F32 against BF16: close, 0 of 5 values beyond the tolerance, max rel diff 0.0026; equal: true
}
