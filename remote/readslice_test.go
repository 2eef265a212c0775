package remote

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestReadSlice reads selections of a remote file into the caller's buffer
// with Reader.ReadSlice and compares them with Tensor.Slice of the file in
// memory, counting the requests (one for a contiguous selection, one a
// MiB for runs close together); and a context cancelled while the request
// is in flight aborts it.
func TestReadSlice(t *testing.T) {
	const rows, cols = 1024, 1024
	m := safetensors.Tensor{Name: "w", DType: safetensors.BF16, Shape: []uint64{rows, cols}, Data: make([]byte, rows*cols*2)}
	for i := range m.Data {
		m.Data[i] = byte(i*7 + i>>11)
	}
	var file bytes.Buffer
	require.NoError(t, safetensors.Write(&file, []safetensors.Tensor{m}, nil))
	s := newRangeServer(t, file.Bytes(), nil)
	ctx := context.Background()
	r, err := Open(ctx, s.Client(), s.URL)
	require.NoError(t, err)
	defer r.Close()

	dst := make([]byte, len(m.Data))
	for _, tc := range []struct {
		sel      []safetensors.Selector
		requests int64
	}{
		{nil, 1},
		{[]safetensors.Selector{safetensors.Range(100, 300)}, 1},
		// 1024 runs of 1 KiB, 2 KiB apart: 512 to a MiB.
		{[]safetensors.Selector{safetensors.All(), safetensors.Range(512, 1024)}, 2},
		// 342 runs of 2 bytes, 6 KiB apart: 171 to a MiB.
		{[]safetensors.Selector{safetensors.RangeStep(1, 1024, 3), safetensors.AtFromEnd(1)}, 2},
	} {
		want, err := m.Slice(tc.sel...)
		require.NoError(t, err)
		before := s.count.Load()
		n, err := r.ReadSlice(ctx, "w", dst, tc.sel...)
		require.NoError(t, err, "%v", tc.sel)
		assert.Equal(t, want.AppendTo(nil), dst[:n], "%v", tc.sel)
		assert.Equal(t, tc.requests, s.count.Load()-before, "%v", tc.sel)
	}

	// A request in flight, aborted by the context.
	stalled := newRangeServer(t, file.Bytes(), func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n == 1 {
			return false
		}
		<-r.Context().Done()
		return true
	})
	r2, err := Open(ctx, stalled.Client(), stalled.URL, StallTimeout(0))
	require.NoError(t, err)
	defer r2.Close()
	cctx, cancel := context.WithCancelCause(ctx)
	cause := errors.New("rank restarted")
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	_, err = r2.ReadSlice(cctx, "w", dst, safetensors.All(), safetensors.Range(0, 512))
	require.ErrorIs(t, err, cause)
	assert.Contains(t, err.Error(), `tensor "w"`)
	assert.Equal(t, int64(2), stalled.count.Load(), "no retry after the context ended")
}
