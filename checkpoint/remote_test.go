package checkpoint

// Tests of checkpoints opened over HTTP, which remote.OpenIndex opened
// before Open took URLs.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layers writes a checkpoint of n tensors in shards of about shardSize
// bytes into a new directory, and returns the directory.
func layers(t testing.TB, n, tensorSize int, shardSize int64) string {
	dir := t.TempDir()
	tensors := make([]safetensors.Tensor, n)
	for i := range tensors {
		data := make([]byte, tensorSize)
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		tensors[i] = safetensors.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.U8, Shape: []uint64{uint64(tensorSize)}, Data: data}
	}
	require.NoError(t, Write(dir, tensors, MaxShardSize(shardSize), FileMetadata(map[string]string{"format": "pt"})))
	return dir
}

// sameCheckpoint checks that got reads as the local checkpoint in dir.
func sameCheckpoint(t *testing.T, dir string, got *Checkpoint) {
	want, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer want.Close()
	assert.Equal(t, want.Names(), got.Names())
	assert.Equal(t, want.Files(), got.Files())
	assert.Equal(t, want.Index(), got.Index())
	assert.Equal(t, want.Metadata(), got.Metadata())
	assert.Equal(t, want.IndexMetadata(), got.IndexMetadata())
	for _, name := range want.Names() {
		w, err := want.Tensor(name)
		require.NoError(t, err)
		g, err := got.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, w, g, name)
	}
}

func TestOpenURL(t *testing.T) {
	dir := layers(t, 20, 1000, 3000)
	srv := serveDirDelayed(t, dir, 20*time.Millisecond, nil)
	for _, tc := range []struct {
		url      string
		requests int64
		why      string
	}{
		{srv.base + "/model.safetensors.index.json", 1 + 7, "the index, the shards' first 64 KiB, which hold their tensors too"},
		{srv.base, 5 + 7, "model_index.json, modules.json and config.json at once, model.safetensors (404), the index, the shards"},
		{srv.base + "/", 5 + 7, "the same"},
	} {
		srv.requests()
		c, err := Open(context.Background(), tc.url)
		require.NoError(t, err, tc.url)
		assert.Equal(t, tc.requests, srv.count.Load(), "%s: %s", tc.url, tc.why)
		assert.Len(t, c.Files(), 7)
		assert.Equal(t, srv.base, c.Dir())
		assert.Equal(t, srv.base+"/model.safetensors.index.json", c.String())
		sameCheckpoint(t, dir, c)
		require.NoError(t, c.Close())
	}
	assert.Greater(t, srv.peak.Load(), int64(1), "shards opened in parallel")
}

func TestOpenURLSingleFile(t *testing.T) {
	dir := layers(t, 3, 100, 1<<20)
	srv := serveDir(t, dir)
	for _, tc := range []struct {
		url      string
		requests int64
	}{
		{srv.base, 4},                        // model_index.json, modules.json, config.json (404) at once, and the header, which holds the tensors too
		{srv.base + "/model.safetensors", 1}, // the header
	} {
		srv.requests()
		c, err := Open(context.Background(), tc.url)
		require.NoError(t, err, tc.url)
		assert.Equal(t, []string{"model.safetensors"}, c.Files())
		assert.Equal(t, map[string]string{"format": "pt"}, c.Metadata())
		assert.Nil(t, c.IndexMetadata())
		sameCheckpoint(t, dir, c)
		assert.Equal(t, tc.requests, srv.count.Load(), tc.url)
		require.NoError(t, c.Close())
	}
}

// TestOpenURLQuery: a file's URL keeps its query, such as the signature
// of a presigned URL, which the server checks; a folder's files' URLs
// get none.
func TestOpenURLQuery(t *testing.T) {
	dir := layers(t, 3, 100, 1<<20)
	srv := serveDirDelayed(t, dir, 0, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("sig") != "ok" {
			http.Error(w, "signature", http.StatusForbidden)
			return true
		}
		return false
	})
	c, err := Open(context.Background(), srv.base+"/model.safetensors?sig=ok#frag")
	require.NoError(t, err)
	assert.Equal(t, srv.base, c.Dir())
	sameCheckpoint(t, dir, c)
	require.NoError(t, c.Close())

	_, err = Open(context.Background(), srv.base+"/model.safetensors?sig=no")
	assert.ErrorContains(t, err, "403")
}

func TestOpenURLErrors(t *testing.T) {
	ctx := context.Background()
	srv := serveDir(t, t.TempDir())
	_, err := Open(ctx, srv.base)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "model.safetensors.index.json")
	assert.ErrorContains(t, err, srv.base)
	_, err = Open(ctx, srv.base+"/model.safetensors")
	assert.ErrorContains(t, err, "404")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)

	// A shard missing, and a shard that is not what the index says.
	dir := layers(t, 20, 1000, 3000)
	srv = serveDir(t, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00007.safetensors")))
	_, err = Open(ctx, srv.base)
	assert.ErrorIs(t, err, ErrInvalidIndex)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, "404")

	dir = layers(t, 20, 1000, 3000)
	srv = serveDir(t, dir)
	other := layers(t, 2, 10, 1<<20)
	data, err := os.ReadFile(filepath.Join(other, "model.safetensors"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model-00003-of-00007.safetensors"), data, 0o666))
	_, err = Open(ctx, srv.base+"/model.safetensors.index.json")
	assert.ErrorIs(t, err, ErrInvalidIndex)

	// An index that is not JSON.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte("<html>"), 0o666))
	_, err = Open(ctx, srv.base)
	assert.ErrorIs(t, err, ErrInvalidIndex)

	// A server that refuses: the status, not ErrNoModel.
	gated := serveDirDelayed(t, dir, 0, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer hf_x" {
			http.Error(w, "gated", http.StatusUnauthorized)
			return true
		}
		return false
	})
	_, err = Open(ctx, gated.base)
	assert.ErrorContains(t, err, "401")
	assert.NotErrorIs(t, err, ErrNoModel)
	c, err := Open(ctx, gated.base+"/model-00001-of-00007.safetensors", RemoteOptions(remote.RequestHeader("Authorization", "Bearer hf_x")), HTTPClient(gated.Client()))
	require.NoError(t, err, "the options' header")
	require.NoError(t, c.Close())

	_, err = Open(ctx, "http://[::1]:namedport/model.safetensors")
	assert.Error(t, err, "not a URL")
}
