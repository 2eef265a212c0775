package safetensors

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// le8 returns n bytes counting up from seed, as tensor data.
func le8(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*37)
	}
	return b
}

// aligned returns a copy of b whose first byte sits at a multiple of 8.
func aligned(b []byte) []byte {
	buf := make([]uint64, (len(b)+7)/8+1)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(b))
	copy(out, b)
	return out
}

func checkView[T Number](t *testing.T, d DType, decode func([]byte) T, size int) {
	t.Helper()
	data := aligned(le8(6*size, 3))
	tensor := Tensor{Name: "t", DType: d, Shape: []uint64{2, 3}, Data: data}
	var want []T
	for i := 0; i < len(data); i += size {
		want = append(want, decode(data[i:]))
	}
	v, err := View[T](tensor)
	if !littleEndian && size > 1 {
		// A big-endian host has no view of little-endian elements.
		require.ErrorIs(t, err, ErrNoView, "%v", d)
		assert.Nil(t, v, "%v", d)
	} else {
		require.NoError(t, err, "%v", d)
		assert.Equal(t, want, v, "%v", d)
		assert.Equal(t, unsafe.Pointer(unsafe.SliceData(data)), unsafe.Pointer(unsafe.SliceData(v)), "%v: no copy", d)
	}

	got, err := Values[T](tensor, []T{42})
	require.NoError(t, err, "%v", d)
	assert.Equal(t, append([]T{42}, want...), got, "%v", d)

	if size > 1 {
		// Misaligned: no view on any host, but Values decodes.
		shifted := aligned(append([]byte{0}, data...))[1:]
		tensor.Data = shifted
		_, err := View[T](tensor)
		assert.ErrorIs(t, err, ErrNoView, "%v", d)
		got, err := Values[T](tensor, nil)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%v", d)
	}
}

func TestView(t *testing.T) {
	le := binary.LittleEndian
	checkView(t, U8, func(b []byte) uint8 { return b[0] }, 1)
	checkView(t, BOOL, func(b []byte) uint8 { return b[0] }, 1)
	checkView(t, F8_E4M3, func(b []byte) uint8 { return b[0] }, 1)
	checkView(t, I8, func(b []byte) int8 { return int8(b[0]) }, 1)
	checkView(t, U16, func(b []byte) uint16 { return le.Uint16(b) }, 2)
	checkView(t, BF16, func(b []byte) uint16 { return le.Uint16(b) }, 2)
	checkView(t, F16, func(b []byte) uint16 { return le.Uint16(b) }, 2)
	checkView(t, I16, func(b []byte) int16 { return int16(le.Uint16(b)) }, 2)
	checkView(t, U32, func(b []byte) uint32 { return le.Uint32(b) }, 4)
	checkView(t, I32, func(b []byte) int32 { return int32(le.Uint32(b)) }, 4)
	checkView(t, F32, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) }, 4)
	checkView(t, U64, func(b []byte) uint64 { return le.Uint64(b) }, 8)
	checkView(t, I64, func(b []byte) int64 { return int64(le.Uint64(b)) }, 8)
	checkView(t, F64, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }, 8)
	checkView(t, C64, func(b []byte) complex64 {
		return complex(math.Float32frombits(le.Uint32(b)), math.Float32frombits(le.Uint32(b[4:])))
	}, 8)

	type myFloat float32 // types defined on the basic ones work too
	checkView(t, F32, func(b []byte) myFloat { return myFloat(math.Float32frombits(le.Uint32(b))) }, 4)
}

func TestViewErrors(t *testing.T) {
	f32 := Tensor{Name: "w", DType: F32, Shape: []uint64{2}, Data: aligned(le8(8, 1))}
	_, err := View[int32](f32)
	require.ErrorIs(t, err, ErrDTypeMismatch)
	assert.Contains(t, err.Error(), `tensor "w": element type does not match the dtype: F32 elements are float32, not int32`)
	_, err = View[uint32](f32)
	assert.ErrorIs(t, err, ErrDTypeMismatch)
	_, err = Values[float64](f32, nil)
	assert.ErrorIs(t, err, ErrDTypeMismatch)
	_, err = View[float32](Tensor{DType: BF16, Shape: []uint64{2}, Data: aligned(le8(4, 1))})
	assert.ErrorIs(t, err, ErrDTypeMismatch)
	_, err = View[uint8](Tensor{DType: F4, Shape: []uint64{2}, Data: []byte{0x21}})
	assert.ErrorIs(t, err, ErrDTypeMismatch)
	_, err = View[float32](Tensor{DType: F32, Shape: []uint64{2}, Data: aligned(le8(7, 1))})
	assert.ErrorIs(t, err, ErrSizeMismatch)

	empty, err := View[float32](Tensor{DType: F32, Shape: []uint64{0}})
	require.NoError(t, err)
	assert.NotNil(t, empty)
	assert.Empty(t, empty)
}

// TestViewAlignedFiles checks that every tensor of a file from the writer
// is aligned for its elements, and so has a view on a little-endian host:
// the header pads the data section to 8 bytes, and the largest dtypes come
// first. (A big-endian host has no view of multi-byte elements at all.)
func TestViewAlignedFiles(t *testing.T) {
	for _, open := range []func([]byte) (*Reader, error){
		func(b []byte) (*Reader, error) { return NewReader(aligned(b)) },
		func(b []byte) (*Reader, error) { return Open(writeTemp(t, b)) },
	} {
		data, err := writeBytes(streamTensors(), nil)
		require.NoError(t, err)
		r, err := open(data)
		require.NoError(t, err)
		all, err := r.Tensors()
		require.NoError(t, err)
		for _, tensor := range all {
			if len(tensor.Data) > 0 {
				addr := uintptr(unsafe.Pointer(unsafe.SliceData(tensor.Data)))
				assert.Zero(t, addr%uintptr(max(tensor.DType.Bits()/8, 1)), "%s: %v at %#x", tensor.Name, tensor.DType, addr)
			}
			var err error
			switch tensor.DType {
			case F64:
				_, err = View[float64](tensor)
			case I64:
				_, err = View[int64](tensor)
			case F32:
				_, err = View[float32](tensor)
			case BF16:
				_, err = View[uint16](tensor)
			case BOOL:
				_, err = View[uint8](tensor)
			}
			if !littleEndian && tensor.DType.Bits() > 8 && len(tensor.Data) > 0 {
				assert.ErrorIs(t, err, ErrNoView, tensor.Name)
			} else {
				assert.NoError(t, err, tensor.Name)
			}
		}
		require.NoError(t, r.Close())
	}
}
