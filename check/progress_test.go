package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// progressCalls records the calls of a Progress function. It takes no
// lock: the calls come from the goroutine that called the check, which
// -race verifies.
type progressCalls struct{ done, total []uint64 }

func (p *progressCalls) f(done, total uint64) {
	p.done = append(p.done, done)
	p.total = append(p.total, total)
}

// assertProgress checks that the calls count up to total, never down, and
// always against total.
func (p *progressCalls) assert(t *testing.T, total uint64, msg string) {
	t.Helper()
	require.NotEmpty(t, p.done, msg)
	assert.IsNonDecreasing(t, p.done, msg)
	assert.Equal(t, total, p.done[len(p.done)-1], msg)
	for _, tt := range p.total {
		assert.Equal(t, total, tt, msg)
	}
}

func floatTensor(t *testing.T, name string, d safetensors.DType, n int) safetensors.Tensor {
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i%7) - 3
	}
	tn, err := safetensors.TensorFromFloat32s(name, d, []uint64{uint64(n)}, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	return tn
}

// TestProgress: Run reports the bytes of the float tensors it reads, a
// large one in several pieces, up to their total; an integer tensor, whose
// values are not read, does not count; the calls come in order on the
// calling goroutine, with several workers or one.
func TestProgress(t *testing.T) {
	big := floatTensor(t, "big", safetensors.F32, 3*chunkBytes/4+5)
	small := floatTensor(t, "small", safetensors.BF16, 100)
	ids := safetensors.Tensor{Name: "ids", DType: safetensors.I64, Shape: []uint64{4}, Data: make([]byte, 32)}
	total := uint64(len(big.Data) + len(small.Data))
	for _, workers := range []int{1, 3} {
		var p progressCalls
		r, err := Run(t.Context(), memSourceOf(ids, big, small), Progress(p.f), Workers(workers))
		require.NoError(t, err)
		assert.Equal(t, 3, r.Tensors)
		p.assert(t, total, "workers")
		assert.GreaterOrEqual(t, len(p.done), 4, "a call per piece: the large tensor is 4")
	}
	// Nothing to read: no call; a nil function is no option at all.
	var p progressCalls
	_, err := Run(t.Context(), memSourceOf(ids), Progress(p.f))
	require.NoError(t, err)
	assert.Empty(t, p.done)
	_, err = Run(t.Context(), memSourceOf(big), Progress(nil))
	require.NoError(t, err)
}

// TestProgressParts: for a model of several parts, Model counts the bytes
// of every part against one total, part after part.
func TestProgressParts(t *testing.T) {
	dir := t.TempDir()
	writeJSON := func(name string, v any) {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o777))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o666))
	}
	writeJSON("model_index.json", map[string]any{
		"_class_name": "StableDiffusionPipeline",
		"unet":        []any{"diffusers", "UNet2DConditionModel"},
		"vae":         []any{"diffusers", "AutoencoderKL"},
	})
	var total uint64
	for i, part := range []string{"unet", "vae"} {
		writeJSON(part+"/config.json", map[string]any{"_class_name": "X"})
		ts := []safetensors.Tensor{floatTensor(t, "a.weight", safetensors.F32, 1000*(i+1)), floatTensor(t, "b.weight", safetensors.F16, 10)}
		for _, tn := range ts {
			total += uint64(len(tn.Data))
		}
		require.NoError(t, checkpoint.Write(filepath.Join(dir, part), ts, checkpoint.BaseName("diffusion_pytorch_model")))
	}
	var p progressCalls
	r, err := Model(t.Context(), dir, Progress(p.f))
	require.NoError(t, err)
	require.Len(t, r.Parts, 2)
	p.assert(t, total, "two parts")
	assert.Less(t, p.done[0], total-4000-20, "the first part's bytes come first")
}
