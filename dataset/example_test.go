package dataset_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/dataset"
)

// A batch dataset: every 2 samples make a shard whose tensors are the
// columns, stacked.
func ExampleCreate() {
	dir, err := os.MkdirTemp("", "dataset")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := dataset.Create(dir, dataset.Batch,
		[]dataset.Column{{Name: "x", DType: safetensors.BF16, Shape: []uint64{3}}},
		dataset.BatchSize(2),
		dataset.TailStrategy(dataset.TailWrite), // keep a short last shard (the default)
	)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Abort() // removes the files unless Close succeeded
	for i := range 5 {
		v := float32(i)
		if err := w.WriteFloat32s([]float32{v, v + 0.25, v + 0.5}); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	m := w.Manifest()
	fmt.Println(m.TotalSamples, "samples,", len(m.Shards), "shards, schema", m.Schema)

	d, err := dataset.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	for batch, err := range d.Batches() {
		if err != nil {
			log.Fatal(err)
		}
		vals, _ := batch[0].Float32s()
		fmt.Println(batch[0].Shape, vals)
	}
	// Output:
	// 5 samples, 3 shards, schema map[x:{BF16 [2 3]}]
	// [2 3] [0 0.25 0.5 1 1.25 1.5]
	// [2 3] [2 2.25 2.5 3 3.25 3.5]
	// [1 3] [4 4.25 4.5]
}

// A key-value dataset, read back by key.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "dataset")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := dataset.Create(dir, dataset.KeyValue, []dataset.Column{{Name: "vec", DType: safetensors.F32, Shape: []uint64{2}}}, dataset.TensorIndex())
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"alice", "bob"} {
		if err := w.WriteKVFloat32s(key, []float32{float32(len(key)), 1}); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	d, err := dataset.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	t, err := d.Tensor("alice__vec") // found through _tensor_index.parquet
	if err != nil {
		log.Fatal(err)
	}
	v, err := safetensors.Values[float32](t, nil) // a copy on every host; View would alias the mapping where it can
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Mode(), t.Name, v)
	for s, err := range d.Samples(context.Background()) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(s.Key, s.Tensors[0].Name)
	}
	// Output:
	// key-value alice__vec [5 1]
	// alice alice__vec
	// bob bob__vec
}

// A batch dataset of scalar labels, written from bytes, and read back
// into memory with the core's ReadAll.
func ExampleWriter_WriteSample() {
	dir, err := os.MkdirTemp("", "dataset")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := dataset.Create(dir, dataset.Batch, []dataset.Column{{Name: "label", DType: safetensors.U8, Shape: []uint64{}}}, dataset.BatchSize(2))
	if err != nil {
		log.Fatal(err)
	}
	for _, label := range []byte{7, 8, 9} {
		if err := w.WriteSample([]byte{label}); err != nil { // one []byte a column
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	d, err := dataset.Open(dir, dataset.ReadOptions(safetensors.ReadAll())) // read into memory, not mapped
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	for _, s := range d.Manifest().Shards {
		fmt.Println(s.Samples)
	}
	// Output:
	// 2
	// 1
}

// A key-value dataset whose names join key and column with "/": the
// writer and the reader are given the same separator.
func ExampleSeparator() {
	dir, err := os.MkdirTemp("", "dataset")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := dataset.Create(dir, dataset.KeyValue, []dataset.Column{{Name: "id", DType: safetensors.I32, Shape: []uint64{1}}}, dataset.Separator("/"))
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"user7", "user8"} {
		if err := w.WriteKV(key, []byte{key[4] - '0', 0, 0, 0}); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	d, err := dataset.Open(dir, dataset.Separator("/")) // the manifest does not record it
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	shard, err := d.Shard("user7/id")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(shard) > 0, d.Columns()[0].Name)
	// Output: true id
}

// A key-value dataset whose "tokens" column gives no shape: each key's
// tensor has a shape of its own, which the manifest's schema records.
func ExampleWriter_WriteKVTensors() {
	dir, err := os.MkdirTemp("", "dataset")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := dataset.Create(dir, dataset.KeyValue, []dataset.Column{
		{Name: "tokens", DType: safetensors.I32},                  // no shape: any shape
		{Name: "label", DType: safetensors.U8, Shape: []uint64{}}, // a scalar, always
	})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Abort() // removes the files unless Close succeeded
	for i, n := range []uint64{3, 1} {
		tokens := safetensors.Tensor{Name: "tokens", DType: safetensors.I32, Shape: []uint64{n}, Data: make([]byte, 4*n)}
		label := safetensors.Tensor{Name: "label", DType: safetensors.U8, Shape: []uint64{}, Data: []byte{byte(i)}}
		if err := w.WriteKVTensors(fmt.Sprint("doc", i), tokens, label); err != nil {
			log.Fatal(err)
		}
	}
	// A tensor that does not fit its column is refused, and nothing of
	// its sample is kept; the Writer goes on.
	bad := safetensors.Tensor{Name: "label", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{1, 2}}
	err = w.WriteKVTensors("doc9", safetensors.Tensor{Name: "tokens", DType: safetensors.I32}, bad)
	fmt.Println(errors.Is(err, dataset.ErrInvalidSample))
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	m := w.Manifest()
	for _, name := range []string{"doc0__tokens", "doc1__tokens", "doc1__label"} {
		fmt.Println(name, m.Schema[name].Shape)
	}
	fmt.Println(m.TotalSamples, "samples")
	// Output:
	// true
	// doc0__tokens [3]
	// doc1__tokens [1]
	// doc1__label []
	// 2 samples
}
