package safetensors

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a destination that keeps the bytes written and the size of
// each call, sequential (Write) or at an offset (WriteAt).
type recorder struct {
	data  []byte
	calls []int
}

func (r *recorder) Write(p []byte) (int, error) {
	r.data = append(r.data, p...)
	r.calls = append(r.calls, len(p))
	return len(p), nil
}

func (r *recorder) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(r.data) {
		r.data = append(r.data, make([]byte, end-len(r.data))...)
	}
	copy(r.data[off:], p)
	r.calls = append(r.calls, len(p))
	return len(p), nil
}

// sized is a source that says it holds len(data) bytes but writes out
// write of them.
type sized struct {
	data  []byte
	write int
}

func (s *sized) Read(p []byte) (int, error) { return 0, fmt.Errorf("sized: Read called") }
func (s *sized) Len() int                   { return len(s.data) }
func (s *sized) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(append(s.data, make([]byte, max(0, s.write-len(s.data)))...)[:s.write])
	return int64(n), err
}

// TestWriteTensorWritesItself: a *bytes.Reader of exactly a tensor's bytes
// goes to the destination in one call, larger than the copy buffer, in
// both ways of writing; one that holds more is copied, its extra bytes
// left; a sized source that writes more than its Len said is refused, with
// nothing written past the tensor, and one that writes fewer is a size
// mismatch.
func TestWriteTensorWritesItself(t *testing.T) {
	big := make([]byte, 1<<20+3) // more than the 256 KiB copy buffer
	for i := range big {
		big[i] = byte(i*7 + 1)
	}
	tensors := []Tensor{{Name: "big", DType: U8, Shape: []uint64{uint64(len(big))}, Data: big}}
	want, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	for _, at := range []bool{false, true} {
		t.Run(fmt.Sprintf("at=%v", at), func(t *testing.T) {
			write := func(w *Writer, r io.Reader) error {
				if at {
					return w.WriteTensorAt("big", r)
				}
				return w.WriteTensor("big", r)
			}
			var rec recorder
			w, err := NewWriter(&rec, specsOf(tensors), nil)
			require.NoError(t, err)
			rec.calls = nil // the header's
			require.NoError(t, write(w, bytes.NewReader(big)))
			require.NoError(t, w.Close())
			assert.Equal(t, want, rec.data)
			assert.Equal(t, []int{len(big)}, rec.calls, "one call of the whole tensor")

			rec = recorder{}
			w, err = NewWriter(&rec, specsOf(tensors), nil)
			require.NoError(t, err)
			rec.calls = nil
			src := bytes.NewReader(append(append([]byte{}, big...), "extra"...))
			require.NoError(t, write(w, src))
			require.NoError(t, w.Close())
			assert.Equal(t, want, rec.data)
			assert.Equal(t, 5, src.Len(), "the extra bytes are left")
			assert.Greater(t, len(rec.calls), 1, "copied through the buffer")

			rec = recorder{}
			w, err = NewWriter(&rec, specsOf(tensors), nil)
			require.NoError(t, err)
			prefix := len(rec.data)
			err = write(w, &sized{data: big, write: len(big) + 10})
			require.ErrorIs(t, err, ErrSizeMismatch)
			assert.Contains(t, err.Error(), `tensor "big"`)
			assert.Len(t, rec.data, prefix+len(big), "nothing past the tensor")

			rec = recorder{}
			w, err = NewWriter(&rec, specsOf(tensors), nil)
			require.NoError(t, err)
			err = write(w, &sized{data: big, write: len(big) - 1})
			require.ErrorIs(t, err, ErrSizeMismatch)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Contains(t, err.Error(), fmt.Sprintf("the source ended after %d of %d bytes", len(big)-1, len(big)))
		})
	}
}
