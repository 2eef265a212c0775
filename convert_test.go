package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

// The independent references below compute conversions with float64
// arithmetic, the way the definitions read: scale by the format's quantum at
// that magnitude, round the quotient, encode the result. They share no code
// with the bit manipulations in convert.go.

// pow2 returns 2^e, for -1022 <= e <= 1023.
func pow2(e int) float64 { return math.Float64frombits(uint64(e+1023) << 52) }

// exponent returns floor(log2(v)) for a positive normal float64 v, which
// every non-zero float32 is.
func exponent(v float64) int { return int(math.Float64bits(v)>>52&0x7ff) - 1023 }

// refRound rounds v, which is finite and not negative, to the format with
// mBits mantissa bits and smallest normal exponent minExp, by rounding to
// nearest even or toward zero. It returns the rounded value.
func refRound(v float64, mBits, minExp int, trunc bool) float64 {
	if v == 0 {
		return 0
	}
	e := max(exponent(v), minExp) - mBits // the quantum at v's magnitude is 2^e
	n := v * pow2(-e)
	if trunc {
		n = math.Floor(n)
	} else {
		n = math.RoundToEven(n)
	}
	return n * pow2(e)
}

// refEncode encodes the rounded value r, finite and not negative, in a
// format with the given widths and bias; r at or past 2^(maxExp+1) is Inf.
func refEncode(r float64, eBits, mBits, bias int) uint32 {
	maxExp := 1<<eBits - 2 - bias
	minExp := 1 - bias
	if r >= pow2(maxExp+1) {
		return uint32(1<<eBits-1) << mBits
	}
	if r < pow2(minExp) {
		return uint32(r * pow2(mBits-minExp)) // subnormal or zero
	}
	e := exponent(r)
	man := r*pow2(mBits-e) - float64(uint(1)<<mBits)
	return uint32(e+bias)<<mBits | uint32(man)
}

// refF16 is the reference for F32ToF16.
func refF16(f float32, r Rounding) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	v := math.Abs(float64(f))
	switch {
	case math.IsNaN(v):
		return sign | 0x7e00 | uint16(x>>13)&0x3ff
	case math.IsInf(v, 0):
		return sign | 0x7c00
	}
	return sign | uint16(refEncode(refRound(v, 10, -14, r == Truncate), 5, 10, 15))
}

// refBF16 is the reference for F32ToBF16.
func refBF16(f float32, r Rounding) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	v := math.Abs(float64(f))
	switch {
	case math.IsNaN(v):
		return sign | 0x7f80 | 0x40 | uint16(x>>16)&0x7f
	case math.IsInf(v, 0):
		return sign | 0x7f80
	}
	return sign | uint16(refEncode(refRound(v, 7, -126, r == Truncate), 8, 7, 127))
}

// refF16ToF32 is the reference for F16ToF32, from the encoding's definition.
func refF16ToF32(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp, man := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0x1f:
		if h&0x3ff != 0 {
			return sign | 0x7fc00000 | uint32(h&0x3ff)<<13 // NaNs come out quiet
		}
		return sign | 0x7f800000
	case 0:
		return sign | math.Float32bits(float32(math.Ldexp(man, -24)))
	}
	return sign | math.Float32bits(float32(math.Ldexp(1024+man, exp-25)))
}

func TestF16ToF32All(t *testing.T) {
	var bulk [1 << 16]uint16
	for h := range 1 << 16 {
		bulk[h] = uint16(h)
		got := math.Float32bits(F16ToF32(uint16(h)))
		require.Equal(t, refF16ToF32(uint16(h)), got, "%#04x", h)
		require.Equal(t, math.Float32bits(float16.Frombits(uint16(h)).Float32()), got, "%#04x vs x448", h)
		require.Equal(t, uint32(h)<<16, math.Float32bits(BF16ToF32(uint16(h))), "%#04x", h)
	}
	out := F16ToF32s(nil, bulk[:])
	outB := BF16ToF32s(nil, bulk[:])
	bytes := make([]byte, 2<<16)
	for i, h := range bulk {
		binary.LittleEndian.PutUint16(bytes[2*i:], h)
	}
	outFromBytes := F16BytesToF32s(nil, bytes)
	outBFromBytes := BF16BytesToF32s(nil, bytes)
	for h := range bulk {
		require.Equal(t, math.Float32bits(F16ToF32(uint16(h))), math.Float32bits(out[h]), "bulk %#04x", h)
		require.Equal(t, math.Float32bits(F16ToF32(uint16(h))), math.Float32bits(outFromBytes[h]), "bytes %#04x", h)
		require.Equal(t, uint32(h)<<16, math.Float32bits(outB[h]), "bulk BF16 %#04x", h)
		require.Equal(t, uint32(h)<<16, math.Float32bits(outBFromBytes[h]), "bytes BF16 %#04x", h)
	}
}

// special lists float32 bit patterns around every boundary of the 16-bit
// formats: zeros, infinities, NaNs with payloads high and low, the largest
// and smallest normal and subnormal values, the overflow thresholds, and
// values just below, at and above the halfway points.
func special() []uint32 {
	var xs []uint32
	for _, x := range []uint32{
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff, 0x7f802000,
		0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x477fffff, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff,
		0x38800000, 0x387fffff, 0x387fe000, 0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0x00000001, 0x00800000,
		0x007fffff, 0x3f800000, 0x3f801000, 0x3f803000, 0x3f802000, 0x3f808000, 0x3f818000, 0x3f817fff, 0x3f818001,
	} {
		for d := -2; d <= 2; d++ {
			xs = append(xs, x+uint32(d), (x+uint32(d))^0x80000000)
		}
	}
	return xs
}

// checkF32To16 compares the conversions of the float32 bit patterns xs
// with the references, and the bulk conversions with the scalar ones.
func checkF32To16(t *testing.T, xs []uint32, f16, bf16 []uint16, b []byte, fs []float32) {
	for i, x := range xs {
		fs[i] = math.Float32frombits(x)
	}
	fs = fs[:len(xs)]
	for _, r := range []Rounding{RoundNearestEven, Truncate} {
		F32ToF16s(f16[:len(xs)], fs, r)
		for i, f := range fs {
			want := refF16(f, r)
			if got := F32ToF16(f, r); got != want || f16[i] != want {
				t.Fatalf("F32ToF16(%#08x, %v) = %#04x, bulk %#04x, want %#04x", xs[i], r, got, f16[i], want)
			}
			if r == RoundNearestEven && !math.IsNaN(float64(f)) {
				if x448 := float16.Fromfloat32(f).Bits(); x448 != want {
					t.Fatalf("F32ToF16(%#08x) = %#04x, x448 %#04x", xs[i], want, x448)
				}
			}
		}
		F32sToF16Bytes(b, fs, r)
		for i := range fs {
			if got := binary.LittleEndian.Uint16(b[2*i:]); got != f16[i] {
				t.Fatalf("F32sToF16Bytes(%#08x, %v) = %#04x, want %#04x", xs[i], r, got, f16[i])
			}
		}
		F32ToBF16s(bf16[:len(xs)], fs, r)
		for i, f := range fs {
			want := refBF16(f, r)
			if got := F32ToBF16(f, r); got != want || bf16[i] != want {
				t.Fatalf("F32ToBF16(%#08x, %v) = %#04x, bulk %#04x, want %#04x", xs[i], r, got, bf16[i], want)
			}
		}
		F32sToBF16Bytes(b, fs, r)
		for i := range fs {
			if got := binary.LittleEndian.Uint16(b[2*i:]); got != bf16[i] {
				t.Fatalf("F32sToBF16Bytes(%#08x, %v) = %#04x, want %#04x", xs[i], r, got, bf16[i])
			}
		}
	}
}

// TestF32To16 covers the boundaries and a million random patterns; the
// exhaustive test covers every pattern.
func TestF32To16(t *testing.T) {
	xs := special()
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1 << 20 {
		xs = append(xs, rng.Uint32())
	}
	n := len(xs)
	checkF32To16(t, xs, make([]uint16, n), make([]uint16, n), make([]byte, 2*n), make([]float32, n))
}

// TestBulkLargeAndMisaligned runs the bulk conversions on a result large
// enough to be streamed past the cache, at every offset of the destination
// within a 64-byte line and at an odd byte offset, on values of the common
// magnitudes with the special ones scattered among them, so that the
// kernels' paths for blocks with and without special values are both
// taken; every result must equal the scalar conversion.
func TestBulkLargeAndMisaligned(t *testing.T) {
	n := 4<<20 + 77 // the result is 8 MiB and more
	if testing.Short() {
		n = 1<<10 + 77
	}
	rng := rand.New(rand.NewPCG(7, 8))
	specials := special()
	src := make([]float32, n)
	for i := range src {
		if rng.IntN(200) == 0 {
			src[i] = math.Float32frombits(specials[rng.IntN(len(specials))])
		} else {
			src[i] = float32(rng.NormFloat64() * 100)
		}
	}
	want := make(map[Rounding][2][]uint16)
	for _, r := range []Rounding{RoundNearestEven, Truncate} {
		f16, bf16 := make([]uint16, n), make([]uint16, n)
		for i, f := range src {
			f16[i], bf16[i] = F32ToF16(f, r), F32ToBF16(f, r)
		}
		want[r] = [2][]uint16{f16, bf16}
	}
	buf := make([]uint16, n+64)
	bytesBuf := make([]byte, 2*n+1)
	for _, r := range []Rounding{RoundNearestEven, Truncate} {
		for off := 0; off < 32; off += 7 {
			dst := buf[off : off+n]
			if !slices.Equal(want[r][0], F32ToF16s(dst, src, r)) {
				t.Fatalf("F32ToF16s(%v) at offset %d differs from F32ToF16", r, off)
			}
			if !slices.Equal(want[r][1], F32ToBF16s(dst, src, r)) {
				t.Fatalf("F32ToBF16s(%v) at offset %d differs from F32ToBF16", r, off)
			}
		}
		b := F32sToF16Bytes(bytesBuf[1:], src, r) // odd addresses
		for i, h := range want[r][0] {
			if got := binary.LittleEndian.Uint16(b[2*i:]); got != h {
				t.Fatalf("F32sToF16Bytes(%v)[%d] = %#04x, want %#04x", r, i, got, h)
			}
		}
		b = F32sToBF16Bytes(bytesBuf[:2*n], src, r)
		for i, h := range want[r][1] {
			if got := binary.LittleEndian.Uint16(b[2*i:]); got != h {
				t.Fatalf("F32sToBF16Bytes(%v)[%d] = %#04x, want %#04x", r, i, got, h)
			}
		}
	}
}

func TestNaNsStayNaNs(t *testing.T) {
	for _, x := range []uint32{0x7f800001, 0xff800001, 0x7f801fff, 0x7fc00000, 0x7f800100} {
		f := math.Float32frombits(x)
		for _, r := range []Rounding{RoundNearestEven, Truncate} {
			h := F32ToF16(f, r)
			assert.True(t, h&0x7c00 == 0x7c00 && h&0x3ff != 0, "F16 %#04x of %#08x is NaN", h, x)
			assert.Equal(t, uint16(x>>16)&0x8000, h&0x8000, "sign")
			b := F32ToBF16(f, r)
			assert.True(t, b&0x7f80 == 0x7f80 && b&0x7f != 0, "BF16 %#04x of %#08x is NaN", b, x)
			assert.Equal(t, uint16(x>>16)&0x8000, b&0x8000, "sign")
		}
	}
	// The trap: truncating 0x7f800001 naively gives 0x7f80, an infinity.
	assert.Equal(t, uint16(0x7fc0), F32ToBF16(math.Float32frombits(0x7f800001), Truncate))
	assert.Equal(t, uint16(0x7e00), F32ToF16(math.Float32frombits(0x7f800001), Truncate))
}

// TestF16Truncate checks the documented behaviour at the edges of F16.
func TestF16Truncate(t *testing.T) {
	for _, tt := range []struct {
		f          float32
		rne, trunc uint16
	}{
		{65504, 0x7bff, 0x7bff},
		{65519.996, 0x7bff, 0x7bff},
		{65520, 0x7c00, 0x7bff},
		{65535.996, 0x7c00, 0x7bff},
		{65536, 0x7c00, 0x7c00}, // the exponent does not fit
		{float32(math.Inf(-1)), 0xfc00, 0xfc00},
		{float32(math.Ldexp(1, -24)), 0x0001, 0x0001},
		{float32(math.Ldexp(1.5, -24)), 0x0002, 0x0001},
		{float32(math.Ldexp(1, -25)), 0x0000, 0x0000},
		{float32(math.Ldexp(1.0001, -25)), 0x0001, 0x0000},
		{-1.0009766, 0xbc01, 0xbc01}, // 1 + 2^-10, exact
		{1.0004883, 0x3c00, 0x3c00},  // 1 + 2^-11: a tie, to even
		{1.0014648, 0x3c02, 0x3c01},  // 1 + 3×2^-11: a tie, to even
		{-1.0014649, 0xbc02, 0xbc01}, // just above the tie
	} {
		assert.Equal(t, tt.rne, F32ToF16(tt.f, RoundNearestEven), "%v nearest", tt.f)
		assert.Equal(t, tt.trunc, F32ToF16(tt.f, Truncate), "%v truncate", tt.f)
	}
}

func TestBulkDestinations(t *testing.T) {
	src := []float32{1, 2, 3}
	dst := make([]uint16, 10)
	out := F32ToF16s(dst, src, RoundNearestEven)
	assert.Len(t, out, 3)
	assert.Equal(t, &dst[0], &out[0], "a long enough dst is reused")
	out = F32ToF16s(make([]uint16, 1), src, RoundNearestEven)
	assert.Equal(t, []uint16{0x3c00, 0x4000, 0x4200}, out, "a short one is replaced")
	allocs := testing.AllocsPerRun(100, func() { F32ToBF16s(dst, src, Truncate) })
	assert.Zero(t, allocs)
	assert.Equal(t, "Truncate", Truncate.String())
	assert.Equal(t, "Rounding(7)", Rounding(7).String())
}

// TestF8Tables checks values of each F8 format, and its NaN codes against the
// bits torch's .float() gives on a CPU, which its C++ conversions (named in
// convert.go) give by construction.
func TestF8Tables(t *testing.T) {
	for _, tt := range []struct {
		d        DType
		code     byte
		want     float64
		wantBits uint32
	}{
		{d: F8_E4M3, code: 0x7e, want: 448},
		{d: F8_E4M3, code: 0x7f, wantBits: 0x7ff00000},
		{d: F8_E4M3, code: 0xff, wantBits: 0xfff00000},
		{d: F8_E4M3, code: 0x78, want: 256},
		{d: F8_E4M3, code: 0x01, want: math.Ldexp(1, -9)},
		{d: F8_E4M3, code: 0x08, want: math.Ldexp(1, -6)},
		{d: F8_E4M3, code: 0x38, want: 1},
		{d: F8_E4M3, code: 0xb8, want: -1},
		{d: F8_E4M3, code: 0x80, wantBits: 0x80000000},
		{d: F8_E5M2, code: 0x7b, want: 57344},
		{d: F8_E5M2, code: 0x7c, want: math.Inf(1)},
		{d: F8_E5M2, code: 0xfc, want: math.Inf(-1)},
		{d: F8_E5M2, code: 0x7d, wantBits: 0x7fe00000},
		{d: F8_E5M2, code: 0x7e, wantBits: 0x7fc00000},
		{d: F8_E5M2, code: 0x7f, wantBits: 0x7fe00000},
		{d: F8_E5M2, code: 0xfd, wantBits: 0xffe00000},
		{d: F8_E5M2, code: 0x01, want: math.Ldexp(1, -16)},
		{d: F8_E5M2, code: 0x3c, want: 1},
		{d: F8_E4M3FNUZ, code: 0x7f, want: 240},
		{d: F8_E4M3FNUZ, code: 0x80, wantBits: 0x7f800001},
		{d: F8_E4M3FNUZ, code: 0x40, want: 1},
		{d: F8_E4M3FNUZ, code: 0x01, want: math.Ldexp(1, -10)},
		{d: F8_E4M3FNUZ, code: 0xff, want: -240},
		{d: F8_E5M2FNUZ, code: 0x7f, want: 57344},
		{d: F8_E5M2FNUZ, code: 0x80, wantBits: 0x7f800001},
		{d: F8_E5M2FNUZ, code: 0x40, want: 1},
		{d: F8_E5M2FNUZ, code: 0x01, want: math.Ldexp(1, -17)},
		{d: F8_E8M0, code: 127, want: 1},
		{d: F8_E8M0, code: 0, want: math.Ldexp(1, -127)},
		{d: F8_E8M0, code: 254, want: math.Ldexp(1, 127)},
		{d: F8_E8M0, code: 255, wantBits: 0x7f800001},
		{d: F8_E8M0, code: 0, wantBits: 0x00400000},
	} {
		name := fmt.Sprintf("%v %#02x", tt.d, tt.code)
		out, err := Tensor{DType: tt.d, Shape: []uint64{1}, Data: []byte{tt.code}}.Float32s()
		require.NoError(t, err, name)
		switch {
		case tt.wantBits != 0:
			assert.Equal(t, tt.wantBits, math.Float32bits(out[0]), name)
		default:
			assert.Equal(t, tt.want, float64(out[0]), name)
		}
	}
	// The NaN codes are exactly these: each format's count of them.
	for d, n := range map[DType]int{F8_E4M3: 2, F8_E5M2: 6, F8_E4M3FNUZ: 1, F8_E5M2FNUZ: 1, F8_E8M0: 1} {
		data := make([]byte, 256)
		for i := range data {
			data[i] = byte(i)
		}
		out, err := Tensor{DType: d, Shape: []uint64{256}, Data: data}.Float32s()
		require.NoError(t, err)
		nans := 0
		for _, f := range out {
			if f != f {
				nans++
			}
		}
		assert.Equal(t, n, nans, "%v", d)
	}
	// E5M2 is F16 with its low byte cut off.
	for code := range 256 {
		out, err := Tensor{DType: F8_E5M2, Shape: []uint64{1}, Data: []byte{byte(code)}}.Float32s()
		require.NoError(t, err)
		assert.Equal(t, math.Float32bits(F16ToF32(uint16(code)<<8)), math.Float32bits(out[0]), "%#02x", code)
	}
}

func TestFloat32s(t *testing.T) {
	le := binary.LittleEndian
	f32 := le.AppendUint32(le.AppendUint32(nil, math.Float32bits(1.5)), math.Float32bits(-2))
	f64 := le.AppendUint64(le.AppendUint64(nil, math.Float64bits(1.5)), math.Float64bits(1e300))
	for _, tt := range []struct {
		d    DType
		data []byte
		want []float32
	}{
		{F32, f32, []float32{1.5, -2}},
		{F64, f64, []float32{1.5, float32(math.Inf(1))}},
		{F16, []byte{0x00, 0x3c, 0x00, 0xc0}, []float32{1, -2}},
		{BF16, []byte{0x80, 0x3f, 0x00, 0xc0}, []float32{1, -2}},
		{U8, []byte{0, 255}, []float32{0, 255}},
		{I8, []byte{0x80, 0x7f}, []float32{-128, 127}},
		{U16, []byte{0xff, 0xff}, []float32{65535}},
		{I16, []byte{0x00, 0x80}, []float32{-32768}},
		{U32, le.AppendUint32(nil, 1<<24+1), []float32{1 << 24}},
		{I32, le.AppendUint32(nil, uint32(1<<32-5)), []float32{-5}},
		{U64, le.AppendUint64(nil, 1<<63), []float32{1 << 63}},
		{I64, le.AppendUint64(nil, uint64(1<<64-7)), []float32{-7}},
		{BOOL, []byte{0, 1, 2}, []float32{0, 1, 1}},
	} {
		got, err := Tensor{Name: "t", DType: tt.d, Data: tt.data}.Float32s()
		require.NoError(t, err, tt.d.String())
		assert.Equal(t, tt.want, got, tt.d.String())
	}
	for _, d := range []DType{C64, F4, F6_E2M3, F6_E3M2} {
		_, err := Tensor{Name: "t", DType: d, Data: make([]byte, 8)}.Float32s()
		assert.ErrorIs(t, err, ErrDTypeMismatch, d.String())
	}
	_, err := Tensor{DType: F32, Data: make([]byte, 5)}.Float32s()
	assert.ErrorIs(t, err, ErrSizeMismatch)
}

func TestTensorFromFloat32s(t *testing.T) {
	values := []float32{1, 65520, float32(math.Ldexp(1, -25)) * 1.5, -0}
	for _, tt := range []struct {
		d     DType
		r     Rounding
		bytes []byte
	}{
		{F32, Truncate, nil},
		{F16, RoundNearestEven, []byte{0x00, 0x3c, 0x00, 0x7c, 0x01, 0x00, 0x00, 0x00}},
		{F16, Truncate, []byte{0x00, 0x3c, 0xff, 0x7b, 0x00, 0x00, 0x00, 0x00}},
		{BF16, Truncate, []byte{0x80, 0x3f, 0x7f, 0x47, 0x40, 0x33, 0x00, 0x00}},
	} {
		tensor, err := TensorFromFloat32s("v", tt.d, []uint64{2, 2}, values, tt.r)
		require.NoError(t, err)
		if tt.bytes != nil {
			assert.Equal(t, tt.bytes, tensor.Data, "%v %v", tt.d, tt.r)
		}
		back, err := tensor.Float32s()
		require.NoError(t, err)
		if tt.d == F32 {
			assert.Equal(t, values, back)
		}
		// The tensor is valid for Write.
		_, err = writeBytes([]Tensor{tensor}, nil)
		assert.NoError(t, err)
	}
	_, err := TensorFromFloat32s("v", F16, []uint64{3}, values, Truncate)
	assert.ErrorIs(t, err, ErrSizeMismatch)
	_, err = TensorFromFloat32s("v", I32, []uint64{4}, values, Truncate)
	assert.ErrorIs(t, err, ErrDTypeMismatch)
}
