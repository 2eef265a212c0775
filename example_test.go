package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/safetensors-go/safetensors"
)

// float32Bytes encodes values as the little-endian bytes of an F32 tensor.
func float32Bytes(values ...float32) []byte {
	b := make([]byte, 0, 4*len(values))
	for _, v := range values {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func ExampleNewReader() {
	data, err := os.ReadFile("testdata/conformance/valid/metadata_present.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReader(data)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for _, name := range r.Names() {
		t, err := r.Tensor(name)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(t.Name, t.DType, t.Shape, len(t.Data), "bytes")
	}
	fmt.Println(r.Metadata()["format"])
	// Output:
	// b F32 [2] 8 bytes
	// w F32 [2 2] 16 bytes
	// pt
}

func ExampleWrite() {
	tensors := []safetensors.Tensor{
		{Name: "weight", DType: safetensors.F32, Shape: []uint64{2, 2}, Data: float32Bytes(1, 2, 3, 4)},
		{Name: "bias", DType: safetensors.F32, Shape: []uint64{2}, Data: float32Bytes(0.5, -0.5)},
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		log.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(buf.Bytes())
	fmt.Printf("%d bytes; header: %s\n", buf.Len(), buf.Bytes()[8:8+n])
	// Output:
	// 184 bytes; header: {"__metadata__":{"format":"pt"},"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}}
}

func ExampleReader_Tensor() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, []safetensors.Tensor{
		{Name: "weight", DType: safetensors.F32, Shape: []uint64{3}, Data: float32Bytes(1.5, 2, -3)},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReader(buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	t, err := r.Tensor("weight")
	if err != nil {
		log.Fatal(err)
	}
	// t.Data aliases buf's bytes: decode it in place.
	for i := 0; i < len(t.Data); i += 4 {
		fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:])))
	}
	_, err = r.Tensor("bias")
	fmt.Println(errors.Is(err, safetensors.ErrTensorNotFound))
	// Output:
	// 1.5
	// 2
	// -3
	// true
}

func ExampleReader_Header() {
	data, err := os.ReadFile("testdata/conformance/valid/metadata_present.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReader(data)
	if err != nil {
		log.Fatal(err)
	}
	h := r.Header()
	for _, t := range h.Tensors { // in file order
		fmt.Println(t.Name, t.DType, t.Shape, t.DataOffsets)
	}
	fmt.Println("data section at byte", h.DataOffset(), "of", h.DataLen(), "bytes")
	// Output:
	// b F32 [2] [0 8]
	// w F32 [2 2] [8 24]
	// data section at byte 184 of 24 bytes
}

func ExampleReadHeader() {
	f, err := os.Open("testdata/conformance/valid/metadata_present.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	h, err := safetensors.ReadHeader(f) // reads 184 bytes, not the data
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(h.Tensors), "tensors,", h.DataLen(), "bytes of data")
	// Output:
	// 2 tensors, 24 bytes of data
}

func ExampleWriteFile() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	err = safetensors.WriteFile(path, []safetensors.Tensor{
		{Name: "mask", DType: safetensors.BOOL, Shape: []uint64{4}, Data: []byte{1, 0, 0, 1}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Size())
	// Output:
	// 76
}

// The errors name the reference's verdict, the tensor and the values involved.
func Example_errors() {
	header := `{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`
	bad := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	bad = append(append(bad, header...), "0123456789ab"...)
	_, err := safetensors.NewReader(bad)
	fmt.Println(errors.Is(err, safetensors.ErrSizeMismatch))
	var te *safetensors.TensorError
	if errors.As(err, &te) {
		fmt.Println("tensor:", te.Name)
	}
	fmt.Println(err)
	// Output:
	// true
	// tensor: w
	// safetensors: tensor "w": byte size does not match shape and dtype: data_offsets [0, 12] hold 12 bytes, shape [2 2] of F32 needs 16
}

func ExampleHeaderError() {
	header := `{"a":1}`
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	_, err := safetensors.NewReader(append(data, header...))
	var he *safetensors.HeaderError
	if errors.As(err, &he) {
		fmt.Println(he.Offset, he.Msg)
	}
	fmt.Println(errors.Is(err, safetensors.ErrInvalidHeader))
	// Output:
	// 5 tensor entry is not an object
	// true
}

func ExampleStrict() {
	// The same tensor twice: the reference keeps the last entry.
	header := `{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	data = append(append(data, header...), 7)

	_, err := safetensors.NewReader(data)
	fmt.Println("default:", err)
	_, err = safetensors.NewReader(data, safetensors.Strict())
	fmt.Println("strict:", err)
	// Output:
	// default: <nil>
	// strict: safetensors: tensor "x": invalid JSON header: duplicate tensor name (strict)
}

func ExampleParseDType() {
	d, err := safetensors.ParseDType("BF16")
	fmt.Println(d, d.Bits(), err)
	_, err = safetensors.ParseDType("bf16")
	fmt.Println(err)
	// Output:
	// BF16 16 <nil>
	// safetensors: unknown dtype "bf16"
}

func ExampleDType_Bits() {
	for _, d := range []safetensors.DType{safetensors.F4, safetensors.F6_E2M3, safetensors.BOOL, safetensors.C64} {
		fmt.Println(d, d.Bits())
	}
	// Output:
	// F4 4
	// F6_E2M3 6
	// BOOL 8
	// C64 64
}

func ExampleNewWriter() {
	// The tensors' names, dtypes and shapes first: the header lists every
	// offset, so it is written before any data.
	specs := []safetensors.TensorSpec{
		{Name: "a", DType: safetensors.F32, Shape: []uint64{2}},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{3}},
	}
	var buf bytes.Buffer
	w, err := safetensors.NewWriter(&buf, specs, nil)
	if err != nil {
		log.Fatal(err)
	}
	// The bytes then follow in the order of the header.
	for _, t := range w.Header().Tensors {
		fmt.Println(t.Name, t.DataOffsets)
	}
	if err := w.WriteTensor("a", bytes.NewReader(float32Bytes(1, 2))); err != nil {
		log.Fatal(err)
	}
	if _, err := w.Write([]byte{7, 8}); err != nil { // part of "b"
		log.Fatal(err)
	}
	fmt.Println(w.Close())
	// Output:
	// a [0 8]
	// b [8 11]
	// safetensors: tensor "b": byte size does not match shape and dtype: 2 of 3 bytes written, 1 missing
}

// CreateFile streams a file to disk; with WriteTensorAt, several goroutines
// write its tensors at once, in any order.
func ExampleCreateFile() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	specs := []safetensors.TensorSpec{
		{Name: "layer.0", DType: safetensors.F32, Shape: []uint64{1024}},
		{Name: "layer.1", DType: safetensors.F32, Shape: []uint64{1024}},
	}
	fw, err := safetensors.CreateFile(filepath.Join(dir, "model.safetensors"), specs, nil, safetensors.Alignment(64))
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := make([]byte, 4*1024) // computed by this goroutine
			errs[i] = fw.WriteTensorAt(spec.Name, bytes.NewReader(data))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fw.Abort()
		log.Fatal(err)
	}
	if err := fw.Close(); err != nil { // the file appears at its path now
		log.Fatal(err)
	}
	fmt.Println("data starts at", fw.Header().DataOffset())
	// Output:
	// data starts at 192
}

// Tensors from Readers can be written straight from the Readers' memory, to
// merge or subset checkpoints.
func Example_merge() {
	var a, b bytes.Buffer
	if err := safetensors.Write(&a, []safetensors.Tensor{{Name: "x", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{1, 2}}}, nil); err != nil {
		log.Fatal(err)
	}
	if err := safetensors.Write(&b, []safetensors.Tensor{{Name: "y", DType: safetensors.I16, Shape: []uint64{1}, Data: []byte{3, 4}}}, nil); err != nil {
		log.Fatal(err)
	}
	var all []safetensors.Tensor
	for _, data := range [][]byte{a.Bytes(), b.Bytes()} {
		r, err := safetensors.NewReader(data)
		if err != nil {
			log.Fatal(err)
		}
		tensors, err := r.Tensors()
		if err != nil {
			log.Fatal(err)
		}
		all = append(all, tensors...)
	}
	var merged bytes.Buffer
	if err := safetensors.Write(&merged, all, map[string]string{"merged": "2"}); err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReader(merged.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Names(), r.Metadata())
	// Output:
	// [x y] map[merged:2]
}

func ExampleOpen() {
	r, err := safetensors.Open("testdata/conformance/valid/metadata_present.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close() // unmaps: use the tensors' Data before
	w, err := r.Tensor("w")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.DType, w.Shape, len(w.Data))
	// Output:
	// F32 [2 2] 16
}

// ReadAll reads the file into memory of the Reader's own, which stays
// valid after Close.
func ExampleReadAll() {
	r, err := safetensors.Open("testdata/conformance/valid/metadata_present.safetensors", safetensors.ReadAll())
	if err != nil {
		log.Fatal(err)
	}
	w, err := r.Tensor("w")
	r.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.DType, w.Shape, len(w.Data))
	// Output:
	// F32 [2 2] 16
}

// ReadInto reads files into memory the caller keeps from one to the next:
// one buffer, sized by the headers, serves both files in turn.
func ExampleReadInto() {
	files := []string{
		"testdata/conformance/valid/metadata_present.safetensors",
		"testdata/conformance/valid/dtype_F64.safetensors",
	}
	var size uint64
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			log.Fatal(err)
		}
		h, err := safetensors.ReadHeader(f)
		f.Close()
		if err != nil {
			log.Fatal(err)
		}
		size = max(size, h.DataLen())
	}
	buf := make([]byte, size)
	for _, path := range files {
		r, err := safetensors.Open(path, safetensors.ReadInto(buf))
		if err != nil {
			log.Fatal(err)
		}
		tensors, err := r.Tensors()
		r.Close()
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range tensors {
			fmt.Println(filepath.Base(path), t.Name, t.DType, len(t.Data)) // t.Data is in buf until the next file
		}
	}
	// Output:
	// metadata_present.safetensors b F32 8
	// metadata_present.safetensors w F32 16
	// dtype_F64.safetensors tensor F64 96
}

func ExampleNewReaderAt() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, []safetensors.Tensor{
		{Name: "ids", DType: safetensors.I64, Shape: []uint64{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Any io.ReaderAt: a file, an object in remote storage (see
	// examples/remote), here bytes in memory.
	r, err := safetensors.NewReaderAt(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		log.Fatal(err)
	}
	t, err := r.Tensor("ids") // read now, into new memory
	if err != nil {
		log.Fatal(err)
	}
	ids, err := safetensors.Values[int64](t, nil)
	fmt.Println(ids, err)
	// Output:
	// [1 2] <nil>
}

func ExampleView() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, []safetensors.Tensor{
		{Name: "w", DType: safetensors.F32, Shape: []uint64{3}, Data: float32Bytes(0.5, 1.5, 2.5)},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReader(buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	t, err := r.Tensor("w")
	if err != nil {
		log.Fatal(err)
	}
	w, err := safetensors.View[float32](t) // no copy: w shares buf's bytes
	if errors.Is(err, safetensors.ErrNoView) {
		w, err = safetensors.Values[float32](t, nil) // a copy, always possible
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w)
	_, err = safetensors.View[int32](t)
	fmt.Println(err)
	// Output:
	// [0.5 1.5 2.5]
	// safetensors: tensor "w": element type does not match the dtype: F32 elements are float32, not int32
}

func ExampleTensor_Slice() {
	// A 3x4 matrix of U8 holding 0 to 11.
	m := safetensors.Tensor{Name: "m", DType: safetensors.U8, Shape: []uint64{3, 4}, Data: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}

	row, err := m.Slice(safetensors.At(1)) // m[1]
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(row.Shape, row.AppendTo(nil))

	cols, err := m.Slice(safetensors.All(), safetensors.Range(1, 3)) // m[:, 1:3]
	if err != nil {
		log.Fatal(err)
	}
	for chunk := range cols.Chunks() { // one run of the matrix's bytes per row
		fmt.Println(chunk)
	}
	fmt.Println(cols.Shape, cols.AppendTo(nil))
	// Output:
	// [4] [4 5 6 7]
	// [1 2]
	// [5 6]
	// [9 10]
	// [3 2] [1 2 5 6 9 10]
}

// A selection's values are one call away.
func ExampleTensorSlice_Float32s() {
	// A 2x3 BF16 matrix.
	m, err := safetensors.TensorFromFloat32s("m", safetensors.BF16, []uint64{2, 3}, []float32{1, 2, 3, 4, 5, 6}, safetensors.RoundNearestEven)
	if err != nil {
		log.Fatal(err)
	}
	col, err := m.Slice(safetensors.All(), safetensors.At(2)) // m[:, 2]
	if err != nil {
		log.Fatal(err)
	}
	vals, err := col.Float32s()
	fmt.Println(col.Shape, vals, err)
	// Output: [2] [3 6] <nil>
}

// AppendFloat32s decodes selections through one buffer, here the rows of a
// matrix one at a time.
func ExampleTensorSlice_AppendFloat32s() {
	m := safetensors.Tensor{Name: "m", DType: safetensors.I8, Shape: []uint64{2, 2}, Data: []byte{1, 0xff, 2, 0xfe}}
	buf := make([]float32, 0, 2)
	for i := range m.Shape[0] {
		row, err := m.Slice(safetensors.At(i))
		if err != nil {
			log.Fatal(err)
		}
		if buf, err = row.AppendFloat32s(buf[:0]); err != nil {
			log.Fatal(err)
		}
		fmt.Println(buf)
	}
	// Output:
	// [1 -1]
	// [2 -2]
}

// DataLen counts a selection's bytes.
func ExampleTensorSlice_DataLen() {
	m := safetensors.Tensor{Name: "m", DType: safetensors.F16, Shape: []uint64{4, 8}, Data: make([]byte, 64)}
	rows, err := m.Slice(safetensors.Range(1, 3)) // m[1:3]
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rows.Shape, rows.DataLen(), "bytes")
	// Output: [2 8] 32 bytes
}

// NumElements counts a selection's elements: the product of its shape.
func ExampleTensorSlice_NumElements() {
	m := safetensors.Tensor{Name: "m", DType: safetensors.F16, Shape: []uint64{4, 8}, Data: make([]byte, 64)}
	col, err := m.Slice(safetensors.All(), safetensors.Range(2, 5)) // m[:, 2:5]
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(col.Shape, col.NumElements(), "elements")
	// Output: [4 3] 12 elements
}

// NumElements is the product of the shape; len(Data) is the size in bytes.
func ExampleTensor_NumElements() {
	t := safetensors.Tensor{Name: "w", DType: safetensors.F4, Shape: []uint64{3, 4}, Data: make([]byte, 6)}
	fmt.Println(t.NumElements(), "elements of 4 bits in", len(t.Data), "bytes")
	// Output: 12 elements of 4 bits in 6 bytes
}

// A header's entries give the parameter count of a file without reading its
// tensors.
func ExampleTensorInfo_NumElements() {
	r, err := safetensors.Open("testdata/tiny-llama.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	var params uint64
	for _, info := range r.Header().Tensors {
		params += info.NumElements()
	}
	fmt.Println(params, "parameters")
	// Output: 250432 parameters
}

// Rounding to nearest even, as PyTorch does, and truncation, as the Spark
// connector does, differ on values between two BF16 numbers: 1 + 3×2⁻⁸ lies
// halfway between 1 + 2⁻⁷ (0x3f81) and 1 + 2⁻⁶ (0x3f82).
func ExampleF32ToBF16() {
	f := float32(1 + 3.0/256)
	fmt.Printf("%#04x %#04x\n", safetensors.F32ToBF16(f, safetensors.RoundNearestEven), safetensors.F32ToBF16(f, safetensors.Truncate))
	fmt.Println(safetensors.BF16ToF32(0x3f82))
	// Output:
	// 0x3f82 0x3f81
	// 1.015625
}

// The bulk conversions take a destination: converting in a loop through one
// buffer allocates nothing.
func ExampleF32ToF16s() {
	buf := make([]uint16, 4)
	h := safetensors.F32ToF16s(buf, []float32{1, -2, 65504, 1e6}, safetensors.RoundNearestEven)
	fmt.Printf("%#04x\n", h)
	fmt.Println(safetensors.F16ToF32s(nil, h))
	// Output:
	// [0x3c00 0xc000 0x7bff 0x7c00]
	// [1 -2 65504 +Inf]
}

func ExampleTensor_Float32s() {
	t := safetensors.Tensor{Name: "w", DType: safetensors.BF16, Shape: []uint64{3}, Data: []byte{0x80, 0x3f, 0x00, 0xc0, 0xc0, 0x7f}}
	vals, err := t.Float32s()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(vals)
	// Output: [1 -2 NaN]
}

// AppendFloat32s decodes a tensor a part at a time through one buffer, here
// two elements at a time.
func ExampleTensor_AppendFloat32s() {
	t := safetensors.Tensor{Name: "ids", DType: safetensors.I16, Shape: []uint64{4}, Data: []byte{1, 0, 2, 0, 0xff, 0xff, 0, 0x80}}
	buf := make([]float32, 0, 2)
	for b := t.Data; len(b) > 0; b = b[4:] {
		part := safetensors.Tensor{DType: t.DType, Data: b[:4]}
		var err error
		if buf, err = part.AppendFloat32s(buf[:0]); err != nil {
			log.Fatal(err)
		}
		fmt.Println(buf)
	}
	// Output:
	// [1 2]
	// [-1 -32768]
}

// Stats checks weights as they are loaded.
func ExampleTensor_Stats() {
	t, err := safetensors.TensorFromFloat32s("w", safetensors.F16, []uint64{5}, []float32{1, 2, 3, float32(math.Inf(1)), float32(math.NaN())}, safetensors.RoundNearestEven)
	if err != nil {
		log.Fatal(err)
	}
	s, err := t.Stats()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d values, %d NaN, %d Inf; finite ones: min %v, max %v, mean %v, std %.4f\n", s.Count, s.NaN, s.Inf, s.Min, s.Max, s.Mean, s.StdDev)
	// Output: 5 values, 1 NaN, 1 Inf; finite ones: min 1, max 3, mean 2, std 0.8165
}

// NonFinite counts what Stats counts as NaN and Inf, without the rest of
// the statistics, from the bits: here BF16 codes.
func ExampleTensor_NonFinite() {
	// 1, +Inf, NaN, -Inf, NaN, -2.
	t := safetensors.Tensor{Name: "w", DType: safetensors.BF16, Shape: []uint64{6},
		Data: []byte{0x80, 0x3f, 0x80, 0x7f, 0xc0, 0x7f, 0x80, 0xff, 0xc1, 0xff, 0x00, 0xc0}}
	nan, inf, err := t.NonFinite()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d NaN, %d Inf\n", nan, inf)
	// Output: 2 NaN, 2 Inf
}

func ExampleTensorFromFloat32s() {
	t, err := safetensors.TensorFromFloat32s("w", safetensors.BF16, []uint64{2}, []float32{1, 0.1}, safetensors.RoundNearestEven)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v %v % x\n", t.DType, t.Shape, t.Data)
	// Output: BF16 [2] 80 3f cd 3d
}

// Several goroutines summarize parts of one tensor, and Merge combines
// their statistics.
func ExampleStats_Merge() {
	values := make([]float32, 1000)
	for i := range values {
		values[i] = float32(i)
	}
	t, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{1000}, values, safetensors.RoundNearestEven)
	if err != nil {
		log.Fatal(err)
	}
	parts := make([]safetensors.Stats, 4)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part, err := t.Elements(uint64(i)*250, uint64(i+1)*250)
			if err != nil {
				log.Fatal(err)
			}
			if parts[i], err = part.Stats(); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	var all safetensors.Stats
	for _, p := range parts {
		all.Merge(p) // all changes
	}
	fmt.Printf("%d values in [%g, %g], mean %.1f, std %.2f\n", all.Count, all.Min, all.Max, all.Mean, all.StdDev)

	// A part decoded into a reused buffer.
	buf := make([]float32, 0, 8)
	buf, err = t.AppendFloat32sRange(buf[:0], 500, 504)
	fmt.Println(buf, err)
	// Output:
	// 1000 values in [0, 999], mean 499.5, std 288.67
	// [500 501 502 503] <nil>
}

// NewFileReader reads a file already open, here one inside an os.Root,
// which keeps symbolic links from leading out of the directory.
func ExampleNewFileReader() {
	dir, err := os.MkdirTemp("", "models")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	t := safetensors.Tensor{Name: "w", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{1, 2}}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Tensor{t}, nil); err != nil {
		log.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer root.Close()
	f, err := root.Open("model.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewFileReader(f)
	f.Close() // the Reader keeps its mapping, not the file
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	w, _ := r.Tensor("w")
	fmt.Println(w.Data)
	// Output: [1 2]
}

// The header lays the tensors out as the reference does (8-byte dtypes
// first, then by name); SpecOrder maps that order back to the specs, so
// that bytes held in the specs' order are found by position.
func ExampleWriter_SpecOrder() {
	specs := []safetensors.TensorSpec{
		{Name: "b", DType: safetensors.U8, Shape: []uint64{2}},
		{Name: "a", DType: safetensors.U8, Shape: []uint64{2}},
		{Name: "c", DType: safetensors.I64, Shape: []uint64{}},
	}
	data := [][]byte{{1, 2}, {3, 4}, {5, 0, 0, 0, 0, 0, 0, 0}} // in the specs' order
	var buf bytes.Buffer
	w, err := safetensors.NewWriter(&buf, specs, nil)
	if err != nil {
		log.Fatal(err)
	}
	for k, j := range w.SpecOrder() {
		fmt.Println(w.Header().Tensors[k].Name, "is spec", j)
		if _, err := w.Write(data[j]); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// c is spec 2
	// a is spec 1
	// b is spec 0
}

func ExampleErrNotRegular() {
	_, err := safetensors.Open(os.TempDir()) // a directory; a FIFO is refused the same way, at once
	fmt.Println(errors.Is(err, safetensors.ErrNotRegular))
	// Output: true
}

func ExampleTempPattern() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// What a writer killed with SIGKILL while writing model.safetensors
	// leaves behind.
	if err := os.WriteFile(filepath.Join(dir, ".model.safetensors.tmp1x2y3z"), nil, 0o644); err != nil {
		log.Fatal(err)
	}
	leftovers, err := filepath.Glob(filepath.Join(dir, safetensors.TempPattern))
	if err != nil {
		log.Fatal(err)
	}
	for _, path := range leftovers {
		fmt.Println(filepath.Base(path))
	}
	// Output: .model.safetensors.tmp1x2y3z
}

func ExampleLoad() {
	tensors, metadata, err := safetensors.Load("testdata/tiny-llama.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	norm := tensors["model.norm.weight"]
	values, err := norm.Float32s() // any float dtype, as float32
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(tensors), metadata["format"], norm.DType, norm.Shape, values[:3])
	// Output:
	// 39 pt F32 [64] [1 1 1]
}

func ExampleSave() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	weight, err := safetensors.TensorFromFloat32s("", safetensors.BF16, []uint64{2, 2}, []float32{1, 2, 3, 4}, safetensors.RoundNearestEven)
	if err != nil {
		log.Fatal(err)
	}
	err = safetensors.Save(path, map[string]safetensors.Tensor{"proj.weight": weight}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	back, _, err := safetensors.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	values, _ := back["proj.weight"].Float32s()
	fmt.Println(back["proj.weight"].Name, values)
	// Output:
	// proj.weight [1 2 3 4]
}
