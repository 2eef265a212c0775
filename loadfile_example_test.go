package safetensors_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/safetensors-go/safetensors"
)

// object is a LoadSource that the package does not know: the tensors of a
// file whose header was read elsewhere, and its data section behind an
// io.ReaderAt, such as an object in a store.
type object struct {
	header *safetensors.Header
	data   *bytes.Reader
}

var _ safetensors.LoadSource = object{}

// LoadFiles describes the object to a Loader: it makes object a LoadSource.
func (o object) LoadFiles() ([]safetensors.LoadFile, error) {
	return []safetensors.LoadFile{{Name: "store://bucket/model.safetensors", Data: o.data, Tensors: o.header.Tensors}}, nil
}

// A caller describes any random-access source with LoadFiles, and a Loader
// reads it as it reads files.
func ExampleLoadFile() {
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

	var loader safetensors.Loader
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
