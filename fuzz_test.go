package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzNewReader parses any input. When the input is accepted, every tensor
// must be readable and Write of what was read must give a file that reads
// back the same; the verdict must agree with NewReaderAt, Strict, ReadHeader
// and encoding/json's syntax check. No input may panic.
func FuzzNewReader(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		names, _ := filepath.Glob(filepath.Join(corpusDir, dir, "*.safetensors"))
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add(file(`{"a":["U8",[2],[0,2]],"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1],"x":[1e5,"\ud83d\ude00"]}}`, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(data)
		strict, strictErr := NewReader(data, Strict())
		h, headerErr := ReadHeader(bytes.NewReader(data))
		at, atErr := NewReaderAt(bytes.NewReader(data), int64(len(data)))
		if (err == nil) != (atErr == nil) || err != nil && matching(err)[0] != matching(atErr)[0] {
			t.Fatalf("NewReaderAt: %v, NewReader: %v", atErr, err)
		}
		if err != nil {
			if m := matching(err); len(m) != 1 {
				t.Fatalf("error %q matches %d sentinels", err, len(m))
			}
			if strictErr == nil {
				t.Fatalf("Strict accepts what the default rejects: %v", err)
			}
			if errors.Is(err, ErrIncompleteBuffer) {
				if headerErr != nil {
					t.Fatalf("ReadHeader: %v, NewReader: %v", headerErr, err)
				}
			} else if headerErr == nil || matching(headerErr)[0] != matching(err)[0] {
				t.Fatalf("ReadHeader: %v, NewReader: %v", headerErr, err)
			}
			return
		}
		if headerErr != nil {
			t.Fatalf("ReadHeader rejects what NewReader accepts: %v", headerErr)
		}
		n := binary.LittleEndian.Uint64(data)
		if !json.Valid(data[prefixLen : prefixLen+n]) {
			t.Fatalf("accepted a header encoding/json finds invalid: %q", data[prefixLen:prefixLen+n])
		}
		if !equalHeaders(r.Header(), h) || !equalHeaders(r.Header(), at.Header()) {
			t.Fatalf("ReadHeader or NewReaderAt gives another header")
		}
		if strictErr == nil && !equalHeaders(r.Header(), strict.Header()) {
			t.Fatalf("Strict gives another header")
		}

		tensors, err := r.Tensors()
		if err != nil {
			t.Fatal(err)
		}
		for _, tensor := range tensors {
			got, err := r.Tensor(tensor.Name)
			if err != nil {
				t.Fatal(err)
			}
			size, err := byteSize(got.DType, got.Shape)
			if err != nil || size != uint64(len(got.Data)) {
				t.Fatalf("tensor %q: %d bytes for shape %v of %v: %v", got.Name, len(got.Data), got.Shape, got.DType, err)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, tensors, r.Metadata()); err != nil {
			t.Fatalf("Write of what was read: %v", err)
		}
		back, err := NewReader(buf.Bytes(), Strict())
		if err != nil {
			t.Fatalf("reading back what Write wrote: %v", err)
		}
		checkReadsBack(t, back, tensors, r.Metadata())
	})
}

// FuzzWrite writes tensors built from the input and checks that the file is
// accepted, even by Strict, and reads back the same, or that Write refuses
// them without writing.
func FuzzWrite(f *testing.F) {
	f.Add([]byte("a\x12\x02\x03\x04b\x01\x01\x05"), "pt")
	f.Add([]byte("\x00\x02\x00\x01\x00\xff\xfe"), "")
	f.Fuzz(func(t *testing.T, spec []byte, meta string) {
		// Each tensor takes: a name byte, a dtype byte, a rank byte, and
		// that many dimensions of one byte.
		var tensors []Tensor
		for len(spec) >= 3 && len(tensors) < 16 {
			name, dtype, rank := string(spec[:1]), DType(spec[1]%(byte(lastDType)+2)), int(spec[2]%4)
			spec = spec[3:]
			shape := []uint64{}
			for k := 0; k < rank && len(spec) > 0; k++ {
				shape = append(shape, uint64(spec[0]%9))
				spec = spec[1:]
			}
			var data []byte
			if size, err := byteSize(dtype, shape); err == nil {
				data = make([]byte, size)
				for i := range data {
					data[i] = byte(i) ^ spec0(spec)
				}
			}
			tensors = append(tensors, Tensor{Name: name, DType: dtype, Shape: shape, Data: data})
		}
		metadata := map[string]string{meta: meta}
		var buf bytes.Buffer
		if err := Write(&buf, tensors, metadata); err != nil {
			if buf.Len() != 0 {
				t.Fatalf("Write failed after writing %d bytes: %v", buf.Len(), err)
			}
			return
		}
		r, err := NewReader(buf.Bytes(), Strict())
		if err != nil {
			t.Fatalf("reading what Write wrote: %v", err)
		}
		checkReadsBack(t, r, tensors, metadata)
		if r.Header().DataOffset()%8 != 0 {
			t.Fatalf("data section at %d", r.Header().DataOffset())
		}
	})
}

// checkReadsBack checks that r holds exactly tensors and metadata.
func checkReadsBack(t *testing.T, r *Reader, tensors []Tensor, metadata map[string]string) {
	t.Helper()
	if !equalMetadata(metadata, r.Metadata()) {
		t.Fatalf("metadata %q became %q", metadata, r.Metadata())
	}
	if len(r.Header().Tensors) != len(tensors) {
		t.Fatalf("%d tensors became %d", len(tensors), len(r.Header().Tensors))
	}
	for _, want := range tensors {
		got, err := r.Tensor(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.DType != want.DType || !equalShapes(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("tensor %q changed", want.Name)
		}
	}
}

func spec0(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func equalHeaders(a, b *Header) bool {
	if a.Len != b.Len || len(a.Tensors) != len(b.Tensors) || !equalMetadata(a.Metadata, b.Metadata) {
		return false
	}
	for i := range a.Tensors {
		x, y := a.Tensors[i], b.Tensors[i]
		if x.Name != y.Name || x.DType != y.DType || x.DataOffsets != y.DataOffsets || !equalShapes(x.Shape, y.Shape) {
			return false
		}
	}
	return true
}

func equalMetadata(a, b map[string]string) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalShapes(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
