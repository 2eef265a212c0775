package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// corpus returns a file of the conformance corpus.
func corpus(t testing.TB, name string) []byte {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", name))
	require.NoError(t, err)
	return data
}

// serve serves the named corpus file with range requests, as object storage
// does, and counts the requests.
func serve(t *testing.T, name string) (*httptest.Server, []byte, *atomic.Int64) {
	data := corpus(t, name)
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, data, &count
}

// fast are options that make the zoo's failures quick.
var fast = []Option{StallTimeout(time.Second), Retries(2)}

func TestOpen(t *testing.T) {
	srv, data, count := serve(t, "valid/metadata_present.safetensors")
	r, err := Open(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, int64(1), count.Load(), "one range request for the size and the header")

	local, err := safetensors.NewReader(data)
	require.NoError(t, err)
	assert.Equal(t, local.Header(), r.Header())
	for _, name := range local.Names() {
		want, _ := local.Tensor(name)
		got, err := r.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	assert.Equal(t, int64(1), count.Load(), "the tensors were in the first 64 KiB")
}

// TestOpenReadOptions: Open passes its options to NewReaderAt.
func TestOpenReadOptions(t *testing.T) {
	hdr := `{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`
	data := append([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0}, hdr...)
	data = append(data, 7)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	r, err := Open(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, r.Names())
	_, err = Open(context.Background(), srv.Client(), srv.URL, ReadOptions(safetensors.Strict()))
	assert.ErrorIs(t, err, safetensors.ErrInvalidHeader)
}

// TestOpenLargeHeader reads a header larger than the first read: two range
// requests.
func TestOpenLargeHeader(t *testing.T) {
	srv, data, count := serve(t, "valid/many_5000.safetensors")
	require.Greater(t, len(data), probeLen)
	r, err := Open(context.Background(), nil, srv.URL) // the default client reaches httptest's server too
	require.NoError(t, err)
	defer r.Close()
	assert.Len(t, r.Names(), 5000)
	assert.Equal(t, int64(2), count.Load())
}

func TestOpenInvalid(t *testing.T) {
	srv, _, _ := serve(t, "invalid/layout_hole_4.safetensors")
	_, err := Open(context.Background(), srv.Client(), srv.URL)
	assert.ErrorIs(t, err, safetensors.ErrInvalidOffset)
	assert.Contains(t, err.Error(), srv.URL)

	var count atomic.Int64
	missing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		http.NotFound(w, r)
	}))
	defer missing.Close()
	_, err = Open(context.Background(), missing.Client(), missing.URL)
	assert.ErrorContains(t, err, "404")
	assert.Equal(t, int64(1), count.Load(), "a 404 is not retried")

	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(nil))
	}))
	defer empty.Close()
	_, err = Open(context.Background(), empty.Client(), empty.URL)
	assert.ErrorIs(t, err, safetensors.ErrHeaderTooSmall)
}

func TestReadAt(t *testing.T) {
	srv, data, count := serve(t, "valid/metadata_present.safetensors")
	f, err := OpenFile(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), f.Size())
	assert.True(t, f.Ranged())

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
	assert.Equal(t, int64(1), count.Load(), "the object is smaller than the first read")
	assert.Equal(t, int64(1), f.Requests())
}

// rangeServer serves data with range requests, as a correct server would,
// except for what misbehave changes in the response to request number n
// (1 for the first). It counts the requests and keeps their headers.
type rangeServer struct {
	*httptest.Server
	data      []byte
	count     atomic.Int64
	mu        sync.Mutex
	requests  []http.Header
	misbehave func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool
}

// response is what a rangeServer is about to send.
type response struct {
	status int
	header http.Header
	body   []byte
}

func newRangeServer(t *testing.T, data []byte, misbehave func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool) *rangeServer {
	s := &rangeServer{data: data, misbehave: misbehave}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *rangeServer) handle(w http.ResponseWriter, r *http.Request) {
	n := s.count.Add(1)
	s.mu.Lock()
	s.requests = append(s.requests, r.Header.Clone())
	s.mu.Unlock()
	resp := &response{status: http.StatusOK, header: http.Header{"Etag": {`"v1"`}}, body: s.data}
	if spec, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok {
		a, b, _ := strings.Cut(spec, "-")
		first, _ := strconv.Atoi(a)
		last, _ := strconv.Atoi(b)
		last = min(last, len(s.data)-1)
		resp.status = http.StatusPartialContent
		resp.header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(s.data)))
		resp.body = s.data[first : last+1]
	}
	if s.misbehave != nil && s.misbehave(n, w, r, resp) {
		return // it answered itself
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Length") == "" && resp.header["Content-Length"] == nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(resp.body)))
	}
	w.WriteHeader(resp.status)
	w.Write(resp.body)
}

// open opens the server's file and reads every tensor, and returns the
// first error.
func (s *rangeServer) open(opts ...Option) error {
	r, err := Open(context.Background(), s.Client(), s.URL, append(fast, opts...)...)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, name := range r.Names() {
		sr, err := r.TensorReader(name)
		if err != nil {
			return err
		}
		got, err := io.ReadAll(sr)
		if err != nil {
			return err
		}
		if local, _ := safetensors.NewReader(s.data); local != nil {
			want, _ := local.Tensor(name)
			if !bytes.Equal(want.Data, got) {
				return fmt.Errorf("tensor %s: wrong bytes", name)
			}
		}
	}
	return nil
}

// zooFile is a file whose header takes the first request and whose
// tensors the later ones.
func zooFile(t *testing.T) []byte {
	var buf bytes.Buffer
	data := make([]byte, probeLen+1000)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	require.NoError(t, safetensors.Write(&buf, []safetensors.Tensor{
		{Name: "a", DType: safetensors.U8, Shape: []uint64{uint64(len(data))}, Data: data},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{100}, Data: data[:100]},
	}, nil))
	return buf.Bytes()
}

// TestZoo reads from servers that misbehave after the first request, each
// in one way, and checks the verdict: an error that matches a sentinel,
// never wrong bytes.
func TestZoo(t *testing.T) {
	data := zooFile(t)
	later := func(f func(resp *response)) func(int64, http.ResponseWriter, *http.Request, *response) bool {
		return func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
			if n > 1 {
				f(resp)
			}
			return false
		}
	}
	shift := func(resp *response, dFirst, dLast, dTotal int) {
		first, last, total, _ := parseContentRange(resp.header.Get("Content-Range"))
		resp.header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", int(first)+dFirst, int(last)+dLast, int(total)+dTotal))
	}
	for _, tc := range []struct {
		name      string
		misbehave func(int64, http.ResponseWriter, *http.Request, *response) bool
		want      error
	}{
		{"Content-Range start", later(func(resp *response) { shift(resp, 1, 0, 0); resp.body = resp.body[1:] }), ErrBadResponse},
		{"Content-Range start and end", later(func(resp *response) { shift(resp, 1, 1, 0) }), ErrBadResponse},
		{"Content-Range end", later(func(resp *response) { shift(resp, 0, -1, 0); resp.body = resp.body[1:] }), ErrBadResponse},
		{"Content-Range total", later(func(resp *response) { shift(resp, 0, 0, 1) }), ErrChanged},
		{"Content-Range missing", later(func(resp *response) { resp.header.Del("Content-Range") }), ErrBadResponse},
		{"Content-Range garbage", later(func(resp *response) { resp.header.Set("Content-Range", "bytes 1-x/3") }), ErrBadResponse},
		{"short body", later(func(resp *response) {
			resp.header.Set("Content-Length", strconv.Itoa(len(resp.body)))
			resp.body = resp.body[:len(resp.body)/2]
		}), io.ErrUnexpectedEOF},
		{"long body", later(func(resp *response) { resp.body = append(bytes.Clone(resp.body), 1, 2, 3) }), ErrBadResponse},
		{"long body, chunked", func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("Content-Range", resp.header.Get("Content-Range"))
			w.Header().Set("Etag", `"v1"`)
			w.WriteHeader(http.StatusPartialContent)
			w.Write(resp.body)
			w.(http.Flusher).Flush()
			w.Write([]byte("more"))
			return true
		}, ErrBadResponse},
		{"200 instead of 206", later(func(resp *response) {
			resp.status = http.StatusOK
			resp.header.Del("Content-Range")
			resp.body = data
		}), ErrBadResponse},
		{"ETag changed", later(func(resp *response) { resp.header.Set("Etag", `"v2"`) }), ErrChanged},
		{"ETag gone", later(func(resp *response) { resp.header.Del("Etag") }), ErrChanged},
		{"412", later(func(resp *response) {
			resp.status = http.StatusPreconditionFailed
			resp.body = nil
		}), ErrChanged},
		{"416 with another size", later(func(resp *response) {
			resp.status = http.StatusRequestedRangeNotSatisfiable
			resp.header.Set("Content-Range", "bytes */10")
			resp.body = nil
		}), ErrChanged},
		{"5xx for ever", later(func(resp *response) {
			resp.status = http.StatusServiceUnavailable
			resp.body = nil
		}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRangeServer(t, data, tc.misbehave)
			err := s.open()
			require.Error(t, err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			} else {
				assert.ErrorContains(t, err, "503")
			}
			assert.Contains(t, err.Error(), s.URL)
			assert.NotContains(t, err.Error(), "wrong bytes")
		})
	}
}

// TestZooFirstRequest: the same misbehaviours on the first request, which
// gives the size and the header.
func TestZooFirstRequest(t *testing.T) {
	data := zooFile(t)
	first := func(f func(resp *response)) func(int64, http.ResponseWriter, *http.Request, *response) bool {
		return func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
			f(resp)
			return false
		}
	}
	for _, tc := range []struct {
		name      string
		misbehave func(int64, http.ResponseWriter, *http.Request, *response) bool
		want      error
	}{
		{"Content-Range start", first(func(resp *response) {
			resp.header.Set("Content-Range", fmt.Sprintf("bytes 1-%d/%d", probeLen, len(data)))
		}), ErrBadResponse},
		{"Content-Range end", first(func(resp *response) {
			resp.header.Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", probeLen-2, len(data)))
			resp.body = resp.body[:probeLen-1]
		}), ErrBadResponse},
		{"Content-Range total unknown", first(func(resp *response) {
			resp.header.Set("Content-Range", fmt.Sprintf("bytes 0-%d/*", probeLen-1))
		}), ErrBadResponse},
		{"Content-Range missing", first(func(resp *response) { resp.header.Del("Content-Range") }), ErrBadResponse},
		{"short body", first(func(resp *response) {
			resp.header.Set("Content-Length", strconv.Itoa(len(resp.body)))
			resp.body = resp.body[:100]
		}), io.ErrUnexpectedEOF},
		{"416 for a non-empty object", first(func(resp *response) {
			resp.status = http.StatusRequestedRangeNotSatisfiable
			resp.header.Set("Content-Range", "bytes */5")
			resp.body = nil
		}), ErrBadResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRangeServer(t, data, tc.misbehave)
			_, err := Open(context.Background(), s.Client(), s.URL, fast...)
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorContains(t, err, s.URL)
		})
	}
}

// TestPinnedVersion replaces the object between requests with one of the
// same size, on servers with each kind of validator.
func TestPinnedVersion(t *testing.T) {
	v1 := zooFile(t)
	v2 := bytes.Clone(v1)
	v2[len(v2)-200] ^= 0xff // the same header, another byte of "a"
	for _, tc := range []struct {
		name     string
		validate func(w http.ResponseWriter, version int)
		detected bool // whether the change is detected
		ifRange  bool // whether If-Range is sent
	}{
		{"strong ETag", func(w http.ResponseWriter, v int) { w.Header().Set("Etag", fmt.Sprintf(`"v%d"`, v)) }, true, true},
		{"Last-Modified", func(w http.ResponseWriter, v int) {}, true, true},
		{"weak ETag and Last-Modified", func(w http.ResponseWriter, v int) { w.Header().Set("Etag", fmt.Sprintf(`W/"v%d"`, v)) }, true, true},
		{"no validator", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var replaced atomic.Bool
			var ifRange atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				data, version, mod := v1, 1, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
				if replaced.Load() {
					data, version, mod = v2, 2, mod.Add(time.Hour)
				}
				if r.Header.Get("If-Range") != "" {
					ifRange.Add(1)
				}
				if tc.validate == nil {
					mod = time.Time{}
				} else {
					tc.validate(w, version)
				}
				http.ServeContent(w, r, "", mod, bytes.NewReader(data))
			}))
			defer srv.Close()
			r, err := Open(context.Background(), srv.Client(), srv.URL, fast...)
			require.NoError(t, err)
			_, err = r.Tensor("b")
			require.NoError(t, err)
			replaced.Store(true)
			got, err := r.Tensor("a")
			if tc.detected {
				require.ErrorIs(t, err, ErrChanged)
				assert.Contains(t, err.Error(), srv.URL)
			} else {
				require.NoError(t, err)
				local, _ := safetensors.NewReader(v2)
				want, _ := local.Tensor("a")
				assert.Equal(t, want.Data, got.Data, "without a validator the new bytes come")
			}
			assert.Equal(t, tc.ifRange, ifRange.Load() > 0)
		})
	}
}

// TestSizeChanged: a file replaced by one of another size is detected even
// without validators.
func TestSizeChanged(t *testing.T) {
	v1 := zooFile(t)
	var replaced atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data := v1
		if replaced.Load() {
			data = append(bytes.Clone(v1), 0)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	r, err := Open(context.Background(), srv.Client(), srv.URL, fast...)
	require.NoError(t, err)
	replaced.Store(true)
	_, err = r.Tensor("a")
	assert.ErrorIs(t, err, ErrChanged)
	assert.ErrorContains(t, err, "size")
}

// TestRetries: 5xx, 429 and reset connections are retried.
func TestRetries(t *testing.T) {
	data := zooFile(t)
	fail := func(k int64, f func(w http.ResponseWriter)) func(int64, http.ResponseWriter, *http.Request, *response) bool {
		return func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
			if n > 1 && n <= 1+k {
				f(w)
				return true
			}
			return false
		}
	}
	reset := func(w http.ResponseWriter) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
	}
	for _, tc := range []struct {
		name     string
		fail     func(w http.ResponseWriter)
		minDelay time.Duration
	}{
		{"500", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, 0},
		{"503", func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }, 0},
		{"429 Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}, time.Second},
		{"reset", reset, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRangeServer(t, data, fail(1, tc.fail))
			start := time.Now()
			require.NoError(t, s.open())
			assert.GreaterOrEqual(t, time.Since(start), tc.minDelay)
			assert.Equal(t, int64(4), s.count.Load(), "the probe, the failure, and two tensors")
		})
	}

	// Too many failures: the last one is the error.
	s := newRangeServer(t, data, fail(10, func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway) }))
	err := s.open(Retries(3))
	assert.ErrorContains(t, err, "502")
	assert.Equal(t, int64(5), s.count.Load(), "the probe and four tries")

	// A Retry-After beyond the cap is not waited for.
	s = newRangeServer(t, data, fail(10, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	start := time.Now()
	err = s.open()
	assert.ErrorContains(t, err, "429")
	assert.ErrorContains(t, err, "retry after 1h0m0s")
	assert.Less(t, time.Since(start), time.Minute, "far less than the hour asked for")

	// Not-retryable statuses are not retried.
	s = newRangeServer(t, data, fail(10, func(w http.ResponseWriter) { w.WriteHeader(http.StatusForbidden) }))
	assert.ErrorContains(t, s.open(), "403")
	assert.Equal(t, int64(2), s.count.Load())
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, now.Add(time.Minute).Format(http.TimeFormat): time.Minute,
		now.Add(-time.Minute).Format(http.TimeFormat): 0,
	} {
		got, ok := retryAfter(v, now)
		assert.True(t, ok, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "-1", "soon", "1.5"} {
		_, ok := retryAfter(v, now)
		assert.False(t, ok, v)
	}
}

// TestStalls: a server that stops sending, before its headers or within
// its body, makes the read fail after the stall timeout, whether the
// client is the default one or the caller's; one that sends slowly but
// steadily is read to the end however long it takes.
func TestStalls(t *testing.T) {
	data := zooFile(t)
	block := make(chan struct{})
	defer close(block)
	stallHeader := func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n == 1 {
			return false
		}
		select {
		case <-block:
		case <-r.Context().Done():
		}
		return true
	}
	stallBody := func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n == 1 {
			return false
		}
		w.Header().Set("Content-Range", resp.header.Get("Content-Range"))
		w.Header().Set("Content-Length", strconv.Itoa(len(resp.body)))
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(http.StatusPartialContent)
		w.Write(resp.body[:len(resp.body)/2])
		w.(http.Flusher).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
		return true
	}
	for name, misbehave := range map[string]func(int64, http.ResponseWriter, *http.Request, *response) bool{
		"header": stallHeader, "body": stallBody,
	} {
		t.Run(name, func(t *testing.T) {
			s := newRangeServer(t, data, misbehave)
			start := time.Now()
			err := s.open(StallTimeout(100*time.Millisecond), Retries(1))
			assert.ErrorIs(t, err, ErrStalled)
			assert.Contains(t, err.Error(), s.URL)
			assert.Less(t, time.Since(start), 20*time.Second, "no hang: the stall timeout ended it")
			assert.Equal(t, int64(3), s.count.Load(), "the probe, and the stalled read twice")
		})
	}

	// The probe stalls too, with the default client.
	s := newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		return stallHeader(2, w, r, resp)
	})
	_, err := Open(context.Background(), nil, s.URL, StallTimeout(100*time.Millisecond), Retries(0))
	assert.ErrorIs(t, err, ErrStalled)

	// Slow but steady: 20 pieces 25 ms apart, with a stall timeout of 250 ms.
	s = newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n == 1 {
			return false
		}
		w.Header().Set("Content-Range", resp.header.Get("Content-Range"))
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(http.StatusPartialContent)
		piece := (len(resp.body) + 19) / 20
		for b := resp.body; len(b) > 0; b = b[min(piece, len(b)):] {
			time.Sleep(25 * time.Millisecond)
			w.Write(b[:min(piece, len(b))])
			w.(http.Flusher).Flush()
		}
		return true
	})
	r, err := Open(context.Background(), s.Client(), s.URL, StallTimeout(250*time.Millisecond), Retries(0))
	require.NoError(t, err)
	start := time.Now()
	_, err = r.Tensor("a")
	require.NoError(t, err)
	assert.Greater(t, time.Since(start), 500*time.Millisecond, "longer than the stall timeout")
}

// TestContext: cancelling the context ends a stalled read at once, and no
// retry follows.
func TestContext(t *testing.T) {
	data := zooFile(t)
	s := newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n == 1 {
			return false
		}
		<-r.Context().Done()
		return true
	})
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Open(ctx, s.Client(), s.URL, StallTimeout(0))
	require.NoError(t, err)
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = r.Tensor("a")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(2), s.count.Load())

	// WithContext reads under another context.
	f, err := OpenFile(ctx, s.Client(), s.URL)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, f)
	s = newRangeServer(t, data, nil)
	ctx2, cancel2 := context.WithCancel(context.Background())
	f, err = OpenFile(ctx2, s.Client(), s.URL)
	require.NoError(t, err)
	cancel2()
	_, err = f.ReadAt(make([]byte, 8), probeLen+100)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = f.WithContext(context.Background()).ReadAt(make([]byte, 8), probeLen+100)
	assert.NoError(t, err)
}

// TestNoRange reads the header from a server that ignores Range, such as
// Python's http.server; tensors past the first bytes give ErrNoRange.
func TestNoRange(t *testing.T) {
	for _, name := range []string{"valid/metadata_present.safetensors", "valid/many_5000.safetensors"} {
		data := corpus(t, name)
		var count atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			count.Add(1)
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data)
		}))
		defer srv.Close()
		r, err := Open(context.Background(), srv.Client(), srv.URL)
		require.NoError(t, err, name)
		local, _ := safetensors.NewReader(data)
		assert.Equal(t, local.Header(), r.Header())
		assert.Equal(t, int64(1), count.Load())
		last := r.Header().Tensors[len(r.Header().Tensors)-1]
		if len(data) > probeLen {
			_, err = r.Tensor(last.Name)
			assert.ErrorIs(t, err, ErrNoRange)
			assert.ErrorContains(t, err, srv.URL)
			assert.Equal(t, 1, strings.Count(err.Error(), "safetensors: "), "the prefix once: %v", err)
		} else {
			_, err = r.Tensor(last.Name) // within the bytes read
			assert.NoError(t, err)
		}
	}

	// No Content-Length: the size is unknown.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("x"))
		w.(http.Flusher).Flush()
		w.Write([]byte("y"))
	}))
	defer srv.Close()
	_, err := Open(context.Background(), srv.Client(), srv.URL)
	assert.ErrorIs(t, err, ErrNoRange)

	// A header length beyond the body: the read stops at the body's end.
	var huge bytes.Buffer
	huge.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0})
	huge.WriteString(strings.Repeat(" ", 100))
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(huge.Bytes())
	}))
	defer srv2.Close()
	_, err = Open(context.Background(), srv2.Client(), srv2.URL)
	assert.ErrorIs(t, err, safetensors.ErrHeaderTooLarge)
}

// hugeFile serves a file whose valid header declares one tensor that
// fills an object of size bytes, and generated bytes after the header.
func hugeServer(t *testing.T, size int64) (*httptest.Server, int64) {
	var hdr string
	n := int64(0)
	for range 4 {
		s := size - 8 - n
		hdr = fmt.Sprintf(`{"big":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, s, s)
		n = int64(len(hdr))
	}
	head := append([]byte{byte(n), byte(n >> 8), 0, 0, 0, 0, 0, 0}, hdr...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spec, _ := strings.CutPrefix(r.Header.Get("Range"), "bytes=")
		a, b, _ := strings.Cut(spec, "-")
		first, _ := strconv.ParseInt(a, 10, 64)
		last, _ := strconv.ParseInt(b, 10, 64)
		last = min(last, size-1, first+1<<20) // a server may send less than asked
		// A client that refuses the answer closes the connection unread,
		// which fails this write at once on Linux; under Wine the write
		// can wait on the closed connection, and srv.Close with it, until a
		// deadline ends it.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(2 * time.Second))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		w.WriteHeader(http.StatusPartialContent)
		body := make([]byte, last-first+1)
		for i := range body {
			if o := first + int64(i); o < int64(len(head)) {
				body[i] = head[o]
			} else {
				body[i] = byte(o)
			}
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, size - int64(len(head))
}

// TestHugeDeclaredSize: a server that says the file is a terabyte, or
// 2^60 bytes, with a valid header to match, gets ErrTensorTooLarge from
// Tensor, not an allocation of that size, and TensorReader reads pieces.
func TestHugeDeclaredSize(t *testing.T) {
	for _, size := range []int64{1 << 40, 1 << 60} {
		srv, tensorLen := hugeServer(t, size)
		r, err := Open(context.Background(), srv.Client(), srv.URL)
		require.NoError(t, err)
		_, err = r.Tensor("big")
		assert.ErrorIs(t, err, safetensors.ErrTensorTooLarge)
		sr, err := r.TensorReader("big")
		require.NoError(t, err)
		assert.Equal(t, tensorLen, sr.Size())
		p := make([]byte, 4)
		_, err = sr.ReadAt(p, tensorLen-4)
		require.NoError(t, err)
		o := size - 4
		assert.Equal(t, []byte{byte(o), byte(o + 1), byte(o + 2), byte(o + 3)}, p)
		// The server sends 1 MiB + 1 where 2 MiB are asked for: an error,
		// not a short read taken for the whole.
		_, err = sr.ReadAt(make([]byte, 2<<20), 0)
		assert.ErrorIs(t, err, ErrBadResponse)
	}
}

// TestRedirect follows a redirect to the object's real place, as the
// Hugging Face Hub redirects to its content delivery network, sending the
// headers of Header to the first server.
func TestRedirect(t *testing.T) {
	srv, data, count := serve(t, "valid/metadata_present.safetensors")
	var auth atomic.Value
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		http.Redirect(w, r, srv.URL+"/blob", http.StatusFound)
	}))
	defer hub.Close()
	r, err := Open(context.Background(), hub.Client(), hub.URL+"/repo/resolve/main/model.safetensors", RequestHeader("Authorization", "Bearer hf_x"))
	require.NoError(t, err)
	assert.Equal(t, "Bearer hf_x", auth.Load())
	local, _ := safetensors.NewReader(data)
	assert.Equal(t, local.Header(), r.Header())
	assert.Equal(t, int64(1), count.Load())
}

// TestRedirectPreconditions: the Hub answers a file's URL with a redirect
// whose ETag is its own; a precondition on the object's ETag must not make
// it fail (as If-Match would), and the range requests that follow are
// pinned all the same.
func TestRedirectPreconditions(t *testing.T) {
	data := zooFile(t)
	cdn := newRangeServer(t, data, nil)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const hubETag = `"pointer"`
		w.Header().Set("Etag", hubETag)
		if m := r.Header.Get("If-Match"); m != "" && m != hubETag {
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		http.Redirect(w, r, cdn.URL, http.StatusFound)
	}))
	defer hub.Close()
	r, err := Open(context.Background(), hub.Client(), hub.URL+"/org/m/resolve/main/model.safetensors", fast...)
	require.NoError(t, err)
	_, err = r.Tensor("a")
	require.NoError(t, err)
	assert.Equal(t, int64(2), cdn.count.Load())
	assert.Equal(t, `"v1"`, cdn.requests[1].Get("If-Range"))
}

// TestWeakETag: a weak ETag is not sent (If-Range compares strongly) but
// compared: a change is detected.
func TestWeakETag(t *testing.T) {
	data := zooFile(t)
	s := newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		resp.header.Set("Etag", fmt.Sprintf(`W/"v%d"`, min(n, 2)))
		return false
	})
	r, err := Open(context.Background(), s.Client(), s.URL, fast...)
	require.NoError(t, err)
	_, err = r.Tensor("a")
	assert.ErrorIs(t, err, ErrChanged)
	assert.ErrorContains(t, err, `W/"v2"`)
	assert.Empty(t, s.requests[1].Get("If-Range"))
	assert.Empty(t, s.requests[1].Get("If-Match"))
}

// TestHeader sends a bearer token; without it the server refuses.
func TestHeader(t *testing.T) {
	data := zooFile(t)
	s := newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, "gated", http.StatusUnauthorized)
			return true
		}
		return false
	})
	err := s.open()
	assert.ErrorContains(t, err, "401")
	require.NoError(t, s.open(RequestHeader("Authorization", "Bearer secret")))
	for _, h := range s.requests[2:] { // after the refusal and the probe
		assert.Equal(t, `"v1"`, h.Get("If-Range"), "the version is pinned")
	}
	_, err = Open(context.Background(), nil, s.URL, RequestHeader("Bad Key", "x"))
	assert.Error(t, err)
	_, err = Open(context.Background(), nil, s.URL, RequestHeader("X", "a\r\nb: c"))
	assert.Error(t, err)
}

// TestConcurrentReads reads tensors from many goroutines, each under a
// context of its own, over HTTP/1.1 and over HTTP/2 (as the Hugging Face
// Hub and content delivery networks serve): -race checks the File and the
// reuse of its exchanges (their requests and contexts) from request to
// request.
func TestConcurrentReads(t *testing.T) {
	data := corpus(t, "valid/many_5000.safetensors")
	local, _ := safetensors.NewReader(data)
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			var protos sync.Map
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				protos.Store(r.Proto, true)
				http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
			}))
			if proto == "HTTP/2.0" {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			r, err := Open(context.Background(), srv.Client(), srv.URL)
			require.NoError(t, err)
			names := r.Names()
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					for i := g; i < len(names); i += 8 * 50 {
						got, err := r.TensorContext(ctx, names[i])
						want, _ := local.Tensor(names[i])
						if err != nil || !bytes.Equal(got.Data, want.Data) {
							errs <- errors.Join(err, fmt.Errorf("tensor %s", names[i]))
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			_, ok := protos.Load(proto)
			assert.True(t, ok, "the requests were %s", proto)
		})
	}
}
