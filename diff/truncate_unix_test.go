//go:build unix

package diff

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestTruncatedWhileMapped: a file truncated under a comparison gives an
// error for the tensor, not SIGBUS.
func TestTruncatedWhileMapped(t *testing.T) {
	dir := t.TempDir()
	w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{1 << 16}, make([]float32, 1<<16), safetensors.RoundNearestEven)
	require.NoError(t, err)
	var readers []*safetensors.Reader
	for _, name := range []string{"a", "b"} {
		path := filepath.Join(dir, name)
		require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{w}, nil))
		r, err := safetensors.Open(path)
		require.NoError(t, err)
		defer r.Close()
		readers = append(readers, r)
	}
	require.NoError(t, os.Truncate(filepath.Join(dir, "b"), int64(readers[1].Header().DataOffset())))
	res, err := Compare(t.Context(), readers[0], readers[1], nil, nil)
	require.NoError(t, err)
	require.Len(t, res.Tensors, 1)
	assert.Contains(t, res.Tensors[0].Err, "truncated")
	assert.Equal(t, Error, res.Tensors[0].Verdict)
}
