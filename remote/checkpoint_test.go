package remote

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkpoint writes a checkpoint of n tensors in shards of about shardSize
// bytes into a new directory, and returns the directory.
func checkpoint(t testing.TB, n, tensorSize int, shardSize int64) string {
	dir := t.TempDir()
	tensors := make([]safetensors.Tensor, n)
	for i := range tensors {
		data := make([]byte, tensorSize)
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		tensors[i] = safetensors.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.U8, Shape: []uint64{uint64(tensorSize)}, Data: data}
	}
	require.NoError(t, safetensors.WriteSharded(dir, "model", tensors, shardSize, map[string]string{"format": "pt"}))
	return dir
}

// hub serves dir as the Hugging Face Hub serves a repository's files, under
// /org/model/resolve/main/, and counts the requests and the most in flight.
func hub(t testing.TB, dir string, delay time.Duration) (srv *httptest.Server, base string, count, peak *atomic.Int64) {
	count, peak = new(atomic.Int64), new(atomic.Int64)
	var inFlight atomic.Int64
	files := http.StripPrefix("/org/model/resolve/main", http.FileServer(http.Dir(dir)))
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(delay)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, srv.URL + "/org/model/resolve/main", count, peak
}

// sameCheckpoint checks that got reads as the local checkpoint in dir.
func sameCheckpoint(t *testing.T, dir string, got *safetensors.Sharded) {
	want, err := safetensors.OpenIndex(dir)
	require.NoError(t, err)
	defer want.Close()
	assert.Equal(t, want.Names(), got.Names())
	assert.Equal(t, want.Shards(), got.Shards())
	for _, name := range want.Names() {
		w, err := want.Tensor(name)
		require.NoError(t, err)
		g, err := got.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, w, g, name)
	}
}

func TestOpenIndex(t *testing.T) {
	dir := checkpoint(t, 20, 1000, 3000)
	_, base, count, peak := hub(t, dir, 20*time.Millisecond)
	for _, u := range []string{base + "/model.safetensors.index.json", base, base + "/"} {
		count.Store(0)
		s, err := OpenIndex(context.Background(), nil, u)
		require.NoError(t, err, u)
		assert.Len(t, s.Shards(), 7)
		sameCheckpoint(t, dir, s)
		require.NoError(t, s.Close())
	}
	assert.Greater(t, peak.Load(), int64(1), "shards opened in parallel")
	assert.Equal(t, int64(2+7), count.Load(), "model.safetensors (404), the index, the shards' first 64 KiB, which hold their tensors too")
}

func TestOpenIndexSingleFile(t *testing.T) {
	dir := checkpoint(t, 3, 100, 1<<20)
	_, base, count, _ := hub(t, dir, 0)
	for _, u := range []string{base, base + "/model.safetensors"} {
		count.Store(0)
		s, err := OpenIndex(context.Background(), nil, u)
		require.NoError(t, err, u)
		assert.Equal(t, []string{"model.safetensors"}, s.Shards())
		assert.Equal(t, map[string]string{"format": "pt"}, s.Metadata())
		sameCheckpoint(t, dir, s)
		assert.Equal(t, int64(1), count.Load(), "the header, which holds the tensors too")
		require.NoError(t, s.Close())
	}
}

func TestOpenIndexErrors(t *testing.T) {
	_, base, _, _ := hub(t, t.TempDir(), 0)
	_, err := OpenIndex(context.Background(), nil, base)
	assert.ErrorContains(t, err, "404")
	assert.ErrorContains(t, err, "model.safetensors.index.json")

	// A shard missing, and a shard that is not what the index says.
	dir := checkpoint(t, 20, 1000, 3000)
	_, base, _, _ = hub(t, dir, 0)
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00007.safetensors")))
	_, err = OpenIndex(context.Background(), nil, base)
	assert.ErrorIs(t, err, safetensors.ErrInvalidIndex)
	assert.ErrorContains(t, err, "404")

	dir = checkpoint(t, 20, 1000, 3000)
	_, base, _, _ = hub(t, dir, 0)
	other := checkpoint(t, 2, 10, 1<<20)
	data, err := os.ReadFile(filepath.Join(other, "model.safetensors"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model-00003-of-00007.safetensors"), data, 0o666))
	_, err = OpenIndex(context.Background(), nil, base+"/model.safetensors.index.json")
	assert.ErrorIs(t, err, safetensors.ErrInvalidIndex)

	// An index that is not JSON.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte("<html>"), 0o666))
	_, err = OpenIndex(context.Background(), nil, base)
	assert.ErrorIs(t, err, safetensors.ErrInvalidIndex)
}
