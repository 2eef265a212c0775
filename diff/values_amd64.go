//go:build amd64 && !purego

package diff

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 loop in values_amd64.s compares the bulk of the float32 values
// where the CPU and the operating system support AVX2; compareValues
// compares the last few, and every block in which a difference is not
// finite, and everything elsewhere or with the purego build tag.

// useAVX2 reports whether the AVX2 loop is used.
var useAVX2 = cpu.X86.HasAVX2

// avx2Tally is what compareFloat32sAVX2 found, as compareFinite finds it.
type avx2Tally struct {
	unequal, differing uint64
	maxAbs, maxRel     float64
	nonFinite          uint64 // not 0: some difference is NaN or infinite, and the rest is wrong
}

// compareFloat32sAVX2 compares the n float32 values at a and b, n a
// multiple of 8, as compareFinite does, in float64, four at a time,
// without fused multiply-adds: the same results, bit for bit, for values
// whose differences are finite. t.maxRel is the largest relative
// difference so far, on entry.
//
//go:noescape
func compareFloat32sAVX2(a, b unsafe.Pointer, n int, atol, rtol float64, t *avx2Tally)

// compareFloat32s is compareValues for float32 values on both sides.
func compareFloat32s(a, b []float32, tol tolerance, t *tally) {
	b = b[:len(a)]
	if n := len(a) &^ 7; useAVX2 && n > 0 {
		r := avx2Tally{maxRel: t.maxRel}
		compareFloat32sAVX2(unsafe.Pointer(unsafe.SliceData(a)), unsafe.Pointer(unsafe.SliceData(b)), n, tol.atol, tol.rtol, &r)
		s := tally{values: uint64(n), unequal: r.unequal, differing: r.differing, maxAbs: r.maxAbs, maxRel: r.maxRel}
		if r.nonFinite != 0 {
			s = tally{maxRel: t.maxRel}
			compareAll(a[:n], b[:n], tol, &s)
		}
		t.merge(s)
		a, b = a[n:], b[n:]
	}
	compareValues(a, b, tol, t)
}
