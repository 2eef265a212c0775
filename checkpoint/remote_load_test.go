package checkpoint

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors/load"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadServer serves the checkpoint in dir, each response delayed, and
// counts the tensor reads (ranged GETs other than the first of each
// object) started and the most in flight.
func loadServer(t *testing.T, dir string, delay time.Duration) (base string, reads, peak *atomic.Int64) {
	reads, peak = new(atomic.Int64), new(atomic.Int64)
	var inFlight atomic.Int64
	srv := serveDirDelayed(t, dir, delay, func(w http.ResponseWriter, r *http.Request) bool {
		if rg := r.Header.Get("Range"); rg != "" && !strings.HasPrefix(rg, "bytes=0-") {
			reads.Add(1)
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(delay) // in flight
		}
		return false
	})
	return srv.base, reads, peak
}

// TestLoader loads a checkpoint over HTTP with a load package Loader: the
// tensors of the local checkpoint, read with parallel range requests.
func TestLoader(t *testing.T) {
	dir := layers(t, 12, 100_000, 300_000)
	base, reads, peak := loadServer(t, dir, 10*time.Millisecond)
	c, err := Open(context.Background(), base)
	require.NoError(t, err)
	defer c.Close()
	local, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer local.Close()

	seen := map[string]bool{}
	loader := &load.Loader{Concurrency: 4}
	for tensor, err := range loader.Load(context.Background(), c) {
		require.NoError(t, err)
		assert.False(t, seen[tensor.Name], tensor.Name)
		seen[tensor.Name] = true
		want, err := local.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, want, tensor)
	}
	assert.Len(t, seen, 12)
	assert.Equal(t, int64(12), reads.Load(), "one request a tensor (each larger than the first read of its shard)")
	assert.Greater(t, peak.Load(), int64(1), "requests in parallel")
	assert.LessOrEqual(t, peak.Load(), int64(4))
}

// TestLoaderChanged: a shard replaced during a load gives ErrChanged.
func TestLoaderChanged(t *testing.T) {
	dir := layers(t, 12, 100_000, 300_000)
	base, _, _ := loadServer(t, dir, 0)
	c, err := Open(context.Background(), base)
	require.NoError(t, err)
	defer c.Close()
	// Replace a shard with one of the same size: FileServer's
	// Last-Modified changes.
	shard := filepath.Join(dir, "model-00002-of-00004.safetensors")
	data, err := os.ReadFile(shard)
	require.NoError(t, err)
	data[len(data)-1]++
	require.NoError(t, os.WriteFile(shard, data, 0o666))
	require.NoError(t, os.Chtimes(shard, time.Now(), time.Now().Add(time.Hour)))
	var last error
	for _, err := range (&load.Loader{}).Load(context.Background(), c) {
		last = err
	}
	assert.ErrorIs(t, last, remote.ErrChanged)
	assert.ErrorContains(t, last, "model-00002-of-00004.safetensors")
}
