// Package digest reads bytes into hashes: the reading loops of the
// signing and verify packages, which hash whole files and ranges of them:
// File for a local file (in place, through a mapping), RangeAhead for a
// remote one (reading ahead of the hashing), Range where neither applies.
package digest

import (
	"context"
	"fmt"
	"io"
)

// BufferSize is the size of the buffers RangeAhead reads through: large
// enough that a read costs little beside hashing it.
const BufferSize = 1 << 20

// PieceSize is the size of the buffer Range reads through: small enough
// that a piece, and the cached pages it was copied from, are still in the
// core's cache when it is hashed, where that cache is 512 KiB; large
// enough that a read's cost is its copy.
const PieceSize = 128 << 10

// Range writes the bytes [start, end) of r to w (a hash, or several
// through io.MultiWriter), reading them into buf in turn with their
// hashing, a piece of len(buf) bytes at a time. It checks ctx between
// reads and calls report, if not nil, with the count of each piece
// written. A file shorter than end is an error wrapping
// io.ErrUnexpectedEOF.
func Range(ctx context.Context, r io.ReaderAt, start, end int64, buf []byte, w io.Writer, report func(n int)) error {
	for off := start; off < end; {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		p, err := readPiece(r, buf, off, start, end)
		if err != nil {
			return err
		}
		w.Write(p)
		if report != nil {
			report(len(p))
		}
		off += int64(len(p))
	}
	return nil
}

// readPiece reads into buf the bytes of r from off, up to end, and
// returns them: an error for fewer.
func readPiece(r io.ReaderAt, buf []byte, off, start, end int64) ([]byte, error) {
	n := int(min(int64(len(buf)), end-off))
	got, err := r.ReadAt(buf[:n], off)
	if got < n && (err == nil || err == io.EOF) {
		err = fmt.Errorf("%w: %d bytes read of %d", io.ErrUnexpectedEOF, off+int64(got)-start, end-start)
	}
	if err != nil && !(err == io.EOF && got == n) {
		return nil, err
	}
	return buf[:n], nil
}

// RangeAhead is Range reading into the two buffers of bufs in turn on
// another goroutine, so that the reading of each buffer overlaps the
// hashing of the one before: for reads that wait (on a network), or for a
// file in the page cache where a core is free to copy out of it.
func RangeAhead(ctx context.Context, r io.ReaderAt, start, end int64, bufs [2][]byte, w io.Writer, report func(n int)) error {
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
			p, err := readPiece(r, b, off, start, end)
			if err != nil {
				full <- chunk{err: err}
				return
			}
			off += int64(len(p))
			select {
			case full <- chunk{b: p}:
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
