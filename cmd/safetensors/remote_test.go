package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveDir serves dir as the Hugging Face Hub serves a repository, under
// /org/tiny/resolve/main, and returns that base URL and the Authorization
// headers it received.
func serveDir(t *testing.T, dir string) (base string, auth *atomic.Value) {
	auth = new(atomic.Value)
	auth.Store("")
	files := http.StripPrefix("/org/tiny/resolve/main", http.FileServer(http.Dir(dir)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/org/tiny/resolve/main", auth
}

// shardedTiny writes the tiny model as a checkpoint of several shards.
func shardedTiny(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, checkpoint.Write(dir, tinyLlama(), checkpoint.MaxShardSize(200_000), checkpoint.FileMetadata(map[string]string{"format": "pt"})))
	return dir
}

// jsonTensors returns the tensors and totals of inspect --json's output.
func jsonTensors(t *testing.T, out string) (tensors, totals any) {
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	return s["tensors"], s["totals"]
}

// TestRemoteCheckpoint: inspect, validate and stats of a checkpoint's URLs
// print what they print for the local checkpoint.
func TestRemoteCheckpoint(t *testing.T) {
	dir := shardedTiny(t)
	base, _ := serveDir(t, dir)
	status, local, stderr := runCmd("inspect", "--json", dir)
	require.Equal(t, exitOK, status, stderr)
	wantTensors, wantTotals := jsonTensors(t, local)
	for _, u := range []string{base, base + "/model.safetensors.index.json"} {
		status, out, stderr := runCmd("inspect", "--json", u)
		require.Equal(t, exitOK, status, stderr)
		gotTensors, gotTotals := jsonTensors(t, out)
		assert.Equal(t, wantTensors, gotTensors)
		assert.Equal(t, wantTotals, gotTotals)

		status, out, _ = runCmd("validate", "--values", u)
		assert.Equal(t, exitOK, status, out)
		assert.Contains(t, out, u+": ok, 39 tensors in ")
	}
	status, want, _ := runCmd("stats", dir)
	require.Equal(t, exitOK, status)
	status, got, stderr := runCmd("stats", base)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, want, got)
}

// TestRemoteFile: inspect, validate and stats of a single file's URL.
func TestRemoteFile(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(tinyModel)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), data, 0o666))
	base, _ := serveDir(t, dir)
	u := base + "/model.safetensors"

	_, want, _ := runCmd("inspect", tinyModel)
	status, got, stderr := runCmd("inspect", u)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, strings.Replace(want, tinyModel, u, 1), got)

	status, out, _ := runCmd("validate", "--values", u)
	assert.Equal(t, exitOK, status, out)
	_, want, _ = runCmd("stats", tinyModel, "model.norm.weight", "lm_head.weight")
	status, got, stderr = runCmd("stats", u, "model.norm.weight", "lm_head.weight")
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, want, got)

	status, _, stderr = runCmd("inspect", base+"/missing.safetensors")
	assert.Equal(t, exitTrouble, status, "a URL that is not found")
	assert.Contains(t, stderr, "404")
}

// TestRemoteNoRange: a server that ignores Range, as Python's http.server
// does, still gives the header; reading tensors fails naming the cause.
func TestRemoteNoRange(t *testing.T) {
	data, err := os.ReadFile(tinyModel)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	}))
	defer srv.Close()
	u := srv.URL + "/model.safetensors"
	status, out, stderr := runCmd("inspect", u)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, out, "39 tensors")
	status, _, stderr = runCmd("stats", u, "lm_head.weight")
	assert.Equal(t, exitTrouble, status, "the tensor could not be read")
	assert.Contains(t, stderr, "does not support range requests")
}

// TestRemoteHeaders: --header goes to every URL; HF_TOKEN only to the Hub
// (here HF_ENDPOINT).
func TestRemoteHeaders(t *testing.T) {
	dir := shardedTiny(t)
	files := http.FileServer(http.Dir(dir))
	var got atomic.Value
	gated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer hf_test" {
			http.Error(w, "gated", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer gated.Close()

	t.Setenv("HF_TOKEN", "hf_test")
	t.Setenv("HF_ENDPOINT", "https://hub.example")
	status, _, stderr := runCmd("inspect", gated.URL)
	assert.Equal(t, exitTrouble, status, "it could not be read")
	assert.Contains(t, stderr, "401")
	assert.Equal(t, "", got.Load(), "the token goes to the Hub alone")

	status, _, stderr = runCmd("inspect", "--header", "Authorization: Bearer hf_test", gated.URL)
	assert.Equal(t, exitOK, status, stderr)
	status, _, stderr = runCmd("validate", "-header=Authorization: Bearer hf_test", gated.URL+"/model.safetensors.index.json")
	assert.Equal(t, exitOK, status, stderr)

	t.Setenv("HF_ENDPOINT", gated.URL)
	status, out, stderr := runCmd("stats", gated.URL, "model.norm.weight")
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, out, "model.norm.weight")

	status, _, stderr = runCmd("inspect", "--header", "no colon", gated.URL)
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "Name: value")
}

func TestIsHub(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "")
	for u, want := range map[string]bool{
		"https://huggingface.co/org/m/resolve/main": true,
		"https://cdn-lfs.huggingface.co/x":          true,
		"https://hf.co/org/m":                       true,
		"https://nothuggingface.co/x":               false,
		"https://huggingface.co.evil.example/x":     false,
		"http://127.0.0.1:8080/x":                   false,
	} {
		assert.Equal(t, want, isHub(u), u)
	}
}

// TestRemoteHint: the next step for a request refused for want of
// credentials, from a server that answers 401 or 403, and none for any
// other error.
func TestRemoteHint(t *testing.T) {
	var code atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused", int(code.Load()))
	}))
	defer srv.Close()
	errFor := func(c int) error {
		code.Store(int64(c))
		_, err := checkpoint.Open(t.Context(), srv.URL+"/org/m/resolve/main/model.safetensors", checkpointOptions(srv.URL)...)
		require.Error(t, err)
		return err
	}
	requestHeaders = nil
	t.Cleanup(func() { requestHeaders = nil })

	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_ENDPOINT", srv.URL) // the server stands for the Hub
	assert.Equal(t, "set HF_TOKEN or pass --header 'Authorization: Bearer TOKEN'", remoteHint(errFor(401)))
	assert.Equal(t, "set HF_TOKEN or pass --header 'Authorization: Bearer TOKEN'", remoteHint(errFor(403)))
	assert.Equal(t, "", remoteHint(errFor(404)))
	assert.Equal(t, "", remoteHint(errFor(500)))
	assert.Equal(t, "", remoteHint(os.ErrNotExist))
	assert.Equal(t, "", remoteHint(nil))

	t.Setenv("HF_TOKEN", "hf_x")
	assert.Contains(t, remoteHint(errFor(403)), "check the token in HF_TOKEN")

	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_ENDPOINT", "https://hub.example") // not the Hub
	assert.Equal(t, "pass --header 'Authorization: Bearer TOKEN' (or the header the server wants)", remoteHint(errFor(401)))
	requestHeaders = headerFlags{"authorization: Bearer x"}
	assert.Equal(t, "check the token of the Authorization --header: the server refused it", remoteHint(errFor(401)))
}
