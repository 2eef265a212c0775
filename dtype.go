package safetensors

import (
	"fmt"
	"strconv"
)

// DType is the element type of a tensor. The constants are spelled as on the
// wire, the way debug/elf keeps the spellings of its specification.
//
// The zero value is not a valid DType. The constants are declared in the
// reference implementation's order, so comparing two DTypes with < gives the
// reference's order (the writer lays tensors out by descending DType).
type DType uint8

// The 22 element types of the reference implementation, in its order.
const (
	BOOL        DType = iota + 1 // boolean, one byte per element
	F4                           // 4-bit float (E2M1), two elements per byte
	F6_E2M3                      // 6-bit float, packed
	F6_E3M2                      // 6-bit float, packed
	U8                           // unsigned 8-bit integer
	I8                           // signed 8-bit integer
	F8_E5M2                      // 8-bit float, 5 exponent and 2 mantissa bits
	F8_E4M3                      // 8-bit float, 4 exponent and 3 mantissa bits
	F8_E8M0                      // 8-bit exponent-only scale
	F8_E4M3FNUZ                  // 8-bit float, finite, no negative zero
	F8_E5M2FNUZ                  // 8-bit float, finite, no negative zero
	I16                          // signed 16-bit integer
	U16                          // unsigned 16-bit integer
	F16                          // IEEE 754 half precision
	BF16                         // bfloat16
	I32                          // signed 32-bit integer
	U32                          // unsigned 32-bit integer
	F32                          // IEEE 754 single precision
	C64                          // complex of two F32
	F64                          // IEEE 754 double precision
	I64                          // signed 64-bit integer
	U64                          // unsigned 64-bit integer

	lastDType = U64
)

var dtypeNames = [...]string{
	BOOL:        "BOOL",
	F4:          "F4",
	F6_E2M3:     "F6_E2M3",
	F6_E3M2:     "F6_E3M2",
	U8:          "U8",
	I8:          "I8",
	F8_E5M2:     "F8_E5M2",
	F8_E4M3:     "F8_E4M3",
	F8_E8M0:     "F8_E8M0",
	F8_E4M3FNUZ: "F8_E4M3FNUZ",
	F8_E5M2FNUZ: "F8_E5M2FNUZ",
	I16:         "I16",
	U16:         "U16",
	F16:         "F16",
	BF16:        "BF16",
	I32:         "I32",
	U32:         "U32",
	F32:         "F32",
	C64:         "C64",
	F64:         "F64",
	I64:         "I64",
	U64:         "U64",
}

var dtypeBits = [...]uint8{
	BOOL:        8,
	F4:          4,
	F6_E2M3:     6,
	F6_E3M2:     6,
	U8:          8,
	I8:          8,
	F8_E5M2:     8,
	F8_E4M3:     8,
	F8_E8M0:     8,
	F8_E4M3FNUZ: 8,
	F8_E5M2FNUZ: 8,
	I16:         16,
	U16:         16,
	F16:         16,
	BF16:        16,
	I32:         32,
	U32:         32,
	F32:         32,
	C64:         64,
	F64:         64,
	I64:         64,
	U64:         64,
}

// valid reports whether d is one of the 22 constants.
func (d DType) valid() bool { return d >= BOOL && d <= lastDType }

// String returns the wire name of d, such as "BF16", or "DType(n)" for a value
// that is not one of the constants.
func (d DType) String() string {
	if !d.valid() {
		return "DType(" + strconv.Itoa(int(d)) + ")"
	}
	return dtypeNames[d]
}

// Bits returns the size of one element in bits: 4 for F4, 6 for F6_E2M3 and
// F6_E3M2, 8 to 64 for the others, and 0 for a value that is not a DType.
// A tensor's byte size is its element count times Bits, divided by 8; for the
// sub-byte types that product must be a multiple of 8.
func (d DType) Bits() int {
	if !d.valid() {
		return 0
	}
	return int(dtypeBits[d])
}

// IsFloat reports whether d is a real floating-point type: F4, F6_E2M3,
// F6_E3M2, the five F8 types, F16, BF16, F32 and F64. F8_E8M0 is one of
// them: its values are those of a float with 8 exponent bits and no
// mantissa (the powers of two from 2^-127 to 2^127, and NaN), as
// PyTorch's float8_e8m0fnu, a floating-point dtype there too. C64 is not
// (its elements are complex, as reflect tells Complex64 from Float32), nor
// are BOOL and the integers.
//
// A float tensor's values may still be unable to hold NaN or infinity:
// [DType.HasNaN] says which can.
func (d DType) IsFloat() bool {
	switch d {
	case F4, F6_E2M3, F6_E3M2, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F16, BF16, F32, F64:
		return true
	}
	return false
}

// HasNaN reports whether a value of d can be NaN: for the float types of 8
// bits and more, those for which [DType.IsFloat] is true except F4, F6_E2M3
// and F6_E3M2, whose every code is a finite number (the OCP Microscaling
// formats define no NaN or infinity for them). Every dtype with an
// infinity (F8_E5M2, F16, BF16, F32, F64) has NaN too, so HasNaN is also
// whether a value of d can be other than finite. F8_E4M3, F8_E8M0 and the
// FNUZ types have NaN and no infinity. [Tensor.Stats] counts the NaN and
// infinite values of every dtype for which HasNaN is true; for the others
// there is none to count.
func (d DType) HasNaN() bool {
	return d.IsFloat() && d.Bits() >= 8
}

// ParseDType returns the DType whose wire name is s. Names are case-sensitive,
// as in the reference: "F32" is a DType, "f32" and "float32" are not. An
// unknown name gives an error that wraps [ErrUnknownDType].
func ParseDType(s string) (DType, error) {
	if d := lookupDType(s); d != 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownDType, s)
}

// lookupDType returns the DType named b, or 0. It takes bytes too, so that
// the header scanner can look a name up without allocating.
func lookupDType[T string | []byte](b T) DType {
	// The switch on string(b) does not allocate.
	switch string(b) {
	case "BOOL":
		return BOOL
	case "F4":
		return F4
	case "F6_E2M3":
		return F6_E2M3
	case "F6_E3M2":
		return F6_E3M2
	case "U8":
		return U8
	case "I8":
		return I8
	case "F8_E5M2":
		return F8_E5M2
	case "F8_E4M3":
		return F8_E4M3
	case "F8_E8M0":
		return F8_E8M0
	case "F8_E4M3FNUZ":
		return F8_E4M3FNUZ
	case "F8_E5M2FNUZ":
		return F8_E5M2FNUZ
	case "I16":
		return I16
	case "U16":
		return U16
	case "F16":
		return F16
	case "BF16":
		return BF16
	case "I32":
		return I32
	case "U32":
		return U32
	case "F32":
		return F32
	case "C64":
		return C64
	case "F64":
		return F64
	case "I64":
		return I64
	case "U64":
		return U64
	}
	return 0
}

// MarshalText implements [encoding.TextMarshaler]. It returns the wire name,
// or an error for a value that is not one of the constants.
func (d DType) MarshalText() ([]byte, error) {
	if !d.valid() {
		return nil, fmt.Errorf("%w: %v", ErrUnknownDType, d)
	}
	return []byte(dtypeNames[d]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with [ParseDType].
func (d *DType) UnmarshalText(text []byte) error {
	v := lookupDType(text)
	if v == 0 {
		return fmt.Errorf("%w %q", ErrUnknownDType, text)
	}
	*d = v
	return nil
}
