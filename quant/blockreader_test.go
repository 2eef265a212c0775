package quant

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callsWriter keeps the bytes written to it and the size of each call.
type callsWriter struct {
	data  []byte
	calls []int
}

func (w *callsWriter) Write(p []byte) (int, error) {
	w.data = append(w.data, p...)
	w.calls = append(w.calls, len(p))
	return len(p), nil
}

// TestBlockReader: the blocks of a weight go to the Writer's destination
// one write each, whole, each given back and counted once written; the
// item after them (the scale) stays in its place; Read gives the same
// bytes; blocks that end early, run past the weight or bring an error stop
// it with an error.
func TestBlockReader(t *testing.T) {
	blocks := [][]byte{bytes.Repeat([]byte{1}, 5), bytes.Repeat([]byte{2}, 7), bytes.Repeat([]byte{3}, 3)}
	want := bytes.Join(blocks, nil)
	start := func(blocks [][]byte, after quantItem) (*blockReader, chan []byte, *uint64) {
		next := make(chan quantItem, len(blocks)+1)
		for _, b := range blocks {
			next <- quantItem{block: append([]byte{}, b...), read: uint64(2 * len(b))}
		}
		next <- after
		free := make(chan []byte, len(blocks)+1)
		var read uint64
		return &blockReader{next: next, free: free, read: func(n uint64) { read += n }, left: len(want)}, free, &read
	}
	scale := quantItem{scale: safetensors.Tensor{Name: "w.weight_scale"}}

	br, free, read := start(blocks, scale)
	assert.Equal(t, len(want), br.Len())
	var w callsWriter
	n, err := br.WriteTo(&w)
	require.NoError(t, err)
	br.release()
	assert.Equal(t, int64(len(want)), n)
	assert.Equal(t, want, w.data)
	assert.Equal(t, []int{5, 7, 3}, w.calls, "one write a block")
	assert.Zero(t, br.Len())
	assert.Len(t, free, 3, "every block given back")
	assert.Equal(t, uint64(2*len(want)), *read, "and counted")
	assert.Equal(t, scale.scale.Name, (<-br.next).scale.Name, "the scale left in its place")

	br, _, _ = start(blocks, scale)
	got, err := io.ReadAll(io.LimitReader(br, int64(len(want))))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = br.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "at the weight's end")
	assert.Equal(t, scale.scale.Name, (<-br.next).scale.Name)

	br, _, _ = start(blocks[:2], scale)
	_, err = br.WriteTo(&w)
	assert.ErrorContains(t, err, "ended early")

	br, _, _ = start(append(blocks[:2:2], bytes.Repeat([]byte{4}, 4)), scale)
	_, err = br.WriteTo(&w)
	assert.ErrorContains(t, err, "longer than the weight")

	bad := errors.New("bad rows")
	br, _, _ = start(blocks[:1], quantItem{err: bad})
	_, err = br.WriteTo(&w)
	assert.ErrorIs(t, err, bad)
	assert.ErrorIs(t, br.err, bad, "kept")
}
