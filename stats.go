package safetensors

import (
	"math"

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

// statsChunk is the number of elements summarized at a time: a chunk's
// values are read twice, for the mean and then the squared deviations from
// it, while they are in the cache.
const statsChunk = 4096

// Stats computes the statistics of the tensor's elements in one pass over
// its bytes, with float64 arithmetic, in chunks whose partial results are
// combined with the pairwise formulas of Chan, Golub and LeVeque, so that
// the standard deviation stays accurate when the mean is large. It takes any
// dtype that Float32s decodes, and F64 without rounding to float32; it
// allocates nothing for F32 and F64 tensors in a file, and a 16 KiB buffer
// for the others.
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

// addChunk adds the values of one chunk to a.
func addChunk[T float32 | float64](a *statsAcc, v []T) {
	if len(v) == 0 {
		return
	}
	a.count += uint64(len(v))
	// First pass: the sum and the extremes, with four sums to shorten the
	// chains of dependent additions, and no test for NaN and ±Inf: one of
	// them makes the sum NaN or infinite, and the chunk is done again with
	// tests.
	var s0, s1, s2, s3 float64
	lo, hi := float64(v[0]), float64(v[0])
	i := 0
	for ; i+3 < len(v); i += 4 {
		x0, x1, x2, x3 := float64(v[i]), float64(v[i+1]), float64(v[i+2]), float64(v[i+3])
		s0 += x0
		s1 += x1
		s2 += x2
		s3 += x3
		lo, hi = extend(lo, hi, x0)
		lo, hi = extend(lo, hi, x1)
		lo, hi = extend(lo, hi, x2)
		lo, hi = extend(lo, hi, x3)
	}
	for ; i < len(v); i++ {
		x := float64(v[i])
		s0 += x
		lo, hi = extend(lo, hi, x)
	}
	sum := s0 + s1 + s2 + s3
	if sum-sum != 0 {
		addChunkChecked(a, v)
		return
	}
	mean := sum / float64(len(v))
	// Second pass, over values still in the cache: the squared deviations.
	var m0, m1, m2, m3 float64
	i = 0
	for ; i+3 < len(v); i += 4 {
		d0, d1, d2, d3 := float64(v[i])-mean, float64(v[i+1])-mean, float64(v[i+2])-mean, float64(v[i+3])-mean
		m0 += d0 * d0
		m1 += d1 * d1
		m2 += d2 * d2
		m3 += d3 * d3
	}
	for ; i < len(v); i++ {
		d := float64(v[i]) - mean
		m0 += d * d
	}
	a.merge(float64(len(v)), mean, m0+m1+m2+m3, lo, hi)
}

// extend returns the range [lo, hi] extended to x, with comparisons rather
// than min and max, which would order NaNs and signed zeros at some cost.
func extend(lo, hi, x float64) (float64, float64) {
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
