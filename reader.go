package safetensors

import (
	"maps"
	"slices"
	"sync/atomic"
)

// A Reader gives access to the tensors of one safetensors file.
//
// A Reader is safe for use by several goroutines at once: Tensor, Tensors,
// Names, Metadata and Header may be called concurrently. Close must not be
// called concurrently with them.
type Reader struct {
	h      *parsedHeader
	data   []byte // the data section
	closed atomic.Bool
}

// NewReader parses and validates data, the whole image of a safetensors file,
// and returns a Reader whose tensors are slices of data: no tensor byte is
// copied or even read. The caller must not modify data while the Reader or
// any of its Tensors is in use.
//
// NewReader checks everything the reference checks, in its order, and its
// errors wrap the sentinel of the reference's verdict: the prefix
// (ErrHeaderTooSmall, ErrHeaderTooLarge, ErrInvalidHeaderLength), the header
// text (ErrHeaderNotUTF8, ErrInvalidHeader), each tensor in file order
// (ErrInvalidOffset, ErrShapeOverflow, ErrMisalignedSlice, ErrSizeMismatch),
// and finally that the tensors cover the data section exactly
// (ErrIncompleteBuffer).
func NewReader(data []byte, opts ...ReadOption) (*Reader, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(data) < prefixLen {
		return nil, errorf(ErrHeaderTooSmall, "file is %d bytes, shorter than the %d-byte header length", len(data), prefixLen)
	}
	n, err := headerLen(data, int64(len(data)))
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(data[prefixLen:prefixLen+n], cfg)
	if err != nil {
		return nil, err
	}
	rest := data[prefixLen+n:]
	if end := h.DataLen(); end != uint64(len(rest)) {
		return nil, errorf(ErrIncompleteBuffer, "the tensors cover %d bytes but the data section is %d bytes", end, len(rest))
	}
	return &Reader{h: h, data: rest}, nil
}

// Header returns the parsed header. It is shared by the Reader and must not
// be modified.
func (r *Reader) Header() *Header { return &r.h.Header }

// Names returns the names of the tensors, sorted, like keys() in Python.
// The order of the tensors in the file is that of Header().Tensors.
func (r *Reader) Names() []string {
	names := make([]string, len(r.h.Tensors))
	for i := range r.h.Tensors {
		names[i] = r.h.Tensors[i].Name
	}
	slices.Sort(names)
	return names
}

// Metadata returns a copy of the "__metadata__" map: nil when the file has
// none or null, empty but not nil when it is {}.
func (r *Reader) Metadata() map[string]string { return maps.Clone(r.h.Metadata) }

// Tensor returns the named tensor. Its Data aliases the Reader's memory.
// An unknown name gives a *TensorError wrapping ErrTensorNotFound.
func (r *Reader) Tensor(name string) (Tensor, error) {
	if r.closed.Load() {
		return Tensor{}, ErrClosed
	}
	i := r.h.index.find(r.h.Tensors, name)
	if i < 0 {
		return Tensor{}, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	return r.tensor(i), nil
}

// Tensors returns every tensor in file order. Their Data alias the Reader's
// memory.
func (r *Reader) Tensors() ([]Tensor, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	ts := make([]Tensor, len(r.h.Tensors))
	for i := range ts {
		ts[i] = r.tensor(i)
	}
	return ts, nil
}

// tensor returns the i-th tensor in file order.
func (r *Reader) tensor(i int) Tensor {
	t := &r.h.Tensors[i]
	b, e := t.DataOffsets[0], t.DataOffsets[1]
	return Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: r.data[b:e:e]}
}

// Close marks the Reader closed: later calls of Tensor and Tensors return
// ErrClosed. A Reader from NewReader holds no resource, so Close only does
// that; the Tensors obtained before stay valid as long as the caller's data
// does. Close may be called more than once and always returns nil.
func (r *Reader) Close() error {
	r.closed.Store(true)
	return nil
}
