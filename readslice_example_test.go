package safetensors_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/safetensors-go/safetensors"
)

// One tensor-parallel rank's columns of a matrix, read into a buffer the
// caller owns: the same call reads a file Open mapped, an io.ReaderAt, or a
// remote file of the remote package.
func ExampleReader_ReadSlice() {
	// A 4x6 U8 matrix holding 0 to 23, in a file in memory.
	m := safetensors.Tensor{Name: "w", DType: safetensors.U8, Shape: []uint64{4, 6}, Data: make([]byte, 24)}
	for i := range m.Data {
		m.Data[i] = byte(i)
	}
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{m}, nil); err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReaderAt(bytes.NewReader(file.Bytes()), int64(file.Len()))
	if err != nil {
		log.Fatal(err)
	}

	// Rank 1 of 2 takes columns 3 to 5: w[:, 3:6].
	sel := []safetensors.Selector{safetensors.All(), safetensors.Range(3, 6)}
	info, err := r.Info("w")
	if err != nil {
		log.Fatal(err)
	}
	part, err := info.Slice(sel...)
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, part.DataLen()) // reused from tensor to tensor
	n, err := r.ReadSlice(context.Background(), "w", buf, sel...)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(part.Shape, buf[:n])

	// Every other row, from the end of each: w[::2, -1].
	n, err = r.ReadSlice(context.Background(), "w", buf, safetensors.RangeStep(0, 4, 2), safetensors.AtFromEnd(1))
	fmt.Println(buf[:n], err)

	// w[..., 0]: the first column, whatever the rank.
	n, err = r.ReadSlice(context.Background(), "w", buf, safetensors.Ellipsis(), safetensors.At(0))
	fmt.Println(buf[:n], err)
	// Output:
	// [4 3] [3 4 5 9 10 11 15 16 17 21 22 23]
	// [5 17] <nil>
	// [0 6 12 18] <nil>
}
