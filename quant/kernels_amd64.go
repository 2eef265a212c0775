//go:build amd64 && !purego

package quant

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 loops in kernels_amd64.s take the bulk of the float32 rows where
// the CPU and the operating system support AVX2; the pure-Go loops finish
// each row's last elements, and do everything elsewhere or with the
// purego build tag. Each loop handles n elements, a multiple of 32.

// useAVX2 reports whether the AVX2 loops are used.
var useAVX2 = cpu.X86.HasAVX2

// maxAbsBitsAVX2 returns the largest float32 bits, sign cleared, of the n
// values at x: max|x| where every value is finite, or a NaN's or an
// infinity's bits where one is not.
//
//go:noescape
func maxAbsBitsAVX2(x unsafe.Pointer, n int) uint32

// quantF32DivAVX2 writes round_half_even(clamp(x / scale, -128, 127)) of
// the n finite float32 values at x to the n bytes at q, each quotient
// rounded to float32 as IEEE 754 divides.
//
//go:noescape
func quantF32DivAVX2(q, x unsafe.Pointer, n int, scale float32)

// quantRoundDivAVX2 writes round_half_even(clamp(r(x / scale), -128,
// 127)) of the n finite float32 values at x to the n bytes at q, where r
// rounds a float32 to nearest even on its bits: u += bias + (u >> shift &
// 1), then u &= mask (shift 16 for BF16, 13 for F16's normal range).
//
//go:noescape
func quantRoundDivAVX2(q, x unsafe.Pointer, n int, scale float32, shift, bias, mask uint32)

// roundAwayAVX2 writes round(clamp(float32(x * factor), -128, 127)),
// rounding half away from zero, of the n finite float32 values at x to the
// n bytes at q.
//
//go:noescape
func roundAwayAVX2(q, x unsafe.Pointer, n int, factor float32)

// maxAbsBits is rowMaxAbs's loop: the largest float32 bits of x, sign
// cleared.
func maxAbsBits(x []float32) uint32 {
	var hi uint32
	if n := len(x) &^ 31; useAVX2 && n > 0 {
		hi = maxAbsBitsAVX2(unsafe.Pointer(unsafe.SliceData(x)), n)
		x = x[n:]
	}
	return max(hi, maxAbsBitsGo(x))
}

// quantF32Div writes round_half_even(clamp(x / scale, -128, 127)) for each
// v of x into q, and returns how many it wrote: all of x with AVX2, else
// none, which leaves the row to the pure-Go loop.
func quantF32Div(q []byte, x []float32, scale float32) int {
	n := min(len(q), len(x)) &^ 31
	if !useAVX2 || n == 0 {
		return 0
	}
	quantF32DivAVX2(unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(x)), n, scale)
	for i := n; i < min(len(q), len(x)); i++ {
		q[i] = toInt8(float32(x[i] / scale))
	}
	return min(len(q), len(x))
}

// quantRoundDiv writes round_half_even(clamp(r(x / scale), -128, 127))
// for each v of x into q, where r rounds to shift fewer mantissa bits (16
// for BF16, 13 for F16; see quantRow), and returns how many it wrote: all
// of x with AVX2, else none, which leaves the row to the pure-Go loops.
func quantRoundDiv(q []byte, x []float32, scale float32, shift uint32) int {
	n := min(len(q), len(x))
	bulk := n &^ 31
	if !useAVX2 || bulk == 0 {
		return 0
	}
	bias, mask := uint32(1)<<(shift-1)-1, ^(uint32(1)<<shift - 1)
	quantRoundDivAVX2(unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(x)), bulk, scale, shift, bias, mask)
	for i := bulk; i < n; i++ {
		u := math.Float32bits(float32(x[i] / scale))
		u += bias + u>>shift&1
		q[i] = toInt8(math.Float32frombits(u & mask))
	}
	return n
}

// roundAway is roundAwayRow with AVX2 for the bulk of the row.
func roundAway(q []int8, x []float32, factor float32) {
	if n := min(len(q), len(x)) &^ 31; useAVX2 && n > 0 {
		roundAwayAVX2(unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(x)), n, factor)
		q, x = q[n:], x[n:]
	}
	roundAwayRow(q, x, factor)
}
