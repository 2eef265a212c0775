package safetensors

import (
	"context"
	"io"
	"sync"
)

// ReadSlice reads the named tensor's bytes into dst, the caller's memory,
// and returns how many it wrote: the selection the selectors make (see
// Selector), or the whole tensor without selectors, contiguous, in
// row-major order, as TensorSlice.AppendTo gives them. It is the read for
// a program that stages weights in memory of its own, such as a server's
// pinned, device-visible buffers, or that loads one rank's part of each
// tensor (a tensor-parallel shard: rows, columns, every n-th head).
//
// dst must hold the selection: TensorInfo.Slice of the tensor's Info says
// its shape and size (DataLen); a shorter dst gives an error wrapping
// io.ErrShortBuffer, and nothing is read.
//
// It reads every kind of Reader the same way, and allocates nothing once
// warm, for tensors of up to 16 dimensions: from Open or NewReader it
// copies from the mapping or memory; from NewReaderAt (a file, a remote
// object of the remote package) it reads from the source under ctx
// (through its ReadAtContext where it has one, whose request in flight
// ctx aborts), the whole selection with one read when it is contiguous,
// otherwise with one read per stretch of at most 1 MiB that holds runs of
// the selection at most 64 KiB apart, through a buffer the Reader pools,
// or one read per run when they are further apart. For the remote
// package's files, each read is one HTTP request, whose own allocations
// are net/http's.
//
// Selectors that do not fit give the errors of Tensor.Slice; an unknown
// name a *TensorError wrapping ErrTensorNotFound; a read that fails, or
// one of a file truncated while mapped (ErrFileChanged), an error naming
// the tensor, after which dst holds part of the selection. After Close it
// returns ErrClosed.
func (r *Reader) ReadSlice(ctx context.Context, name string, dst []byte, selectors ...Selector) (n int, err error) {
	if err := ctx.Err(); err != nil {
		return 0, &TensorError{Name: name, Err: context.Cause(ctx)}
	}
	if r.closed.Load() {
		return 0, ErrClosed
	}
	i := r.h.names.find(r.h.Tensors, name)
	if i < 0 {
		return 0, &TensorError{Name: name, Err: ErrTensorNotFound}
	}
	t := &r.h.Tensors[i]
	rank := len(t.Shape)
	var selsBuf [maxStackRank]dimSel
	var outerBuf [maxStackRank]span
	sels, outer := selsBuf[:], outerBuf[:]
	if rank > maxStackRank {
		sels, outer = make([]dimSel, rank), make([]span, rank)
	}
	p, err := planSlice(t.Name, t.DType, t.Shape, selectors, sels[:rank], outer[:rank])
	if err != nil {
		return 0, err
	}
	size := p.size()
	if uint64(len(dst)) < size {
		return 0, tensorErrorf(t.Name, io.ErrShortBuffer, "the selection is %d bytes, dst holds %d", size, len(dst))
	}
	// size is at most the tensor's, within the data section and len(dst).
	dst = dst[:size]
	if r.ra == nil {
		return r.copyRuns(t.Name, r.data[t.DataOffsets[0]:t.DataOffsets[1]], &p, dst)
	}
	// The header's validation bounds the offsets by the source's size.
	if err := readRunsAt(ctx, r.ra, r.base+int64(t.DataOffsets[0]), &p, dst); err != nil {
		return 0, &TensorError{Name: t.Name, Err: err}
	}
	return int(size), nil
}

// copyRuns copies the runs of p from data, a tensor's bytes in memory
// (perhaps mapped), to dst.
func (r *Reader) copyRuns(name string, data []byte, p *slicePlan, dst []byte) (n int, err error) {
	old := guardFaults()
	defer func() {
		if e := recoverFault(old, recover(), name); e != nil {
			n, err = 0, e
		}
	}()
	d := uint64(0)
	run := p.run
	p.runOffsets(func(off uint64) bool {
		copy(dst[d:d+run], data[off:off+run])
		d += run
		return true
	})
	return int(d), nil
}

// The reads of a selection through an io.ReaderAt: runs at most sliceGap
// bytes apart are read together, sliceWindow bytes at most at once, through
// a pooled buffer.
const (
	sliceWindow = 1 << 20
	sliceGap    = 64 << 10
)

var sliceBuffers = sync.Pool{New: func() any {
	b := make([]byte, sliceWindow)
	return &b
}}

// readRunsAt reads the runs of p from ra, where the tensor starts at base,
// into dst, under ctx.
func readRunsAt(ctx context.Context, ra io.ReaderAt, base int64, p *slicePlan, dst []byte) error {
	if p.runs == 0 {
		return nil
	}
	if len(p.outer) == 0 {
		return readFullAt(ctx, ra, dst, base+int64(p.start))
	}
	// The innermost span repeats the run in sweeps of evenly spaced runs;
	// the other spans, an odometer, move the sweeps.
	inner := p.outer[len(p.outer)-1]
	sweeps := p.outer[:len(p.outer)-1]
	run := p.run
	direct := inner.stride-run > sliceGap || run > sliceWindow/2
	var buf []byte
	if !direct {
		bp := sliceBuffers.Get().(*[]byte)
		defer sliceBuffers.Put(bp)
		buf = *bp
	}
	var stack [maxStackRank]uint64
	pos := stack[:0]
	if len(sweeps) <= maxStackRank {
		pos = stack[:len(sweeps)]
	} else {
		pos = make([]uint64, len(sweeps))
	}
	d := uint64(0)
	off := p.start
	for {
		if direct {
			for j := range inner.count {
				if err := readFullAt(ctx, ra, dst[d:d+run], base+int64(off+j*inner.stride)); err != nil {
					return err
				}
				d += run
			}
		} else {
			// m runs at a time: as many as fit in the buffer.
			per := (sliceWindow-run)/inner.stride + 1
			for j := uint64(0); j < inner.count; {
				m := min(per, inner.count-j)
				w := (m-1)*inner.stride + run
				if err := readFullAt(ctx, ra, buf[:w], base+int64(off+j*inner.stride)); err != nil {
					return err
				}
				for q := range m {
					copy(dst[d:d+run], buf[q*inner.stride:q*inner.stride+run])
					d += run
				}
				j += m
			}
		}
		var more bool
		if off, more = turn(sweeps, pos, off); !more {
			return nil
		}
	}
}
