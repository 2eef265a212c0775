package digest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRange checks Range against crypto/sha256 over the same bytes, for
// ranges shorter than a buffer, of whole buffers and more, and its errors.
func TestRange(t *testing.T) {
	data := make([]byte, 10000)
	_, _ = rand.Read(data)
	bufs := [2][]byte{make([]byte, 1000), make([]byte, 1000)}
	for _, r := range [][2]int64{{0, 0}, {0, 1}, {3, 999}, {0, 1000}, {0, 2000}, {17, 10000}, {0, 10000}} {
		h := sha256.New()
		var reported int
		require.NoError(t, Range(context.Background(), bytes.NewReader(data), r[0], r[1], bufs, h, func(n int) { reported += n }))
		assert.Equal(t, sha256.Sum256(data[r[0]:r[1]]), [32]byte(h.Sum(nil)), "%v", r)
		assert.Equal(t, int(r[1]-r[0]), reported)
	}
	err := Range(context.Background(), bytes.NewReader(data), 0, 20000, bufs, io.Discard, nil)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	assert.ErrorIs(t, Range(ctx, bytes.NewReader(data), 0, 10000, bufs, io.Discard, nil), cause)
}
