package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/rangeserver"
)

// TestReadSlice reads selections of a remote file into the caller's buffer
// with Reader.ReadSlice and compares them with Tensor.Slice of the file in
// memory, counting the requests (one for a contiguous selection, one a
// MiB for runs close together); and a context cancelled while the request
// is in flight aborts it.
func TestReadSlice(t *testing.T) {
	const rows, cols = 1024, 1024
	m := safetensors.Tensor{Name: "w", DType: safetensors.BF16, Shape: []uint64{rows, cols}, Data: make([]byte, rows*cols*2)}
	for i := range m.Data {
		m.Data[i] = byte(i*7 + i>>11)
	}
	var file bytes.Buffer
	require.NoError(t, safetensors.Write(&file, []safetensors.Tensor{m}, nil))
	s := newRangeServer(t, file.Bytes(), nil)
	ctx := context.Background()
	r, err := Open(ctx, s.Client(), s.URL)
	require.NoError(t, err)
	defer r.Close()

	dst := make([]byte, len(m.Data))
	for _, tc := range []struct {
		sel      []safetensors.Selector
		requests int64
	}{
		{nil, 1},
		{[]safetensors.Selector{safetensors.Range(100, 300)}, 1},
		// 1024 runs of 1 KiB, 2 KiB apart: 512 to a MiB.
		{[]safetensors.Selector{safetensors.All(), safetensors.Range(512, 1024)}, 2},
		// 342 runs of 2 bytes, 6 KiB apart: 171 to a MiB.
		{[]safetensors.Selector{safetensors.RangeStep(1, 1024, 3), safetensors.AtFromEnd(1)}, 2},
	} {
		want, err := m.Slice(tc.sel...)
		require.NoError(t, err)
		before := s.count.Load()
		n, err := r.ReadSlice(ctx, "w", dst, tc.sel...)
		require.NoError(t, err, "%v", tc.sel)
		assert.Equal(t, want.AppendTo(nil), dst[:n], "%v", tc.sel)
		assert.Equal(t, tc.requests, s.count.Load()-before, "%v", tc.sel)
	}

	// A request in flight, aborted by the context.
	stalled := newRangeServer(t, file.Bytes(), func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		if n == 1 {
			return false
		}
		<-r.Context().Done()
		return true
	})
	r2, err := Open(ctx, stalled.Client(), stalled.URL, StallTimeout(0))
	require.NoError(t, err)
	defer r2.Close()
	cctx, cancel := context.WithCancelCause(ctx)
	cause := errors.New("rank restarted")
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	_, err = r2.ReadSlice(cctx, "w", dst, safetensors.All(), safetensors.Range(0, 512))
	require.ErrorIs(t, err, cause)
	assert.Contains(t, err.Error(), `tensor "w"`)
	assert.Equal(t, int64(2), stalled.count.Load(), "no retry after the context ended")
}

// TestReadSliceAllocs: a read into the caller's buffer over HTTP
// allocates nothing: ReadSlice of a whole tensor (one request) and of half
// its columns (two), under a context that never ends and under one that
// can be cancelled, against a server that allocates nothing
// (rangeserver), so that the count is the client's. The range requests go
// over the package's own connections (direct.go). For comparison, the log
// gives what the same requests cost with net/http alone at its most
// frugal: an *http.Request for each, made beforehand and reused, with its
// Range header's value made for each request.
func TestReadSliceAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	const rows, cols = 1024, 1024
	m := safetensors.Tensor{Name: "w", DType: safetensors.BF16, Shape: []uint64{rows, cols}, Data: make([]byte, rows*cols*2)}
	for i := range m.Data {
		m.Data[i] = byte(i*7 + i>>11)
	}
	var file bytes.Buffer
	require.NoError(t, safetensors.Write(&file, []safetensors.Tensor{m}, nil))
	s := rangeserver.Start(t, map[string][]byte{"/m.safetensors": file.Bytes()})
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	background := context.Background()
	cancelable, cancel := context.WithCancel(background)
	defer cancel()
	r, err := Open(background, client, s.URL+"/m.safetensors")
	require.NoError(t, err)
	defer r.Close()

	dst := make([]byte, len(m.Data))
	for _, tc := range []struct {
		name     string
		sel      []safetensors.Selector
		requests int
	}{
		{"whole", nil, 1},
		{"columns", []safetensors.Selector{safetensors.All(), safetensors.Range(512, 1024)}, 2},
	} {
		want, err := m.Slice(tc.sel...)
		require.NoError(t, err)
		sent := s.Record(func() {
			n, err := r.ReadSlice(background, "w", dst, tc.sel...)
			require.NoError(t, err)
			require.Equal(t, want.AppendTo(nil), dst[:n], tc.name)
		})
		require.Len(t, sent, tc.requests, tc.name)
		for _, ctx := range []struct {
			name string
			ctx  context.Context
		}{{"Background", background}, {"cancelable", cancelable}} {
			// net/http alone: the same requests, made beforehand.
			reqs := make([]*http.Request, len(sent))
			ranges := make([][]string, len(sent))
			for i, q := range sent {
				reqs[i], err = http.NewRequestWithContext(ctx.ctx, http.MethodGet, s.URL+q.Path, nil)
				require.NoError(t, err)
				ranges[i] = []string{""}
				reqs[i].Header["Range"] = ranges[i]
				reqs[i].Header["If-Range"] = []string{rangeserver.ETag}
			}
			plainRun := func() {
				for i, req := range reqs {
					var b [48]byte
					ranges[i][0] = string(strconv.AppendInt(append(strconv.AppendInt(append(b[:0], "bytes="...), sent[i].First, 10), '-'), sent[i].Last, 10))
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(resp.Body, dst[:sent[i].Last-sent[i].First+1]); err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
				}
			}
			remoteRun := func() {
				if _, err := r.ReadSlice(ctx.ctx, "w", dst, tc.sel...); err != nil {
					t.Fatal(err)
				}
			}
			// The fewest of three measurements each, taken in turns: the
			// counts are the process's, and net/http's connection
			// goroutines (and Windows' network poller) may add one now
			// and then.
			plain, withRemote := math.Inf(1), math.Inf(1)
			for range 3 {
				plain = min(plain, testing.AllocsPerRun(100, plainRun))
				withRemote = min(withRemote, testing.AllocsPerRun(100, remoteRun))
			}
			t.Logf("%s, %s context: %v allocations with remote, %v with net/http alone, for %d requests", tc.name, ctx.name, withRemote, plain, len(sent))
			assert.Zero(t, withRemote, "%s, %s context", tc.name, ctx.name)
		}
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRequestContext: the context and header of each request are the
// caller's of that request, though requests, their contexts and headers
// are reused from read to read: its values and deadline reach the
// transport, and a cookie jar's cookies do not pile up.
func TestRequestContext(t *testing.T) {
	data := zooFile(t)
	s := newRangeServer(t, data, func(n int64, w http.ResponseWriter, r *http.Request, resp *response) bool {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "1"})
		return false
	})
	type key struct{}
	type seen struct {
		value    any
		deadline time.Time
		cookie   []string
	}
	var got []seen
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		d, _ := r.Context().Deadline()
		got = append(got, seen{r.Context().Value(key{}), d, r.Header["Cookie"]})
		return s.Client().Transport.RoundTrip(r)
	})}
	f, err := OpenFile(context.Background(), client, s.URL)
	require.NoError(t, err)
	deadline := time.Now().Add(time.Hour)
	one, cancel := context.WithDeadline(context.WithValue(context.Background(), key{}, "one"), deadline)
	defer cancel()
	two := context.WithValue(context.Background(), key{}, "two")
	buf := make([]byte, 8)
	for _, ctx := range []context.Context{one, two, one, two} {
		_, err := f.ReadAtContext(ctx, buf, probeLen+100)
		require.NoError(t, err)
	}
	want := []seen{{nil, time.Time{}, nil}} // the probe
	for range 2 {
		want = append(want, seen{"one", deadline, []string{"session=1"}}, seen{"two", time.Time{}, []string{"session=1"}})
	}
	assert.Equal(t, want, got)
}
