package remote

import (
	"bytes"
	"errors"
	"io"
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

// serve serves the named corpus file with range requests, as object storage
// does, and counts the requests.
func serve(t *testing.T, name string) (*httptest.Server, []byte, *atomic.Int64) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", name))
	require.NoError(t, err)
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, data, &count
}

func TestOpen(t *testing.T) {
	srv, data, count := serve(t, "valid/metadata_present.safetensors")
	r, err := Open(srv.Client(), srv.URL)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, int64(2), count.Load(), "HEAD and one range request for the header")

	local, err := safetensors.NewReader(data)
	require.NoError(t, err)
	assert.Equal(t, local.Header(), r.Header())
	for _, name := range local.Names() {
		want, _ := local.Tensor(name)
		got, err := r.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	assert.Equal(t, int64(4), count.Load(), "one more request per tensor")
}

// TestOpenLargeHeader reads a header larger than the first read: two range
// requests.
func TestOpenLargeHeader(t *testing.T) {
	srv, _, count := serve(t, "valid/many_5000.safetensors")
	r, err := Open(nil, srv.URL) // the default client reaches httptest's server too
	require.NoError(t, err)
	defer r.Close()
	assert.Len(t, r.Names(), 5000)
	assert.Equal(t, int64(3), count.Load())
}

func TestOpenInvalid(t *testing.T) {
	srv, _, _ := serve(t, "invalid/layout_hole_4.safetensors")
	_, err := Open(srv.Client(), srv.URL)
	assert.True(t, errors.Is(err, safetensors.ErrInvalidOffset), "%v", err)
	assert.Contains(t, err.Error(), srv.URL)

	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	_, err = Open(missing.Client(), missing.URL)
	assert.ErrorContains(t, err, "404")
}

func TestReadAt(t *testing.T) {
	srv, data, _ := serve(t, "valid/metadata_present.safetensors")
	f, err := Stat(srv.Client(), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), f.Size())

	p := make([]byte, 10)
	n, err := f.ReadAt(p, 5)
	assert.NoError(t, err)
	assert.Equal(t, data[5:15], p[:n])

	n, err = f.ReadAt(p, int64(len(data))-4) // the object ends within p
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, data[len(data)-4:], p[:n])

	n, err = f.ReadAt(p, int64(len(data)))
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)
	_, err = f.ReadAt(p, -1)
	assert.Error(t, err)
	n, err = f.ReadAt(nil, 0)
	assert.NoError(t, err)
	assert.Zero(t, n)
}

// TestServerIgnoringRange refuses a server that answers a range request with
// the whole object.
func TestServerIgnoringRange(t *testing.T) {
	data := make([]byte, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(data)
	}))
	defer srv.Close()
	f, err := Stat(srv.Client(), srv.URL)
	require.NoError(t, err)
	_, err = f.ReadAt(make([]byte, 8), 0)
	assert.ErrorContains(t, err, "200 OK")
}

// TestStatWithoutHead reads a file from a server that refuses HEAD, as URLs
// signed for GET alone do: the size comes from a ranged GET.
func TestStatWithoutHead(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", "valid", "metadata_present.safetensors"))
	require.NoError(t, err)
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		if r.Method == http.MethodHead {
			http.Error(w, "signature does not match", http.StatusForbidden)
			return
		}
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	r, err := Open(srv.Client(), srv.URL)
	require.NoError(t, err)
	defer r.Close()
	assert.Len(t, r.Names(), 2)
	assert.Equal(t, int64(3), count.Load(), "HEAD, GET of byte 0, GET of the header")

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Range", "bytes 0-0/*")
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte{0})
	}))
	defer bad.Close()
	_, err = Stat(bad.Client(), bad.URL)
	assert.ErrorContains(t, err, "gives no size")
}
