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

// TestRange checks Range and RangeAhead against crypto/sha256 over the
// same bytes, for ranges shorter than a buffer, of whole buffers and more,
// and their errors.
func TestRange(t *testing.T) {
	data := make([]byte, 10000)
	_, _ = rand.Read(data)
	bufs := [2][]byte{make([]byte, 1000), make([]byte, 1000)}
	ranges := map[string]func(ctx context.Context, r io.ReaderAt, start, end int64, w io.Writer, report func(int)) error{
		"Range": func(ctx context.Context, r io.ReaderAt, start, end int64, w io.Writer, report func(int)) error {
			return Range(ctx, r, start, end, bufs[0], w, report)
		},
		"RangeAhead": func(ctx context.Context, r io.ReaderAt, start, end int64, w io.Writer, report func(int)) error {
			return RangeAhead(ctx, r, start, end, bufs, w, report)
		},
	}
	for name, hashRange := range ranges {
		for _, r := range [][2]int64{{0, 0}, {0, 1}, {3, 999}, {0, 1000}, {0, 2000}, {17, 10000}, {0, 10000}} {
			h := sha256.New()
			var reported int
			var pieces []int
			require.NoError(t, hashRange(context.Background(), bytes.NewReader(data), r[0], r[1], h, func(n int) { reported += n; pieces = append(pieces, n) }))
			assert.Equal(t, sha256.Sum256(data[r[0]:r[1]]), [32]byte(h.Sum(nil)), "%s %v", name, r)
			assert.Equal(t, int(r[1]-r[0]), reported, "%s %v", name, r)
			for _, n := range pieces {
				assert.LessOrEqual(t, n, 1000, "%s %v: a piece larger than the buffer", name, r)
			}
		}
		err := hashRange(context.Background(), bytes.NewReader(data), 17, 20000, io.Discard, nil)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, name)
		assert.ErrorContains(t, err, "9983 bytes read of 19983", name)
		ctx, cancel := context.WithCancelCause(context.Background())
		cause := errors.New("stop")
		cancel(cause)
		assert.ErrorIs(t, hashRange(ctx, bytes.NewReader(data), 0, 10000, io.Discard, nil), cause, name)
	}
}
