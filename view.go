package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"unsafe"
)

// Number is the element types that typed access offers: Go's fixed-size
// integers and floats, and complex64, or types defined on them.
type Number interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~float32 | ~float64 | ~complex64
}

var (
	// ErrDTypeMismatch is returned by View and Values when the Go element
	// type does not hold the tensor's dtype: for example float32 for a BF16
	// tensor, whose elements are read as uint16 bit patterns.
	ErrDTypeMismatch = errors.New("safetensors: element type does not match the dtype")

	// ErrNoView is returned by View when the tensor's bytes cannot be seen
	// as a slice of the element type without copying: the host is big-endian
	// or the bytes are not aligned for the type. Values copies instead.
	ErrNoView = errors.New("safetensors: no zero-copy view")
)

// littleEndian reports whether the host stores numbers as the format does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// elemKind returns the kind of Go element type that holds dtype d: the
// integer or float of its width, uint16 for the bit patterns of F16 and BF16,
// uint8 for those of BOOL and the F8 types. Packed F4 and F6 have none.
func elemKind(d DType) reflect.Kind {
	switch d {
	case U8, BOOL, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ:
		return reflect.Uint8
	case I8:
		return reflect.Int8
	case U16, F16, BF16:
		return reflect.Uint16
	case I16:
		return reflect.Int16
	case U32:
		return reflect.Uint32
	case I32:
		return reflect.Int32
	case U64:
		return reflect.Uint64
	case I64:
		return reflect.Int64
	case F32:
		return reflect.Float32
	case F64:
		return reflect.Float64
	case C64:
		return reflect.Complex64
	}
	return reflect.Invalid
}

// checkKind returns an error if T does not hold t's elements, and the
// number of elements otherwise.
func checkKind[T Number](t Tensor) (int, error) {
	kind := reflect.TypeFor[T]().Kind()
	want := elemKind(t.DType)
	if want == reflect.Invalid {
		return 0, tensorErrorf(t.Name, ErrDTypeMismatch, "%v elements are packed bits; no Go type holds them", t.DType)
	}
	if kind != want {
		return 0, tensorErrorf(t.Name, ErrDTypeMismatch, "%v elements are %v, not %v", t.DType, want, kind)
	}
	size := int(unsafe.Sizeof(*new(T)))
	if len(t.Data)%size != 0 {
		return 0, tensorErrorf(t.Name, ErrSizeMismatch, "%d bytes is not a whole number of %d-byte elements", len(t.Data), size)
	}
	return len(t.Data) / size, nil
}

// View returns t's elements as a []T that shares t's bytes, without copying:
// []float32 for an F32 tensor, []uint16 for the bit patterns of F16 and
// BF16 (convert them with the package's converters), []uint8 for BOOL and
// the F8 types. The slice is read-only, like t.Data, and valid as long as it
// is.
//
// View returns an error wrapping ErrDTypeMismatch if T does not hold the
// dtype, and one wrapping ErrNoView if the host is big-endian or t.Data is
// not aligned for T; Values works in both of those cases. Files from the
// reference writer, opened with Open or NewReader, have every tensor
// aligned.
func View[T Number](t Tensor) ([]T, error) {
	n, err := checkKind[T](t)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return []T{}, nil
	}
	size := unsafe.Sizeof(*new(T))
	if !littleEndian && size > 1 {
		return nil, tensorErrorf(t.Name, ErrNoView, "the host is big-endian; use Values")
	}
	p := unsafe.Pointer(unsafe.SliceData(t.Data))
	if align := unsafe.Alignof(*new(T)); uintptr(p)%align != 0 {
		return nil, tensorErrorf(t.Name, ErrNoView, "its data at address %#x is not %d-byte aligned for %T; use Values", uintptr(p), align, *new(T))
	}
	return unsafe.Slice((*T)(p), n), nil
}

// Values decodes t's elements into dst, appending to it, and returns the
// result: a copy, whatever the host's byte order and the alignment of
// t.Data. T must hold the dtype as for View.
func Values[T Number](t Tensor, dst []T) (result []T, err error) {
	n, err := checkKind[T](t)
	if err != nil {
		return dst, err
	}
	orig := dst
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), t.Name); e != nil {
			result, err = orig, e
		}
	}()
	if cap(dst)-len(dst) < n {
		dst = append(make([]T, 0, len(dst)+n), dst...)
	}
	out := dst[len(dst) : len(dst)+n]
	b := t.Data
	if unsafe.Sizeof(*new(T)) == 1 {
		// uint8 and int8 and the types defined on them: the bytes as they are.
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), n), b)
	} else {
		decode(out, b)
	}
	return dst[:len(dst)+n], nil
}

// decode fills out from the little-endian bytes b, for element types wider
// than a byte, including types defined on the basic ones, whose memory is
// the same. Each element is stored with the host's byte order.
func decode[T Number](out []T, b []byte) {
	le := binary.LittleEndian
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Uint16, reflect.Int16:
		for i := range out {
			*(*uint16)(unsafe.Pointer(&out[i])) = le.Uint16(b[2*i:])
		}
	case reflect.Uint32, reflect.Int32, reflect.Float32:
		for i := range out {
			*(*uint32)(unsafe.Pointer(&out[i])) = le.Uint32(b[4*i:])
		}
	case reflect.Uint64, reflect.Int64, reflect.Float64:
		for i := range out {
			*(*uint64)(unsafe.Pointer(&out[i])) = le.Uint64(b[8*i:])
		}
	case reflect.Complex64:
		// Two float32s, the real part first, each little-endian.
		for i := range out {
			parts := (*[2]uint32)(unsafe.Pointer(&out[i]))
			parts[0] = le.Uint32(b[8*i:])
			parts[1] = le.Uint32(b[8*i+4:])
		}
	default:
		panic(fmt.Sprintf("safetensors: no decoding for %v", reflect.TypeFor[T]()))
	}
}
