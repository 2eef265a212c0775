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
// through io.MultiWriter), reading len(buf) bytes at a time, checking ctx
// between reads and calling report, if not nil, with the count of each
// read. A file shorter than end is an error wrapping io.ErrUnexpectedEOF.
func Range(ctx context.Context, r io.ReaderAt, start, end int64, buf []byte, w io.Writer, report func(n int)) error {
	for off := start; off < end; {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		n := int(min(int64(len(buf)), end-off))
		got, err := r.ReadAt(buf[:n], off)
		if got > 0 {
			w.Write(buf[:got])
			if report != nil {
				report(got)
			}
			off += int64(got)
		}
		if err == io.EOF && off < end || err == nil && got == 0 {
			return fmt.Errorf("%w: %d bytes read of %d", io.ErrUnexpectedEOF, off-start, end-start)
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}
