//go:build unix

package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestConvertTruncated: a file truncated while Convert reads it through
// its mapping gives an error wrapping safetensors.ErrFileChanged, not
// SIGBUS, and nothing is left behind. With one goroutine, Convert reads at
// most 4 chunks ahead of the one it writes (2*GOMAXPROCS+2): the file is
// truncated when the first is written, before the last of 8 is read.
func TestConvertTruncated(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	dir := t.TempDir()
	src := filepath.Join(dir, "in.safetensors")
	vals := make([]float32, 8*convertChunk)
	for i := range vals {
		vals[i] = float32(i)
	}
	w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{uint64(len(vals))}, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteFile(src, []safetensors.Tensor{w}, nil))
	out := t.TempDir()
	_, err = Convert(context.Background(), src, filepath.Join(out, "out.safetensors"), safetensors.BF16, Progress(func(done, total uint64) {
		if done < total {
			require.NoError(t, os.Truncate(src, 4096))
		}
	}))
	require.ErrorIs(t, err, safetensors.ErrFileChanged)
	assert.Empty(t, dirNames(t, out), "nothing left behind")
}
