package check

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/nonfinite"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/plural"
	"github.com/safetensors-go/safetensors/internal/role"
	"github.com/safetensors-go/safetensors/internal/verdict"
)

// chunkBytes is the size of the pieces a tensor's values are checked in,
// each by one goroutine, and read in one request from a remote source.
const chunkBytes = 4 << 20

// newLimits returns the limits for maxAbs, positive; +Inf turns the
// magnitude check off.
func newLimits(maxAbs float64) nonfinite.Limit {
	l := nonfinite.Limit{Float: maxAbs, F64: math.Float64bits(maxAbs)}
	f := float32(maxAbs)
	if float64(f) > maxAbs {
		f = math.Nextafter32(f, 0)
	}
	l.F32 = math.Float32bits(f)
	l.BF16 = uint16(l.F32 >> 16) // truncation rounds down
	l.F16 = min(safetensors.F32ToF16(f, safetensors.Truncate), 0x7c00)
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
// read (GOMAXPROCS where it is 0). report, unless nil, receives the bytes
// of the runs done so far (read or not), from the calling goroutine, as
// parallel.ForProgress says. Its error is that of a file truncated while
// mapped (safetensors.ErrFileChanged), or that of ctx done before the scan
// (see parallel.Stopped).
func scanValues(ctx context.Context, src safetensors.ElementSource, infos []info, maxAbs float64, workers int, report func(done uint64)) (out []Finding, bounds []string, err error) {
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
	results := make([]nonfinite.Counts, len(units))
	readErrs := make([]error, len(units))
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(units)))
	bufs := make([][]float32, workers)
	data := make([][]byte, workers)
	err = parallel.ForProgress(ctx, len(units), workers, func(w, k int) (uint64, error) {
		u := units[k]
		t := infos[u.t]
		// The memory a source read through ReadAt reads into, grown to
		// the largest piece; a mapped source gives slices of its own.
		need := (u.hi - u.lo) * uint64(t.DType.Bits()/8)
		if uint64(cap(data[w])) < need {
			data[w] = make([]byte, need)
		}
		piece, err := src.TensorElements(ctx, t.Name, u.lo, u.hi, data[w])
		if err != nil {
			if parallel.Stopped(ctx) == nil {
				readErrs[k] = err
			}
			return need, nil
		}
		err = safetensors.GuardFaults(func() error {
			results[k], bufs[w] = scan(piece, u.lo, lim, bufs[w])
			return nil
		})
		if err != nil {
			return need, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		return need, nil
	}, report)
	if stopped := parallel.Stopped(ctx); stopped != nil {
		return nil, nil, fmt.Errorf("check: stopped: %w", stopped)
	}
	if err != nil {
		return nil, nil, err
	}
	total := make(map[int]*nonfinite.Counts)
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
			c = new(nonfinite.Counts)
			total[u.t] = c
			order = append(order, u.t)
		}
		c.Merge(results[k])
	}
	for _, i := range order {
		if failed[i] {
			continue
		}
		c, t := total[i], infos[i]
		elems := t.size / uint64(t.DType.Bits()/8)
		if verdict.IntendedInf(t.Name, elems, c.NaN, c.Inf) {
			bounds = append(bounds, t.Name)
			continue
		}
		if c.NaN > 0 {
			out = append(out, valueFinding(Error, KindNaN, t.Name, c.NaN, c.FirstNaN, "%s, the first at index %d"))
		}
		if c.Inf > 0 {
			out = append(out, valueFinding(Error, KindInf, t.Name, c.Inf, c.FirstInf, "%s, the first at index %d"))
		}
		// A buffer's values are not weights: checked for NaN and Inf only.
		buffer := role.IsBuffer(t.Name, t.Shape)
		if c.Big > 0 && !buffer {
			f := valueFinding(Warning, KindMagnitude, t.Name, c.Big, c.FirstBig, "")
			f.Message = fmt.Sprintf("%s beyond ±%g, the first at index %d", plural.Of(c.Big, "value"), lim.Float, c.FirstBig)
			out = append(out, f)
		}
		if !c.Nonzero && c.NaN == 0 && !buffer {
			out = append(out, Finding{Severity: Warning, Kind: KindZero, Tensor: t.Name, Message: fmt.Sprintf("all %d values are zero", elems)})
		}
	}
	return out, bounds, nil
}

func valueFinding(s Severity, kind, name string, n, first uint64, format string) Finding {
	noun := "NaN value"
	if kind == KindInf {
		noun = "infinite value"
	}
	return Finding{Severity: s, Kind: kind, Tensor: name, Count: n, First: &first, Message: fmt.Sprintf(format, plural.Of(n, noun), first)}
}

// scan checks the elements of t, a piece of a tensor whose first element
// is the tensor's element base, as nonfinite.Scan does; the F8 types are
// decoded into buf first.
func scan(t safetensors.Tensor, base uint64, lim nonfinite.Limit, buf []float32) (nonfinite.Counts, []float32) {
	switch t.DType {
	case safetensors.F32:
		return nonfinite.Scan(nonfinite.F32, t.Data, base, lim), buf
	case safetensors.BF16:
		return nonfinite.Scan(nonfinite.BF16, t.Data, base, lim), buf
	case safetensors.F16:
		return nonfinite.Scan(nonfinite.F16, t.Data, base, lim), buf
	case safetensors.F64:
		return nonfinite.Scan(nonfinite.F64, t.Data, base, lim), buf
	}
	// The F8 types, F8_E8M0 included, through float32.
	buf, _ = t.AppendFloat32s(buf[:0])
	return nonfinite.Floats(buf, base, lim.Float), buf
}
