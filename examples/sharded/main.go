// Command sharded splits a safetensors file into a sharded checkpoint, as
// transformers' save_pretrained does for large models (shards of at most a
// given size and a model.safetensors.index.json), then opens the checkpoint
// as one and reads a tensor from it. OUTDIR is created if it does not
// exist.
//
//	go run ./examples/sharded testdata/tiny-llama.safetensors out-dir 300000
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: sharded IN OUTDIR MAX_SHARD_BYTES")
		os.Exit(2)
	}
	maxSize, err := strconv.ParseInt(os.Args[3], 10, 64)
	if err != nil || maxSize <= 0 {
		fmt.Fprintln(os.Stderr, "MAX_SHARD_BYTES must be a positive number")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1], os.Args[2], maxSize); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(w io.Writer, in, dir string, maxSize int64) error {
	src, err := safetensors.Open(in)
	if err != nil {
		return err
	}
	defer src.Close()

	// The shards are written with temporary names; Close renames them into
	// place and writes the index last. Tensors stream from the source's
	// mapping to the shards; WriteTensor takes any io.Reader, in any order.
	h := src.Header()
	specs := make([]safetensors.TensorSpec, len(h.Tensors))
	for i, t := range h.Tensors {
		specs[i] = safetensors.TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	sw, err := checkpoint.Create(dir, specs, checkpoint.MaxShardSize(maxSize), checkpoint.FileMetadata(src.Metadata()))
	if err != nil {
		return err
	}
	defer sw.Abort() // does nothing once Close has succeeded
	for _, spec := range specs {
		t, err := src.Tensor(spec.Name)
		if err != nil {
			return err
		}
		if err := sw.WriteTensor(spec.Name, bytes.NewReader(t.Data)); err != nil {
			return err
		}
	}
	if err := sw.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %d shards: %v\n", len(sw.Files()), sw.Files())

	// Open finds the checkpoint in the directory as transformers does,
	// checks the index against every shard and reads them as one; given a
	// directory holding a single model.safetensors, it reads that.
	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		return err
	}
	defer ckpt.Close()
	const name = "lm_head.weight"
	shard, err := ckpt.File(name)
	if err != nil {
		return err
	}
	t, err := ckpt.Tensor(name)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d tensors; %s %v %v is in %s\n", len(ckpt.Names()), t.Name, t.DType, t.Shape, shard)
	return nil
}
