package dataset

import (
	"bytes"
	"io"
	"path/filepath"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
)

// batchShard is the Batch shard being written: a temporary file laid out
// for BatchSize samples, into which each column's bytes go at their place
// as samples come, a few MiB at a time, so that memory stays bounded
// whatever the batch size.
type batchShard struct {
	f       *atomicfile.File // errors name the shard, not the temporary file
	hdr     *safetensors.Header
	colOff  []int64  // where each column (in the order of cols) starts in the file
	pending [][]byte // each column's bytes not yet written, from sample first on
	first   int      // the first sample of pending
	n       int      // samples so far
	bytes   int      // len of pending, added up
}

// batchFlushSize is how many bytes of samples the Writer holds before it
// writes them into the shard.
const batchFlushSize = 4 << 20

// batchSpecs returns the tensors of a Batch shard of n samples.
func (w *Writer) batchSpecs(n int) []safetensors.TensorSpec {
	specs := make([]safetensors.TensorSpec, len(w.cols))
	for i, c := range w.cols {
		specs[i] = safetensors.TensorSpec{Name: c.Name, DType: c.DType, Shape: append([]uint64{uint64(n)}, c.Shape...)}
	}
	return specs
}

// batchLayout writes the header of a shard of n samples, the next shard,
// to a new temporary file and returns it, with the header and where each
// column starts.
func (w *Writer) batchLayout(n int) (*atomicfile.File, *safetensors.Header, []int64, error) {
	var hdr bytes.Buffer
	sw, err := safetensors.NewWriter(&hdr, w.batchSpecs(n), nil)
	if err != nil {
		return nil, nil, nil, err
	}
	h := sw.Header()
	colOff := make([]int64, len(w.cols))
	for k, i := range sw.SpecOrder() {
		colOff[i] = int64(h.DataOffset() + h.Tensors[k].DataOffsets[0])
	}
	f, err := atomicfile.Create(filepath.Join(w.dir, w.peekShardName()))
	if err != nil {
		return nil, nil, nil, err
	}
	_, err = f.Write(hdr.Bytes())
	if err == nil {
		// The whole size at once: pad samples are the zeros of the hole.
		err = f.Truncate(int64(h.DataOffset() + h.DataLen()))
	}
	if err != nil {
		f.Abort()
		return nil, nil, nil, err
	}
	return f, h, colOff, nil
}

// batchAdd adds a sample's values, in the order of cols, to the shard,
// starting one if needed.
func (w *Writer) batchAdd(values [][]byte) error {
	b := &w.batch
	if b.f == nil {
		f, h, colOff, err := w.batchLayout(w.opts.batchSize)
		if err != nil {
			return err
		}
		pending := b.pending
		if pending == nil {
			pending = make([][]byte, len(w.cols))
		}
		*b = batchShard{f: f, hdr: h, colOff: colOff, pending: pending}
	}
	for i, v := range values {
		b.pending[i] = append(b.pending[i], v...)
		b.bytes += len(v)
	}
	b.n++
	if b.bytes >= batchFlushSize {
		if err := w.batchFlush(); err != nil {
			return err
		}
	}
	return nil
}

// batchFlush writes the pending bytes at their place in the shard.
func (w *Writer) batchFlush() error {
	b := &w.batch
	for i, p := range b.pending {
		if len(p) == 0 {
			continue
		}
		if _, err := b.f.WriteAt(p, b.colOff[i]+int64(b.first)*int64(w.cols[i].sampleBytes())); err != nil {
			return err
		}
		b.pending[i] = p[:0]
	}
	b.first, b.bytes = b.n, 0
	return nil
}

// batchFinish completes the shard: full, or the tail as TailStrategy says.
func (w *Writer) batchFinish() error {
	b := &w.batch
	if err := w.batchFlush(); err != nil {
		return w.fail(err)
	}
	n := b.n
	switch {
	case n == w.opts.batchSize, w.opts.tail == TailPad:
		n = w.opts.batchSize
	case w.opts.tail == TailDrop:
		w.batchAbort()
		return nil
	default: // TailWrite: a shard of n samples, copied from the first n of each column
		f, h, colOff, err := w.batchLayout(n)
		if err != nil {
			return w.fail(err)
		}
		for i, c := range w.cols {
			size := int64(n) * int64(c.sampleBytes())
			if _, err = io.Copy(io.NewOffsetWriter(f, colOff[i]), io.NewSectionReader(b.f, b.colOff[i], size)); err != nil {
				break
			}
		}
		w.batchAbort()
		*b = batchShard{f: f, hdr: h}
		if err != nil {
			w.batchAbort()
			return w.fail(err)
		}
	}
	name := w.shardName()
	// Synced and renamed into place; the directory is synced once, when
	// the manifest that lists the shards is.
	err := b.f.Flush()
	if err == nil {
		err = b.f.Rename()
	}
	if err != nil {
		*b = batchShard{}
		return w.fail(err)
	}
	h := b.hdr
	*b = batchShard{pending: b.pending}
	return w.recordShard(name, int64(n), h)
}

// batchAbort removes the shard being written, if any.
func (w *Writer) batchAbort() {
	b := &w.batch
	if b.f != nil {
		b.f.Abort()
	}
	for i := range b.pending {
		b.pending[i] = b.pending[i][:0]
	}
	*b = batchShard{pending: b.pending}
}
