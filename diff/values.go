package diff

import (
	"bytes"
	"math"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/nonfinite"
)

// tally is what the comparison of some of a tensor's elements found.
type tally struct {
	values    uint64 // elements compared
	unequal   uint64 // elements whose values differ (a != b)
	differing uint64 // elements beyond the tolerance
	// maxAbs and maxRel are the largest |a - b| and |a - b| / |b|, +Inf
	// once a pair's difference is not finite.
	maxAbs, maxRel float64
	bytesDiffer    bool // the bytes are not the same
}

func (t *tally) merge(o tally) {
	t.values += o.values
	t.unequal += o.unequal
	t.differing += o.differing
	t.maxAbs = max(t.maxAbs, o.maxAbs)
	t.maxRel = max(t.maxRel, o.maxRel)
	t.bytesDiffer = t.bytesDiffer || o.bytesDiffer
}

// tolerance is what makes two values close: see Tolerance and EqualNaN.
type tolerance struct {
	atol, rtol float64
	equalNaN   bool
}

// compareValues adds to t the comparison of the values a[i] and b[i], b
// as long as a, as Tolerance defines it, in float64. MaxRel is the largest
// of the quotients d / |b|, each rounded as float64 division rounds it,
// whichever loop finds it.
func compareValues[X, Y float32 | float64](a []X, b []Y, tol tolerance, t *tally) {
	b = b[:len(a)]
	s := tally{maxRel: t.maxRel}
	if !compareFinite(a, b, tol, &s) {
		s = tally{maxRel: t.maxRel}
		compareAll(a, b, tol, &s)
	}
	t.merge(s)
}

// relMargin makes the test for a new largest relative difference, d >
// threshold*|b| with threshold = maxRel*relMargin, let through every d
// whose quotient d/|b| may exceed maxRel, however the product and the
// quotient round, so that the quotient is computed for those alone.
const relMargin = 1 - 0x1p-40

// compareFinite is compareAll for values whose differences are finite,
// the usual case, in fewer steps: it returns false, its tally wrong, where
// a difference is not (a NaN or an infinity on a side).
func compareFinite[X, Y float32 | float64](a []X, b []Y, tol tolerance, t *tally) bool {
	b = b[:len(a)]
	atol, rtol := tol.atol, tol.rtol
	maxRel := t.maxRel // the largest so far, so that few quotients are computed
	threshold := maxRel * relMargin
	var maxAbs, sum float64
	var unequal, differing uint64
	for i, x := range a {
		x, y := float64(x), float64(b[i])
		if x == y {
			continue
		}
		unequal++
		d := math.Abs(x - y)
		ay := math.Abs(y)
		if !(d <= atol+float64(rtol*ay)) { // float64(): no fused multiply-add, as in the assembly
			differing++
			sum += d // NaN or Inf if d is: a NaN fails every test below
		}
		if d > maxAbs { // not max, which looks for NaNs and signed zeros
			maxAbs = d
		}
		if d > threshold*ay {
			if r := d / ay; r > maxRel { // +Inf for b = 0
				maxRel, threshold = r, r*relMargin
			}
		}
	}
	t.values += uint64(len(a))
	t.unequal += unequal
	t.differing += differing
	t.maxAbs, t.maxRel = max(t.maxAbs, maxAbs), maxRel
	return sum-sum == 0 && maxAbs-maxAbs == 0
}

// compareAll adds to t the comparison of the values a[i] and b[i], b as
// long as a, as Tolerance defines it, in float64.
func compareAll[X, Y float32 | float64](a []X, b []Y, tol tolerance, t *tally) {
	b = b[:len(a)]
	atol, rtol := tol.atol, tol.rtol
	maxRel := t.maxRel
	threshold := maxRel * relMargin
	var maxAbs float64
	var unequal, differing uint64
	for i, x := range a {
		x, y := float64(x), float64(b[i])
		if x == y {
			continue
		}
		unequal++
		d := math.Abs(x - y)
		ay := math.Abs(y)
		if d-d != 0 {
			// NaN or Inf: a NaN on either side, an infinity against
			// anything but itself, or finite values too far apart for
			// float64. Never close, but for two NaNs under EqualNaN.
			if x != x && y != y && tol.equalNaN {
				unequal--
				continue
			}
			differing++
			maxAbs, maxRel, threshold = math.Inf(1), math.Inf(1), math.Inf(1)
			continue
		}
		if d > atol+float64(rtol*ay) {
			differing++
		}
		if d > maxAbs {
			maxAbs = d
		}
		if d > threshold*ay {
			if r := d / ay; r > maxRel {
				maxRel, threshold = r, r*relMargin
			}
		}
	}
	t.values += uint64(len(a))
	t.unequal += unequal
	t.differing += differing
	t.maxAbs, t.maxRel = max(t.maxAbs, maxAbs), max(t.maxRel, maxRel)
}

// block is the values of some elements of one side, decoded: as float32
// where that is exact, else as float64.
type block struct {
	f32  []float32
	f64  []float64
	wide bool // f64 holds the values
}

// decoder decodes blocks of elements through buffers it keeps.
type decoder struct {
	f32 []float32
	f64 []float64
	i32 []int32
	u32 []uint32
	i64 []int64
	u64 []uint64
}

// decode decodes the elements of t, which must have real values: F32 and
// F64 in place where their bytes are aligned; the 32- and 64-bit integers
// and F64 to float64 (the 64-bit integers to the nearest float64); every
// other dtype as Tensor.AppendFloat32s decodes it, exactly.
func (d *decoder) decode(t safetensors.Tensor) (block, error) {
	var err error
	switch t.DType {
	case safetensors.F32:
		if v, err := safetensors.View[float32](t); err == nil {
			return block{f32: v}, nil
		}
	case safetensors.F64:
		if v, err := safetensors.View[float64](t); err == nil {
			return block{f64: v, wide: true}, nil
		}
		d.f64, err = safetensors.Values(t, d.f64[:0])
		return block{f64: d.f64, wide: true}, err
	case safetensors.I32:
		d.f64, err = widen(t, &d.i32, d.f64)
		return block{f64: d.f64, wide: true}, err
	case safetensors.U32:
		d.f64, err = widen(t, &d.u32, d.f64)
		return block{f64: d.f64, wide: true}, err
	case safetensors.I64:
		d.f64, err = widen(t, &d.i64, d.f64)
		return block{f64: d.f64, wide: true}, err
	case safetensors.U64:
		d.f64, err = widen(t, &d.u64, d.f64)
		return block{f64: d.f64, wide: true}, err
	}
	d.f32, err = t.AppendFloat32s(d.f32[:0])
	return block{f32: d.f32}, err
}

// widen decodes the integers of t through *ints into dst[:0] as float64.
func widen[T int32 | uint32 | int64 | uint64](t safetensors.Tensor, ints *[]T, dst []float64) ([]float64, error) {
	v, err := safetensors.Values(t, (*ints)[:0])
	if err != nil {
		return dst, err
	}
	*ints = v
	dst = dst[:0]
	for _, x := range v {
		dst = append(dst, float64(x))
	}
	return dst, nil
}

// compareBlocks adds the comparison of the values of two blocks of the
// same length to t.
func compareBlocks(a, b block, tol tolerance, t *tally) {
	switch {
	case !a.wide && !b.wide:
		compareFloat32s(a.f32, b.f32, tol, t)
	case !a.wide:
		compareValues(a.f32, b.f64, tol, t)
	case !b.wide:
		compareValues(a.f64, b.f32, tol, t)
	default:
		compareValues(a.f64, b.f64, tol, t)
	}
}

// blockLen is how many elements are decoded and compared at a time: a few
// pages of each side, which stay in the core's cache between their
// decoding and their comparison.
const blockLen = 4096

// compareDecoded adds to t the comparison of the values of a and b, pieces
// of the same elements of a tensor, decoded a block at a time with da and
// db.
func compareDecoded(a, b safetensors.Tensor, tol tolerance, da, db *decoder, t *tally) error {
	sa, sb := a.DType.Bits()/8, b.DType.Bits()/8 // whole bytes: the packed dtypes have no values
	n := len(a.Data) / sa
	for lo := 0; lo < n; lo += blockLen {
		hi := min(lo+blockLen, n)
		va, err := da.decode(safetensors.Tensor{Name: a.Name, DType: a.DType, Data: a.Data[lo*sa : hi*sa]})
		if err != nil {
			return err
		}
		vb, err := db.decode(safetensors.Tensor{Name: b.Name, DType: b.DType, Data: b.Data[lo*sb : hi*sb]})
		if err != nil {
			return err
		}
		compareBlocks(va, vb, tol, t)
	}
	return nil
}

// nanCount returns how many of the elements of t, a piece of a tensor
// whose dtype has real values, are NaN, decoded as compareDecoded decodes
// them.
func nanCount(t safetensors.Tensor, d *decoder) (uint64, error) {
	if !t.DType.HasNaN() {
		return 0, nil
	}
	var f nonfinite.Format
	switch t.DType {
	case safetensors.F64:
		f = nonfinite.F64
	case safetensors.F32:
		f = nonfinite.F32
	case safetensors.F16:
		f = nonfinite.F16
	case safetensors.BF16:
		f = nonfinite.BF16
	}
	if f != 0 {
		return nonfinite.Scan(f, t.Data, 0, nonfinite.NoLimit).NaN, nil
	}
	// The F8 types, a block at a time.
	var nan uint64
	n := uint64(len(t.Data)) // a byte an element
	for lo := uint64(0); lo < n; lo += blockLen {
		v, err := d.decode(safetensors.Tensor{Name: t.Name, DType: t.DType, Data: t.Data[lo:min(lo+blockLen, n)]})
		if err != nil {
			return 0, err
		}
		for _, x := range v.f32 {
			if x != x {
				nan++
			}
		}
	}
	return nan, nil
}

// differingElements returns how many of the elements of bits bits in a
// and b, of the same length, differ in their bits: for the dtypes compared
// by their bytes. Elements smaller than a byte are counted within groups
// of whole bytes (one byte of two F4 elements, three bytes of four F6
// elements), each group a little-endian number whose lowest bits are the
// first element; which bits an element takes changes nothing for F4, and
// for F6 only which element of a group is counted.
func differingElements(a, b []byte, bits int) uint64 {
	var n uint64
	if bits%8 == 0 {
		size := bits / 8
		for i := 0; i+size <= len(a); i += size {
			if !bytes.Equal(a[i:i+size], b[i:i+size]) {
				n++
			}
		}
		return n
	}
	group := bits / (bits & -bits) // bytes of a group: lcm(bits, 8) / 8, for 4 or 6 bits
	mask := uint32(1)<<bits - 1
	for i := 0; i+group <= len(a); i += group {
		var x uint32
		for k := range group {
			x |= uint32(a[i+k]^b[i+k]) << (8 * k)
		}
		for f := 0; f < 8*group; f += bits {
			if x>>f&mask != 0 {
				n++
			}
		}
	}
	return n
}
