package diff

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// hookSource is a safetensors.TensorSource over tensors in memory that
// calls hook, if set, on every read, and counts the reads.
type hookSource struct {
	tensors map[string]safetensors.Tensor
	hook    func(name string)
	reads   atomic.Int32
}

func newHookSource(ts ...safetensors.Tensor) *hookSource {
	s := &hookSource{tensors: map[string]safetensors.Tensor{}}
	for _, t := range ts {
		s.tensors[t.Name] = t
	}
	return s
}

func (s *hookSource) Names() []string {
	var names []string
	for n := range s.tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (s *hookSource) TensorContext(_ context.Context, name string) (safetensors.Tensor, error) {
	s.reads.Add(1)
	if s.hook != nil {
		s.hook(name)
	}
	t, ok := s.tensors[name]
	if !ok {
		return t, safetensors.ErrTensorNotFound
	}
	return t, nil
}

// TestCompareCancelled: a comparison stops once its context is done: it
// reads nothing on a context already done, and a context cancelled while
// a tensor is compared, bytes or decoded values, stops within the tensor,
// with an error that wraps context.Canceled and the cause.
func TestCompareCancelled(t *testing.T) {
	n := 3 * diffChunk // elements: three chunks of compareTensor's
	zeros := make([]float32, n)
	big := f32(t, "big", []uint64{uint64(n)}, zeros...)
	cast, err := safetensors.TensorFromFloat32s("cast", safetensors.BF16, []uint64{uint64(n)}, zeros, safetensors.RoundNearestEven)
	require.NoError(t, err)
	small := f32(t, "small", []uint64{1}, 1)

	cause := errors.New("stop")
	check := func(t *testing.T, r *Result, err error) {
		t.Helper()
		assert.Nil(t, r)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, cause)
	}
	for _, workers := range []int{1, 4} {
		// Already done: no tensor is read.
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(cause)
		a, b := newHookSource(big, small), newHookSource(big, small)
		r, err := Compare(ctx, a, b, nil, nil, Workers(workers))
		check(t, r, err)
		assert.Zero(t, a.reads.Load()+b.reads.Load(), "workers %d", workers)

		// Cancelled as the second side of a tensor is read: the bytes
		// (same dtype) or the values (F32 against BF16) are not compared
		// to the end, which would give a result without an error.
		for _, other := range []safetensors.Tensor{big, {Name: "big", DType: cast.DType, Shape: cast.Shape, Data: cast.Data}} {
			ctx, cancel := context.WithCancelCause(t.Context())
			a, b := newHookSource(big), newHookSource(other)
			b.hook = func(string) { cancel(cause) }
			r, err := Compare(ctx, a, b, nil, nil, Workers(workers))
			check(t, r, err)
		}
	}

	// Not cancelled, the same sources compare.
	r, err := Compare(t.Context(), newHookSource(big, small), newHookSource(big, small), nil, nil)
	require.NoError(t, err)
	assert.True(t, r.Equal())
}

// TestPathsCancelled: Paths on a done context returns its error.
func TestPathsCancelled(t *testing.T) {
	path := write(t, []safetensors.Tensor{f32(t, "w", []uint64{2}, 1, 2)}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, err := Paths(ctx, path, path)
	assert.Nil(t, r)
	require.ErrorIs(t, err, context.Canceled)
}

// TestInvalidOption: Workers below 1 fails Compare and Paths with
// safetensors.ErrInvalidOption before anything is read.
func TestInvalidOption(t *testing.T) {
	for _, n := range []int{0, -1} {
		a := newHookSource(f32(t, "w", []uint64{1}, 1))
		_, err := Compare(t.Context(), a, a, nil, nil, Workers(n))
		require.ErrorIs(t, err, safetensors.ErrInvalidOption)
		assert.Zero(t, a.reads.Load())
		_, err = Paths(t.Context(), "no such file", "no such file", Workers(n))
		require.ErrorIs(t, err, safetensors.ErrInvalidOption)
	}
}
