//go:build unix

package signing

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestFIFO checks that a FIFO in a model's folder is refused, by the
// listing and by Open, without waiting for a writer.
func TestFIFO(t *testing.T) {
	dir := folder(t, map[string]string{"a": "a"})
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	k, _ := newKey(t)
	_, _, err := Sign(context.Background(), dir, k)
	assert.ErrorContains(t, err, "pipe: not a regular file")
	f, err := OpenFolder(dir)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Open("pipe")
	assert.ErrorIs(t, err, safetensors.ErrNotRegular)
}
