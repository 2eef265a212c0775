package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serve serves the named corpus file with range requests, as object storage
// does, and counts the requests.
func serve(t *testing.T, name string) (*httptest.Server, []byte, *int) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "conformance", name))
	require.NoError(t, err)
	var mu sync.Mutex
	count := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		count++
		mu.Unlock()
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, data, &count
}

func TestRemote(t *testing.T) {
	srv, data, count := serve(t, "valid/metadata_present.safetensors")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, srv.Client(), srv.URL, []string{"w"}))
	r, err := safetensors.NewReader(data)
	require.NoError(t, err)
	w, _ := r.Tensor("w")
	assert.Equal(t, srv.URL+": 208 bytes, 2 tensors, header read in 1 requests\n"+
		fmt.Sprintf("w F32 [2 2]: % x\n", w.Data[:8])+
		"1 requests in all\n", out.String())
	assert.Equal(t, 1, *count, "one range request for the header, which holds the small tensors too")
}

// TestRemoteLargeHeader reads a header larger than the first read: two
// range requests.
func TestRemoteLargeHeader(t *testing.T) {
	srv, _, count := serve(t, "valid/many_5000.safetensors")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, srv.Client(), srv.URL, nil))
	assert.Contains(t, out.String(), "5000 tensors, header read in 2 requests")
	assert.Equal(t, 2, *count)
}

func TestRemoteInvalid(t *testing.T) {
	srv, _, _ := serve(t, "invalid/layout_hole_4.safetensors")
	err := run(context.Background(), &bytes.Buffer{}, srv.Client(), srv.URL, nil)
	assert.True(t, errors.Is(err, safetensors.ErrInvalidOffset), "%v", err)

	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	assert.Error(t, run(context.Background(), &bytes.Buffer{}, missing.Client(), missing.URL, nil))
}

// TestRemoteToken sends the token as a bearer token, as HF_TOKEN does for
// the Hugging Face Hub.
func TestRemoteToken(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "conformance", "valid", "metadata_present.safetensors"))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer hf_secret" {
			http.Error(w, "Access to this model is restricted", http.StatusUnauthorized)
			return
		}
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	err = run(context.Background(), &bytes.Buffer{}, srv.Client(), srv.URL, nil)
	assert.ErrorContains(t, err, "401")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, srv.Client(), srv.URL, []string{"w"}, remote.RequestHeader("Authorization", "Bearer hf_secret")))
	assert.Contains(t, out.String(), "2 tensors")
}
