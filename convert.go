package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// Rounding says how a float32 that a 16-bit format cannot hold exactly is
// rounded.
type Rounding int

const (
	// RoundNearestEven rounds to the nearest value, ties to the one with an
	// even last bit, as IEEE 754 does by default and PyTorch and NumPy do;
	// values beyond the largest finite one become ±Inf. It is the default.
	RoundNearestEven Rounding = iota

	// Truncate drops the bits that do not fit, rounding toward zero in
	// magnitude. For F16, a value whose exponent does not fit (2^16 and up)
	// becomes ±Inf, and subnormal results are truncated too. For BF16 the
	// result is the top 16 bits of the float32. NaNs stay NaNs of the same
	// sign in both, quiet, with the payload's top bits kept. The Spark safetensors connector truncates BF16 to the same bits,
	// but F16 differently: it flushes results below 2^-14 to zero and writes
	// every NaN as the quiet NaN of its sign; the dataset subpackage encodes
	// as the connector does.
	Truncate
)

// String returns "RoundNearestEven" or "Truncate".
func (r Rounding) String() string {
	switch r {
	case RoundNearestEven:
		return "RoundNearestEven"
	case Truncate:
		return "Truncate"
	}
	return fmt.Sprintf("Rounding(%d)", int(r))
}

// F16ToF32 returns the float32 that the IEEE 754 half-precision bits h
// encode. Every F16 value is a float32 value, so the result is exact: ±0,
// subnormals and ±Inf. A NaN keeps its sign and payload and comes out
// quiet, as with github.com/x448/float16 and the F16C instructions.
func F16ToF32(h uint16) float32 {
	return math.Float32frombits(f16ToF32Bits(h))
}

func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch exp {
	case 0:
		if man == 0 {
			return sign
		}
		// A subnormal, man × 2^-24: normalize it. The leading 1 of the
		// 10-bit mantissa moves to bit 10, the hidden bit.
		shift := uint32(bits.LeadingZeros32(man)) - 21
		return sign | (113-shift)<<23 | (man<<shift&0x3ff)<<13
	case 0x1f:
		if man != 0 {
			return sign | 0x7fc00000 | man<<13 // a quiet NaN
		}
		return sign | 0x7f800000
	}
	return sign | (exp+112)<<23 | man<<13
}

// BF16ToF32 returns the float32 that the bfloat16 bits b encode: b is the top
// half of a float32, so the result is exact, NaN payloads included.
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// F32ToF16 returns the IEEE 754 half-precision bits nearest to f with
// RoundNearestEven, or toward zero with Truncate. ±0 and ±Inf are kept, and
// so are subnormal results, which F16 has below 2^-14. A NaN gives a NaN of
// the same sign, quiet, with the top bits of f's payload: the quiet bit is
// set so that a payload held in f's low bits does not turn into an
// infinity. With RoundNearestEven the result equals that of
// github.com/x448/float16's Fromfloat32 for every input but NaNs.
func F32ToF16(f float32, r Rounding) uint16 {
	return f32BitsToF16(math.Float32bits(f), r)
}

func f32BitsToF16(x uint32, r Rounding) uint16 {
	sign := uint16(x>>16) & 0x8000
	abs := x & 0x7fffffff
	if abs-0x38800000 < 0x47800000-0x38800000 { // from 2^-14 to 2^16: a normal F16
		h := (abs - 112<<23) >> 13
		if r == RoundNearestEven {
			// Add one when the dropped bits are above half, or at half with
			// an odd result, without a branch; a carry into the exponent is
			// right, up to Inf.
			h += (abs&0x1fff + 0xfff + h&1) >> 13
		}
		return sign | uint16(h)
	}
	return sign | f32BitsToF16Rare(abs, r)
}

// f32BitsToF16Rare converts the absolute values that do not give a normal
// F16: NaN, Inf, overflow, subnormals and zero.
func f32BitsToF16Rare(abs uint32, r Rounding) uint16 {
	switch {
	case abs > 0x7f800000: // NaN
		return 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x47800000: // 2^16 and up, or Inf: the exponent does not fit
		return 0x7c00
	case abs < 0x33000000: // below 2^-25, half the smallest subnormal: zero
		return 0
	}
	// A subnormal F16, a multiple of 2^-24: the significand with its hidden
	// bit, shifted down by what the exponent lacks.
	m := abs&0x7fffff | 0x800000
	shift := 126 - abs>>23 // from 14 to 24
	h := m >> shift
	if r == RoundNearestEven {
		rest, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		h += (rest + half - 1 + h&1) >> shift
	}
	return uint16(h)
}

// F32ToBF16 returns the bfloat16 bits nearest to f with RoundNearestEven,
// or f's top 16 bits with Truncate. BF16 has float32's exponent range, so
// only rounding can overflow to ±Inf. A NaN gives a NaN of the same sign,
// quiet, with the top bits of f's payload: the quiet bit is set so that a
// payload held in f's low bits does not turn into an infinity.
func F32ToBF16(f float32, r Rounding) uint16 {
	return f32BitsToBF16(math.Float32bits(f), r)
}

func f32BitsToBF16(x uint32, r Rounding) uint16 {
	if x&0x7fffffff > 0x7f800000 {
		return uint16(x>>16) | 0x40
	}
	if r == RoundNearestEven {
		x += 0x7fff + (x>>16)&1
	}
	return uint16(x >> 16)
}

// The bulk conversions below take a destination slice, as snappy.Decode
// does: if it is long enough, the result is written into it and returned,
// resliced to the result's length, so that converting in a loop allocates
// nothing; otherwise a new slice is allocated. Each element is converted as
// the scalar function does.

// F16ToF32s converts the F16 bits in src to float32s in dst.
func F16ToF32s(dst []float32, src []uint16) []float32 {
	dst = grow(dst, len(src))
	f16ToF32s(dst, src)
	return dst
}

// BF16ToF32s converts the BF16 bits in src to float32s in dst.
func BF16ToF32s(dst []float32, src []uint16) []float32 {
	dst = grow(dst, len(src))
	bf16ToF32s(dst, src)
	return dst
}

// F32ToF16s converts the float32s in src to F16 bits in dst, rounded with r.
func F32ToF16s(dst []uint16, src []float32, r Rounding) []uint16 {
	dst = grow(dst, len(src))
	f32ToF16s(dst, src, r)
	return dst
}

// F32ToBF16s converts the float32s in src to BF16 bits in dst, rounded with
// r.
func F32ToBF16s(dst []uint16, src []float32, r Rounding) []uint16 {
	dst = grow(dst, len(src))
	f32ToBF16s(dst, src, r)
	return dst
}

// F16BytesToF32s converts the little-endian F16 tensor bytes in src, whose
// length must be even, to float32s in dst.
func F16BytesToF32s(dst []float32, src []byte) []float32 {
	dst = grow(dst, len(src)/2)
	f16BytesToF32s(dst, src)
	return dst
}

// BF16BytesToF32s converts the little-endian BF16 tensor bytes in src, whose
// length must be even, to float32s in dst.
func BF16BytesToF32s(dst []float32, src []byte) []float32 {
	dst = grow(dst, len(src)/2)
	bf16BytesToF32s(dst, src)
	return dst
}

// F32sToF16Bytes converts the float32s in src to the little-endian bytes of
// an F16 tensor in dst, rounded with r.
func F32sToF16Bytes(dst []byte, src []float32, r Rounding) []byte {
	dst = grow(dst, 2*len(src))
	f32sToF16Bytes(dst, src, r)
	return dst
}

// F32sToBF16Bytes converts the float32s in src to the little-endian bytes of
// a BF16 tensor in dst, rounded with r.
func F32sToBF16Bytes(dst []byte, src []float32, r Rounding) []byte {
	dst = grow(dst, 2*len(src))
	f32sToBF16Bytes(dst, src, r)
	return dst
}

// grow returns dst resliced to n elements, or a new slice if it is too
// short.
func grow[T any](dst []T, n int) []T {
	if cap(dst) < n {
		return make([]T, n)
	}
	return dst[:n]
}

// The bulk conversions: the pure-Go loops, which assembly replaces at
// start-up where the CPU allows (convert_amd64.go).
var (
	f16ToF32s       = f16ToF32sGo
	bf16ToF32s      = bf16ToF32sGo
	f32ToF16s       = f32ToF16sGo
	f32ToBF16s      = f32ToBF16sGo
	f16BytesToF32s  = f16BytesToF32sGo
	bf16BytesToF32s = bf16BytesToF32sGo
	f32sToF16Bytes  = f32sToF16BytesGo
	f32sToBF16Bytes = f32sToBF16BytesGo
)

// The pure-Go bulk loops.

// f16Table maps every F16 to its float32 bits, for the pure-Go bulk
// decoding: 256 KiB, built on first use.
var f16Table = sync.OnceValue(func() *[1 << 16]uint32 {
	t := new([1 << 16]uint32)
	for h := range t {
		t[h] = f16ToF32Bits(uint16(h))
	}
	return t
})

func f16ToF32sGo(dst []float32, src []uint16) {
	t := f16Table()
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = math.Float32frombits(t[h])
	}
}

func bf16ToF32sGo(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	if littleEndian {
		n := swarBF16ToF32(asBytes(dst), asBytes(src))
		dst, src = dst[n:], src[n:]
	}
	for i, b := range src {
		dst[i] = math.Float32frombits(uint32(b) << 16)
	}
}

func f32ToF16sGo(dst []uint16, src []float32, r Rounding) {
	dst = dst[:len(src)]
	// f32BitsToF16, with its common case written out, since it is too large
	// to be inlined.
	if r == Truncate {
		for i, f := range src {
			x := math.Float32bits(f)
			sign, abs := uint16(x>>16)&0x8000, x&0x7fffffff
			if abs-0x38800000 < 0x47800000-0x38800000 {
				dst[i] = sign | uint16((abs-112<<23)>>13)
			} else {
				dst[i] = sign | f32BitsToF16Rare(abs, Truncate)
			}
		}
		return
	}
	for i, f := range src {
		x := math.Float32bits(f)
		sign, abs := uint16(x>>16)&0x8000, x&0x7fffffff
		if abs-0x38800000 < 0x47800000-0x38800000 {
			h := (abs - 112<<23) >> 13
			dst[i] = sign | uint16(h+(abs&0x1fff+0xfff+h&1)>>13)
		} else {
			dst[i] = sign | f32BitsToF16Rare(abs, RoundNearestEven)
		}
	}
}

func f32ToBF16sGo(dst []uint16, src []float32, r Rounding) {
	dst = dst[:len(src)]
	if r == Truncate {
		if littleEndian {
			n := swarF32ToBF16Trunc(asBytes(dst), asBytes(src))
			dst, src = dst[n:], src[n:]
		}
		for i, f := range src {
			dst[i] = f32BitsToBF16(math.Float32bits(f), Truncate)
		}
		return
	}
	for i, f := range src {
		dst[i] = f32BitsToBF16(math.Float32bits(f), RoundNearestEven)
	}
}

func f16BytesToF32sGo(dst []float32, src []byte) {
	t := f16Table()
	dst = dst[:len(src)/2]
	for i := range dst {
		dst[i] = math.Float32frombits(t[binary.LittleEndian.Uint16(src[2*i:])])
	}
}

func bf16BytesToF32sGo(dst []float32, src []byte) {
	dst = dst[:len(src)/2]
	if littleEndian {
		n := swarBF16ToF32(asBytes(dst), src)
		dst, src = dst[n:], src[2*n:]
	}
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

func f32sToF16BytesGo(dst []byte, src []float32, r Rounding) {
	dst = dst[:2*len(src)]
	// In chunks through a buffer of uint16s, to share f32ToF16sGo's loop.
	var buf [256]uint16
	for len(src) > 0 {
		n := min(len(src), len(buf))
		f32ToF16sGo(buf[:n], src[:n], r)
		for i, h := range buf[:n] {
			binary.LittleEndian.PutUint16(dst[2*i:], h)
		}
		src, dst = src[n:], dst[2*n:]
	}
}

func f32sToBF16BytesGo(dst []byte, src []float32, r Rounding) {
	dst = dst[:2*len(src)]
	if r == Truncate {
		if littleEndian {
			n := swarF32ToBF16Trunc(dst, asBytes(src))
			dst, src = dst[2*n:], src[n:]
		}
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], f32BitsToBF16(math.Float32bits(f), Truncate))
		}
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], f32BitsToBF16(math.Float32bits(f), RoundNearestEven))
	}
}

// The F8 formats, decoded through tables of their 256 values. A value is
// exact; a NaN code gives the float32 bits that torch's .float() gives on a
// CPU (torch 2.x, c10/util/Float8_*.h and torch/headeronly/util), since
// torch is what users compare with:
//
//   - F8_E4M3 (torch's float8_e4m3fn) through fp8e4m3fn_to_fp32_value, whose
//     bit arithmetic turns the NaN codes 0x7f and 0xff into the sign, an
//     all-ones exponent and the code's mantissa bits shifted as for a number:
//     0x7ff00000 and 0xfff00000;
//   - F8_E5M2 as the top byte of an F16, through fp16_ieee_to_fp32_value (F16C's
//     conversion, or a float multiply where it is missing): a NaN keeps its
//     sign and payload and is made quiet, so 0x7d gives 0x7fe00000, 0x7e
//     0x7fc00000, 0x7f 0x7fe00000, as F16ToF32 does;
//   - F8_E4M3FNUZ and F8_E5M2FNUZ through fp8_fnuz_to_fp32_value
//     (Float8_fnuz_cvt.h), which returns the fixed bits 0x7f800001 for 0x80;
//   - F8_E8M0 (float8_e8m0fnu) through its operator float, which returns
//     0x7f800001 for 0xff.
var f8Tables = sync.OnceValue(func() map[DType]*[256]uint32 {
	return map[DType]*[256]uint32{
		F8_E4M3:     f8Table(4, 3, 7, f8FN),
		F8_E5M2:     f8Table(5, 2, 15, f8IEEE),
		F8_E4M3FNUZ: f8Table(4, 3, 8, f8FNUZ),
		F8_E5M2FNUZ: f8Table(5, 2, 16, f8FNUZ),
		F8_E8M0:     f8E8M0Table(),
	}
})

// The ways the F8 formats spend their top codes.
const (
	f8IEEE = iota // all-ones exponent: Inf for a zero mantissa, else NaN (E5M2)
	f8FN          // no Inf; only the all-ones code of each sign is NaN (E4M3)
	f8FNUZ        // no Inf, no -0; 0x80 is the only NaN (FNUZ)
)

// torchFixedNaN is the float32 NaN that torch's fp8_fnuz_to_fp32_value and
// Float8_e8m0fnu's operator float return for the NaN code: a signalling
// NaN, bits that stay as they are through loads and stores.
const torchFixedNaN = 0x7f800001

// f8Table builds the float32 bits of the 256 codes of an F8 format with the
// given exponent and mantissa widths and exponent bias.
func f8Table(expBits, manBits uint, bias int, kind int) *[256]uint32 {
	t := new([256]uint32)
	expMax := 1<<expBits - 1
	for code := range t {
		sign := uint32(code>>7) << 31
		exp := code >> manBits & expMax
		man := code & (1<<manBits - 1)
		switch {
		case kind == f8FNUZ && code == 0x80:
			t[code] = torchFixedNaN
			continue
		case kind == f8FN && exp == expMax && man == 1<<manBits-1:
			// An all-ones exponent with the code's mantissa bits in place.
			t[code] = sign | 0x7f800000 | uint32(man)<<(23-manBits)
			continue
		case kind == f8IEEE && exp == expMax:
			// Inf, or a NaN made quiet as F16ToF32 does.
			t[code] = sign | 0x7f800000 | uint32(man)<<(23-manBits)
			if man != 0 {
				t[code] |= 0x400000
			}
			continue
		}
		// value = man × 2^(1-bias-manBits) for exp 0, else (2^manBits +
		// man) × 2^(exp-bias-manBits): exact in float32.
		var v float32
		if exp == 0 {
			v = float32(math.Ldexp(float64(man), 1-bias-int(manBits)))
		} else {
			v = float32(math.Ldexp(float64(1<<manBits+man), exp-bias-int(manBits)))
		}
		t[code] = sign | math.Float32bits(v)
	}
	return t
}

// f8E8M0Table builds the float32 bits of the 256 codes of F8_E8M0, an
// exponent alone: 2^(code-127), with 0xff for NaN.
func f8E8M0Table() *[256]uint32 {
	t := new([256]uint32)
	for code := range t {
		if code == 0xff {
			t[code] = torchFixedNaN
			continue
		}
		t[code] = math.Float32bits(float32(math.Ldexp(1, code-127)))
	}
	return t
}

// Float32s decodes the tensor's elements into a new []float32, whatever its
// dtype, as long as its elements are real numbers:
//
//   - F32 as it is; F16 and BF16 exactly, through the bulk converters;
//   - F64 and the 64-bit integers rounded to the nearest float32, as Go's
//     conversions do; the other integers exactly;
//   - the F8 types exactly, through tables of their 256 values; their NaN
//     codes give the bits torch's .float() gives (0x7ff00000 for F8_E4M3's
//     0x7f, 0x7f800001 for the FNUZ types' 0x80 and F8_E8M0's 0xff);
//   - BOOL as 0 for a zero byte and 1 for any other.
//
// C64 and the packed F4 and F6 types give an error wrapping
// ErrDTypeMismatch.
func (t Tensor) Float32s() ([]float32, error) {
	return t.AppendFloat32s(nil)
}

// AppendFloat32s appends the tensor's elements, decoded as Float32s decodes
// them, to dst and returns the extended slice. It allocates only when dst
// lacks the capacity, so that a large tensor can be decoded in chunks
// through one buffer: give it a Tensor whose Data is a part of the bytes, a
// whole number of elements, and dst[:0]. On error dst is returned as it was.
func (t Tensor) AppendFloat32s(dst []float32) (result []float32, err error) {
	if err := t.checkFloat32s(); err != nil {
		return dst, err
	}
	orig := dst
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), t.Name); e != nil {
			result, err = orig, e
		}
	}()
	n := len(t.Data) / (t.DType.Bits() / 8)
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	b := t.Data
	le := binary.LittleEndian
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case F16:
		f16BytesToF32s(out, b)
	case BF16:
		bf16BytesToF32s(out, b)
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case F8_E4M3, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0:
		table := f8Tables()[t.DType]
		for i := range out {
			out[i] = math.Float32frombits(table[b[i]])
		}
	case BOOL:
		for i := range out {
			if b[i] != 0 {
				out[i] = 1
			}
		}
	case U8:
		for i := range out {
			out[i] = float32(b[i])
		}
	case I8:
		for i := range out {
			out[i] = float32(int8(b[i]))
		}
	case U16:
		for i := range out {
			out[i] = float32(le.Uint16(b[2*i:]))
		}
	case I16:
		for i := range out {
			out[i] = float32(int16(le.Uint16(b[2*i:])))
		}
	case U32:
		for i := range out {
			out[i] = float32(le.Uint32(b[4*i:]))
		}
	case I32:
		for i := range out {
			out[i] = float32(int32(le.Uint32(b[4*i:])))
		}
	case U64:
		for i := range out {
			out[i] = float32(le.Uint64(b[8*i:]))
		}
	case I64:
		for i := range out {
			out[i] = float32(int64(le.Uint64(b[8*i:])))
		}
	default:
		return dst, tensorErrorf(t.Name, ErrDTypeMismatch, "%v elements have no float32 value", t.DType)
	}
	return dst[:len(dst)+n], nil
}

// Elements returns the elements [start, end) of the tensor, in the order
// of its bytes (row-major), as a one-dimensional tensor of the same name and
// dtype whose Data is a slice of t.Data: a part of a large tensor that
// AppendFloat32s decodes into a caller's buffer, or that Stats summarizes
// (then Stats.Merge combines the parts), so that several goroutines can
// share one tensor. The elements are counted from the tensor's bytes. For
// the packed dtypes, start and end must fall on whole bytes: even for F4
// (two elements a byte), multiples of 4 for F6 (four elements in three
// bytes), or the error wraps ErrMisalignedSlice. A range outside the
// tensor gives an error wrapping ErrInvalidSlice.
func (t Tensor) Elements(start, end uint64) (Tensor, error) {
	b, e, err := elementBytes(t.Name, t.DType, uint64(len(t.Data)), start, end)
	if err != nil {
		return Tensor{}, err
	}
	return Tensor{Name: t.Name, DType: t.DType, Shape: []uint64{end - start}, Data: t.Data[b:e:e]}, nil
}

// elementBytes returns the bytes [b, e) that hold the elements [start, end)
// of a tensor of the dtype and size (in bytes), as Elements takes them.
func elementBytes(name string, dtype DType, size, start, end uint64) (b, e uint64, err error) {
	nbits := uint64(dtype.Bits())
	if nbits == 0 {
		return 0, 0, tensorErrorf(name, ErrDTypeMismatch, "unknown dtype %v", dtype)
	}
	n := elementCount(size, dtype)
	if start > end || end > n {
		return 0, 0, tensorErrorf(name, ErrInvalidSlice, "elements [%d, %d) of a tensor of %d", start, end, n)
	}
	// The bit offsets, in 128 bits: start and end are at most n, but a
	// tensor read through a source may claim up to 2^63 bytes.
	bitAt := func(i uint64) (byteOff uint64, whole bool) {
		hi, lo := bits.Mul64(i, nbits)
		return hi<<61 | lo>>3, lo%8 == 0
	}
	b, wb := bitAt(start)
	e, we := bitAt(end)
	if !wb || !we {
		return 0, 0, tensorErrorf(name, ErrMisalignedSlice, "elements [%d, %d) of %v do not fall on whole bytes", start, end, dtype)
	}
	return b, e, nil
}

// AppendFloat32sRange appends the elements [start, end) of the tensor to
// dst, decoded as Float32s decodes them, and returns the extended slice:
// t.Elements(start, end) and then AppendFloat32s, for decoding a large
// tensor in chunks into a reused buffer, from several goroutines at once.
// On error dst is returned as it was.
func (t Tensor) AppendFloat32sRange(dst []float32, start, end uint64) ([]float32, error) {
	part, err := t.Elements(start, end)
	if err != nil {
		return dst, err
	}
	return part.AppendFloat32s(dst)
}

// checkFloat32s returns an error if t's dtype has no float32 value or its
// bytes are not a whole number of elements.
func (t Tensor) checkFloat32s() error {
	size := t.DType.Bits()
	if size < 8 || t.DType == C64 {
		return tensorErrorf(t.Name, ErrDTypeMismatch, "%v elements have no float32 value", t.DType)
	}
	if len(t.Data)%(size/8) != 0 {
		return tensorErrorf(t.Name, ErrSizeMismatch, "%d bytes is not a whole number of %d-byte elements", len(t.Data), size/8)
	}
	return nil
}

// TensorFromFloat32s builds a tensor of dtype F32, F16 or BF16 from values,
// rounded with r, for writers: len(values) must be the shape's element count.
func TensorFromFloat32s(name string, dtype DType, shape []uint64, values []float32, r Rounding) (Tensor, error) {
	size, err := byteSize(dtype, shape)
	if err != nil {
		return Tensor{}, &TensorError{Name: name, Err: err}
	}
	bitsPer := uint64(dtype.Bits())
	if dtype != F32 && dtype != F16 && dtype != BF16 {
		return Tensor{}, tensorErrorf(name, ErrDTypeMismatch, "TensorFromFloat32s makes F32, F16 or BF16 tensors, not %v", dtype)
	}
	if n := size * 8 / bitsPer; n != uint64(len(values)) {
		return Tensor{}, tensorErrorf(name, ErrSizeMismatch, "%d values for shape %v, which holds %d", len(values), shape, n)
	}
	t := Tensor{Name: name, DType: dtype, Shape: shape}
	switch dtype {
	case F32:
		t.Data = make([]byte, size)
		for i, v := range values {
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
		}
	case F16:
		t.Data = F32sToF16Bytes(nil, values, r)
	case BF16:
		t.Data = F32sToBF16Bytes(nil, values, r)
	}
	return t, nil
}
