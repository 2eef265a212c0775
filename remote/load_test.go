package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadServer serves the checkpoint in dir, each response delayed, and
// counts the tensor reads (ranged GETs other than the first of each
// object) started.
func loadServer(t *testing.T, dir string, delay time.Duration) (base string, reads *atomic.Int64) {
	reads = new(atomic.Int64)
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rg := r.Header.Get("Range"); rg != "" && !strings.HasPrefix(rg, "bytes=0-") {
			reads.Add(1)
		}
		time.Sleep(delay)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, reads
}

func TestLoad(t *testing.T) {
	dir := checkpoint(t, 12, 100_000, 300_000)
	base, reads := loadServer(t, dir, 10*time.Millisecond)
	s, err := OpenIndex(nil, base)
	require.NoError(t, err)
	defer s.Close()
	local, err := safetensors.OpenIndex(dir)
	require.NoError(t, err)
	defer local.Close()

	seen := map[string]bool{}
	start := time.Now()
	for tensor, err := range Load(context.Background(), s, nil, Concurrency(4)) {
		require.NoError(t, err)
		assert.False(t, seen[tensor.Name], tensor.Name)
		seen[tensor.Name] = true
		want, err := local.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, want, tensor)
	}
	assert.Len(t, seen, 12)
	assert.Equal(t, int64(12), reads.Load(), "one request a tensor (each larger than the first read of its shard)")
	assert.Less(t, time.Since(start), 8*10*time.Millisecond, "reads in parallel")

	// Some tensors only; an unknown one.
	n := 0
	for tensor, err := range Load(context.Background(), s, []string{"layers.3.weight", "layers.0.weight"}) {
		require.NoError(t, err)
		assert.Contains(t, []string{"layers.3.weight", "layers.0.weight"}, tensor.Name)
		n++
	}
	assert.Equal(t, 2, n)
	for _, err := range Load(context.Background(), s, []string{"nope"}) {
		assert.ErrorIs(t, err, safetensors.ErrTensorNotFound)
	}
	for _, err := range Load(context.Background(), s, nil, Concurrency(0)) {
		assert.Error(t, err)
	}

	// Into the caller's buffers, reused from one load to the next.
	var mu sync.Mutex
	bufs := map[string][]byte{}
	alloc := func(name string, size int64) []byte {
		mu.Lock()
		defer mu.Unlock()
		if bufs[name] == nil {
			bufs[name] = make([]byte, size+10)
		}
		return bufs[name]
	}
	for range 2 {
		n = 0
		for tensor, err := range Load(context.Background(), s, nil, Into(alloc)) {
			require.NoError(t, err)
			want, _ := local.Tensor(tensor.Name)
			assert.Equal(t, want, tensor)
			mu.Lock()
			assert.Same(t, &bufs[tensor.Name][0], &tensor.Data[0])
			mu.Unlock()
			n++
		}
		assert.Equal(t, 12, n)
	}
	for _, err := range Load(context.Background(), s, nil, Into(func(string, int64) []byte { return nil })) {
		assert.ErrorContains(t, err, "Into gave 0 bytes")
	}
}

// TestLoadMemoryLimit: with a limit of two tensors and a slow consumer,
// never more than two tensors are read ahead of it.
func TestLoadMemoryLimit(t *testing.T) {
	dir := checkpoint(t, 12, 100_000, 300_000)
	base, reads := loadServer(t, dir, 0)
	s, err := OpenIndex(nil, base)
	require.NoError(t, err)
	defer s.Close()
	got := 0
	for _, err := range Load(context.Background(), s, nil, Concurrency(8), MemoryLimit(200_000)) {
		require.NoError(t, err)
		got++
		time.Sleep(5 * time.Millisecond)
		// At most the tensors yielded and two more were read.
		assert.LessOrEqual(t, reads.Load(), int64(got+2))
	}
	assert.Equal(t, 12, got)
}

// TestLoadStop: breaking out of the loop and cancelling the context stop
// the load; an object replaced during the load gives ErrChanged.
func TestLoadStop(t *testing.T) {
	dir := checkpoint(t, 12, 100_000, 300_000)
	base, reads := loadServer(t, dir, 5*time.Millisecond)
	s, err := OpenIndex(nil, base)
	require.NoError(t, err)
	defer s.Close()
	for _, err := range Load(context.Background(), s, nil, Concurrency(2)) {
		require.NoError(t, err)
		break
	}
	assert.Less(t, reads.Load(), int64(6))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	for _, err := range Load(ctx, s, nil, Concurrency(2)) {
		cancel()
		last = err
	}
	assert.ErrorIs(t, last, context.Canceled)

	// Replace a shard with one of the same size: FileServer's
	// Last-Modified changes.
	shard := filepath.Join(dir, "model-00002-of-00004.safetensors")
	data, err := os.ReadFile(shard)
	require.NoError(t, err)
	data[len(data)-1]++
	require.NoError(t, os.WriteFile(shard, data, 0o666))
	require.NoError(t, os.Chtimes(shard, time.Now(), time.Now().Add(time.Hour)))
	last = nil
	for _, err := range Load(context.Background(), s, nil) {
		last = err
	}
	assert.ErrorIs(t, last, ErrChanged)
}
