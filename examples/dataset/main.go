// Command dataset writes a small tensor dataset in the safetensors-spark
// layout, the way a Go data producer feeds a Spark or PyTorch pipeline, and
// reads it back: samples in key-value mode (one embedding and one label per
// user), with the Parquet index that lets a reader find a key's shard.
//
//	go run ./examples/dataset out-dir
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/dataset"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dataset OUTDIR")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(w io.Writer, dir string) error {
	cols := []dataset.Column{
		{Name: "embedding", DType: safetensors.BF16, Shape: []uint64{4}},
		{Name: "label", DType: safetensors.I64},
	}
	dw, err := dataset.Create(dir, dataset.KeyValue, cols, dataset.TensorIndex())
	if err != nil {
		return err
	}
	defer dw.Abort() // removes everything unless Close succeeded
	for i := range 5 {
		emb := []float32{float32(i), float32(math.Sqrt(float64(i))), -1, 0.5}
		// WriteKV takes each column's little-endian bytes as they are
		// (WriteKVFloat32s encodes float32 values as the connector does,
		// for datasets whose columns are all floats).
		embBytes := safetensors.F32sToBF16Bytes(nil, emb, safetensors.Truncate)
		label := binary.LittleEndian.AppendUint64(nil, uint64(i%2))
		if err := dw.WriteKV(fmt.Sprintf("user%d", i), embBytes, label); err != nil {
			return err
		}
	}
	if err := dw.Close(); err != nil {
		return err
	}
	m := dw.Manifest()
	fmt.Fprintf(w, "wrote %d samples in %d shard(s), %d bytes\n", m.TotalSamples, len(m.Shards), m.TotalBytes)

	// Open checks the manifest against every shard's header. Samples are
	// copies, the caller's to keep.
	ds, err := dataset.Open(dir)
	if err != nil {
		return err
	}
	defer ds.Close()
	for s, err := range ds.Samples(context.Background()) {
		if err != nil {
			return err
		}
		emb, err := s.Tensors[0].Float32s()
		if err != nil {
			return err
		}
		label, err := safetensors.Values[int64](s.Tensors[1], nil)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: embedding %.3g label %d\n", s.Key, emb, label[0])
	}
	// A lookup by key reads the Parquet index, then only the shard that
	// holds the tensor.
	t, err := ds.Tensor("user3__embedding")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "user3__embedding: %v %v, % x\n", t.DType, t.Shape, t.Data)
	return nil
}
