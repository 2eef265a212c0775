package safetensors

import (
	"bytes"
	"io"
)

// TensorReader returns a reader of the named tensor's bytes: an
// io.SectionReader over the file's data section, which allocates nothing
// and reads from the source only when read, for tensors too large to hold
// in memory at once (see MaxTensorAlloc) or to copy into memory the caller
// provides. It works for every Reader, whatever made it; the tensor's dtype
// and shape are in Header. The SectionReader may be used concurrently with
// other reads of the Reader, but not after Close: it then returns
// ErrClosed. An unknown name gives a *TensorError wrapping
// ErrTensorNotFound.
func (r *Reader) TensorReader(name string) (*io.SectionReader, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	i := r.h.names.find(r.h.Tensors, name)
	if i < 0 {
		return nil, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	t := &r.h.Tensors[i]
	// The header's validation bounds both offsets by the source's size,
	// an int64, so neither conversion overflows.
	b, n := int64(t.DataOffsets[0]), int64(t.DataOffsets[1]-t.DataOffsets[0])
	if r.ra == nil {
		return io.NewSectionReader(closedCheck{r, bytes.NewReader(r.data)}, b, n), nil
	}
	return io.NewSectionReader(closedCheck{r, r.ra}, r.base+b, n), nil
}

// closedCheck is an io.ReaderAt that fails with ErrClosed once its Reader
// is closed, rather than touch memory that Close unmapped.
type closedCheck struct {
	r  *Reader
	ra io.ReaderAt
}

func (c closedCheck) ReadAt(p []byte, off int64) (int, error) {
	if c.r.closed.Load() {
		return 0, ErrClosed
	}
	return c.ra.ReadAt(p, off)
}
