//go:build unix

package atomicfile

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors/internal/regular"
)

// TestCopyFileFIFO: a source that became a FIFO after the caller checked
// it is refused at once, not read, which would wait for a writer.
func TestCopyFileFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	done := make(chan error, 1)
	go func() { done <- CopyFile(fifo, filepath.Join(dir, "copy")) }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, regular.ErrNotRegular)
		assert.ErrorContains(t, err, fifo)
	case <-time.After(10 * time.Second):
		t.Fatal("CopyFile of a FIFO blocked")
	}
	assert.Equal(t, []string{"fifo"}, entries(t, dir))
}
