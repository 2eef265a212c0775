package safetensors

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hugeSource is an io.ReaderAt that claims size bytes: a valid header that
// declares one U8 tensor covering the rest, then bytes that are a function
// of their offset. It stands for a server that says a file is a terabyte.
type hugeSource struct {
	header []byte // prefix and JSON
	size   int64
}

func newHugeSource(size int64) *hugeSource {
	// The tensor's size depends on the header's length, which depends on
	// the size's digits: iterate to the fixed point.
	n := int64(0)
	var hdr string
	for range 4 {
		s := size - 8 - n
		hdr = fmt.Sprintf(`{"big":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, s, s)
		n = int64(len(hdr))
	}
	buf := make([]byte, 8, 8+len(hdr))
	buf[0], buf[1] = byte(n), byte(n>>8)
	return &hugeSource{header: append(buf, hdr...), size: size}
}

func (h *hugeSource) ReadAt(p []byte, off int64) (int, error) {
	if off >= h.size {
		return 0, io.EOF
	}
	for i := range p {
		o := off + int64(i)
		if o >= h.size {
			return i, io.EOF
		}
		if o < int64(len(h.header)) {
			p[i] = h.header[o]
		} else {
			p[i] = byte(o*7 + 3)
		}
	}
	return len(p), nil
}

// TestNewReaderAtHugeTensor: a header declaring a tensor of a terabyte, or
// of 2^60 bytes, gives ErrTensorTooLarge from Tensor, neither a panic nor an
// allocation of that size, and TensorReader reads it.
func TestNewReaderAtHugeTensor(t *testing.T) {
	for _, size := range []int64{1 << 40, 1 << 60, MaxTensorAlloc + 1024} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			src := newHugeSource(size)
			r, err := NewReaderAt(src, size)
			require.NoError(t, err)
			defer r.Close()
			tensorLen := size - int64(len(src.header))
			require.Equal(t, uint64(tensorLen), r.Header().DataLen())

			_, err = r.Tensor("big")
			assert.ErrorIs(t, err, ErrTensorTooLarge)
			var te *TensorError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, "big", te.Name)
			assert.Contains(t, err.Error(), fmt.Sprint(tensorLen))
			assert.Contains(t, err.Error(), "TensorReader")
			_, err = r.Tensors()
			assert.ErrorIs(t, err, ErrTensorTooLarge)

			sr, err := r.TensorReader("big")
			require.NoError(t, err)
			assert.Equal(t, tensorLen, sr.Size())
			for _, off := range []int64{0, tensorLen - 16} {
				got := make([]byte, 16)
				_, err := sr.ReadAt(got, off)
				require.NoError(t, err)
				want := make([]byte, 16)
				src.ReadAt(want, int64(len(src.header))+off)
				assert.Equal(t, want, got)
			}
			_, err = sr.ReadAt(make([]byte, 1), tensorLen)
			assert.Equal(t, io.EOF, err)
		})
	}
}

// TestTensorReader reads every tensor of a file through TensorReader from
// each kind of Reader, and gets the bytes Tensor gives.
func TestTensorReader(t *testing.T) {
	tensors := streamTensors()
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, tensors, nil))
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o666))

	open := map[string]func() (*Reader, error){
		"Open":        func() (*Reader, error) { return Open(path) },
		"ReadAll":     func() (*Reader, error) { return Open(path, ReadAll()) },
		"NewReader":   func() (*Reader, error) { return NewReader(buf.Bytes()) },
		"NewReaderAt": func() (*Reader, error) { return NewReaderAt(bytes.NewReader(buf.Bytes()), int64(buf.Len())) },
	}
	for kind, openf := range open {
		t.Run(kind, func(t *testing.T) {
			r, err := openf()
			require.NoError(t, err)
			for _, want := range tensors {
				sr, err := r.TensorReader(want.Name)
				require.NoError(t, err)
				got, err := io.ReadAll(sr)
				require.NoError(t, err)
				assert.Equal(t, want.Data, got, want.Name)
			}
			_, err = r.TensorReader("nope")
			assert.ErrorIs(t, err, ErrTensorNotFound)

			largest := slices.MaxFunc(tensors, func(a, b Tensor) int { return cmp.Compare(len(a.Data), len(b.Data)) })
			sr, err := r.TensorReader(largest.Name)
			require.NoError(t, err)
			require.NotZero(t, sr.Size())
			require.NoError(t, r.Close())
			_, err = sr.ReadAt(make([]byte, 1), 0)
			assert.ErrorIs(t, err, ErrClosed)
			_, err = r.TensorReader(largest.Name)
			assert.ErrorIs(t, err, ErrClosed)
		})
	}
}
