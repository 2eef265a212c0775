package check

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/verdict"
)

// chunkBytes is the size of the pieces a tensor's values are checked in,
// each by one goroutine, and read in one request from a remote source.
const chunkBytes = 4 << 20

// counts are the value checks' results over a run of elements.
type counts struct {
	nan, inf, big             uint64
	firstNaN, firstInf, first uint64 // flat indices; valid when the count is not 0
	nonzero                   bool
}

func (c *counts) merge(o counts) {
	add := func(n *uint64, first *uint64, on, ofirst uint64) {
		if on == 0 {
			return
		}
		if *n == 0 || ofirst < *first {
			*first = ofirst
		}
		*n += on
	}
	add(&c.nan, &c.firstNaN, o.nan, o.firstNaN)
	add(&c.inf, &c.firstInf, o.inf, o.firstInf)
	add(&c.big, &c.first, o.big, o.first)
	c.nonzero = c.nonzero || o.nonzero
}

// limits holds the magnitude limit as the largest value of each dtype that
// is not beyond it, as bits of the value's absolute value.
type limits struct {
	f64       uint64
	f32       uint32
	bf16, f16 uint16
	f         float64
}

// newLimits returns the limits for maxAbs, positive; +Inf turns the
// magnitude check off.
func newLimits(maxAbs float64) limits {
	l := limits{f: maxAbs, f64: math.Float64bits(maxAbs)}
	f := float32(maxAbs)
	if float64(f) > maxAbs {
		f = math.Nextafter32(f, 0)
	}
	l.f32 = math.Float32bits(f)
	l.bf16 = uint16(l.f32 >> 16) // truncation rounds down
	l.f16 = min(safetensors.F32ToF16(f, safetensors.Truncate), 0x7c00)
	return l
}

// unit is a run of one tensor's elements.
type unit struct {
	t      int    // index in the tensors
	lo, hi uint64 // element range
}

// scanValues checks the values of the float tensors of src, whose entries
// infos gives, in parallel over runs of chunkBytes, each read with
// TensorElements into a buffer of its goroutine: for a source in memory or
// mapped, a slice of it, with no copy; for one read through ReadAt (a
// remote checkpoint), a read of its own, so that at most workers times
// chunkBytes of values are in memory at once, whatever the model's size.
// It returns the findings (a tensor that cannot be read is one, of kind
// KindRead), and the names of the tensors that hold only infinities as
// bounds (verdict.IntendedInf), which are not findings. Values beyond
// maxAbs are reported, none where it is +Inf; at most workers goroutines
// read (GOMAXPROCS where it is 0). Its error is that of a file truncated
// while mapped (safetensors.ErrFileChanged), or that of ctx done before the
// scan (see parallel.Stopped).
func scanValues(ctx context.Context, src safetensors.ElementSource, infos []info, maxAbs float64, workers int) (out []Finding, bounds []string, err error) {
	lim := newLimits(maxAbs)
	var units []unit
	for i, t := range infos {
		if !t.DType.HasNaN() {
			continue // integers, and F4 and F6, which have only finite values
		}
		size := uint64(t.DType.Bits() / 8)
		n := t.size / size
		step := chunkBytes / size
		for lo := uint64(0); lo < n; lo += step {
			units = append(units, unit{i, lo, min(lo+step, n)})
		}
	}
	results := make([]counts, len(units))
	readErrs := make([]error, len(units))
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(units)))
	bufs := make([][]float32, workers)
	data := make([][]byte, workers)
	err = parallel.For(ctx, len(units), workers, func(w, k int) error {
		u := units[k]
		t := infos[u.t]
		// The memory a source read through ReadAt reads into, grown to
		// the largest piece; a mapped source gives slices of its own.
		if need := (u.hi - u.lo) * uint64(t.DType.Bits()/8); uint64(cap(data[w])) < need {
			data[w] = make([]byte, need)
		}
		piece, err := src.TensorElements(ctx, t.Name, u.lo, u.hi, data[w])
		if err != nil {
			if parallel.Stopped(ctx) == nil {
				readErrs[k] = err
			}
			return nil
		}
		err = safetensors.GuardFaults(func() error {
			results[k], bufs[w] = scan(piece, u.lo, lim, bufs[w])
			return nil
		})
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		return nil
	})
	if stopped := parallel.Stopped(ctx); stopped != nil {
		return nil, nil, fmt.Errorf("check: stopped: %w", stopped)
	}
	if err != nil {
		return nil, nil, err
	}
	total := make(map[int]*counts)
	failed := make(map[int]bool)
	var order []int
	for k, u := range units {
		if failed[u.t] {
			continue
		}
		if readErrs[k] != nil {
			failed[u.t] = true
			out = append(out, Finding{Severity: Error, Kind: KindRead, Tensor: infos[u.t].Name, Message: readErrs[k].Error()})
			continue
		}
		c := total[u.t]
		if c == nil {
			c = new(counts)
			total[u.t] = c
			order = append(order, u.t)
		}
		c.merge(results[k])
	}
	for _, i := range order {
		if failed[i] {
			continue
		}
		c, t := total[i], infos[i]
		elems := t.size / uint64(t.DType.Bits()/8)
		if verdict.IntendedInf(t.Name, elems, c.nan, c.inf) {
			bounds = append(bounds, t.Name)
			continue
		}
		if c.nan > 0 {
			out = append(out, valueFinding(Error, KindNaN, t.Name, c.nan, c.firstNaN, "%d NaN values, the first at index %d"))
		}
		if c.inf > 0 {
			out = append(out, valueFinding(Error, KindInf, t.Name, c.inf, c.firstInf, "%d infinite values, the first at index %d"))
		}
		buffer := isBuffer(t.Name, t.Shape)
		if c.big > 0 && !buffer {
			f := valueFinding(Warning, KindMagnitude, t.Name, c.big, c.first, "%d values beyond ±%g, the first at index %d")
			f.Message = fmt.Sprintf("%d values beyond ±%g, the first at index %d", c.big, lim.f, c.first)
			out = append(out, f)
		}
		if !c.nonzero && c.nan == 0 && !buffer {
			out = append(out, Finding{Severity: Warning, Kind: KindZero, Tensor: t.Name, Message: fmt.Sprintf("all %d values are zero", elems)})
		}
	}
	return out, bounds, nil
}

func valueFinding(s Severity, kind, name string, n, first uint64, format string) Finding {
	return Finding{Severity: s, Kind: kind, Tensor: name, Count: n, First: &first, Message: fmt.Sprintf(format, n, first)}
}

// scan checks the elements of t, a piece of a tensor whose first element
// is the tensor's element base. The common case, where all values are
// finite and within the limit, costs one pass that keeps the largest
// absolute value's bits and the OR of all of them; the elements are looked
// at one by one only when that pass finds something.
func scan(t safetensors.Tensor, base uint64, lim limits, buf []float32) (counts, []float32) {
	var c counts
	le := binary.LittleEndian
	switch t.DType {
	case safetensors.F32:
		b := t.Data
		// Two elements at a time in a 64-bit word: adding 0x7fffffff - t
		// to a lane's absolute value sets the lane's top bit when the value
		// is above t, without carrying into the next lane. t is the limit,
		// or the largest finite value if that is lower, so that NaN and
		// Inf always take the slow path.
		top := min(lim.f32, 0x7f7fffff)
		k := uint64(0x7fffffff-top) * 0x0000000100000001
		var or, over uint64
		i := 0
		for ; i+16 <= len(b); i += 16 {
			w0 := le.Uint64(b[i:]) & 0x7fffffff7fffffff
			w1 := le.Uint64(b[i+8:]) & 0x7fffffff7fffffff
			or |= w0 | w1
			over |= (w0 + k) | (w1 + k)
		}
		slow := over&0x8000000080000000 != 0
		for ; i < len(b); i += 4 {
			a := le.Uint32(b[i:]) & 0x7fffffff
			or |= uint64(a)
			slow = slow || a > top
		}
		c.nonzero = or != 0
		if slow {
			for k := range len(b) / 4 {
				a := le.Uint32(b[4*k:]) & 0x7fffffff
				c.classify(base+uint64(k), a > 0x7f800000, a == 0x7f800000, a > lim.f32)
			}
		}
	case safetensors.BF16, safetensors.F16:
		b := t.Data
		l, inf := lim.bf16, uint16(0x7f80)
		if t.DType == safetensors.F16 {
			l, inf = lim.f16, 0x7c00
		}
		// Four elements at a time, as for F32 above.
		top := min(l, inf-1)
		k := uint64(0x7fff-top) * 0x0001000100010001
		var or, over uint64
		i := 0
		for ; i+16 <= len(b); i += 16 {
			w0 := le.Uint64(b[i:]) & 0x7fff7fff7fff7fff
			w1 := le.Uint64(b[i+8:]) & 0x7fff7fff7fff7fff
			or |= w0 | w1
			over |= (w0 + k) | (w1 + k)
		}
		slow := over&0x8000800080008000 != 0
		for ; i < len(b); i += 2 {
			a := le.Uint16(b[i:]) & 0x7fff
			or |= uint64(a)
			slow = slow || a > top
		}
		c.nonzero = or != 0
		if slow {
			for k := range len(b) / 2 {
				a := le.Uint16(b[2*k:]) & 0x7fff
				c.classify(base+uint64(k), a > inf, a == inf, a > l)
			}
		}
	case safetensors.F64:
		b := t.Data
		// The limit, or the largest finite value if that is lower, so that
		// Inf is looked at when the limit is off (+Inf), as for F32.
		top := min(lim.f64, 0x7fefffffffffffff)
		for k := range len(b) / 8 {
			a := le.Uint64(b[8*k:]) & 0x7fffffffffffffff
			c.nonzero = c.nonzero || a != 0
			if a > top {
				c.classify(base+uint64(k), a > 0x7ff0000000000000, a == 0x7ff0000000000000, true)
			}
		}
	default: // the F8 types, F8_E8M0 included, through float32
		buf, _ = t.AppendFloat32s(buf[:0])
		top := min(lim.f, math.MaxFloat64) // as for F64
		for k, v := range buf {
			a := math.Abs(float64(v))
			c.nonzero = c.nonzero || a != 0
			if !(a <= top) {
				c.classify(base+uint64(k), math.IsNaN(a), math.IsInf(a, 0), true)
			}
		}
	}
	return c, buf
}

// classify counts element i as NaN, infinite, or beyond the limit.
func (c *counts) classify(i uint64, nan, inf, beyond bool) {
	switch {
	case nan:
		if c.nan == 0 {
			c.firstNaN = i
		}
		c.nan++
	case inf:
		if c.inf == 0 {
			c.firstInf = i
		}
		c.inf++
	case beyond:
		if c.big == 0 {
			c.first = i
		}
		c.big++
	}
}
