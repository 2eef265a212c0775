package diff

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// serveModel writes a sharded checkpoint of F32 tensors of about size
// bytes in all, the largest half of it, whose values depend on seed in
// the largest tensor only, serves it over HTTP and returns its URL.
func serveModel(t *testing.T, size int, seed float32) string {
	t.Helper()
	dir := t.TempDir()
	var tensors []safetensors.Tensor
	for i, n := range []int{size / 2, size / 4, size / 4} {
		data := make([]byte, n/4*4)
		for j := 0; j < len(data); j += 4 {
			v := float32(j%89) / 89
			if i == 0 {
				v += seed
			}
			binary.LittleEndian.PutUint32(data[j:], math.Float32bits(v))
		}
		tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("w%d", i), DType: safetensors.F32, Shape: []uint64{uint64(len(data) / 4)}, Data: data})
	}
	require.NoError(t, checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(int64(size/3))))
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRemoteBoundedMemory: comparing two models over HTTP reads them a
// chunk at a time: it allocates a small part of their size, not the
// models, and finds the tensor that differs.
func TestRemoteBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("serves two models of 64 MiB")
	}
	const size = 64 << 20
	a, err := checkpoint.Open(context.Background(), serveModel(t, size, 0))
	require.NoError(t, err)
	defer a.Close()
	b, err := checkpoint.Open(context.Background(), serveModel(t, size, 1))
	require.NoError(t, err)
	defer b.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := Compare(context.Background(), a, b, a.Metadata(), b.Metadata(), Workers(2))
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	n := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes comparing two models of %d", n, size)
	assert.Less(t, n, uint64(size/2))
	require.Len(t, r.Tensors, 3)
	assert.Equal(t, Different, r.Tensors[0].Verdict)
	assert.Equal(t, uint64(size/2/4), r.Tensors[0].Differing)
	assert.InDelta(t, 1, r.Tensors[0].MaxAbs, 1e-6)
	assert.Equal(t, Identical, r.Tensors[1].Verdict)
	assert.Equal(t, Identical, r.Tensors[2].Verdict)
}
