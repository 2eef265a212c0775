package safetensors_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log"

	"github.com/safetensors-go/safetensors"
)

// TensorReader streams a tensor's bytes, here into a hash, without holding
// the whole tensor in memory: the way to read a tensor larger than
// MaxTensorAlloc through NewReaderAt.
func ExampleReader_TensorReader() {
	var file bytes.Buffer
	err := safetensors.Write(&file, []safetensors.Tensor{
		{Name: "w", DType: safetensors.U8, Shape: []uint64{4}, Data: []byte{1, 2, 3, 4}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReaderAt(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	sr, err := r.TensorReader("w")
	if err != nil {
		log.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, sr); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes, sha256 %x\n", sr.Size(), h.Sum(nil)[:4])
	// Output: 4 bytes, sha256 9f64a747
}
