package safetensors_test

// The programs of the README's tasks: the body of each Example below is the
// body of main in the README, word for word, which TestREADME checks. They
// run from the repository's root, as the README's commands do.

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/check"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
)

// Read a model: checkpoint.Open takes every form a model comes in.
func Example_readModel() {
	// A file, a sharded checkpoint's index, a model's folder as any library
	// saves it, a Hugging Face cache snapshot, or an https:// URL of these.
	ckpt, err := checkpoint.Open(context.Background(), "testdata/tiny-llama.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()

	t, err := ckpt.Tensor("model.norm.weight") // t.Data: the file's bytes, not a copy
	if err != nil {
		log.Fatal(err)
	}
	vals, err := t.Float32s() // any float dtype (F16, BF16, F8, ...) as float32
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ckpt.Names()), "tensors;", t.Name, t.DType, t.Shape, vals[:3])

	emb, err := ckpt.Tensor("model.embed_tokens.weight")
	if err != nil {
		log.Fatal(err)
	}
	row, err := emb.Slice(safetensors.At(7)) // emb[7]
	if err != nil {
		log.Fatal(err)
	}
	rowVals, err := row.Float32s()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %d elements: %.4f ...\n", row.Shape, row.NumElements(), rowVals[:3])
	// Output:
	// 39 tensors; model.norm.weight F32 [64] [1 1 1]
	// [64] 64 elements: [-0.0227 -0.0013 0.0063] ...
}

// Write a model: tensors built from values, written as one file.
func Example_writeModel() {
	dir, err := os.MkdirTemp("", "model")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := safetensors.TensorFromFloat32s("w", safetensors.BF16, []uint64{2, 3},
		[]float32{1, 2, 3, 4, 5, 6}, safetensors.RoundNearestEven)
	if err != nil {
		log.Fatal(err)
	}
	ids := safetensors.Tensor{Name: "ids", DType: safetensors.U8, Shape: []uint64{4}, Data: []byte{1, 2, 3, 4}}
	path := filepath.Join(dir, "model.safetensors")
	err = safetensors.WriteFile(path, []safetensors.Tensor{w, ids}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}

	r, err := safetensors.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Names(), r.Metadata())
	// Output: [ids w] map[format:pt]
}

// Load a model fast: tensors stream through memory of a bounded size.
func Example_loadModel() {
	ctx := context.Background()
	ckpt, err := checkpoint.Open(ctx, "testdata/tiny-llama.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()

	loader := &load.Loader{MemoryLimit: 64 << 20} // reads into at most 64 MiB of memory
	tensors, bytes := 0, 0
	for t, err := range loader.Load(ctx, ckpt) {
		if err != nil {
			log.Fatal(err)
		}
		tensors++ // t.Data is valid until the next iteration: copy it to the device here
		bytes += len(t.Data)
	}
	fmt.Println(tensors, "tensors,", bytes, "bytes")
	// Output: 39 tensors, 1001728 bytes
}

// Check a model: NaN, Inf, zeroed tensors, and the weights against the
// model's config.json.
func Example_checkModel() {
	report, err := check.Model(context.Background(), "testdata/models/llama")
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range report.Findings {
		fmt.Println(f)
	}
	fmt.Println(report.Tensors, "tensors,", report.Family, "configuration:", report.Errors(), "errors,", report.Warnings(), "warnings")
	// Output: 30 tensors, llama configuration: 0 errors, 0 warnings
}

// Convert a model: its float tensors cast to BF16, the others kept.
func Example_convertModel() {
	dir, err := os.MkdirTemp("", "bf16")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	dst := filepath.Join(dir, "tiny-llama.safetensors") // a folder gives a folder
	c, err := checkpoint.Convert(context.Background(), "testdata/tiny-llama.safetensors", dst, safetensors.BF16)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Converted, "of", c.Tensors, "tensors converted,", c.Bytes, "bytes")
	// Output: 39 of 39 tensors converted, 504912 bytes
}
