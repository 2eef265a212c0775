package remote

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileServer answers each request with handle, numbered from 1, and
// counts them.
func fileServer(t *testing.T, handle func(n int64, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int64) {
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle(count.Add(1), w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

func TestReadFile(t *testing.T) {
	const body = `{"architectures": ["LlamaForCausalLM"]}`
	var gotRange, gotAuth atomic.Value
	srv, count := fileServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		gotRange.Store(r.Header.Get("Range"))
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(body))
	})
	data, err := ReadFile(context.Background(), srv.Client(), srv.URL+"/config.json", 1000, RequestHeader("Authorization", "Bearer t"))
	require.NoError(t, err)
	assert.Equal(t, body, string(data))
	assert.Equal(t, int64(1), count.Load())
	assert.Equal(t, "", gotRange.Load(), "the whole object, not a range")
	assert.Equal(t, "Bearer t", gotAuth.Load(), "the options' headers")

	// Exactly the limit is allowed.
	data, err = ReadFile(context.Background(), nil, srv.URL, int64(len(body)))
	require.NoError(t, err)
	assert.Equal(t, body, string(data))
}

// TestReadFileNotFound: a 404 matches fs.ErrNotExist, names the URL, and
// is not retried; another status does not match it.
func TestReadFileNotFound(t *testing.T) {
	srv, count := fileServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	data, err := ReadFile(context.Background(), srv.Client(), srv.URL+"/model_index.json", 1000)
	assert.Nil(t, data)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	assert.ErrorContains(t, err, "404")
	assert.ErrorContains(t, err, srv.URL+"/model_index.json")
	assert.Equal(t, int64(1), count.Load(), "a 404 is not retried")

	forbidden, _ := fileServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gated", http.StatusForbidden)
	})
	_, err = ReadFile(context.Background(), forbidden.Client(), forbidden.URL, 1000)
	assert.ErrorContains(t, err, "403")
	assert.False(t, errors.Is(err, fs.ErrNotExist), "%v", err)
}

// TestReadFileTooLarge: a file over the limit is an error, whether the
// server says its size or not, and ReadFile reads no more than limit+1
// bytes of it: the servers here send that much and then stall until the
// request ends, so a read of one byte more would stall.
func TestReadFileTooLarge(t *testing.T) {
	const limit = 100
	for _, tc := range []struct {
		name   string
		length string // the Content-Length sent, or "" for a chunked body
	}{
		{"declared", strconv.FormatInt(1<<40, 10)},
		{"chunked", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, count := fileServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				if tc.length != "" {
					w.Header().Set("Content-Length", tc.length)
				}
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(strings.Repeat("x", limit+1)))
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			start := time.Now()
			data, err := ReadFile(context.Background(), srv.Client(), srv.URL, limit, StallTimeout(10*time.Second))
			assert.Nil(t, data)
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrStalled)
			assert.ErrorContains(t, err, "more than 100")
			assert.ErrorContains(t, err, srv.URL)
			assert.Less(t, time.Since(start), 5*time.Second, "no more than limit+1 bytes read: no stall")
			assert.Equal(t, int64(1), count.Load(), "too large is not retried")
		})
	}
}

// TestReadFileRetries: a 503 is retried, up to Retries times.
func TestReadFileRetries(t *testing.T) {
	srv, count := fileServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("{}"))
	})
	data, err := ReadFile(context.Background(), srv.Client(), srv.URL, 10, Retries(2))
	require.NoError(t, err)
	assert.Equal(t, "{}", string(data))
	assert.Equal(t, int64(3), count.Load(), "two failures and the success")

	count.Store(0)
	_, err = ReadFile(context.Background(), srv.Client(), srv.URL, 10, Retries(1))
	assert.ErrorContains(t, err, "503")
	assert.Equal(t, int64(2), count.Load(), "one try and one retry")

	// Stalls are retried too, and the last is the error.
	stalled, count := fileServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	_, err = ReadFile(context.Background(), stalled.Client(), stalled.URL, 10, Retries(1), StallTimeout(50*time.Millisecond))
	assert.ErrorIs(t, err, ErrStalled)
	assert.Equal(t, int64(2), count.Load())

	_, err = ReadFile(context.Background(), nil, srv.URL, 10, Retries(-1))
	assert.Error(t, err, "invalid options")
}

// TestReadAtContext: cancelling the context of ReadAtContext aborts the
// request in flight, which the server sees end, while the File's own
// context still reads.
func TestReadAtContext(t *testing.T) {
	data := zooFile(t)
	aborted := make(chan struct{})
	s := newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n != 2 {
			return false
		}
		<-r.Context().Done()
		close(aborted)
		return true
	})
	f, err := OpenFile(context.Background(), s.Client(), s.URL, StallTimeout(0), Retries(3))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	p := make([]byte, 8)
	start := time.Now()
	_, err = f.ReadAtContext(ctx, p, probeLen+100)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, s.URL)
	select {
	case <-aborted:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's request was not ended")
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, int64(2), s.count.Load(), "no retry after the context ended")

	// Under a context already done, nothing is sent.
	_, err = f.ReadAtContext(ctx, p, probeLen+200)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(2), s.count.Load())

	// The File's own context is untouched.
	n, err := f.ReadAt(p, probeLen+100)
	require.NoError(t, err)
	assert.Equal(t, data[probeLen+100:probeLen+108], p[:n])
	n, err = f.ReadAtContext(context.Background(), p, 16)
	require.NoError(t, err, "from the first request's bytes")
	assert.Equal(t, data[16:24], p[:n])
	assert.Equal(t, int64(3), s.count.Load())
}
