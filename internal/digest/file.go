package digest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"unsafe"

	"github.com/safetensors-go/safetensors/internal/mmap"
)

// fileStep is how many bytes of a mapped file File hashes between two
// looks at its context.
const fileStep = 1 << 20

// File writes the bytes [start, end) of f to w, as Range does, but read in
// place, through a mapping of the file, where this platform maps files:
// the hash reads the page cache itself, with no copy out of it, which
// costs a tenth of hashing's time or more (on 2 cores, 8 files of 128 MiB
// in the page cache were hashed in 0.49-0.51 s against 0.58-0.62 s read
// in pieces of 128 KiB). Where f cannot be mapped, or is shorter than end,
// it reads it with Range through buf. A file that shrinks while it is
// hashed is an error wrapping io.ErrUnexpectedEOF, as a short read is, not
// the end of the program: the fault of its missing pages is recovered,
// on the calling goroutine.
func File(ctx context.Context, f *os.File, start, end int64, buf []byte, w io.Writer, report func(n int)) error {
	if start >= end {
		return nil
	}
	info, err := f.Stat()
	if err != nil || info.Size() < end || !mmap.Supported {
		return Range(ctx, f, start, end, buf, w, report)
	}
	m, unmap, err := mmap.Map(f, end)
	if err != nil {
		return Range(ctx, f, start, end, buf, w, report)
	}
	defer unmap()
	mmap.Sequential(m[start-start%int64(os.Getpagesize()):])
	return hashMapped(ctx, f.Name(), m, start, w, report)
}

// hashMapped writes m[start:], a mapping of the file name, to w in steps
// of fileStep, and turns a fault on its pages into an error.
func hashMapped(ctx context.Context, name string, m []byte, start int64, w io.Writer, report func(n int)) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r == nil {
			return
		}
		if e := faultError(r, name, m); e != nil {
			err = e
			return
		}
		panic(r)
	}()
	for off := start; off < int64(len(m)); {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		p := m[off:min(off+fileStep, int64(len(m)))]
		w.Write(p)
		if report != nil {
			report(len(p))
		}
		off += int64(len(p))
	}
	return nil
}

// faultError returns the error for r, what recover returned in
// hashMapped, if it is a fault on a bad address (the missing pages of m,
// the mapping of the file name), or nil.
func faultError(r any, name string, m []byte) error {
	re, ok := r.(runtime.Error)
	if !ok {
		return nil
	}
	a, ok := re.(interface{ Addr() uintptr })
	if !ok || a.Addr() < 0x1000 { // below: a nil pointer, not the mapping
		return nil
	}
	at := ""
	if off := a.Addr() - uintptr(unsafe.Pointer(unsafe.SliceData(m))); off < uintptr(len(m)) {
		at = fmt.Sprintf(" at offset %d", off)
	}
	return fmt.Errorf("%w: %s shrank while it was hashed: its bytes%s are gone", io.ErrUnexpectedEOF, name, at)
}
