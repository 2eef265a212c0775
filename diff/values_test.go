package diff

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/safetensors-go/safetensors"
)

// allclose is Tolerance's definition, written for the tests from numpy's
// isclose, one value at a time, independently of compareValues: the pairs
// that are not equal, those that are not close, and the largest |a - b|
// and |a - b| / |b|, +Inf where they are not numbers.
func allclose(a, b []float64, tol tolerance) (unequal, differing uint64, maxAbs, maxRel float64) {
	for i, x := range a {
		y := b[i]
		bothNaN := math.IsNaN(x) && math.IsNaN(y)
		if x == y || tol.equalNaN && bothNaN {
			continue
		}
		unequal++
		// numpy: abs(x - y) <= atol + rtol*abs(y), where y is finite, or x == y.
		close := !math.IsInf(y, 0) && math.Abs(x-y) <= tol.atol+float64(tol.rtol*math.Abs(y))
		if !close {
			differing++
		}
		d := math.Abs(x - y)
		r := d / math.Abs(y)
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		if math.IsNaN(r) {
			r = math.Inf(1)
		}
		maxAbs, maxRel = max(maxAbs, d), max(maxRel, r)
	}
	return unequal, differing, maxAbs, maxRel
}

// specials are float32 values at the edges: zeros, NaNs, infinities,
// subnormals, the largest finite values.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), float32(math.NaN()), math.Float32frombits(0x7fc00001), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32, 1, -1, 1e-3, 0.5,
}

// pairs returns n pairs of float32 values: b a's value changed by a
// relative amount around scale, or one of the specials with probability
// special.
func pairs(rng *rand.Rand, n int, scale, special float64) ([]float32, []float32) {
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
		b[i] = a[i] * float32(1+scale*rng.NormFloat64())
		if rng.Float64() < special {
			a[i] = specials[rng.IntN(len(specials))]
		}
		if rng.Float64() < special {
			b[i] = specials[rng.IntN(len(specials))]
		}
	}
	return a, b
}

func widen32(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestCompareValues compares float32 values, with and without specials,
// of every length up to a few groups of the assembly and with its loop's
// remainder, through compareFloat32s (the assembly where the CPU has
// AVX2), compareValues (pure Go) and compareValues of float64 values, with
// the definition: the same counts and maxima, bit for bit.
func TestCompareValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tols := []tolerance{{}, {rtol: 1.0 / 256}, {atol: 1e-3}, {atol: 1e-5, rtol: 1e-3}, {rtol: 1e-3, equalNaN: true}, {equalNaN: true}}
	lengths := []int{0, 1, 3, 7, 8, 9, 16, 17, 31, 64, 100, blockLen + 5}
	for _, special := range []float64{-2, -1, 0, 0.01, 0.3} {
		for _, n := range lengths {
			a, b := pairs(rng, n, 1e-3, max(special, 0))
			// Zeros on both sides beside values that differ, in every
			// group, in the even lanes (-1) or the high ones (-2): a lane's
			// 0/0 must not count as a relative difference.
			for i := range a {
				if special == -1 && i%2 == 0 || special == -2 && i%4 >= 2 {
					a[i], b[i] = 0, 0
				}
			}
			fa, fb := widen32(a), widen32(b)
			for _, tol := range tols {
				name := fmt.Sprintf("special %v/n %d/%+v", special, n, tol)
				unequal, differing, maxAbs, maxRel := allclose(fa, fb, tol)
				want := tally{values: uint64(n), unequal: unequal, differing: differing, maxAbs: maxAbs, maxRel: maxRel}
				for kernel, compare := range map[string]func(*tally){
					"compareFloat32s":        func(s *tally) { compareFloat32s(a, b, tol, s) },
					"compareValues float32":  func(s *tally) { compareValues(a, b, tol, s) },
					"compareValues float64":  func(s *tally) { compareValues(fa, fb, tol, s) },
					"compareValues mixed":    func(s *tally) { compareValues(a, fb, tol, s) },
					"compareFloat32s halves": func(s *tally) { compareFloat32s(a[:n/2], b[:n/2], tol, s); compareFloat32s(a[n/2:], b[n/2:], tol, s) },
				} {
					var got tally
					compare(&got)
					assert.Equal(t, want, got, "%s: %s", name, kernel)
				}
			}
		}
	}
}

// TestTolerance checks Tolerance's rule on pairs worked out by hand.
func TestTolerance(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct {
		a, b       float64
		atol, rtol float64
		equalNaN   bool
		unequal    bool // a != b
		close      bool
	}{
		{1, 1, 0, 0, false, false, true},
		{0, math.Copysign(0, -1), 0, 0, false, false, true}, // -0 == 0
		{1, 1.5, 0, 0, false, true, false},
		{1, 1.5, 0.5, 0, false, true, true},     // |a-b| = atol
		{1, 1.5, 0.49, 0, false, true, false},   // just beyond
		{1.5, 1, 0, 0.5, false, true, true},     // rtol*|b| = 0.5
		{1, 1.5, 0, 0.5, false, true, true},     // rtol*|1.5| = 0.75
		{1.5, 1, 0, 0.49, false, true, false},   // B is the reference: 0.49*1 < 0.5
		{1, 1.5, 0, 0.34, false, true, true},    // 0.34*1.5 = 0.51
		{1, 1.25, 0.1, 0.1, false, true, false}, // 0.25 > 0.1 + 0.1*1.25
		{1, 1.2, 0.1, 0.1, false, true, true},   // 0.2 <= 0.1 + 0.1*1.2
		{inf, inf, 0, 0, false, false, true},
		{-inf, inf, 1, 1, false, true, false},
		{1, inf, 1, 1, false, true, false}, // an infinity is close only to itself
		{inf, 1, 1, 1, false, true, false},
		{nan, nan, 0, 0, false, true, false}, // numpy's default
		{nan, nan, 0, 0, true, false, true},  // equal_nan=True
		{nan, 1, 1, 1, true, true, false},
		{1, nan, 1, 1, true, true, false},
		{0, 1e-300, 1e-300, 0, false, true, true},
		{0, 1e-300, 0, 0.5, false, true, false}, // rtol alone cannot reach 0
	} {
		tol := tolerance{atol: c.atol, rtol: c.rtol, equalNaN: c.equalNaN}
		var got tally
		compareValues([]float64{c.a}, []float64{c.b}, tol, &got)
		assert.Equal(t, c.unequal, got.unequal == 1, "%v against %v, %+v: unequal", c.a, c.b, tol)
		assert.Equal(t, !c.close, got.differing == 1, "%v against %v, %+v: beyond the tolerance", c.a, c.b, tol)
		if float64(float32(c.a)) != c.a || float64(float32(c.b)) != c.b {
			continue
		}
		// The same pair in every lane of compareFloat32s's groups.
		const n = 19
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(c.a), float32(c.b)
		}
		got = tally{}
		compareFloat32s(a, b, tol, &got)
		assert.Equal(t, c.unequal, got.unequal == n, "%v against %v, %+v: unequal, float32", c.a, c.b, tol)
		assert.Equal(t, !c.close, got.differing == n, "%v against %v, %+v: beyond the tolerance, float32", c.a, c.b, tol)
	}
}

// TestDifferingElements counts the elements of the dtypes compared by
// their bits.
func TestDifferingElements(t *testing.T) {
	assert.Equal(t, uint64(1), differingElements([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, []byte{0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8}, safetensors.C64.Bits()))
	// F4: two elements a byte, either changed.
	assert.Equal(t, uint64(4), differingElements([]byte{0x00, 0x11, 0xff}, []byte{0x01, 0x10, 0x00}, safetensors.F4.Bits()))
	// F6: four elements in three bytes: bits 0-5, 6-11, 12-17, 18-23.
	assert.Equal(t, uint64(2), differingElements([]byte{0x01, 0x00, 0x80}, []byte{0, 0, 0}, safetensors.F6_E2M3.Bits()))
	assert.Equal(t, uint64(1), differingElements([]byte{0x40, 0x00, 0x00}, []byte{0, 0, 0}, safetensors.F6_E3M2.Bits()))
	assert.Zero(t, differingElements([]byte{1, 2, 3}, []byte{1, 2, 3}, 6))
}
