package safetensors

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"unicode/utf8"
)

// TensorSpec describes a tensor to write: everything but its bytes, which a
// [Writer] takes afterwards.
type TensorSpec struct {
	Name  string
	DType DType
	// Shape holds the dimensions, outermost first; empty for a scalar.
	Shape []uint64
}

// A WriteOption changes how a file is written. Pass options to [NewWriter],
// [Write], [WriteFile] and [CreateFile].
type WriteOption func(*writeConfig) error

// writeConfig holds the settings of WriteOptions.
type writeConfig struct {
	align int
}

func newWriteConfig(opts []WriteOption) (*writeConfig, error) {
	cfg := &writeConfig{align: headerAlign}
	for _, o := range opts {
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// MaxAlignment is the largest boundary [Alignment] accepts, 1 MiB.
const MaxAlignment = 1 << 20

// Alignment returns an option that pads the header with spaces, which the
// reference accepts, so that the data section starts at a multiple of n
// bytes: n must be a power of two from 8 to MaxAlignment. The default is 8,
// as in the reference; 64 suits vector loads and GPU copies, 4096 direct
// I/O. Tensors still follow each other without gaps, since the format allows
// none: only the data section's start is aligned, and each tensor within it
// to a multiple of its own size in the reference's order (largest dtypes
// first).
func Alignment(n int) WriteOption {
	return func(c *writeConfig) error {
		if n < headerAlign || n > MaxAlignment || n&(n-1) != 0 {
			return fmt.Errorf("%w: Alignment(%d): not a power of two from %d to %d", ErrInvalidOption, n, headerAlign, MaxAlignment)
		}
		c.align = n
		return nil
	}
}

// plan is the layout of a file to write.
type plan struct {
	header Header    // the tensors in file order, with their offsets
	order  []int     // order[k] is the index, in the caller's list, of the k-th tensor
	names  nameTable // finds a tensor of header.Tensors by name
	prefix []byte    // the 8-byte length, the JSON header and its padding
}

// makePlan validates the n tensors that spec(i) describes, and the
// metadata, and lays them out as the reference writer does.
func makePlan(n int, spec func(i int) (string, DType, []uint64), metadata map[string]string, cfg *writeConfig) (*plan, error) {
	for k, v := range metadata {
		if !utf8.ValidString(k) {
			return nil, errorf(ErrHeaderNotUTF8, "metadata key %q is not valid UTF-8", k)
		}
		if !utf8.ValidString(v) {
			return nil, errorf(ErrHeaderNotUTF8, "metadata value of %q is not valid UTF-8", k)
		}
	}
	infos := make([]TensorInfo, n)
	for i := range infos {
		name, dtype, shape := spec(i)
		switch {
		case !utf8.ValidString(name):
			return nil, &TensorError{Name: name, Err: errorf(ErrHeaderNotUTF8, "the name is not valid UTF-8")}
		case name == metadataKey:
			return nil, &TensorError{Name: name, Err: errorf(ErrInvalidHeader, "the name is reserved for the metadata")}
		case !dtype.valid():
			return nil, &TensorError{Name: name, Err: fmt.Errorf("%w: %v", ErrUnknownDType, dtype)}
		}
		size, err := byteSize(dtype, shape)
		if err != nil {
			return nil, &TensorError{Name: name, Err: err}
		}
		// DataOffsets[1] holds the size until the offsets are known.
		infos[i] = TensorInfo{Name: name, DType: dtype, Shape: shape, DataOffsets: [2]uint64{0, size}}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(infos[b].DType, infos[a].DType); c != 0 {
			return c
		}
		return cmp.Compare(infos[a].Name, infos[b].Name)
	})
	sorted := make([]TensorInfo, n)
	for k, i := range order {
		sorted[k] = infos[i]
	}
	// The index that finds a tensor by name, for the Writer, finds names
	// given twice too.
	names, dups := buildNameTable(sorted)
	if len(dups) > 0 {
		return nil, &TensorError{Name: sorted[dups[0]].Name, Err: errorf(ErrInvalidHeader, "duplicate tensor name")}
	}
	var off uint64
	for k := range sorted {
		t := &sorted[k]
		size := t.DataOffsets[1]
		if off+size < off {
			return nil, &TensorError{Name: t.Name, Err: errorf(ErrShapeOverflow, "the data section would be more than 2^64-1 bytes")}
		}
		t.DataOffsets = [2]uint64{off, off + size}
		off += size
	}
	prefix := appendHeader(nil, metadata, sorted, cfg.align)
	if n := len(prefix) - prefixLen; n > MaxHeaderSize {
		return nil, errorf(ErrHeaderTooLarge, "the header would be %d bytes, more than the limit of %d", n, MaxHeaderSize)
	}
	pl := &plan{order: order, prefix: prefix, names: names}
	pl.header = Header{Tensors: sorted, Len: uint64(len(prefix) - prefixLen)}
	if metadata != nil {
		pl.header.Metadata = make(map[string]string, len(metadata))
		for k, v := range metadata {
			pl.header.Metadata[k] = v
		}
	}
	return pl, nil
}

// A Writer writes a safetensors file whose tensors are known in advance and
// whose bytes come afterwards, in chunks of any size, so that files larger
// than memory can be written: the header, which lists every offset, goes
// first.
//
// Each tensor's bytes are written once, in one of two ways:
//
//   - in file order, the order of Header().Tensors, through Write (any
//     chunks, as from io.Copy) or WriteTensor (a whole tensor, by name);
//   - when the destination is an io.WriterAt, such as an *os.File, through
//     WriteTensorAt: whole tensors in any order, from any number of
//     goroutines at once.
//
// Writes in file order come first: WriteTensorAt may follow them, for the
// tensors they have not begun, but they may not follow WriteTensorAt, since
// an io.Writer's position need not follow what WriteAt wrote. Close checks
// that every byte arrived.
//
// A call that would break these rules writes nothing, leaves the Writer as
// it was, and returns a *TensorError naming the tensor and wrapping
// ErrWriteOrder (a tensor written before the one whose bytes come next, or
// Write and WriteTensor after WriteTensorAt), ErrTensorWritten (a tensor
// written twice), ErrTensorNotFound (a name not in the header) or
// errors.ErrUnsupported (WriteTensorAt on a destination that is not an
// io.WriterAt). Errors of the writes themselves are sticky: once a write
// fails, every later call returns the same error. Apart from WriteTensorAt,
// a Writer is for one goroutine at a time.
type Writer struct {
	w      io.Writer
	header Header
	names  nameTable // finds a tensor of header.Tensors by name
	order  []int     // the specs' indices, in file order
	total  uint64    // the length of the data section

	mu     sync.Mutex
	err    error  // the first error, returned ever after
	off    uint64 // data bytes written in order, by Write and WriteTensor
	at     []byte // per tensor, for WriteTensorAt: 0 pending, 1 writing, 2 written; nil before the first
	closed bool
}

// The states of a tensor written by WriteTensorAt.
const (
	atPending = iota
	atWriting
	atWritten
)

// NewWriter validates the tensors and metadata, lays them out as the
// reference writer does, writes the 8-byte length and the header to w, and
// returns a Writer for the tensors' bytes. The file is byte for byte what
// Write writes for the same tensors; NewWriter checks them as Write does,
// and writes nothing if they are invalid. It does not buffer: for many small
// writes, give it a bufio.Writer.
func NewWriter(w io.Writer, specs []TensorSpec, metadata map[string]string, opts ...WriteOption) (*Writer, error) {
	pl, err := planSpecs(specs, metadata, opts)
	if err != nil {
		return nil, err
	}
	return newWriter(w, pl)
}

// newWriter writes the prefix and header of pl to w and returns the Writer.
func newWriter(w io.Writer, pl *plan) (*Writer, error) {
	if _, err := w.Write(pl.prefix); err != nil {
		return nil, err
	}
	return &Writer{w: w, header: pl.header, names: pl.names, order: pl.order, total: pl.header.DataLen()}, nil
}

// Header returns the header the Writer wrote: Tensors lists the tensors in
// the order their bytes must come, with their offsets. It is shared by the
// Writer and must not be modified.
func (w *Writer) Header() *Header { return &w.header }

// SpecOrder returns, for each tensor of Header().Tensors, the index of its
// TensorSpec in the list given to NewWriter or CreateFile: a caller that
// holds the tensors' bytes in its own order finds them by position, with no
// lookup by name. It is shared by the Writer and must not be modified.
func (w *Writer) SpecOrder() []int { return w.order }

// fail records err as the sticky error, unless there is one, and returns the
// sticky error.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// check returns the error that stops the writes of name's bytes in file
// order, if any; name is "" for Write, whose error then names the tensor
// whose bytes come next.
func (w *Writer) check(name string) error {
	switch {
	case w.err != nil:
		return w.err
	case w.closed:
		return ErrClosed
	case w.at != nil:
		if name == "" {
			name = w.current(w.off).Name
		}
		return tensorErrorf(name, ErrWriteOrder, "writes in file order cannot follow WriteTensorAt")
	}
	return nil
}

// current returns the tensor that holds data byte off, or the last tensor
// when off is the end of the data section. There must be a tensor.
func (w *Writer) current(off uint64) *TensorInfo {
	ts := w.header.Tensors
	i, _ := slices.BinarySearchFunc(ts, off, func(t TensorInfo, off uint64) int {
		return cmp.Compare(t.DataOffsets[1], off+1)
	})
	return &ts[min(i, len(ts)-1)]
}

// Write writes the next bytes of the data section: the tensors' bytes, one
// after the other in the order of Header().Tensors, in chunks of any size.
// It never writes past the end of the data section: the bytes that would go
// beyond it are refused with an error wrapping ErrSizeMismatch, after the
// ones that fit are written.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(""); err != nil {
		return 0, err
	}
	room := w.total - w.off
	extra := uint64(len(p)) > room
	if extra {
		p = p[:room]
	}
	var n int
	if len(p) > 0 {
		var err error
		n, err = w.w.Write(p)
		w.off += uint64(n)
		if err != nil {
			return n, w.fail(err)
		}
	}
	if extra {
		err := errorf(ErrSizeMismatch, "write past the end of the data section, which is %d bytes", w.total)
		if len(w.header.Tensors) > 0 {
			err = &TensorError{Name: w.header.Tensors[len(w.header.Tensors)-1].Name, Err: err}
		}
		return n, w.fail(err)
	}
	return n, nil
}

// copyBufs holds the buffers that WriteTensor and WriteTensorAt copy
// through when the source cannot write itself out.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// A sizedSource is a source that tells how many bytes it holds and writes
// them out itself, as a *bytes.Reader or *strings.Reader does.
type sizedSource interface {
	io.WriterTo
	Len() int
}

// copyN copies exactly n bytes from src to dst. A sizedSource that holds
// exactly n bytes writes them to dst itself, in writes as large as it
// holds them (the whole of a *bytes.Reader's slice), with no buffer in
// between; the bytes it would write beyond n are refused.
func copyN(dst io.Writer, src io.Reader, n uint64) (uint64, error) {
	if s, ok := src.(sizedSource); ok && s.Len() >= 0 && uint64(s.Len()) == n {
		lw := &limitedWriter{w: dst, left: n}
		_, err := s.WriteTo(lw)
		done := n - lw.left
		if err == nil && done < n {
			err = io.ErrUnexpectedEOF // it wrote fewer than its Len said
		}
		return done, err
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	var done uint64
	for done < n {
		// Chunks of at most 1 GiB keep the int64 conversion exact.
		chunk := min(n-done, 1<<30)
		k, err := io.CopyBuffer(dst, io.LimitReader(src, int64(chunk)), *buf)
		done += uint64(k)
		if err != nil {
			return done, err
		}
		if uint64(k) < chunk {
			return done, io.ErrUnexpectedEOF
		}
	}
	return done, nil
}

// limitedWriter passes on to w at most left bytes, and refuses the rest.
type limitedWriter struct {
	w    io.Writer
	left uint64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	var over error
	if uint64(len(p)) > l.left {
		p = p[:l.left]
		over = errorf(ErrSizeMismatch, "the source wrote more bytes than its Len said it held")
	}
	n, err := l.w.Write(p)
	l.left -= uint64(n)
	if err == nil {
		err = over
	}
	return n, err
}

// copyError returns the error of copying n of the size bytes of the named
// tensor: a source that ended early is a size mismatch.
func copyError(name string, n, size uint64, err error) error {
	if err == io.ErrUnexpectedEOF {
		return tensorErrorf(name, ErrSizeMismatch, "the source ended after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	return &TensorError{Name: name, Err: err}
}

// WriteTensor writes the named tensor's bytes, read from r: exactly as many
// as its shape and dtype need (r may hold more). The tensor must be the one
// whose bytes come next: the writes in file order so far must end where it
// begins. A tensor that begins later gives an error wrapping ErrWriteOrder,
// one whose bytes were written an error wrapping ErrTensorWritten, and
// neither writes anything. If r ends early, the error names the tensor and the
// missing bytes and wraps io.ErrUnexpectedEOF. A source that holds
// exactly the tensor's bytes and writes itself out (an io.WriterTo with a
// Len method, such as a *bytes.Reader of them) writes them to the
// destination itself, without an intermediate buffer; so does an *os.File
// where the destination reads from it (an *os.File, or CreateFile's).
func (w *Writer) WriteTensor(name string, r io.Reader) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(name); err != nil {
		return err
	}
	i := w.names.find(w.header.Tensors, name)
	if i < 0 {
		return &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	t := &w.header.Tensors[i]
	switch begin := t.DataOffsets[0]; {
	case begin < w.off:
		return tensorErrorf(name, ErrTensorWritten, "its bytes, from data offset %d, were written by Write or WriteTensor, which are at %d", begin, w.off)
	case begin > w.off:
		next := w.current(w.off)
		return tensorErrorf(name, ErrWriteOrder, "its bytes start at data offset %d, but the next byte to write is at %d, in tensor %q", begin, w.off, next.Name)
	}
	size := t.DataOffsets[1] - t.DataOffsets[0]
	n, err := copyN(w.w, r, size)
	w.off += n
	if err != nil {
		return w.fail(copyError(name, n, size, err))
	}
	return nil
}

// WriteTensorAt writes the named tensor's bytes, read from r, at their place
// in the file: the destination must be an io.WriterAt, such as an *os.File,
// whose offset 0 is the start of the file (else the error wraps
// errors.ErrUnsupported). Tensors may be written in any order and by
// several goroutines at once, each tensor once (else ErrTensorWritten),
// including after Write and WriteTensor, for the tensors they have not
// begun; Write and WriteTensor may not follow it (ErrWriteOrder). Like
// WriteTensor, it takes exactly the tensor's size from r, and a source
// that holds exactly those bytes and writes itself out (a *bytes.Reader of
// them) writes them at their place itself, in writes as large as it makes
// them, without an intermediate buffer.
func (w *Writer) WriteTensorAt(name string, r io.Reader) error {
	i, wa, err := w.startAt(name)
	if err != nil {
		return err
	}
	t := &w.header.Tensors[i]
	size := t.DataOffsets[1] - t.DataOffsets[0]
	n, err := copyN(io.NewOffsetWriter(wa, int64(w.header.DataOffset()+t.DataOffsets[0])), r, size)

	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		return w.fail(copyError(name, n, size, err))
	}
	w.at[i] = atWritten
	return nil
}

// startAt checks that WriteTensorAt may write the named tensor, and marks
// it as being written; it returns the tensor's index in the header and the
// destination.
func (w *Writer) startAt(name string) (int, io.WriterAt, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		return 0, nil, w.err
	case w.closed:
		return 0, nil, ErrClosed
	}
	i := w.names.find(w.header.Tensors, name)
	if i < 0 {
		return 0, nil, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	wa, ok := w.w.(io.WriterAt)
	if !ok {
		return 0, nil, tensorErrorf(name, errors.ErrUnsupported, "WriteTensorAt needs a destination that is an io.WriterAt, not %T", w.w)
	}
	t := &w.header.Tensors[i]
	if t.DataOffsets[0] < w.off {
		return 0, nil, tensorErrorf(name, ErrTensorWritten, "its bytes, from data offset %d, were written by Write or WriteTensor, which are at %d", t.DataOffsets[0], w.off)
	}
	if w.at == nil {
		w.at = make([]byte, len(w.header.Tensors))
	}
	switch w.at[i] {
	case atWriting:
		return 0, nil, tensorErrorf(name, ErrTensorWritten, "another WriteTensorAt is writing its bytes")
	case atWritten:
		return 0, nil, tensorErrorf(name, ErrTensorWritten, "its bytes were written by WriteTensorAt")
	}
	w.at[i] = atWriting
	return i, wa, nil
}

// Close checks that every byte of every tensor was written. If not, it
// returns an error that names the first incomplete tensor and the bytes
// missing, wrapping ErrSizeMismatch. It does not close the underlying
// writer. After Close, the writing methods return ErrClosed. Call it after
// every WriteTensorAt has returned.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	for i := range w.header.Tensors {
		t := &w.header.Tensors[i]
		begin, end := t.DataOffsets[0], t.DataOffsets[1]
		if begin == end || end <= w.off || w.at != nil && w.at[i] == atWritten {
			continue // empty, written in file order, or by WriteTensorAt
		}
		var got uint64
		if begin < w.off {
			got = w.off - begin
		}
		size := end - begin
		return w.fail(tensorErrorf(t.Name, ErrSizeMismatch, "%d of %d bytes written, %d missing", got, size, size-got))
	}
	return nil
}

// Write writes tensors and metadata to w as a safetensors file, byte for byte
// as the reference writer does:
//
//   - the tensors in order of descending DType (U64 first, BOOL last), then
//     of name, each starting where the previous one ends;
//   - compact JSON with "__metadata__" first, written when metadata is not
//     nil (even if empty), its keys sorted so the output is deterministic
//     (the reference uses hash order);
//   - names and strings escaped as serde_json does;
//   - the header padded with spaces so that the data section starts at a
//     multiple of 8, or of the Alignment option.
//
// Write checks everything before it writes a byte: names must be valid UTF-8
// (ErrHeaderNotUTF8), unique, and not "__metadata__" (ErrInvalidHeader); the
// DType must be one of the constants (ErrUnknownDType); the shape must not
// overflow (ErrShapeOverflow) and must fill whole bytes (ErrMisalignedSlice);
// len(Data) must match the shape and dtype (ErrSizeMismatch). Metadata keys
// and values must be valid UTF-8. Errors about a tensor are *TensorErrors.
//
// The tensors may come from Readers, to merge or subset checkpoints: their
// Data is written straight from the Readers' memory. Write goes through a
// Writer, buffering small tensors; it does not close w. With zero tensors
// and empty metadata it writes {"__metadata__":{}}, where the reference
// writes invalid JSON.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string, opts ...WriteOption) error {
	pl, err := planTensors(tensors, metadata, opts)
	if err != nil {
		return err
	}
	return writeTensors(w, pl, tensors)
}

// planSpecs validates specs and metadata, and lays them out.
func planSpecs(specs []TensorSpec, metadata map[string]string, opts []WriteOption) (*plan, error) {
	cfg, err := newWriteConfig(opts)
	if err != nil {
		return nil, err
	}
	return makePlan(len(specs), func(i int) (string, DType, []uint64) {
		s := &specs[i]
		return s.Name, s.DType, s.Shape
	}, metadata, cfg)
}

// planTensors validates tensors, their Data included, and metadata, and
// lays them out.
func planTensors(tensors []Tensor, metadata map[string]string, opts []WriteOption) (*plan, error) {
	cfg, err := newWriteConfig(opts)
	if err != nil {
		return nil, err
	}
	pl, err := makePlan(len(tensors), func(i int) (string, DType, []uint64) {
		t := &tensors[i]
		return t.Name, t.DType, t.Shape
	}, metadata, cfg)
	if err != nil {
		return nil, err
	}
	for k, i := range pl.order {
		t := &tensors[i]
		info := &pl.header.Tensors[k]
		if size := info.DataOffsets[1] - info.DataOffsets[0]; uint64(len(t.Data)) != size {
			return nil, tensorErrorf(t.Name, ErrSizeMismatch, "len(Data) is %d, shape %v of %v needs %d bytes", len(t.Data), t.Shape, t.DType, size)
		}
	}
	return pl, nil
}

// writeTensors writes the file that pl lays out for tensors to w, through a
// Writer, buffering small tensors.
func writeTensors(w io.Writer, pl *plan, tensors []Tensor) (err error) {
	// A tensor mapped by Open from a file truncated since is an error.
	var name string
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), name); e != nil {
			err = e
		}
	}()
	bw := bufio.NewWriterSize(w, 64<<10)
	wr, err := newWriter(bw, pl)
	if err != nil {
		return err
	}
	for _, i := range pl.order {
		name = tensors[i].Name
		// The bytes go to bw as they are; bufio passes large ones through.
		if _, err := wr.Write(tensors[i].Data); err != nil {
			return err
		}
	}
	if err := wr.Close(); err != nil {
		return err
	}
	return bw.Flush()
}
