package quant

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// TestWriteModelProgress: Progress gets the bytes of the tensors written,
// growing, up to the size of every tensor of the model, from the calling
// goroutine (no lock: -race), with a call per tensor.
func TestWriteModelProgress(t *testing.T) {
	const src = "../testdata/models/llama"
	ck, err := checkpoint.Open(t.Context(), src)
	require.NoError(t, err)
	var total uint64
	names := ck.Names()
	for _, n := range names {
		info, err := safetensors.AsElementSource(ck).Info(n)
		require.NoError(t, err)
		total += info.DataOffsets[1] - info.DataOffsets[0]
	}
	require.NoError(t, ck.Close())

	var done, totals []uint64
	sum, err := WriteModel(t.Context(), src, filepath.Join(t.TempDir(), "q"), PerChannel, Progress(func(d, tt uint64) {
		done = append(done, d)
		totals = append(totals, tt)
	}), OpenOptions(checkpoint.Strict()))
	require.NoError(t, err)
	require.NotEmpty(t, sum.Quantized)
	require.Len(t, done, len(names), "a call per tensor")
	assert.IsIncreasing(t, done)
	assert.Equal(t, total, done[len(done)-1])
	for _, tt := range totals {
		assert.Equal(t, total, tt)
	}
}

// TestWriteModelOpenOptions: the options go to checkpoint.Open, whose
// error for one it does not take WriteModel returns; nothing is written.
func TestWriteModelOpenOptions(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "q")
	_, err := WriteModel(t.Context(), "../testdata/models/llama", dst, PerChannel, OpenOptions(checkpoint.Rounding(safetensors.Truncate)))
	require.ErrorIs(t, err, safetensors.ErrInvalidOption)
	assert.NoDirExists(t, dst)
	_, err = WriteModel(t.Context(), "../testdata/models/llama", dst, PerChannel, OpenOptions(checkpoint.Variant("fp16")))
	require.Error(t, err, "no fp16 variant")
}
