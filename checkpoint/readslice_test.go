package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
)

// TestReadSlice reads selections of the tensors of a checkpoint of three
// shards, on disk and over HTTP, into the caller's buffer, and compares
// them with Tensor.Slice of the tensors written; an unknown name, a short
// buffer and an ended context fail as Reader.ReadSlice's do. From the
// files on disk a read allocates nothing once warm.
func TestReadSlice(t *testing.T) {
	dir := t.TempDir()
	var tensors []safetensors.Tensor
	for i, shape := range [][]uint64{{64, 48}, {3, 5, 7}, {100}, {8, 16}} {
		n := 2
		for _, d := range shape {
			n *= int(d)
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i*31 + j*7 + j>>8)
		}
		tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.BF16, Shape: shape, Data: data})
	}
	require.NoError(t, Write(dir, tensors, Shards(3)))
	selections := [][]safetensors.Selector{
		nil,
		{safetensors.Range(1, 3)},
		{safetensors.All(), safetensors.RangeStep(1, 48, 2)},
		{safetensors.Ellipsis(), safetensors.AtFromEnd(1)},
		{safetensors.At(2)},
	}
	openBoth(t, dir, "", func(t *testing.T, target string) {
		ctx := context.Background()
		c, err := Open(ctx, target)
		require.NoError(t, err)
		defer c.Close()
		require.Len(t, c.Files(), 3)
		dst := make([]byte, 64*48*2)
		for _, tn := range tensors {
			for _, sel := range selections {
				want, err := tn.Slice(sel...)
				n, rerr := c.ReadSlice(ctx, tn.Name, dst, sel...)
				if err != nil {
					assert.Error(t, rerr, "%s %v: %v", tn.Name, sel, err)
					continue
				}
				require.NoError(t, rerr, "%s %v", tn.Name, sel)
				assert.Equal(t, want.AppendTo(nil), dst[:n], "%s %v", tn.Name, sel)
			}
		}

		_, err = c.ReadSlice(ctx, "nope", dst)
		assert.ErrorIs(t, err, safetensors.ErrTensorNotFound)
		_, err = c.ReadSlice(ctx, "layers.0.weight", dst[:10])
		assert.ErrorIs(t, err, io.ErrShortBuffer)
		assert.ErrorContains(t, err, "model-0000")
		ended, cancel := context.WithCancelCause(ctx)
		cause := errors.New("rank restarted")
		cancel(cause)
		_, err = c.ReadSlice(ended, "layers.0.weight", dst)
		assert.ErrorIs(t, err, cause)

		if testing.CoverMode() != "" || remote.IsURL(target) {
			return // coverage allocates; over HTTP, see remote's TestReadSliceAllocs
		}
		for _, sel := range selections[:3] {
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := c.ReadSlice(ctx, "layers.0.weight", dst, sel...); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs, "%v", sel)
		}
	})
}
