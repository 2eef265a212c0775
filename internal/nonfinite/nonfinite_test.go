package nonfinite

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// le32 and the others return values as little-endian bytes.
func le32(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func le16(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func le64(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

// TestScan counts NaN, infinities of both signs and values beyond the
// limit in each format, with the first index of each offset by base, both
// in the words of the fast pass and in the tail after them.
func TestScan(t *testing.T) {
	lim := Limit{F64: math.Float64bits(2), F32: math.Float32bits(2), BF16: 0x4000, F16: 0x4000, Float: 2}
	for _, tail := range []int{0, 5} { // elements of 1.0 before the values: in the words, or not
		pad32, pad16, pad64 := make([]uint32, tail), make([]uint16, tail), make([]uint64, tail)
		for i := range tail {
			pad32[i], pad16[i], pad64[i] = 0x3f800000, 0x3c00, 0x3ff0000000000000
		}
		base := uint64(100)
		want := Counts{NaN: 2, Inf: 2, Big: 1, FirstNaN: base + uint64(tail) + 1, FirstInf: base + uint64(tail), FirstBig: base + uint64(tail) + 3, Nonzero: true}
		// +Inf, NaN, -NaN, 3 (beyond), -Inf, 1, -2 (the limit: not beyond), 0.
		got := Scan(F32, le32(append(pad32, 0x7f800000, 0x7fc00000, 0xffc00001, 0x40400000, 0xff800000, 0x3f800000, 0xc0000000, 0)...), base, lim)
		assert.Equal(t, want, got, "F32, %d before", tail)
		got = Scan(BF16, le16(append(pad16, 0x7f80, 0x7fc0, 0xffc1, 0x4040, 0xff80, 0x3f80, 0xc000, 0)...), base, lim)
		assert.Equal(t, want, got, "BF16, %d before", tail)
		// F16: +Inf 0x7c00, NaN 0x7e00, 3 = 0x4200, 1 = 0x3c00, -2 = 0xc000.
		got = Scan(F16, le16(append(pad16, 0x7c00, 0x7e00, 0xfe01, 0x4200, 0xfc00, 0x3c00, 0xc000, 0)...), base, lim)
		assert.Equal(t, want, got, "F16, %d before", tail)
		got = Scan(F64, le64(append(pad64, 0x7ff0000000000000, 0x7ff8000000000000, 0xfff8000000000001, math.Float64bits(3), 0xfff0000000000000, math.Float64bits(1), math.Float64bits(-2), 0)...), base, lim)
		assert.Equal(t, want, got, "F64, %d before", tail)
		vals := []float32{float32(math.Inf(1)), float32(math.NaN()), float32(-math.NaN()), 3, float32(math.Inf(-1)), 1, -2, 0}
		for range tail {
			vals = append([]float32{1}, vals...)
		}
		assert.Equal(t, want, Floats(vals, base, 2), "Floats, %d before", tail)
	}
}

// TestScanFinite: the fast pass alone, over values all finite and within
// the limit; zeros of both signs are zero; NoLimit counts no finite value.
func TestScanFinite(t *testing.T) {
	n := 37 // words of the fast pass and a tail
	f32, bf16, f16, f64 := make([]uint32, n), make([]uint16, n), make([]uint16, n), make([]uint64, n)
	for i := range n {
		f32[i], bf16[i], f16[i], f64[i] = 0x80000000, 0x8000, 0x8000, 0x8000000000000000 // -0
	}
	for f, data := range map[Format][]byte{F32: le32(f32...), BF16: le16(bf16...), F16: le16(f16...), F64: le64(f64...)} {
		assert.Equal(t, Counts{}, Scan(f, data, 0, NoLimit), "format %d, zeros", f)
	}
	f32[n-1], bf16[n-1], f16[n-1], f64[n-1] = 0x7f7fffff, 0x7f7f, 0x7bff, 0x7fefffffffffffff // the largest finite values
	for f, data := range map[Format][]byte{F32: le32(f32...), BF16: le16(bf16...), F16: le16(f16...), F64: le64(f64...)} {
		assert.Equal(t, Counts{Nonzero: true}, Scan(f, data, 0, NoLimit), "format %d, the largest", f)
	}
	assert.Equal(t, Counts{Nonzero: true}, Floats([]float64{math.MaxFloat64, -1, 0}, 0, math.Inf(1)))
	assert.Equal(t, Counts{}, Floats([]float32{0, float32(math.Copysign(0, -1))}, 0, math.Inf(1)))
}

func TestFinite(t *testing.T) {
	var c Counts
	for i, x := range []float64{1, math.NaN(), math.Inf(-1), 0, math.NaN(), math.Inf(1), -math.MaxFloat64} {
		assert.Equal(t, x-x == 0, c.Finite(uint64(i), x), "%v", x)
	}
	assert.Equal(t, Counts{NaN: 2, Inf: 2, FirstNaN: 1, FirstInf: 2}, c)
}

func TestMerge(t *testing.T) {
	a := Counts{NaN: 1, FirstNaN: 50, Big: 2, FirstBig: 7}
	a.Merge(Counts{NaN: 3, FirstNaN: 10, Inf: 1, FirstInf: 99, Nonzero: true})
	assert.Equal(t, Counts{NaN: 4, FirstNaN: 10, Inf: 1, FirstInf: 99, Big: 2, FirstBig: 7, Nonzero: true}, a)
	a.Merge(Counts{NaN: 1, FirstNaN: 20, FirstBig: 1}) // no Big: its first is not valid
	assert.Equal(t, Counts{NaN: 5, FirstNaN: 10, Inf: 1, FirstInf: 99, Big: 2, FirstBig: 7, Nonzero: true}, a)
}

// TestScanF8: the counts, the first index of each offset by base, and
// Nonzero, in the words of the fast pass and in the tail.
func TestScanF8(t *testing.T) {
	for _, c := range []struct {
		f         Format
		one, zero byte // a finite value, a zero
		nan, inf  byte // 0: none
	}{
		{F8E5M2, 0x3c, 0x80, 0xfd, 0x7c},
		{F8E4M3, 0x38, 0x80, 0xff, 0},
		{F8E4M3FNUZ, 0x40, 0x00, 0x80, 0},
		{F8E5M2FNUZ, 0x40, 0x00, 0x80, 0},
		{F8E8M0, 0x7f, 0, 0xff, 0},
	} {
		for _, n := range []int{5, 8, 21} {
			data := make([]byte, n)
			for i := range data {
				data[i] = c.zero
			}
			want := Counts{Nonzero: c.f == F8E8M0}
			assert.Equal(t, want, ScanF8(c.f, data, 7), "format %d, zeros", c.f)
			data[n-1] = c.one
			want.Nonzero = true
			assert.Equal(t, want, ScanF8(c.f, data, 7), "format %d, one value", c.f)
			data[n-3], data[n-2] = c.nan, c.nan
			want.NaN, want.FirstNaN = 2, 7+uint64(n-3)
			if c.inf != 0 {
				data[1] = c.inf
				want.Inf, want.FirstInf = 1, 8
			}
			assert.Equal(t, want, ScanF8(c.f, data, 7), "format %d, length %d", c.f, n)
		}
	}
}
