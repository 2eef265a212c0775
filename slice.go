package safetensors

import (
	"errors"
	"iter"
	"math/bits"
	"slices"
)

// ErrInvalidSlice is returned by Tensor.Slice for selectors that do not fit
// the tensor: more selectors than dimensions, a position or bound past the
// end of its dimension, or a range whose start is after its stop.
var ErrInvalidSlice = errors.New("safetensors: invalid slice")

// A Selector selects part of one dimension of a tensor, for Tensor.Slice:
// a single position (At), which drops the dimension, a range of positions
// (Range), or the whole dimension (All). The zero Selector is All().
type Selector struct {
	start, stop uint64
	kind        selectorKind
}

// selectorKind says what a Selector selects.
type selectorKind uint8

const (
	selectAll selectorKind = iota
	selectAt
	selectRange
)

// At selects position i of a dimension, and drops the dimension from the
// result's shape, like x[i] in Python.
func At(i uint64) Selector { return Selector{start: i, kind: selectAt} }

// Range selects positions start up to stop, excluded, like x[start:stop] in
// Python; start == stop selects nothing.
func Range(start, stop uint64) Selector {
	return Selector{start: start, stop: stop, kind: selectRange}
}

// All selects a whole dimension, like x[:] in Python; dimensions after the
// last Selector are selected whole too.
func All() Selector { return Selector{kind: selectAll} }

// A TensorSlice is the part of a tensor that Tensor.Slice selects: its shape,
// and its bytes, which are runs of the tensor's bytes (row-major order makes
// each run contiguous). It refers to the tensor's bytes without copying
// them.
type TensorSlice struct {
	Name  string
	DType DType
	// Shape is the shape of the selection, without the dimensions selected
	// with At.
	Shape []uint64

	data  []byte
	outer []span // the selected positions of the dimensions before the run's
	runs  uint64 // the number of runs: the product of the outer spans
	start uint64 // the byte offset of the first run
	run   uint64 // the length in bytes of each run
}

// span is a selected range of positions of one dimension, with the number
// of bytes one position of that dimension spans.
type span struct {
	first, count, stride uint64
}

// Slice selects part of the tensor, as the reference's get_slice does: one
// Selector per leading dimension, the rest whole. It returns the selection's
// shape and its bytes as contiguous runs of t.Data, without copying them.
// Selectors that do not fit give an error wrapping ErrInvalidSlice; a
// selection of F4 or F6 elements whose runs do not start and end on byte
// boundaries gives one wrapping ErrMisalignedSlice.
func (t Tensor) Slice(selectors ...Selector) (TensorSlice, error) {
	size, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return TensorSlice{}, &TensorError{Name: t.Name, Err: err}
	}
	if size != uint64(len(t.Data)) {
		return TensorSlice{}, tensorErrorf(t.Name, ErrSizeMismatch, "len(Data) is %d, shape %v of %v needs %d bytes", len(t.Data), t.Shape, t.DType, size)
	}
	rank := len(t.Shape)
	if len(selectors) > rank {
		return TensorSlice{}, tensorErrorf(t.Name, ErrInvalidSlice, "%d selectors for %d dimensions", len(selectors), rank)
	}
	s := TensorSlice{Name: t.Name, DType: t.DType, Shape: []uint64{}, data: t.Data}

	// The selection of each dimension, checked.
	sel := make([]span, rank)
	for i, d := range t.Shape {
		first, count := uint64(0), d
		if i < len(selectors) {
			x := selectors[i]
			switch x.kind {
			case selectAt:
				if x.start >= d {
					return TensorSlice{}, tensorErrorf(t.Name, ErrInvalidSlice, "index %d of dimension %d is out of range [0, %d)", x.start, i, d)
				}
				first, count = x.start, 1
			case selectRange:
				if x.start > x.stop {
					return TensorSlice{}, tensorErrorf(t.Name, ErrInvalidSlice, "range [%d, %d) of dimension %d starts after it stops", x.start, x.stop, i)
				}
				if x.stop > d {
					return TensorSlice{}, tensorErrorf(t.Name, ErrInvalidSlice, "range [%d, %d) of dimension %d is out of range [0, %d]", x.start, x.stop, i, d)
				}
				first, count = x.start, x.stop-x.start
			}
		}
		sel[i] = span{first: first, count: count}
		if i >= len(selectors) || selectors[i].kind != selectAt {
			s.Shape = append(s.Shape, count)
		}
	}

	// Strides in bits, from the last dimension; they cannot overflow since
	// the whole tensor's bits do not.
	elemBits := uint64(t.DType.Bits())
	stride := elemBits
	for i := rank - 1; i >= 0; i-- {
		sel[i].stride = stride
		stride *= t.Shape[i]
	}

	// The run is the selection of the last dimension that is not whole, with
	// everything after it; the dimensions before it repeat the run.
	k := rank - 1
	for k >= 0 && sel[k].first == 0 && sel[k].count == t.Shape[k] {
		k--
	}
	runBits := uint64(len(t.Data)) * 8
	var startBits uint64
	s.runs = 1
	if k >= 0 {
		runBits = sel[k].count * sel[k].stride
		startBits = sel[k].first * sel[k].stride
		for i := 0; i < k; i++ {
			startBits += sel[i].first * sel[i].stride
			hi, lo := bits.Mul64(s.runs, sel[i].count)
			if hi != 0 {
				lo = 0 // cannot happen: the runs fit in the tensor
			}
			s.runs = lo
		}
		s.outer = sel[:k]
	}
	if runBits == 0 {
		s.runs = 0
	}
	if s.runs > 0 {
		// Every run starts at startBits plus multiples of the outer strides.
		misaligned := startBits%8 != 0 || runBits%8 != 0
		for _, o := range s.outer {
			misaligned = misaligned || o.count > 1 && o.stride%8 != 0
		}
		if misaligned {
			return TensorSlice{}, tensorErrorf(t.Name, ErrMisalignedSlice, "the selection of %v elements does not start and end on byte boundaries", t.DType)
		}
	}
	s.start, s.run = startBits/8, runBits/8
	for i := range s.outer {
		s.outer[i].stride /= 8
	}
	return s, nil
}

// DataLen returns the number of bytes the selection holds, as
// Header.DataLen does for a data section; NumElements counts its elements.
func (s TensorSlice) DataLen() uint64 { return s.runs * s.run }

// NumElements returns the number of elements the selection holds: the
// product of its Shape.
func (s TensorSlice) NumElements() uint64 { return elementCount(s.DataLen(), s.DType) }

// Chunks returns the selection's bytes as runs of the tensor's bytes, in
// row-major order: as few as the selection allows, each a slice of the
// tensor's Data.
func (s TensorSlice) Chunks() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		if s.runs == 0 {
			return
		}
		pos := make([]uint64, len(s.outer)) // an odometer over the outer spans
		for {
			off := s.start
			for i, o := range s.outer {
				off += pos[i] * o.stride
			}
			if !yield(s.data[off : off+s.run : off+s.run]) {
				return
			}
			i := len(pos) - 1
			for ; i >= 0; i-- {
				pos[i]++
				if pos[i] < s.outer[i].count {
					break
				}
				pos[i] = 0
			}
			if i < 0 {
				return
			}
		}
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
