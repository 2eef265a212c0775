package checkpoint_test

// Examples of sharded checkpoints that lived in the root package's
// example_test.go before checkpoints moved here.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing/fstest"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// Write splits a checkpoint as transformers does; Open reads it back as
// one.
func ExampleOpen_index() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for i := range 3 {
		tensors = append(tensors, safetensors.Tensor{
			Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.F32, Shape: []uint64{64}, Data: make([]byte, 256),
		})
	}
	// At most 512 bytes of tensors a shard: two shards.
	err = checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(512), checkpoint.FileMetadata(map[string]string{"format": "pt"}))
	if err != nil {
		log.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(index))

	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	shard, _ := ckpt.File("layers.2.weight")
	fmt.Println(ckpt.Names(), shard)
	// Output:
	// {
	//   "metadata": {
	//     "total_parameters": 192,
	//     "total_size": 768
	//   },
	//   "weight_map": {
	//     "layers.0.weight": "model-00001-of-00002.safetensors",
	//     "layers.1.weight": "model-00001-of-00002.safetensors",
	//     "layers.2.weight": "model-00002-of-00002.safetensors"
	//   }
	// }
	// [layers.0.weight layers.1.weight layers.2.weight] model-00002-of-00002.safetensors
}

// Open reads a checkpoint whose files are not on disk by its URL, with
// range requests: here the files are held in memory and served by a test
// server, elsewhere by the Hugging Face Hub or an object store. Only the
// headers are read when it opens, and each tensor when it is asked for.
func ExampleOpen_remote() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tensors := []safetensors.Tensor{
		{Name: "a", DType: safetensors.U8, Shape: []uint64{3}, Data: []byte{1, 2, 3}},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{4, 5}},
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(3)); err != nil {
		log.Fatal(err)
	}
	files := fstest.MapFS{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			log.Fatal(err)
		}
		files[e.Name()] = &fstest.MapFile{Data: data}
	}
	srv := httptest.NewServer(http.FileServerFS(files))
	defer srv.Close()

	ckpt, err := checkpoint.Open(context.Background(), srv.URL+"/model.safetensors.index.json")
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	b, err := ckpt.Tensor("b")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ckpt.Files(), ckpt.IndexMetadata(), b.Data)
	// Output:
	// [model-00001-of-00002.safetensors model-00002-of-00002.safetensors] map[total_parameters:5 total_size:5] [4 5]
}

// Create streams tensors too large for memory into shards, in any order,
// and writes the index when all have arrived.
func ExampleCreate_streaming() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	specs := []safetensors.TensorSpec{
		{Name: "embed", DType: safetensors.BF16, Shape: []uint64{1024, 64}}, // 128 KiB
		{Name: "head", DType: safetensors.BF16, Shape: []uint64{1024, 64}},
	}
	w, err := checkpoint.Create(dir, specs, checkpoint.MaxShardSize(200<<10))
	if err != nil {
		log.Fatal(err)
	}
	defer w.Abort()
	for _, s := range []string{"head", "embed"} {
		shard, _ := w.File(s)
		fmt.Println(s, "→", shard)
		if err := w.WriteTensor(s, bytes.NewReader(make([]byte, 128<<10))); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// head → model-00002-of-00002.safetensors
	// embed → model-00001-of-00002.safetensors
}

// A shard may hold a tensor that the index does not list: loaders ignore
// it, and so does the checkpoint, whose Unlisted names it. Strict refuses
// such a checkpoint.
func ExampleCheckpoint_Unlisted_strict() {
	dir, err := os.MkdirTemp("", "unlisted")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for _, name := range []string{"a", "b", "c"} {
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{1, 2}})
	}
	// Two shards: a and b in the first, c in the second.
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(4)); err != nil {
		log.Fatal(err)
	}
	// An index that leaves b out.
	index := `{"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}}`
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(index), 0o644); err != nil {
		log.Fatal(err)
	}

	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	fmt.Println(ckpt.Names(), ckpt.Unlisted())

	_, err = checkpoint.Open(context.Background(), dir, checkpoint.Strict())
	fmt.Println(errors.Is(err, checkpoint.ErrUnlistedTensor))
	// Output:
	// [a c] [b]
	// true
}
