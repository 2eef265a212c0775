//go:build unix

package quant

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestWriteModelConfigFIFO: a config.json that is a FIFO is refused at
// once, not read, which would wait for a writer; nothing is left behind.
func TestWriteModelConfigFIFO(t *testing.T) {
	src := t.TempDir()
	writeLinear(t, filepath.Join(src, "model.safetensors"))
	require.NoError(t, syscall.Mkfifo(filepath.Join(src, "config.json"), 0o644))
	parent := t.TempDir()
	done := make(chan error, 1)
	go func() {
		_, err := WriteModel(t.Context(), src, filepath.Join(parent, "out"), PerChannel)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, safetensors.ErrNotRegular)
		assert.Contains(t, err.Error(), "config.json")
	case <-time.After(10 * time.Second):
		// Unblock the reader, so that the test ends.
		if f, err := os.OpenFile(filepath.Join(src, "config.json"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("WriteModel blocked on a FIFO config.json")
	}
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
