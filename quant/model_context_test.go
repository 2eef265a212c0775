package quant

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/linktest"
)

func writeLinear(t *testing.T, path string) {
	t.Helper()
	w, err := safetensors.TensorFromFloat32s("model.layers.0.mlp.up_proj.weight", safetensors.F32, []uint64{2, 2}, []float32{1, -2, 3, 4}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{w}, nil))
}

// TestWriteModelCancelled: a cancelled write leaves neither DST nor its
// temporary directory.
func TestWriteModelCancelled(t *testing.T) {
	src := t.TempDir()
	writeLinear(t, filepath.Join(src, "model.safetensors"))
	parent := t.TempDir()
	dst := filepath.Join(parent, "out")
	cause := errors.New("stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	_, err := WriteModel(ctx, src, dst, PerChannel)
	require.ErrorIs(t, err, cause)
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// TestCompressWeightCancelled: a done context stops the quantization of a
// weight, in one goroutine or several, with the context's cause.
func TestCompressWeightCancelled(t *testing.T) {
	cause := errors.New("stop")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	for _, rows := range []int{4, 1024} { // one goroutine, and as many as GOMAXPROCS
		vals := make([]float32, rows*256)
		for i := range vals {
			vals[i] = float32(i%7) - 3
		}
		w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{uint64(rows), 256}, vals, safetensors.RoundNearestEven)
		require.NoError(t, err)
		for _, s := range []Strategy{PerChannel, PerTensor} {
			_, _, err := compressWeight(ctx, w, s)
			require.ErrorIs(t, err, cause, "%d rows, %v", rows, s)
			_, _, err = compressWeight(t.Context(), w, s)
			require.NoError(t, err)
		}
	}
}

// TestModelFilesOrder: model.safetensors wins over an index, as in
// transformers and checkpoint.Open; links to files are copied.
func TestModelFilesOrder(t *testing.T) {
	src := t.TempDir()
	writeLinear(t, filepath.Join(src, "model.safetensors"))
	require.NoError(t, os.WriteFile(filepath.Join(src, "other.safetensors.index.json"), []byte("{}"), 0o644))
	blob := filepath.Join(t.TempDir(), "blob")
	require.NoError(t, os.WriteFile(blob, []byte(`{"a": 1}`), 0o644))
	if !linktest.Symlink(t, blob, filepath.Join(src, "tokenizer.json")) {
		// The order is still tested, with a plain file.
		require.NoError(t, os.WriteFile(filepath.Join(src, "tokenizer.json"), []byte(`{"a": 1}`), 0o644))
	}
	dst := filepath.Join(t.TempDir(), "out")
	sum, err := WriteModel(t.Context(), src, dst, PerChannel)
	require.NoError(t, err)
	assert.Equal(t, []string{"model.safetensors"}, sum.Files)
	assert.Contains(t, sum.Copied, "tokenizer.json")
	data, err := os.ReadFile(filepath.Join(dst, "tokenizer.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"a": 1}`, string(data))
	info, err := os.Stat(dst)
	require.NoError(t, err)
	ref := filepath.Join(t.TempDir(), "ref")
	require.NoError(t, os.Mkdir(ref, 0o777))
	want, err := os.Stat(ref)
	require.NoError(t, err)
	assert.Equal(t, want.Mode().Perm(), info.Mode().Perm(), "0777 less the umask, not MkdirTemp's 0700")
}
