// Package digest reads bytes into hashes: the one reading loop of the
// signing and verify packages, which hash whole files and ranges of them.
package digest

import (
	"context"
	"fmt"
	"io"
)

// BufferSize is the size of the buffers Range reads through: large enough
// that a read costs little beside hashing it, small enough to stay in a
// core's cache.
const BufferSize = 1 << 20

// Range writes the bytes [start, end) of r to w (a hash, or several
// through io.MultiWriter), reading into the two buffers of bufs in turn on
// another goroutine, so that the reading of each buffer overlaps the
// hashing of the one before: for a file in the page cache, the copy out of
// it then costs the hash no time where a core is free. It checks ctx
// between reads and calls report, if not nil, with the count of each
// buffer written. A file shorter than end is an error wrapping
// io.ErrUnexpectedEOF.
func Range(ctx context.Context, r io.ReaderAt, start, end int64, bufs [2][]byte, w io.Writer, report func(n int)) error {
	type chunk struct {
		b   []byte
		err error
	}
	full := make(chan chunk, 1)
	free := make(chan []byte, 2)
	free <- bufs[0]
	free <- bufs[1]
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for off := start; off < end; {
			var b []byte
			select {
			case b = <-free:
			case <-stop:
				return
			}
			if err := ctx.Err(); err != nil {
				full <- chunk{err: context.Cause(ctx)}
				return
			}
			n := int(min(int64(len(b)), end-off))
			got, err := r.ReadAt(b[:n], off)
			if got < n && (err == nil || err == io.EOF) {
				err = fmt.Errorf("%w: %d bytes read of %d", io.ErrUnexpectedEOF, off+int64(got)-start, end-start)
			}
			if err != nil && !(err == io.EOF && got == n) {
				full <- chunk{err: err}
				return
			}
			off += int64(n)
			select {
			case full <- chunk{b: b[:n]}:
			case <-stop:
				return
			}
		}
	}()
	for done := start; done < end; {
		c := <-full
		if c.err != nil {
			return c.err
		}
		w.Write(c.b)
		if report != nil {
			report(len(c.b))
		}
		done += int64(len(c.b))
		free <- c.b[:cap(c.b)]
	}
	return nil
}
