package checkpoint

// Tests of checkpoints opened over HTTP, which remote.OpenIndex opened
// before Open took URLs.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// TestOpenURLNoModel: a base URL under which every file tried answers
// 404 names the base URL and every file tried under it, and ends with the
// server's message, which says whether the repository or the revision is
// missing rather than the weights.
func TestOpenURLNoModel(t *testing.T) {
	srv := serveDirDelayed(t, t.TempDir(), 0, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id: mian", http.StatusNotFound)
		return true
	})
	_, err := Open(context.Background(), srv.base)
	require.ErrorIs(t, err, ErrNoModel)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "checkpoint: no model found: "+srv.base+": none of "), msg)
	for _, name := range []string{"model.safetensors", "model.safetensors.index.json", "diffusion_pytorch_model.safetensors", "diffusion_pytorch_model.safetensors.index.json", "adapter_model.safetensors", "open_clip_model.safetensors"} {
		assert.Contains(t, msg, " "+name+",", "every file tried under the base URL")
	}
	assert.True(t, strings.HasSuffix(msg, "; the server answered 404 Not Found, saying: Invalid rev id: mian"), msg)

	// The URL of the Hub's web page of the folder: its resolve/ form.
	tree := srv.URL + "/org/model/tree/main"
	_, err = Open(context.Background(), tree)
	require.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "; "+tree+" is the URL of a web page: use the resolve/ form, "+srv.URL+"/org/model/resolve/main")
}

// TestOpenURLWebPage: the URL of the Hub's web page of a file or of an
// index gives a web page: the error says so, and names the file's URL.
func TestOpenURLWebPage(t *testing.T) {
	page := "<!DOCTYPE html>\n<html><head><title>model.safetensors · org/model at main</title></head><body>" + strings.Repeat("<p>x</p>", 100) + "</body></html>"
	srv := serveDirDelayed(t, t.TempDir(), 0, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
		return true
	})
	ctx := context.Background()
	blob := srv.URL + "/org/model/blob/main/model.safetensors"
	_, err := Open(ctx, blob)
	require.ErrorIs(t, err, safetensors.ErrNotSafetensors)
	assert.EqualError(t, err, "safetensors: "+blob+" is a web page (HTML), not a safetensors file: use the resolve/ form of its URL, "+srv.URL+"/org/model/resolve/main/model.safetensors")

	index := srv.URL + "/org/model/blob/main/model.safetensors.index.json"
	_, err = Open(ctx, index)
	require.ErrorIs(t, err, ErrInvalidIndex)
	assert.EqualError(t, err, "checkpoint: invalid index: "+index+": a web page (HTML), not the file: use the resolve/ form of its URL, "+srv.URL+"/org/model/resolve/main/model.safetensors.index.json")

	// A server that answers every path with a web page.
	_, err = Open(ctx, srv.base)
	require.ErrorIs(t, err, ErrNoModel)
	assert.EqualError(t, err, "checkpoint: no model found: "+srv.base+"/model_index.json: a web page (HTML), not the file: for the Hugging Face Hub, use the resolve/ form of its URL, https://huggingface.co/REPO/resolve/REVISION/FILE")
}

// TestOpenURLStatus: a refusal comes as the remote package's StatusError,
// with the server's message.
func TestOpenURLStatus(t *testing.T) {
	srv := serveDirDelayed(t, t.TempDir(), 0, func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "Access to model org/model is restricted.", http.StatusUnauthorized)
		return true
	})
	for _, target := range []string{srv.base, srv.base + "/model.safetensors", srv.base + "/model.safetensors.index.json"} {
		_, err := Open(context.Background(), target)
		var se *remote.StatusError
		require.ErrorAs(t, err, &se, target)
		assert.Equal(t, http.StatusUnauthorized, se.Code)
		assert.Equal(t, "Access to model org/model is restricted.", se.Body)
		assert.ErrorContains(t, err, "401 Unauthorized: the server wants credentials")
	}
}

// TestOpenScheme: a URL's scheme in any case is a URL; another scheme is
// no path, and the error says which schemes are read rather than that
// "stat" failed.
func TestOpenScheme(t *testing.T) {
	dir := layers(t, 2, 10, 1<<20)
	srv := serveDir(t, dir)
	c, err := Open(context.Background(), "HTTP"+strings.TrimPrefix(srv.base, "http"))
	require.NoError(t, err)
	require.NoError(t, c.Close())

	for _, target := range []string{"hf://org/model", "s3://bucket/model.safetensors"} {
		_, err = Open(context.Background(), target)
		require.ErrorIs(t, err, fs.ErrNotExist)
		scheme, _, _ := strings.Cut(target, "://")
		assert.True(t, strings.HasPrefix(err.Error(), "checkpoint: "+target+" is not a path on disk, and only http:// and https:// URLs are read, not "+scheme+":// ones: "), err.Error())
	}
	_, err = Open(context.Background(), filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotContains(t, err.Error(), "URL")
}
