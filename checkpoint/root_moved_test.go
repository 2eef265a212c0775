package checkpoint_test

// Tests of sharded checkpoints that lived in the root package's tests
// (fuzz_test.go, tensorreader_test.go) before checkpoints moved here.

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzOpenIndex opens a checkpoint of two valid shards under any index
// file. No index may panic; an accepted one must list only tensors that
// its shards hold, each readable, and an error must match ErrInvalidIndex
// (or ErrUnlistedTensor, under Strict) and come without a Checkpoint.
func FuzzOpenIndex(f *testing.F) {
	dir := f.TempDir()
	tensors := []safetensors.Tensor{
		{Name: "a", DType: safetensors.U8, Shape: []uint64{2}, Data: []byte{1, 2}},
		{Name: "b", DType: safetensors.F32, Shape: []uint64{}, Data: []byte{0, 0, 0x80, 0x3f}},
		{Name: "c", DType: safetensors.I16, Shape: []uint64{1}, Data: []byte{7, 0}},
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(4)); err != nil {
		f.Fatal(err)
	}
	index := filepath.Join(dir, "model.safetensors.index.json")
	good, err := os.ReadFile(index)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"metadata":{"total_size":2},"weight_map":{"a":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../model-00001-of-00002.safetensors","b":7}}`))
	f.Add([]byte(`{"metadata":{"total_size":-1e400},"weight_map":{}}`))
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(index, data, 0o644); err != nil {
			t.Fatal(err)
		}
		strict, err := checkpoint.Open(ctx, index, checkpoint.Strict())
		if err != nil && !errors.Is(err, checkpoint.ErrInvalidIndex) && !errors.Is(err, checkpoint.ErrUnlistedTensor) && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("unexpected error under Strict: %v", err)
		}
		if err != nil && strict != nil {
			t.Fatalf("a Checkpoint with the error %v", err)
		}
		if strict != nil {
			strict.Close()
		}
		c, err := checkpoint.Open(ctx, index)
		if err != nil {
			if !errors.Is(err, checkpoint.ErrInvalidIndex) && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("unexpected error: %v", err)
			}
			if c != nil {
				t.Fatalf("a Checkpoint with the error %v", err)
			}
			return
		}
		defer c.Close()
		if (strict == nil) != (len(c.Unlisted()) > 0) {
			t.Fatalf("Strict gave %v, and Unlisted is %q", err, c.Unlisted())
		}
		for _, name := range c.Names() {
			if _, err := c.Tensor(name); err != nil {
				t.Fatalf("listed tensor %q: %v", name, err)
			}
		}
		for _, name := range c.Unlisted() {
			if _, err := c.Tensor(name); !errors.Is(err, safetensors.ErrTensorNotFound) {
				t.Fatalf("unlisted tensor %q: %v", name, err)
			}
		}
	})
}

// movedStreamTensors returns tensors with distinct, non-zero bytes, some
// empty: the root package's streamTensors.
func movedStreamTensors() []safetensors.Tensor {
	mk := func(name string, d safetensors.DType, shape ...uint64) safetensors.Tensor {
		size := uint64(d.Bits())
		for _, n := range shape {
			size *= n
		}
		data := make([]byte, size/8)
		for i := range data {
			data[i] = byte(len(name)*31 + i*7 + 1)
		}
		return safetensors.Tensor{Name: name, DType: d, Shape: shape, Data: data}
	}
	return []safetensors.Tensor{
		mk("embed", safetensors.BF16, 64, 33),
		mk("bias", safetensors.F32, 17),
		mk("empty", safetensors.F32, 0, 5),
		mk("counts", safetensors.I64, 3),
		mk("mask", safetensors.BOOL, 9),
		mk("scale", safetensors.F64),
		mk("packed", safetensors.F4, 6),
	}
}

// TestShardedTensorReader reads every tensor of a checkpoint through
// Checkpoint.TensorReader.
func TestShardedTensorReader(t *testing.T) {
	tensors := movedStreamTensors()
	dir := t.TempDir()
	require.NoError(t, checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(64)))
	c, err := checkpoint.Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	require.Greater(t, len(c.Files()), 1)
	for _, want := range tensors {
		sr, err := c.TensorReader(want.Name)
		require.NoError(t, err)
		got, err := io.ReadAll(sr)
		require.NoError(t, err)
		assert.Equal(t, want.Data, got, want.Name)
	}
	_, err = c.TensorReader("nope")
	assert.ErrorIs(t, err, safetensors.ErrTensorNotFound)
}
