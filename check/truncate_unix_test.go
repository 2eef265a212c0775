//go:build unix

package check

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestTruncatedWhileMapped: a file truncated under a running check gives
// ErrFileChanged, not SIGBUS.
func TestTruncatedWhileMapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{1 << 18}, make([]float32, 1<<18), safetensors.RoundNearestEven)
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{w}, nil))
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, os.Truncate(path, int64(r.Header().DataOffset())))
	_, err = Run(t.Context(), r)
	require.ErrorIs(t, err, safetensors.ErrFileChanged)
	require.ErrorContains(t, err, `"w"`)
}

// TestConfigFIFO: a FIFO named config.json is refused at once.
func TestConfigFIFO(t *testing.T) {
	dir := t.TempDir()
	w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{4}, []float32{1, 2, 3, 4}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), []safetensors.Tensor{w}, nil))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := Model(t.Context(), dir)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, safetensors.ErrNotRegular)
	case <-time.After(10 * time.Second):
		t.Fatal("Model blocked on a FIFO named config.json")
	}
}
