package check

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// cancellingSource is a memSource that cancels a context, with its cause,
// when the tensor named at is read, and counts the reads.
type cancellingSource struct {
	memSource
	at     string
	cancel context.CancelCauseFunc
	cause  error
	reads  atomic.Int32
}

func (s *cancellingSource) TensorContext(ctx context.Context, name string) (safetensors.Tensor, error) {
	s.reads.Add(1)
	if name == s.at {
		s.cancel(s.cause)
	}
	return s.memSource.TensorContext(ctx, name)
}

// TestRunCancelled: a check stops once its context is done, reading no
// more tensors and scanning no values, with an error that wraps both
// context.Canceled and the cause.
func TestRunCancelled(t *testing.T) {
	nan := float32(math.NaN())
	var ts memSource
	for _, name := range []string{"a", "b", "c"} {
		tn, err := safetensors.TensorFromFloat32s(name, safetensors.F32, []uint64{1 << 18}, make([]float32, 1<<18), safetensors.RoundNearestEven)
		require.NoError(t, err)
		ts = append(ts, tn)
	}
	bad, err := safetensors.TensorFromFloat32s("z", safetensors.F32, []uint64{2}, []float32{1, nan}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	ts = append(ts, bad)
	for _, tc := range []struct {
		name      string
		at        string // the tensor whose read cancels
		wantReads int32
	}{
		{"while reading the tensors", "a", 1},
		// Every tensor is read: the value scan starts on a done context.
		{"before the value scan", "z", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, workers := range []int{1, 4} {
				ctx, cancel := context.WithCancelCause(t.Context())
				cause := errors.New("stop")
				src := &cancellingSource{memSource: ts, at: tc.at, cancel: cancel, cause: cause}
				r, err := Run(ctx, src, Workers(workers))
				require.Error(t, err, "workers %d", workers)
				assert.Nil(t, r)
				assert.ErrorIs(t, err, context.Canceled)
				assert.ErrorIs(t, err, cause)
				assert.Equal(t, tc.wantReads, src.reads.Load())
			}
		})
	}

	// Without the cancellation, the same source gives a report.
	src := &cancellingSource{memSource: ts, at: "none", cancel: func(error) {}}
	r, err := Run(t.Context(), src)
	require.NoError(t, err)
	assert.Equal(t, 1, r.Errors())
}

// TestModelCancelled: Model on a done context opens the model and returns
// the context's error, not a report.
func TestModelCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, err := Model(ctx, models+"/llama")
	assert.Nil(t, r)
	require.ErrorIs(t, err, context.Canceled)
}

// TestInvalidOption: options given values they cannot take fail Run and
// Model with safetensors.ErrInvalidOption, before anything is read.
func TestInvalidOption(t *testing.T) {
	for name, o := range map[string]Option{
		"MaxAbs(0)":    MaxAbs(0),
		"MaxAbs(-1)":   MaxAbs(-1),
		"MaxAbs(NaN)":  MaxAbs(math.NaN()),
		"MaxAbs(+Inf)": MaxAbs(math.Inf(1)),
		"Workers(0)":   Workers(0),
		"Workers(-2)":  Workers(-2),
	} {
		_, err := Run(t.Context(), memSourceOf(), o)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption, name)
		_, err = Model(t.Context(), "no such model", o)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption, name)
	}
}

// TestMagnitudeOptions: MaxAbs moves the limit of the magnitude warnings,
// and NoMagnitude turns them off, while NaN is still an error.
func TestMagnitudeOptions(t *testing.T) {
	nan := float32(math.NaN())
	w, err := safetensors.TensorFromFloat32s("w", safetensors.F32, []uint64{4}, []float32{1, 3, 2e4, nan}, safetensors.RoundNearestEven)
	require.NoError(t, err)
	for _, tc := range []struct {
		opts []Option
		want uint64 // values beyond the limit
	}{
		{nil, 1},
		{[]Option{MaxAbs(2)}, 2},
		{[]Option{MaxAbs(3e4)}, 0},
		{[]Option{NoMagnitude()}, 0},
		{[]Option{NoMagnitude(), MaxAbs(2)}, 2}, // the last one wins
	} {
		r, err := Run(t.Context(), memSourceOf(w), tc.opts...)
		require.NoError(t, err)
		assert.Equal(t, 1, r.Errors(), "the NaN")
		var got uint64
		for _, f := range find(r, KindMagnitude, "w") {
			got += f.Count
		}
		assert.Equal(t, tc.want, got, "%d options", len(tc.opts))
	}
}
