package load_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
)

// object is a load.Source that the package does not know: the tensors of
// a file whose header was read elsewhere, and its data section behind an
// io.ReaderAt, such as an object in a store.
type object struct {
	header *safetensors.Header
	data   *bytes.Reader
}

var _ load.Source = object{}

// DataSections describes the object to a Loader: it makes object a
// load.Source.
func (o object) DataSections() ([]safetensors.DataSection, error) {
	return []safetensors.DataSection{{Name: "store://bucket/model.safetensors", Data: o.data, Tensors: o.header.Tensors}}, nil
}

// A caller describes any random-access source with safetensors.DataSection
// values, and a Loader reads it as it reads files.
func ExampleSource() {
	var file bytes.Buffer
	err := safetensors.Write(&file, []safetensors.Tensor{
		{Name: "a", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{1, 2}},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{3}, Data: []byte{3, 4, 5}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	h, err := safetensors.ReadHeader(bytes.NewReader(file.Bytes()))
	if err != nil {
		log.Fatal(err)
	}
	src := object{header: h, data: bytes.NewReader(file.Bytes()[h.DataOffset():])}

	var loader load.Loader
	for t, err := range loader.Load(context.Background(), src) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(t.Name, t.Data)
	}
	// Unordered output:
	// a [1 2]
	// b [3 4 5]
}

// A Loader reads a checkpoint with several goroutines into memory it
// reuses, and hands each tensor over once its bytes have arrived.
func ExampleLoader_Load() {
	dir, err := os.MkdirTemp("", "checkpoint")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for i := range 4 {
		tensors = append(tensors, safetensors.Tensor{
			Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.U8, Shape: []uint64{3}, Data: []byte{byte(i), 1, 2},
		})
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(6)); err != nil {
		log.Fatal(err)
	}
	ckpt, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()

	// At most 1 MiB of tensors in memory at once, read around the page
	// cache.
	loader := &load.Loader{MemoryLimit: 1 << 20, NoCache: true}
	sum := 0
	for t, err := range loader.Load(context.Background(), ckpt) {
		if err != nil {
			log.Fatal(err)
		}
		sum += int(t.Data[0]) // t.Data is valid until the next iteration
	}
	fmt.Println(sum)
	// Output:
	// 6
}
