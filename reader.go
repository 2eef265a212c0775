package safetensors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/safetensors-go/safetensors/internal/pagecache"
	"github.com/safetensors-go/safetensors/internal/regular"
)

// A Reader gives access to the tensors of one safetensors file. There are
// three ways to get one:
//
//   - [Open] maps a file into memory; tensors are slices of the mapping.
//   - [NewReader] wraps a whole file held in memory; tensors are slices of it.
//   - [NewReaderAt] reads the header through an io.ReaderAt, such as a remote
//     object, and each tensor's bytes when it is asked for, into new memory.
//
// All three validate the whole file as the reference does before returning,
// and give the same verdict, tensors and metadata for every file.
//
// A Reader is safe for use by several goroutines at once: Tensor, Tensors,
// Names, Metadata, Header, Prefetch and ReadSlice may be called
// concurrently, as may View, Values and Slice on the tensors they return.
// Close must not be called concurrently with them.
type Reader struct {
	h    *parsedHeader
	data []byte // the data section, for Open and NewReader

	mapping []byte       // the whole mapped file, for Open with mmap
	release func() error // unmaps, or nil

	ra   io.ReaderAt // for NewReaderAt
	base int64       // the data section's offset in ra

	name  string     // the file's path, for Open; for errors
	local *localFile // the file Open mapped, which DataSections describes

	closed atomic.Bool
}

// ReadAll returns an option that makes Open read the file into memory rather
// than map it: for network file systems, where mapped reads can be many
// times slower, or when tensors must stay valid after Close or if the file
// is truncated. Open reads only the data section, once, in reads of 16 MiB
// from several goroutines (one a processor, and at least four).
// NewFileReader takes it too; NewReader, NewReaderAt and ReadHeader, which
// map nothing, ignore it.
func ReadAll() ReadOption {
	return func(c *readConfig) error {
		c.readAll = true
		return nil
	}
}

// ReadInto returns an option that makes Open read the file into buf, as
// ReadAll does into memory of its own: for a caller that keeps one buffer
// from file to file (a server that swaps models, memory pinned for copies
// to a device). It reads as ReadAll does; where buf has been used before,
// it runs at the speed of the reads alone, whereas the new memory of
// ReadAll must first be cleared by the kernel, page by page, which on
// Linux makes ReadAll take about half as long again.
//
// The tensors' Data are slices of buf, which the caller must not change
// while it uses them; they stay valid after Close, until buf is reused.
// Each option ReadInto returns hands buf out once, from its start: the
// first file opened with it takes Header().DataLen() bytes of it, and each
// other file opened with the same option (the files of a checkpoint that
// the checkpoint package opens with it, several at once) the next ones, in
// no set order, each at a multiple of 64 bytes from buf's start: the sum of
// the files' data sections, each rounded up to 64 bytes, is enough. To
// reuse buf for the next model, call ReadInto again. A buf too small gives
// an error wrapping io.ErrShortBuffer; then any part of buf may have been
// written. Like ReadAll, it applies to Open and NewFileReader.
func ReadInto(buf []byte) ReadOption {
	into := &intoBuffer{buf: buf}
	return func(c *readConfig) error {
		c.readAll, c.into = true, into
		return nil
	}
}

// headerProbe is how much the first read of a header through an io.ReaderAt
// asks for: enough for the header of most files, so that one read does.
const headerProbe = 64 << 10

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
	if err := checkDataLen(h, uint64(len(data))); err != nil {
		return nil, err
	}
	h.raw = data[: prefixLen+n : prefixLen+n]
	return &Reader{h: h, data: data[prefixLen+n:]}, nil
}

// checkDataLen checks that a file of the given size ends where the last
// tensor does.
func checkDataLen(h *parsedHeader, size uint64) error {
	if rest := size - h.DataOffset(); h.DataLen() < rest {
		return errorf(ErrIncompleteBuffer, "the tensors cover %d bytes but the data section is %d bytes: %d bytes after the last tensor", h.DataLen(), rest, rest-h.DataLen())
	} else if h.DataLen() > rest {
		return errorf(ErrIncompleteBuffer, "the tensors cover %d bytes but the data section is %d bytes: the file is %d bytes, the tensors need %d more (a truncated file?)", h.DataLen(), rest, size, h.DataLen()-rest)
	}
	return nil
}

// readHeaderAt reads and validates the header of the file of the given size
// that r holds, with at most two calls of ReadAt: one of up to headerProbe
// bytes, and one for the rest of a longer header.
func readHeaderAt(r io.ReaderAt, size int64, cfg *readConfig) (*parsedHeader, error) {
	if size < prefixLen {
		return nil, errorf(ErrHeaderTooSmall, "file is %d bytes, shorter than the %d-byte header length", max(size, 0), prefixLen)
	}
	buf := make([]byte, min(size, headerProbe))
	if err := readFullAt(nil, r, buf, 0); err != nil {
		return nil, err
	}
	n, err := headerLen(buf, size)
	if err != nil {
		return nil, err
	}
	if end := prefixLen + int64(n); end > int64(len(buf)) {
		// n is at most MaxHeaderSize and within the file.
		buf = append(buf, make([]byte, end-int64(len(buf)))...)
		if err := readFullAt(nil, r, buf[headerProbe:], headerProbe); err != nil {
			return nil, err
		}
	}
	h, err := parseHeader(buf[prefixLen:prefixLen+n], cfg)
	if err != nil {
		return nil, err
	}
	if err := checkDataLen(h, uint64(size)); err != nil {
		return nil, err
	}
	h.raw = buf[: prefixLen+n : prefixLen+n]
	if cap(buf) > 2*len(h.raw) {
		h.raw = slices.Clone(h.raw) // do not keep the rest of the probe
	}
	return h, nil
}

// readFullAt fills p from r at off, under ctx as readAtContext reads. A
// source shorter than it claimed to be gives an error wrapping
// io.ErrUnexpectedEOF.
func readFullAt(ctx context.Context, r io.ReaderAt, p []byte, off int64) error {
	n, err := readAtContext(ctx, r, p, off)
	if n == len(p) {
		return nil // io.ReaderAt may return io.EOF with the last bytes
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%sreading %d bytes at offset %d: got %d: %w", prefix, len(p), off, n, unprefixed{err})
}

// unprefixed is an error of a source, such as the remote package's, whose
// message loses the package's prefix, which the chain already has.
type unprefixed struct{ err error }

func (e unprefixed) Error() string { return strings.TrimPrefix(e.err.Error(), prefix) }
func (e unprefixed) Unwrap() error { return e.err }

// NewReaderAt reads and validates the header of the safetensors file of the
// given size that r holds, and returns a Reader that reads each tensor's
// bytes from r when asked for it. The header takes at most two calls of
// ReadAt: one for the first 64 KiB, which hold the whole header of most
// files, and one for the rest of a longer one. Tensors read this way are
// copies in new memory, and remain valid after Close; since their sizes come
// from the source, Tensor allocates at most MaxTensorAlloc bytes for one,
// and TensorReader streams larger ones.
//
// r may be any random-access source: an *os.File, an in-memory
// *bytes.Reader, or an HTTP object read with range requests (see
// examples/remote). It must allow concurrent ReadAt calls, as io.ReaderAt
// requires, for the Reader to be used from several goroutines. NewReaderAt
// gives the same verdict as NewReader.
func NewReaderAt(r io.ReaderAt, size int64, opts ...ReadOption) (*Reader, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	h, err := readHeaderAt(r, size, cfg)
	if err != nil {
		return nil, err
	}
	return &Reader{h: h, ra: r, base: int64(h.DataOffset())}, nil
}

// Open opens the named safetensors file and validates it as NewReader does,
// reading only the header. On Unix and Windows it then maps the file into
// memory, read-only, so that tensors are slices of the mapping: opening a
// file of tens of gigabytes costs what its header costs, and the pages of a
// tensor are read from disk when it is first touched. Elsewhere (js, wasip1,
// plan9), or with the ReadAll option, it reads the data section into memory.
//
// The mapping lives until Close: the Data of a Tensor obtained from the
// Reader must not be used after Close, which unmaps it. The mapping is
// read-only and shared: writing into a tensor's Data stops the program
// (SIGSEGV); copy it, or Open with ReadAll, to modify tensors. A file
// truncated while it is mapped loses the pages past its new end: the
// functions of this package that read a tensor's bytes (Stats, Float32s,
// Values, Write, ...) then return an error wrapping ErrFileChanged, but
// code that reads Data itself is stopped by the system (SIGBUS) unless it
// calls runtime/debug.SetPanicOnFault on its goroutine and recovers, as the
// ErrFileChanged example shows. Use ReadAll where files may be truncated.
//
// Open fails for an empty file (ErrHeaderTooSmall), a path that is not a
// regular file (ErrNotRegular; a FIFO is refused without waiting for a
// writer), and a file whose size changes while it is opened.
func Open(path string, opts ...ReadOption) (*Reader, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return openFile(f, path, cfg)
}

// NewFileReader is Open of a file already open, such as one opened inside
// an os.Root so that symbolic links cannot lead out of a directory: it maps
// f (or reads it, with ReadAll or ReadInto) and checks it as Open does. It
// does not close f; the Reader does not need it after NewFileReader
// returns.
func NewFileReader(f *os.File, opts ...ReadOption) (*Reader, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	return openFile(f, f.Name(), cfg)
}

// openFile is Open of the file f, opened from path, which it does not
// close.
func openFile(f *os.File, path string, cfg *readConfig) (*Reader, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := regular.Check(path, info); err != nil {
		return nil, err
	}
	size := info.Size()
	h, err := readHeaderAt(f, size, cfg)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	r := &Reader{h: h, name: path}
	if cfg.readAll || !mmapSupported {
		if h.DataLen() > maxInt {
			return nil, &os.PathError{Op: "open", Path: path, Err: errTooLarge(size)}
		}
		if r.data, err = cfg.dest(int(h.DataLen())); err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		// Several goroutines in large chunks: one reading goroutine copies
		// from the page cache at a fraction of the memory's speed.
		if err := readParallel(f, r.data, int64(h.DataOffset()), readers(), readChunk); err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%sthe file changed while it was read: %w", prefix, err)}
		}
	} else if size > 0 {
		m, unmap, err := mapFile(f, size)
		if err != nil {
			return nil, err
		}
		r.mapping, r.release = m, trackMapping(m, path, unmap)
		r.data = m[h.DataOffset():]
		r.local = &localFile{path: path, info: info, dataOffset: int64(h.DataOffset())}
	}
	// A file that shrank while it was opened would crash the program when
	// its missing pages were touched.
	if testHookOpened != nil {
		testHookOpened(f)
	}
	if after, err := f.Stat(); err != nil || after.Size() != size {
		r.Close()
		if err == nil {
			err = fmt.Errorf("%sthe file changed size from %d to %d bytes while it was opened", prefix, size, after.Size())
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return r, nil
}

// testHookOpened, when set by a test, runs in Open between reading or
// mapping the file and checking that its size did not change.
var testHookOpened func(*os.File)

// errTooLarge is the error for a file that does not fit in the address
// space.
func errTooLarge(size int64) error {
	return fmt.Errorf("%sa file of %d bytes does not fit in this platform's memory; open it with NewReaderAt", prefix, size)
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

// Tensor returns the named tensor. From Open and NewReader its Data is a
// slice of the Reader's memory, read-only; from NewReaderAt it is read from
// the source into new memory, of at most MaxTensorAlloc bytes: a larger
// tensor gives an error wrapping ErrTensorTooLarge, and TensorReader reads
// it. An unknown name gives a *TensorError wrapping ErrTensorNotFound.
func (r *Reader) Tensor(name string) (Tensor, error) {
	return r.tensorNamed(nil, name)
}

// TensorContext is Tensor under ctx: a tensor read from a source (a Reader
// from NewReaderAt) is read under ctx, through the source's ReadAtContext
// where it has one, such as a file of the remote package, whose request in
// flight ctx then aborts; a source without one is read once ctx is checked.
// Once ctx is done, it returns an error wrapping ctx.Err(). From Open and
// NewReader, whose tensors are slices of memory, it is Tensor once ctx is
// checked.
func (r *Reader) TensorContext(ctx context.Context, name string) (Tensor, error) {
	if err := ctx.Err(); err != nil {
		return Tensor{}, &TensorError{Name: name, Err: context.Cause(ctx)}
	}
	return r.tensorNamed(ctx, name)
}

// tensorNamed returns the named tensor, read under ctx (nil: the source's
// own).
func (r *Reader) tensorNamed(ctx context.Context, name string) (Tensor, error) {
	if r.closed.Load() {
		return Tensor{}, ErrClosed
	}
	i := r.h.names.find(r.h.Tensors, name)
	if i < 0 {
		return Tensor{}, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	return r.tensor(ctx, i)
}

// Info returns the header's entry of the named tensor: its dtype, shape and
// offsets, found as Tensor finds it, without reading its data. An unknown
// name gives a *TensorError wrapping ErrTensorNotFound. It works after
// Close. The Shape is shared with the Reader and must not be modified.
func (r *Reader) Info(name string) (TensorInfo, error) {
	i := r.h.names.find(r.h.Tensors, name)
	if i < 0 {
		return TensorInfo{}, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	return r.h.Tensors[i], nil
}

// Tensors returns every tensor in file order; see Tensor.
func (r *Reader) Tensors() ([]Tensor, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	ts := make([]Tensor, len(r.h.Tensors))
	for i := range ts {
		var err error
		if ts[i], err = r.tensor(nil, i); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// tensor returns the i-th tensor in file order, read under ctx (nil: the
// source's own).
func (r *Reader) tensor(ctx context.Context, i int) (Tensor, error) {
	t := &r.h.Tensors[i]
	b, e := t.DataOffsets[0], t.DataOffsets[1]
	out := Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}
	if r.ra == nil {
		out.Data = r.data[b:e:e]
		return out, nil
	}
	if e-b > MaxTensorAlloc || e-b > maxInt {
		return Tensor{}, tensorErrorf(t.Name, ErrTensorTooLarge, "%d bytes, more than the %d that Tensor allocates for a tensor read through NewReaderAt; read it with TensorReader", e-b, min(uint64(MaxTensorAlloc), maxInt))
	}
	out.Data = make([]byte, e-b)
	if err := readFullAt(ctx, r.ra, out.Data, r.base+int64(b)); err != nil {
		return Tensor{}, &TensorError{Name: t.Name, Err: err}
	}
	return out, nil
}

// TensorElements returns the elements [start, end) of the named tensor, as
// Tensor.Elements cuts them (a one-dimensional tensor of the same name and
// dtype; for the packed dtypes, start and end on whole bytes), without
// reading the rest: the way to read a tensor of any size piece by piece,
// in memory of a bounded size, as the check and diff packages read a
// model. From Open and NewReader, its Data is a slice of the Reader's
// memory, and buf is not used; from NewReaderAt, the bytes are read from
// the source under ctx (see TensorContext) into buf when it is large
// enough, else into new memory, of at most MaxTensorAlloc bytes. An
// unknown name gives a *TensorError wrapping ErrTensorNotFound, a range
// outside the tensor one wrapping ErrInvalidSlice.
func (r *Reader) TensorElements(ctx context.Context, name string, start, end uint64, buf []byte) (Tensor, error) {
	if err := ctx.Err(); err != nil {
		return Tensor{}, &TensorError{Name: name, Err: context.Cause(ctx)}
	}
	if r.closed.Load() {
		return Tensor{}, ErrClosed
	}
	i := r.h.names.find(r.h.Tensors, name)
	if i < 0 {
		return Tensor{}, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	t := &r.h.Tensors[i]
	tb := t.DataOffsets[0]
	b, e, err := elementBytes(t.Name, t.DType, t.DataOffsets[1]-tb, start, end)
	if err != nil {
		return Tensor{}, err
	}
	out := Tensor{Name: t.Name, DType: t.DType, Shape: []uint64{end - start}}
	if r.ra == nil {
		out.Data = r.data[tb+b : tb+e : tb+e]
		return out, nil
	}
	n := e - b
	if n > MaxTensorAlloc || n > maxInt {
		return Tensor{}, tensorErrorf(t.Name, ErrTensorTooLarge, "elements [%d, %d) are %d bytes, more than the %d that TensorElements reads at once", start, end, n, min(uint64(MaxTensorAlloc), maxInt))
	}
	if uint64(cap(buf)) >= n {
		out.Data = buf[:n:n]
	} else {
		out.Data = make([]byte, n)
	}
	// No overflow: the header's validation bounds the offsets by the
	// source's size, an int64.
	if err := readFullAt(ctx, r.ra, out.Data, r.base+int64(tb+b)); err != nil {
		return Tensor{}, &TensorError{Name: t.Name, Err: err}
	}
	return out, nil
}

// MaxTensorAlloc bounds the memory that Tensor and Tensors of a Reader from
// NewReaderAt allocate for one tensor, whose size the source's header
// declares: a header that claims a tensor of a terabyte must not make the
// program allocate a terabyte. 4 GiB holds the largest tensor of every
// published dense model (the 4.2 GB embedding of Llama 3.1 405B in BF16).
// A larger tensor gives an error wrapping ErrTensorTooLarge; read it with
// TensorReader, into memory of the caller's choosing, in pieces. Readers
// from Open and NewReader allocate nothing for a tensor.
const MaxTensorAlloc = 4 << 30

// ErrTensorTooLarge is returned by Tensor and Tensors of a Reader from
// NewReaderAt for a tensor larger than MaxTensorAlloc, or larger than this
// platform's memory can address; TensorReader reads it.
var ErrTensorTooLarge = errors.New("safetensors: tensor too large to read into memory at once")

// localFile is a file on disk, as Open found it: what DataSections gives a
// loader that reads the file again by its path.
type localFile struct {
	path       string
	info       os.FileInfo // to check that the path still names the same file
	dataOffset int64
}

// maxInt is the largest int, as a uint64.
const maxInt = uint64(^uint(0) >> 1)

// Prefetch asks the operating system to start reading the named tensors, or
// all of them if no name is given, into memory, so that the first touches
// of their bytes do not wait for the disk: a hint for loaders that know what
// they will read next. It applies to a file Open mapped, on Linux
// (madvise MADV_WILLNEED); elsewhere it does nothing, as for a Reader whose
// data is already in memory or read on demand.
func (r *Reader) Prefetch(names ...string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if r.mapping == nil {
		return nil
	}
	base := int(r.h.DataOffset())
	if len(names) == 0 {
		return pagecache.AdviseWillNeed(r.mapping, base, len(r.mapping))
	}
	var errs []error
	for _, name := range names {
		i := r.h.names.find(r.h.Tensors, name)
		if i < 0 {
			errs = append(errs, &TensorError{Name: name, Err: ErrTensorNotFound})
			continue
		}
		t := &r.h.Tensors[i]
		errs = append(errs, pagecache.AdviseWillNeed(r.mapping, base+int(t.DataOffsets[0]), base+int(t.DataOffsets[1])))
	}
	return errors.Join(errs...)
}

// Close releases the Reader: a Reader from Open unmaps the file, so the
// Data of the Tensors obtained from it must not be used after Close. Later
// calls of Tensor, Tensors and Prefetch return ErrClosed; Header, Names and
// Metadata still work. A Reader from NewReader holds no resource, and its
// Tensors stay valid as long as the caller's bytes do; those read through
// NewReaderAt are copies and stay valid too. Close may be called more than
// once; it returns the error of unmapping, the first time.
func (r *Reader) Close() error {
	if r.closed.Swap(true) || r.release == nil {
		return nil
	}
	return r.release()
}
