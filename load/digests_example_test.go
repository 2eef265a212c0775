package load_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
)

// A server loads a model and checks each file against its published
// SHA-256 (here computed beforehand) in the same read: HashFiles hashes
// the bytes as the Loader reads them, and DigestTensors gives each
// tensor's digest before the tensor is handed over.
func ExampleHashFiles() {
	dir, err := os.MkdirTemp("", "model")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	w := safetensors.Tensor{Name: "w", DType: safetensors.F32, Shape: []uint64{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	if err := safetensors.WriteFile(path, []safetensors.Tensor{w}, nil); err != nil {
		log.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	published := sha256.Sum256(raw) // as the Hub or an LFS pointer gives it

	ctx := context.Background()
	c, err := checkpoint.Open(ctx, path)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var d load.Digests
	for t, err := range (&load.Loader{}).Load(ctx, c, load.HashFiles(&d), load.DigestTensors(&d)) {
		if err != nil {
			log.Fatal(err)
		}
		digest, _ := d.Tensor(t.Name) // there before the tensor is handed over
		fmt.Println(t.Name, digest)
	}
	sum, _ := d.File(path)
	fmt.Println("file as published:", sum == published)
	// Output:
	// w bedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa
	// file as published: true
}
