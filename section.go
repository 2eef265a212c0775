package safetensors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
)

// A DataSection says where the tensors of one file are: what a loader needs
// to read them its own way, in parallel and in large chunks, as the load
// package's Loader does. [Reader.DataSections] describes a Reader's file,
// and the checkpoint package's Checkpoint those of its files; a caller may
// describe any other source of safetensors data, such as an object in a
// store of its own, with an io.ReaderAt.
type DataSection struct {
	// Name is what errors call the file: its path or URL.
	Name string
	// Data reads the data section: offset 0 is the first byte after the
	// header. It must allow concurrent ReadAt calls. Where it is also a
	// ReaderAtContext, as the remote package's files are, a loader reads
	// through ReadAtContext, so that cancelling the load aborts the reads
	// in flight.
	Data io.ReaderAt
	// Tensors are the tensors to read, with their offsets into Data.
	Tensors []TensorInfo

	// Path, for a file on disk that Open mapped, is its path; Info is what
	// Open saw of the file, and Offset where the data section starts in
	// it. A loader may open the file again by Path, to read it with pread
	// or direct I/O rather than through the mapping, once os.SameFile tells
	// it that Path still leads to the file of Info. Path is "" otherwise.
	Path   string
	Info   os.FileInfo
	Offset int64

	// HeaderBytes, where known, are the file's bytes before its data
	// section, as they were read and validated: the 8-byte header length
	// and the JSON header. Size is then the file's size: HeaderBytes and
	// the data section. A loader that hashes whole files (the load
	// package's HashFiles) hashes HeaderBytes, then Data up to Size.
	// Reader.DataSections sets both; nil and 0 where unknown.
	HeaderBytes []byte
	Size        int64
}

// DataSections describes the Reader's file, as one DataSection, for a
// loader: it makes a Reader a source that the load package's Loader reads
// (a load.Source), as a checkpoint of several files is. A Reader from Open
// gives its path, for a loader to read the file again by it, and the
// mapping as Data; one from NewReaderAt its io.ReaderAt, from the data
// section's start; one from NewReader, or Open with ReadAll, its memory.
// Data must not be read after Close.
func (r *Reader) DataSections() ([]DataSection, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	s := DataSection{Name: r.name, Tensors: r.h.Tensors, HeaderBytes: r.h.raw}
	if r.h.raw != nil {
		s.Size = int64(r.h.DataOffset() + r.h.DataLen()) // the file's size, checked when it was opened
	}
	switch {
	case r.ra != nil:
		s.Data = sectionAt{r: r.ra, base: r.base}
	default:
		s.Data = sliceReaderAt(r.data)
		if r.local != nil && r.mapping != nil {
			s.Path, s.Info, s.Offset = r.local.path, r.local.info, r.local.dataOffset
		}
	}
	return []DataSection{s}, nil
}

// A ReaderAtContext is an io.ReaderAt that can also read under a context,
// whose end aborts the read in flight, as an HTTP request's does: the
// remote package's File is one. [Reader.TensorContext] and the load
// package's Loader read a source through ReadAtContext where it has it.
type ReaderAtContext interface {
	io.ReaderAt
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// readAtContext reads r at off under ctx: through ReadAtContext if r has
// it, else with ReadAt once ctx is checked. A nil ctx reads with ReadAt,
// under whatever context r keeps of its own.
func readAtContext(ctx context.Context, r io.ReaderAt, p []byte, off int64) (int, error) {
	if ctx == nil {
		return r.ReadAt(p, off)
	}
	if rc, ok := r.(ReaderAtContext); ok {
		return rc.ReadAtContext(ctx, p, off)
	}
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	return r.ReadAt(p, off)
}

// sectionAt reads r from base on, keeping r's ReadAtContext.
type sectionAt struct {
	r    io.ReaderAt
	base int64
}

func (s sectionAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%snegative offset %d", prefix, off)
	}
	return s.r.ReadAt(p, s.base+off)
}

func (s sectionAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%snegative offset %d", prefix, off)
	}
	return readAtContext(ctx, s.r, p, s.base+off)
}

// sliceReaderAt reads a byte slice.
type sliceReaderAt []byte

func (s sliceReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(s)) {
		return 0, fmt.Errorf("%soffset %d outside %d bytes", prefix, off, len(s))
	}
	n := copy(p, s[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readChunk is how many bytes one read of readParallel asks for: large
// enough that a read's cost is its copy.
const readChunk = 16 << 20

// readers is how many reads readParallel runs at once: one a processor,
// and at least four, so that a disk has requests in flight while the
// processors copy.
func readers() int { return max(4, runtime.GOMAXPROCS(0)) }

// readParallel fills p from r at off, as readFullAt does, with up to
// workers goroutines each reading chunks of chunk bytes.
func readParallel(r io.ReaderAt, p []byte, off int64, workers, chunk int) error {
	n := (len(p) + chunk - 1) / chunk
	if n <= 1 || workers <= 1 {
		return readFullAt(nil, r, p, off)
	}
	workers = min(workers, n)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Worker w reads chunks w, w+workers, ...: each goroutine
			// streams through its own part, in order.
			for i := w; i < n; i += workers {
				b, e := i*chunk, min((i+1)*chunk, len(p))
				if err := readFullAt(nil, r, p[b:e], off+int64(b)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
