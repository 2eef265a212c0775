package safetensors

import (
	"math"
	"unsafe"

	"github.com/safetensors-go/safetensors/internal/nonfinite"
)

// Stats summarizes a tensor's values, for checking weights when they are
// loaded: a NaN or an infinity in a checkpoint, or a layer whose values are
// all zero, is worth knowing before it reaches an inference.
type Stats struct {
	// Count is the number of elements; NaN and Inf count those that are
	// NaN and ±Inf.
	Count, NaN, Inf uint64

	// Min, Max, Mean and StdDev are those of the finite elements; StdDev
	// is the population standard deviation, as NumPy's std computes it.
	// All four are NaN when no element is finite.
	Min, Max, Mean, StdDev float64
}

// statsChunk is the number of elements summarized at a time: each chunk's
// sums are taken about a value of its own (its first), and a chunk that
// holds a NaN or an infinity is summarized again, with tests, while it is
// in the cache.
const statsChunk = 4096

// Stats computes the statistics of the tensor's elements in one pass over
// its bytes, with float64 arithmetic, in chunks whose partial results are
// combined with the pairwise formulas of Chan, Golub and LeVeque: within a
// chunk, the sums of the values less the chunk's first and of their
// squares, which lose no accuracy to a large mean (the relative error of a
// chunk's sum of squared deviations stays below a few times 4096 units in
// the last place, whatever the values). It takes any dtype that Float32s
// decodes, and F64 without rounding to float32; it allocates nothing for
// F32 and F64 tensors in a file, and a 16 KiB buffer for the others. On
// amd64 with AVX2 (and without the purego build tag) F32 values are summed
// by an assembly loop, four float64 lanes at a time, whose sums are those of
// the pure-Go loop bit for bit.
func (t Tensor) Stats() (_ Stats, err error) {
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), t.Name); e != nil {
			err = e
		}
	}()
	var a statsAcc
	switch t.DType {
	case F32:
		if v, err := View[float32](t); err == nil {
			addChunks(&a, v)
			return a.stats(), nil
		}
	case F64:
		if v, err := View[float64](t); err == nil {
			addChunks(&a, v)
			return a.stats(), nil
		}
		// Unaligned, or a big-endian host: decode a chunk at a time.
		buf := make([]float64, 0, statsChunk)
		for b := t.Data; len(b) > 0; {
			chunk := b[:min(len(b), 8*statsChunk)]
			var err error
			if buf, err = Values(Tensor{Name: t.Name, DType: F64, Data: chunk}, buf[:0]); err != nil {
				return Stats{}, err
			}
			addChunk(&a, buf)
			b = b[len(chunk):]
		}
		return a.stats(), nil
	}
	if err := t.checkFloat32s(); err != nil {
		return Stats{}, err
	}
	size := t.DType.Bits() / 8
	buf := make([]float32, 0, statsChunk)
	for b := t.Data; len(b) > 0; {
		chunk := b[:min(len(b), size*statsChunk)]
		var err error
		// The dtype and size are checked above: only a fault can fail.
		if buf, err = (Tensor{Name: t.Name, DType: t.DType, Data: chunk}).AppendFloat32s(buf[:0]); err != nil {
			return Stats{}, err
		}
		addChunk(&a, buf)
		b = b[len(chunk):]
	}
	return a.stats(), nil
}

// NonFinite returns the number of elements of t that are NaN and the
// number that are ±Inf: the counts [Tensor.Stats] gives, exact, at a
// fraction of its cost, for a scan that needs no more (a validator's). It
// reads the bits and decodes nothing: a pass that tests the exponent
// fields of two to eight values at a time in 64-bit words, which looks at
// the values one by one only where it finds a NaN or an infinity. It takes
// every dtype: those for which [DType.HasNaN] is false but C64 (the
// integers, BOOL, F4 and the F6 types) hold neither, and give 0, 0; C64
// gives an error wrapping ErrDTypeMismatch, and data that is not a whole
// number of elements one wrapping ErrSizeMismatch.
func (t Tensor) NonFinite() (nan, inf uint64, err error) {
	var f nonfinite.Format
	switch t.DType {
	case F64:
		f = nonfinite.F64
	case F32:
		f = nonfinite.F32
	case F16:
		f = nonfinite.F16
	case BF16:
		f = nonfinite.BF16
	case F8_E5M2:
		f = nonfinite.F8E5M2
	case F8_E4M3:
		f = nonfinite.F8E4M3
	case F8_E4M3FNUZ:
		f = nonfinite.F8E4M3FNUZ
	case F8_E5M2FNUZ:
		f = nonfinite.F8E5M2FNUZ
	case F8_E8M0:
		f = nonfinite.F8E8M0
	case C64:
		return 0, 0, tensorErrorf(t.Name, ErrDTypeMismatch, "%v elements are not real numbers", t.DType)
	default:
		return 0, 0, nil
	}
	if err := t.checkFloat32s(); err != nil {
		return 0, 0, err
	}
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), t.Name); e != nil {
			nan, inf, err = 0, 0, e
		}
	}()
	var c nonfinite.Counts
	if t.DType.Bits() == 8 {
		c = nonfinite.ScanF8(f, t.Data, 0)
	} else {
		c = nonfinite.Scan(f, t.Data, 0, nonfinite.NoLimit)
	}
	return c.NaN, c.Inf, nil
}

// addChunks adds the values of v to a, a chunk at a time.
func addChunks[T float32 | float64](a *statsAcc, v []T) {
	for len(v) > 0 {
		n := min(len(v), statsChunk)
		addChunk(a, v[:n])
		v = v[n:]
	}
}

// statsAcc accumulates statistics chunk by chunk: the count, mean and sum
// of squared deviations from the mean (m2) of the finite values so far.
type statsAcc struct {
	count     uint64
	nonfinite nonfinite.Counts // the NaN and infinite values
	finite    float64
	mean, m2  float64
	min, max  float64
}

// lanes are the sums of a chunk's values less a shift k, and of their
// squares, in four lanes: lane j sums the elements whose index in the
// chunk is j modulo 4, in order, each square rounded to float64 before it
// is added (never fused into a multiply-add), so that the assembly, which
// adds four elements at a time in the lanes of a vector, and the pure-Go
// loop give the same sums bit for bit.
type lanes struct {
	s, q [4]float64
}

// sum returns the lanes' sums, added in a fixed order.
func (l *lanes) sum() (s, q float64) {
	return (l.s[0] + l.s[1]) + (l.s[2] + l.s[3]), (l.q[0] + l.q[1]) + (l.q[2] + l.q[3])
}

// momentsGo adds the elements of v, less k, and their squares to the
// lanes, v's first element in lane 0, and returns the least and greatest
// of them and lo and hi, with comparisons rather than min and max, which
// would order NaNs and signed zeros at some cost: valid when every
// element is finite.
func momentsGo[T float32 | float64](l *lanes, v []T, k float64, lo, hi T) (T, T) {
	s0, s1, s2, s3 := l.s[0], l.s[1], l.s[2], l.s[3]
	q0, q1, q2, q3 := l.q[0], l.q[1], l.q[2], l.q[3]
	i := 0
	for ; i+3 < len(v); i += 4 {
		x := v[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(x[0])-k, float64(x[1])-k, float64(x[2])-k, float64(x[3])-k
		s0 += d0
		s1 += d1
		s2 += d2
		s3 += d3
		q0 += float64(d0 * d0)
		q1 += float64(d1 * d1)
		q2 += float64(d2 * d2)
		q3 += float64(d3 * d3)
		lo, hi = extend(lo, hi, x[0])
		lo, hi = extend(lo, hi, x[1])
		lo, hi = extend(lo, hi, x[2])
		lo, hi = extend(lo, hi, x[3])
	}
	if i < len(v) {
		d := float64(v[i]) - k
		s0 += d
		q0 += float64(d * d)
		lo, hi = extend(lo, hi, v[i])
		if i+1 < len(v) {
			d = float64(v[i+1]) - k
			s1 += d
			q1 += float64(d * d)
			lo, hi = extend(lo, hi, v[i+1])
		}
		if i+2 < len(v) {
			d = float64(v[i+2]) - k
			s2 += d
			q2 += float64(d * d)
			lo, hi = extend(lo, hi, v[i+2])
		}
	}
	l.s, l.q = [4]float64{s0, s1, s2, s3}, [4]float64{q0, q1, q2, q3}
	return lo, hi
}

// addChunk adds the values of one chunk to a: in one pass, the sums of
// the values less the first, of their squares, and the extremes, with no
// test for NaN and ±Inf: one of them makes a sum NaN or infinite, and the
// chunk is done again with tests.
func addChunk[T float32 | float64](a *statsAcc, v []T) {
	if len(v) == 0 {
		return
	}
	a.count += uint64(len(v))
	var l lanes
	k := float64(v[0])
	var lo, hi T
	if unsafe.Sizeof(v[0]) == 4 { // float32: the kernel in use
		// f32Moments is momentsGo for float32, through an assembly loop
		// where the CPU has one (stats_amd64.go, stats_other.go).
		f := unsafe.Slice((*float32)(unsafe.Pointer(&v[0])), len(v))
		flo, fhi := f32Moments(&l, f, k, f[0], f[0])
		lo, hi = T(flo), T(fhi)
	} else {
		lo, hi = momentsGo(&l, v, k, v[0], v[0])
	}
	s, q := l.sum()
	if q-q != 0 || s-s != 0 {
		addChunkChecked(a, v)
		return
	}
	n := float64(len(v))
	// The sum of squared deviations from the mean: q less n times the
	// square of the mean's distance from k, which is s/n.
	a.merge(n, k+s/n, max(0, q-float64(s*s)/n), float64(lo), float64(hi))
}

// extend returns the range [lo, hi] extended to x.
func extend[T float32 | float64](lo, hi, x T) (T, T) {
	if x < lo {
		lo = x
	}
	if x > hi {
		hi = x
	}
	return lo, hi
}

// addChunkChecked is addChunk's second pass for a chunk that holds a NaN
// or an infinity (or finite F64 values whose sum overflows), after its count
// was added: it counts them, as the check package does, and leaves them out
// of the statistics.
func addChunkChecked[T float32 | float64](a *statsAcc, v []T) {
	var sum, n float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, x := range v {
		if f := float64(x); a.nonfinite.Finite(uint64(i), f) {
			sum += f
			n++
			lo, hi = min(lo, f), max(hi, f)
		}
	}
	if n == 0 {
		return
	}
	mean := sum / n
	var m2 float64
	for _, x := range v {
		if f := float64(x); f-f == 0 {
			m2 += (f - mean) * (f - mean)
		}
	}
	a.merge(n, mean, m2, lo, hi)
}

// merge combines a chunk's n finite values, of the given mean and m2, into a.
func (a *statsAcc) merge(n, mean, m2, lo, hi float64) {
	if a.finite == 0 {
		a.finite, a.mean, a.m2, a.min, a.max = n, mean, m2, lo, hi
		return
	}
	total := a.finite + n
	d := mean - a.mean
	a.mean += d * n / total
	a.m2 += m2 + d*d*a.finite*n/total
	a.finite = total
	a.min, a.max = min(a.min, lo), max(a.max, hi)
}

func (a *statsAcc) stats() Stats {
	s := Stats{Count: a.count, NaN: a.nonfinite.NaN, Inf: a.nonfinite.Inf}
	if a.finite == 0 {
		nan := math.NaN()
		s.Min, s.Max, s.Mean, s.StdDev = nan, nan, nan, nan
		return s
	}
	s.Min, s.Max, s.Mean = a.min, a.max, a.mean
	s.StdDev = math.Sqrt(a.m2 / a.finite)
	return s
}

// Merge adds the statistics o to s: s becomes the statistics of the
// elements of both, as if one tensor held them. It changes s, as
// (*big.Int).Add changes its receiver, and returns nothing, so that a call
// whose result is dropped cannot go unnoticed. Several goroutines can each
// summarize a part of a large tensor (Tensor.Elements gives the parts) and
// the parts be merged in any order and grouping:
//
//	var all safetensors.Stats // the zero Stats holds no element
//	for _, part := range parts {
//		all.Merge(part)
//	}
//
// Count, NaN, Inf, Min and Max are exact; Mean and StdDev are combined
// with the pairwise formulas of Chan, Golub and LeVeque that Stats uses
// between its own chunks, and agree with those of the whole to within a
// few units in the last place, not bit for bit, since the sums are added in
// another order.
func (s *Stats) Merge(o Stats) {
	n1 := float64(s.Count - s.NaN - s.Inf)
	n2 := float64(o.Count - o.NaN - o.Inf)
	out := Stats{Count: s.Count + o.Count, NaN: s.NaN + o.NaN, Inf: s.Inf + o.Inf}
	switch {
	case n2 == 0:
		out.Min, out.Max, out.Mean, out.StdDev = s.Min, s.Max, s.Mean, s.StdDev
		if n1 == 0 {
			nan := math.NaN()
			out.Min, out.Max, out.Mean, out.StdDev = nan, nan, nan, nan
		}
	case n1 == 0:
		out.Min, out.Max, out.Mean, out.StdDev = o.Min, o.Max, o.Mean, o.StdDev
	default:
		a := statsAcc{finite: n1, mean: s.Mean, m2: s.StdDev * s.StdDev * n1, min: s.Min, max: s.Max}
		a.merge(n2, o.Mean, o.StdDev*o.StdDev*n2, o.Min, o.Max)
		out.Min, out.Max, out.Mean = a.min, a.max, a.mean
		out.StdDev = math.Sqrt(a.m2 / a.finite)
	}
	*s = out
}
