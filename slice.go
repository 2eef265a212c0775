package safetensors

import (
	"errors"
	"fmt"
	"iter"
	"slices"
)

// ErrInvalidSlice is returned for selectors that do not fit the tensor, as
// the reference's get_slice refuses them: more selectors than dimensions, a
// position or bound outside its dimension (a selector's start must be a
// position of the dimension, so a dimension of size 0 takes none), a range
// whose start is after its stop, a step of 0, more than one Ellipsis.
var ErrInvalidSlice = errors.New("safetensors: invalid slice")

// A Selector selects part of one dimension of a tensor, for Tensor.Slice,
// TensorInfo.Slice and Reader.ReadSlice, as one index of Python's
// get_slice(name)[...] does:
//
//	At(i)                 x[i]      position i; drops the dimension
//	AtFromEnd(i)          x[-i]     position i from the end (1 is the last)
//	Range(a, b)           x[a:b]    positions a up to b, excluded
//	RangeStep(a, b, n)    x[a:b:n]  every n-th of them, from a
//	All()                 x[:]      the whole dimension
//	Ellipsis()            x[...]    as many All() as the other selectors leave
//
// Dimensions after the last Selector are selected whole. The zero Selector
// is All().
//
// The rules are the reference's (safetensors 0.8): positions and bounds
// are checked, never clamped: a range's start must be a position of the
// dimension (below its size) and its stop at most the size; a step is a
// positive integer; one Ellipsis at most. Negative bounds and steps, which
// the reference also refuses, cannot be written: the arguments are
// unsigned. For F4 and F6 tensors, whose elements are not whole bytes, a
// selection must start and end on byte boundaries, with the reference's
// rule (see Tensor.Slice).
type Selector struct {
	start, stop, step uint64
	kind              selectorKind
}

// selectorKind says what a Selector selects.
type selectorKind uint8

const (
	selectAll selectorKind = iota
	selectAt
	selectAtFromEnd
	selectRange
	selectEllipsis
)

// At selects position i of a dimension, and drops the dimension from the
// result's shape, like x[i] in Python.
func At(i uint64) Selector { return Selector{start: i, kind: selectAt} }

// AtFromEnd selects position i counted from the end of a dimension, and
// drops the dimension, like x[-i] in Python: AtFromEnd(1) is the last
// position, AtFromEnd(size) the first. AtFromEnd(0) is out of range.
func AtFromEnd(i uint64) Selector { return Selector{start: i, kind: selectAtFromEnd} }

// Range selects positions start up to stop, excluded, like x[start:stop] in
// Python; start == stop selects nothing, but start must still be a
// position of the dimension.
func Range(start, stop uint64) Selector {
	return Selector{start: start, stop: stop, step: 1, kind: selectRange}
}

// RangeStep selects every step-th position from start up to stop,
// excluded, like x[start:stop:step] in Python: RangeStep(0, 8, 2) selects
// 0, 2, 4 and 6; RangeStep(0, size, n) is x[::n]. A step of 0 is refused,
// as the reference refuses it.
func RangeStep(start, stop, step uint64) Selector {
	return Selector{start: start, stop: stop, step: step, kind: selectRange}
}

// All selects a whole dimension, like x[:] in Python; dimensions after the
// last Selector are selected whole too.
func All() Selector { return Selector{kind: selectAll} }

// Ellipsis stands for as many All() as there are dimensions that the other
// selectors leave, like x[...] in Python: Slice(Ellipsis(), At(1)) selects
// position 1 of the last dimension, whatever the rank. One at most.
func Ellipsis() Selector { return Selector{kind: selectEllipsis} }

// String returns the selector as Python writes it: "1", "-1", "0:4",
// "0:8:2", ":" or "...".
func (s Selector) String() string {
	switch s.kind {
	case selectAt:
		return fmt.Sprint(s.start)
	case selectAtFromEnd:
		return fmt.Sprintf("-%d", s.start)
	case selectRange:
		if s.step == 1 {
			return fmt.Sprintf("%d:%d", s.start, s.stop)
		}
		return fmt.Sprintf("%d:%d:%d", s.start, s.stop, s.step)
	case selectEllipsis:
		return "..."
	}
	return ":"
}

// A TensorSlice is the part of a tensor that Tensor.Slice selects: its shape,
// and its bytes, which are runs of the tensor's bytes (row-major order makes
// each run contiguous). It refers to the tensor's bytes without copying
// them.
type TensorSlice struct {
	Name  string
	DType DType
	// Shape is the shape of the selection, without the dimensions selected
	// with At or AtFromEnd.
	Shape []uint64

	data []byte
	plan slicePlan
}

// A slicePlan says where a selection's bytes are in its tensor's: runs of
// run bytes, the first at start, the others at the offsets that the outer
// spans add, as an odometer over them turns.
type slicePlan struct {
	outer []span // the dimensions that repeat the run, outermost first
	runs  uint64 // the number of runs: the product of the outer counts
	start uint64 // the byte offset of the first run
	run   uint64 // the length in bytes of each run
}

// size returns the selection's length in bytes.
func (p *slicePlan) size() uint64 { return p.runs * p.run }

// span is a dimension that repeats a run: count times, stride bytes apart.
type span struct {
	count, stride uint64
}

// maxStackRank is the rank up to which planning and reading a selection
// allocate nothing: their state lives in arrays of this size.
const maxStackRank = 16

// dimSel is one dimension's selection, resolved: positions first,
// first+step, ..., count of them, and whether the dimension stays in the
// shape.
type dimSel struct {
	first, count, step uint64
	keep               bool
}

// planSlice checks selectors against a tensor of the given dtype and shape,
// with the reference's verdicts, and returns where the selection's bytes
// are. sels receives each dimension's selection (len(shape) of them), and
// outer must have room for len(shape) spans; the plan keeps outer. name is
// for errors.
func planSlice(name string, dtype DType, shape []uint64, selectors []Selector, sels []dimSel, outer []span) (slicePlan, error) {
	rank := len(shape)
	// The reference's order: the index as a whole (ellipses), each item
	// (steps, positions from the end), their number, then each dimension
	// from the last (bounds, alignment).
	ellipsis := -1
	for i, s := range selectors {
		if s.kind == selectEllipsis {
			if ellipsis >= 0 {
				return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "Ellipsis at selectors %d and %d: only one is allowed", ellipsis, i)
			}
			ellipsis = i
		}
	}
	explicit, expand := len(selectors), 0
	if ellipsis >= 0 {
		explicit--
		expand = max(rank-explicit, 0)
	}
	// selector returns the selector of dimension d, and whether it has one
	// (dimensions past the selectors have none).
	selector := func(d int) (Selector, bool) {
		switch {
		case ellipsis < 0 || d < ellipsis:
			if d < len(selectors) {
				return selectors[d], true
			}
			return Selector{}, false
		case d < ellipsis+expand:
			return Selector{}, true
		case d-expand+1 < len(selectors):
			return selectors[d-expand+1], true
		}
		return Selector{}, false
	}
	selected := explicit + expand
	for d := range selected {
		s, _ := selector(d)
		switch s.kind {
		case selectRange:
			if s.step == 0 {
				return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "selector %v of dimension %d: the step must be a positive integer, got 0", s, d)
			}
		case selectAtFromEnd:
			size := uint64(0)
			if d < rank {
				size = shape[d]
			}
			if s.start > size {
				return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "index -%d of dimension %d is out of range for its size %d", s.start, d, size)
			}
		}
	}
	if selected > rank {
		return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "%d selectors for %d dimensions (shape %v)", selected, rank, shape)
	}

	// Each dimension from the last, as the reference checks them: its
	// bounds, then whether the byte ranges the reference would cut so far
	// fall on whole bytes (for F4 and F6). spanBits is the size in bits of
	// one position of the dimension; cut, whether the reference has begun
	// to cut ranges (it begins at the first dimension that is not whole and
	// starts again after an empty one, where its list of ranges is empty).
	spanBits := uint64(dtype.Bits())
	cut := false
	reversed := -1
	for d := rank - 1; d >= 0; d-- {
		size := shape[d]
		s, ok := selector(d)
		if !ok {
			sels[d] = dimSel{first: 0, count: size, step: 1, keep: true}
			spanBits *= size
			continue
		}
		var first, stop, step uint64
		switch s.kind {
		case selectAll:
			first, stop, step = 0, size, 1
		case selectAt:
			first, stop, step = s.start, s.start+1, 1
			if s.start == ^uint64(0) {
				stop = s.start
			}
		case selectAtFromEnd:
			first, stop, step = size-s.start, size-s.start+1, 1
		case selectRange:
			first, stop, step = s.start, s.stop, s.step
		}
		if first >= size || stop > size {
			switch s.kind {
			case selectAt:
				return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "index %d of dimension %d is out of range [0, %d)", s.start, d, size)
			case selectAtFromEnd:
				return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "index -%d of dimension %d is out of range for its size %d", s.start, d, size)
			case selectRange:
				return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "range %v of dimension %d is out of range for its size %d: the start must be below it, the stop at most it", s, d, size)
			}
			return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "%v of dimension %d of size 0: there is no position to start from", s, d)
		}
		count := uint64(0)
		if first <= stop {
			count = (stop-first)/step + min((stop-first)%step, 1)
		} else if reversed < 0 {
			reversed = d
		}
		sels[d] = dimSel{first: first, count: count, step: step, keep: s.kind != selectAt && s.kind != selectAtFromEnd}
		// The products below wrap modulo 2^64, a multiple of 8, so their
		// remainders by 8 are those of the true products.
		aligned := true
		switch {
		case first > stop && (cut || step > 1):
			// The reference fails on such a range, reported below; its
			// arithmetic wraps, and what it checks first depends on it.
		case !cut && step == 1 && first == 0 && stop == size:
			// Whole: the reference has nothing to cut yet.
		case !cut && step == 1:
			aligned = first*spanBits%8 == 0 && stop*spanBits%8 == 0
			cut = true
		case !cut:
			aligned = count == 0 || first*spanBits%8 == 0 && spanBits%8 == 0
			cut = count > 0
		default:
			aligned = count == 0 || first*spanBits%8 == 0 && (count == 1 || step*spanBits%8 == 0)
			cut = count > 0
		}
		if !aligned {
			return slicePlan{}, tensorErrorf(name, ErrMisalignedSlice, "selector %v of dimension %d: %v elements selected so do not start and end on byte boundaries", s, d, dtype)
		}
		spanBits *= size
	}
	if reversed >= 0 {
		s, _ := selector(reversed)
		return slicePlan{}, tensorErrorf(name, ErrInvalidSlice, "range %v of dimension %d starts after it stops", s, reversed)
	}
	return layOut(name, dtype, shape, sels, outer)
}

// layOut returns where the bytes of the selection sels of a tensor of the
// given dtype and shape are: the runs, each as long as the selection allows.
func layOut(name string, dtype DType, shape []uint64, sels []dimSel, outer []span) (slicePlan, error) {
	rank := len(shape)
	for _, s := range sels[:rank] {
		if s.count == 0 {
			return slicePlan{outer: outer[:0]}, nil
		}
	}
	// The run is the selection of the last dimension that is not whole,
	// with everything after it: contiguous if its step is 1, one position
	// otherwise. The dimensions before it, and it too when strided, repeat
	// the run; those with one position only move its start. Strides are in
	// bits: they cannot overflow, since the tensor's bits do not.
	k := rank - 1
	for k >= 0 && sels[k].first == 0 && sels[k].count == shape[k] && sels[k].step == 1 {
		k--
	}
	stride := uint64(dtype.Bits())
	for i := rank - 1; i > k; i-- {
		stride *= shape[i]
	}
	p := slicePlan{runs: 1, outer: outer[:0]}
	runBits, startBits := stride, uint64(0)
	aligned := true
	if k >= 0 {
		strides := outer[:k+1] // the strides in bits, for now
		for i := k; i >= 0; i-- {
			strides[i].stride = stride
			stride *= shape[i]
		}
		if sels[k].step == 1 || sels[k].count == 1 {
			runBits = sels[k].count * strides[k].stride
		} else {
			runBits = strides[k].stride
		}
		n := 0
		for i := 0; i <= k; i++ {
			s, st := sels[i], strides[i].stride
			startBits += s.first * st
			if s.count == 1 || i == k && s.step == 1 {
				continue
			}
			// count > 1 positions within the dimension: step*st fits.
			outer[n] = span{count: s.count, stride: s.step * st}
			aligned = aligned && outer[n].stride%8 == 0
			outer[n].stride /= 8
			p.runs *= s.count // at most the tensor's element count
			n++
		}
		p.outer = outer[:n]
	}
	if !aligned || startBits%8 != 0 || runBits%8 != 0 {
		// The reference's rule, checked above, leaves none of these.
		return slicePlan{}, tensorErrorf(name, ErrMisalignedSlice, "the selection of %v elements does not start and end on byte boundaries", dtype)
	}
	p.start, p.run = startBits/8, runBits/8
	return p, nil
}

// Slice selects part of the tensor, as the reference's get_slice does (see
// Selector for the rules): one Selector per leading dimension, the rest
// whole. It returns the selection's shape and its bytes as contiguous runs
// of t.Data, without copying them.
//
// Selectors that do not fit give an error wrapping ErrInvalidSlice. For F4
// and F6 tensors, whose elements are not whole bytes, a selection is cut
// as the reference cuts it, into byte ranges, from the last dimension to
// the first: it gives an error wrapping ErrMisalignedSlice where one of
// them would not start or end on a byte boundary, as x[:, 1] of a 4x6 F4
// tensor does (each row's second element starts in the middle of a byte).
func (t Tensor) Slice(selectors ...Selector) (TensorSlice, error) {
	size, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return TensorSlice{}, &TensorError{Name: t.Name, Err: err}
	}
	if size != uint64(len(t.Data)) {
		return TensorSlice{}, tensorErrorf(t.Name, ErrSizeMismatch, "len(Data) is %d, shape %v of %v needs %d bytes", len(t.Data), t.Shape, t.DType, size)
	}
	sels := make([]dimSel, len(t.Shape))
	p, err := planSlice(t.Name, t.DType, t.Shape, selectors, sels, make([]span, len(t.Shape)))
	if err != nil {
		return TensorSlice{}, err
	}
	return TensorSlice{Name: t.Name, DType: t.DType, Shape: sliceShape(sels), data: t.Data, plan: p}, nil
}

// sliceShape returns the shape of the selection sels.
func sliceShape(sels []dimSel) []uint64 {
	shape := []uint64{}
	for _, s := range sels {
		if s.keep {
			shape = append(shape, s.count)
		}
	}
	return shape
}

// Slice returns the header entry that the selection would have as a tensor
// of its own, as Reader.ReadSlice reads it: t's Name and DType, the
// selection's Shape, and DataOffsets [0, n], where n, its DataLen, is the
// number of bytes ReadSlice needs. It checks the selectors as
// Tensor.Slice does, with the same errors.
func (t TensorInfo) Slice(selectors ...Selector) (TensorInfo, error) {
	size, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return TensorInfo{}, &TensorError{Name: t.Name, Err: err}
	}
	if t.DataOffsets[1] < t.DataOffsets[0] || t.DataOffsets[1]-t.DataOffsets[0] != size {
		return TensorInfo{}, tensorErrorf(t.Name, ErrSizeMismatch, "data offsets %v for shape %v of %v, which needs %d bytes", t.DataOffsets, t.Shape, t.DType, size)
	}
	sels := make([]dimSel, len(t.Shape))
	p, err := planSlice(t.Name, t.DType, t.Shape, selectors, sels, make([]span, len(t.Shape)))
	if err != nil {
		return TensorInfo{}, err
	}
	return TensorInfo{Name: t.Name, DType: t.DType, Shape: sliceShape(sels), DataOffsets: [2]uint64{0, p.size()}}, nil
}

// DataLen returns the number of bytes of the tensor's data: DataOffsets[1]
// minus DataOffsets[0], or 0 for offsets the wrong way round, which no
// valid header has.
func (t TensorInfo) DataLen() uint64 {
	if t.DataOffsets[1] < t.DataOffsets[0] {
		return 0
	}
	return t.DataOffsets[1] - t.DataOffsets[0]
}

// runOffsets calls yield with the byte offset of each run of p, in order,
// until it returns false. It allocates nothing for up to maxStackRank
// outer spans.
func (p *slicePlan) runOffsets(yield func(off uint64) bool) {
	if p.runs == 0 {
		return
	}
	var stack [maxStackRank]uint64
	pos := stack[:0]
	if len(p.outer) <= maxStackRank {
		pos = stack[:len(p.outer)]
	} else {
		pos = make([]uint64, len(p.outer))
	}
	off := p.start
	for {
		if !yield(off) {
			return
		}
		var more bool
		if off, more = turn(p.outer, pos, off); !more {
			return
		}
	}
}

// turn moves pos, an odometer over spans whose last span turns fastest, on
// by one, and returns the offset of the run it reaches from off, that of
// the run it was at; false once it has gone round.
func turn(spans []span, pos []uint64, off uint64) (uint64, bool) {
	for i := len(pos) - 1; i >= 0; i-- {
		o := spans[i]
		pos[i]++
		off += o.stride
		if pos[i] < o.count {
			return off, true
		}
		off -= pos[i] * o.stride
		pos[i] = 0
	}
	return off, false
}

// DataLen returns the number of bytes the selection holds, as
// Header.DataLen does for a data section; NumElements counts its elements.
func (s TensorSlice) DataLen() uint64 { return s.plan.size() }

// NumElements returns the number of elements the selection holds: the
// product of its Shape.
func (s TensorSlice) NumElements() uint64 { return elementCount(s.DataLen(), s.DType) }

// Chunks returns the selection's bytes as runs of the tensor's bytes, in
// row-major order: as few as the selection allows, each a slice of the
// tensor's Data.
func (s TensorSlice) Chunks() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		s.plan.runOffsets(func(off uint64) bool {
			return yield(s.data[off : off+s.plan.run : off+s.plan.run])
		})
	}
}

// AppendTo appends the selection's bytes to dst and returns the result: the
// elements of the selection, contiguous, in row-major order.
func (s TensorSlice) AppendTo(dst []byte) []byte {
	for chunk := range s.Chunks() {
		dst = append(dst, chunk...)
	}
	return dst
}

// Tensor returns the selection as a tensor of its own, with its bytes
// gathered into new memory.
func (s TensorSlice) Tensor() Tensor {
	return Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: s.AppendTo(make([]byte, 0, s.DataLen()))}
}

// Float32s decodes the selection's elements into a new []float32, in
// row-major order, as Tensor.Float32s decodes a tensor's: s.Float32s() is
// s.Tensor().Float32s() without gathering the bytes first.
func (s TensorSlice) Float32s() ([]float32, error) {
	return s.AppendFloat32s(nil)
}

// AppendFloat32s appends the selection's elements, decoded as
// Tensor.Float32s decodes them, to dst and returns the extended slice. It
// allocates only when dst lacks the capacity. On error dst is returned as
// it was.
func (s TensorSlice) AppendFloat32s(dst []float32) ([]float32, error) {
	if err := (Tensor{Name: s.Name, DType: s.DType}).checkFloat32s(); err != nil {
		return dst, err
	}
	orig := dst
	// The selection is a part of a tensor in memory: its count fits an int.
	dst = slices.Grow(dst, int(s.NumElements()))
	for chunk := range s.Chunks() {
		var err error
		if dst, err = (Tensor{Name: s.Name, DType: s.DType, Data: chunk}).AppendFloat32s(dst); err != nil {
			return orig, err
		}
	}
	return dst, nil
}
