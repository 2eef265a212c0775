package digest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors/internal/mmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFile checks File against crypto/sha256 over the same bytes, for
// ranges of a file of several steps (whole, from an offset inside a page,
// ending before the file's end, empty), and its errors: a range past the
// file's end, a cancelled context.
func TestFile(t *testing.T) {
	data := make([]byte, 2*fileStep+12345)
	_, _ = rand.Read(data)
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1000)
	n := int64(len(data))
	for _, r := range [][2]int64{{0, n}, {4097, n}, {17, fileStep + 3}, {0, 0}, {5, 5}, {n - 1, n}} {
		h := sha256.New()
		var reported int
		require.NoError(t, File(context.Background(), f, r[0], r[1], buf, h, func(n int) { reported += n }))
		assert.Equal(t, sha256.Sum256(data[r[0]:r[1]]), [32]byte(h.Sum(nil)), "%v", r)
		assert.Equal(t, int(r[1]-r[0]), reported, "%v", r)
	}
	err = File(context.Background(), f, 17, n+1, buf, io.Discard, nil)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("stop")
	cancel(cause)
	assert.ErrorIs(t, File(ctx, f, 0, n, buf, io.Discard, nil), cause)
}

// TestFileShrinks: a file truncated while File hashes it through its
// mapping is an error wrapping io.ErrUnexpectedEOF that says so, not the
// end of the program (the fault of its missing pages is recovered).
func TestFileShrinks(t *testing.T) {
	data := make([]byte, 3*fileStep)
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	truncated := false
	h := sha256.New()
	w := writerFunc(func(p []byte) (int, error) {
		h.Write(p) // touches the bytes
		if !truncated {
			truncated = true
			if err := os.Truncate(path, 0); err != nil {
				t.Skipf("the file cannot be truncated while it is mapped here: %v", err)
			}
		}
		return len(p), nil
	})
	err = File(context.Background(), f, 0, int64(len(data)), make([]byte, 1000), w, nil)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	if mmap.Supported {
		assert.ErrorContains(t, err, path+" shrank while it was hashed: its bytes")
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
