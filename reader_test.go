package safetensors

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFile returns a small file image with three tensors and metadata.
func testFile(t *testing.T) []byte {
	t.Helper()
	data, err := writeBytes([]Tensor{
		{Name: "b", DType: F32, Shape: []uint64{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Name: "a", DType: U8, Shape: []uint64{3}, Data: []byte{9, 10, 11}},
		{Name: "c", DType: I64, Shape: []uint64{}, Data: []byte{12, 13, 14, 15, 16, 17, 18, 19}},
	}, map[string]string{"format": "pt"})
	require.NoError(t, err)
	return data
}

func TestReader(t *testing.T) {
	data := testFile(t)
	r, err := NewReader(data)
	require.NoError(t, err)

	assert.Equal(t, []string{"a", "b", "c"}, r.Names())
	// The file order is the writer's: I64, F32, U8.
	h := r.Header()
	require.Len(t, h.Tensors, 3)
	assert.Equal(t, []string{"c", "b", "a"}, []string{h.Tensors[0].Name, h.Tensors[1].Name, h.Tensors[2].Name})
	assert.Equal(t, uint64(len(data)), h.DataOffset()+h.DataLen())

	b, err := r.Tensor("b")
	require.NoError(t, err)
	assert.Equal(t, Tensor{Name: "b", DType: F32, Shape: []uint64{2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}, b)
	// Data is a slice of the caller's bytes, which cannot grow into the next tensor.
	off := h.DataOffset() + h.Tensors[1].DataOffsets[0]
	assert.Equal(t, unsafe.Pointer(&data[off]), unsafe.Pointer(unsafe.SliceData(b.Data)))
	assert.Equal(t, len(b.Data), cap(b.Data))

	c, err := r.Tensor("c")
	require.NoError(t, err)
	assert.Equal(t, []uint64{}, c.Shape)

	all, err := r.Tensors()
	require.NoError(t, err)
	require.Len(t, all, 3)
	for i, tensor := range all {
		assert.Equal(t, h.Tensors[i].Name, tensor.Name)
		one, err := r.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, one, tensor)
	}

	_, err = r.Tensor("d")
	require.ErrorIs(t, err, ErrTensorNotFound)
	var te *TensorError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "d", te.Name)
	assert.Equal(t, `safetensors: tensor "d": tensor not found`, err.Error())

	// Metadata is a copy.
	md := r.Metadata()
	md["format"] = "changed"
	assert.Equal(t, map[string]string{"format": "pt"}, r.Metadata())

	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	_, err = r.Tensor("a")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = r.Tensors()
	assert.ErrorIs(t, err, ErrClosed)
	// The header stays readable.
	assert.Equal(t, []string{"a", "b", "c"}, r.Names())
	// Tensors taken before Close stay valid while the caller's bytes do.
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, b.Data)
}

func TestReaderMetadata(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   map[string]string
	}{
		{`{}`, nil},
		{`{"__metadata__":null}`, nil},
		{`{"__metadata__":{}}`, map[string]string{}},
		{`{"__metadata__":{"a":"\u00e9","b":""}}`, map[string]string{"a": "é", "b": ""}},
	} {
		r, err := NewReader(file(tt.header))
		require.NoError(t, err, tt.header)
		got := r.Metadata()
		assert.Equal(t, tt.want, got, tt.header)
		assert.Equal(t, tt.want == nil, got == nil, tt.header)
		assert.Equal(t, []string{}, r.Names())
		all, err := r.Tensors()
		require.NoError(t, err)
		assert.Empty(t, all)
	}
}

// TestReaderConcurrent reads one Reader from many goroutines; run it with
// -race.
func TestReaderConcurrent(t *testing.T) {
	data := generateModel(t, 2000)
	r, err := NewReader(data)
	require.NoError(t, err)
	want, err := r.Tensors()
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names := r.Names()
			for i := range names {
				name := names[(i+g*97)%len(names)]
				got, err := r.Tensor(name)
				if err != nil {
					errs <- err
					return
				}
				if got.Name != name {
					errs <- assert.AnError
					return
				}
			}
			all, err := r.Tensors()
			if err != nil {
				errs <- err
				return
			}
			assert.Equal(t, want, all)
			_ = r.Metadata()
			_ = r.Header().DataLen()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReaderOwnsStrings checks that names, metadata and errors do not share
// memory with the caller's bytes, whose header the caller may reuse.
func TestReaderOwnsStrings(t *testing.T) {
	data := testFile(t)
	r, err := NewReader(data)
	require.NoError(t, err)
	hdr := data[prefixLen:r.Header().DataOffset()]
	for i := range hdr {
		hdr[i] = 'X'
	}
	assert.Equal(t, []string{"a", "b", "c"}, r.Names())
	assert.Equal(t, map[string]string{"format": "pt"}, r.Metadata())
	_, err = r.Tensor("a")
	assert.NoError(t, err)

	bad := file(`{"name":{"dtype":"F32","shape":[],"data_offsets":[0,5]}}`, 1, 2, 3, 4, 5)
	_, err = NewReader(bad)
	require.Error(t, err)
	msg := err.Error()
	var te *TensorError
	require.ErrorAs(t, err, &te)
	for i := range bad {
		bad[i] = 'X'
	}
	assert.Equal(t, msg, err.Error())
	assert.Equal(t, "name", te.Name)

	bad = file(`{"name":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"name":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, 1, 2, 3, 4)
	_, err = NewReader(bad, Strict())
	require.ErrorAs(t, err, &te)
	for i := range bad {
		bad[i] = 'X'
	}
	assert.Equal(t, "name", te.Name)
}
