package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rawServer answers HTTP/1.1 requests on the loopback interface with
// bytes written by hand, so that a test says exactly what a server sends:
// well-formed or not, in one piece or not.
type rawServer struct {
	URL    string
	data   []byte
	ln     net.Listener
	answer func(s *rawServer, c net.Conn, q rawRequest) bool // false closes the connection

	requests atomic.Int64 // answered or not
	conns    atomic.Int64 // accepted
	mu       sync.Mutex
	heads    []string // the requests' heads, in order
	open     map[net.Conn]bool
	wg       sync.WaitGroup
}

// A rawRequest is a request a rawServer received.
type rawRequest struct {
	n           int64 // its number, from 1 (the probe)
	conn        int64 // its connection's number, from 1
	onConn      int   // its number on its connection, from 1
	first, last int64 // the range asked for, last within the data
	head        string
}

// newRawServer starts a rawServer of data: answer, nil for ok, answers
// each request.
func newRawServer(t *testing.T, data []byte, answer func(s *rawServer, c net.Conn, q rawRequest) bool) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if answer == nil {
		answer = func(s *rawServer, c net.Conn, q rawRequest) bool { return s.ok(c, q, "") }
	}
	s := &rawServer{URL: "http://" + ln.Addr().String() + "/m", data: data, ln: ln, answer: answer, open: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.open[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(c, s.conns.Add(1))
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *rawServer) serve(c net.Conn, conn int64) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for on := 1; ; on++ {
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		q := rawRequest{n: s.requests.Add(1), conn: conn, onConn: on, head: head.String()}
		s.mu.Lock()
		s.heads = append(s.heads, q.head)
		s.mu.Unlock()
		q.first, q.last = 0, int64(len(s.data))-1
		for _, line := range strings.Split(q.head, "\r\n") {
			if v, ok := strings.CutPrefix(line, "Range: bytes="); ok {
				a, b, _ := strings.Cut(v, "-")
				q.first, _ = strconv.ParseInt(a, 10, 64)
				q.last, _ = strconv.ParseInt(b, 10, 64)
				q.last = min(q.last, int64(len(s.data))-1)
			}
		}
		if !s.answer(s, c, q) {
			return
		}
	}
}

// ok answers q as a correct server does, with a strong ETag, and extra
// header lines (each ending with CR LF).
func (s *rawServer) ok(c net.Conn, q rawRequest, extra string) bool {
	_, err := io.WriteString(c, s.head(q, extra)+string(s.data[q.first:q.last+1]))
	return err == nil
}

// head is the head of a correct 206 answer to q.
func (s *rawServer) head(q rawRequest, extra string) string {
	return fmt.Sprintf("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\nEtag: \"v1\"\r\n%s\r\n",
		q.first, q.last, len(s.data), q.last-q.first+1, extra)
}

// testData is an object of 200 KiB.
func testData() []byte {
	data := make([]byte, 200<<10)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	return data
}

// clients returns a client whose range reads go over the package's own
// connections, and one whose reads go through net/http (its cookie jar
// makes it ineligible), each with a transport of its own.
func clients(t *testing.T) map[string]*http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	direct, plain := &http.Transport{}, &http.Transport{}
	t.Cleanup(direct.CloseIdleConnections)
	t.Cleanup(plain.CloseIdleConnections)
	return map[string]*http.Client{"direct": {Transport: direct}, "net/http": {Transport: plain, Jar: jar}}
}

// TestDirectServers reads a range from servers that answer in every odd or
// hostile way, over the package's own connections and through net/http,
// and checks that both give the same verdict: the bytes, or an error that
// matches the same sentinel.
func TestDirectServers(t *testing.T) {
	data := testData()
	const off, n = probeLen + 1000, 50000
	later := func(f func(s *rawServer, c net.Conn, q rawRequest) bool) func(*rawServer, net.Conn, rawRequest) bool {
		return func(s *rawServer, c net.Conn, q rawRequest) bool {
			if q.n == 1 {
				return s.ok(c, q, "")
			}
			return f(s, c, q)
		}
	}
	write := func(c net.Conn, parts ...string) bool {
		for _, p := range parts {
			if _, err := io.WriteString(c, p); err != nil {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		name   string
		answer func(s *rawServer, c net.Conn, q rawRequest) bool
		want   error // nil: the bytes
		// requests is how many the server gets, the probe included;
		// 0 for any.
		requests int64
	}{
		{"103 before 206", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n") && s.ok(c, q, "")
		}), nil, 2},
		{"chunked 206", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			body := s.data[q.first : q.last+1]
			h := strings.Replace(s.head(q, "Transfer-Encoding: chunked\r\n"), fmt.Sprintf("Content-Length: %d\r\n", len(body)), "", 1)
			return write(c, h, fmt.Sprintf("%x\r\n", 1000), string(body[:1000]), "\r\n", fmt.Sprintf("%x\r\n", len(body)-1000), string(body[1000:]), "\r\n0\r\n\r\n")
		}), nil, 2},
		{"Content-Length not the range", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			q.last--
			h := strings.Replace(s.head(q, ""), fmt.Sprintf("bytes %d-%d/", q.first, q.last), fmt.Sprintf("bytes %d-%d/", q.first, q.last+1), 1)
			write(c, h, string(s.data[q.first:q.last+1]))
			return false
		}), ErrBadResponse, 2},
		{"Content-Range not the range", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			q.first++
			return s.ok(c, q, "")
		}), ErrBadResponse, 2},
		{"Content-Range total", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, strings.Replace(s.head(q, ""), fmt.Sprintf("/%d", len(s.data)), fmt.Sprintf("/%d", len(s.data)+1), 1), string(s.data[q.first:q.last+1]))
		}), ErrChanged, 2},
		{"no Content-Range", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, strings.Replace(s.head(q, ""), fmt.Sprintf("Content-Range: bytes %d-%d/%d\r\n", q.first, q.last, len(s.data)), "", 1), string(s.data[q.first:q.last+1]))
		}), ErrBadResponse, 2},
		{"ETag changed", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, strings.Replace(s.head(q, ""), `"v1"`, `"v2"`, 1), string(s.data[q.first:q.last+1]))
		}), ErrChanged, 2},
		{"Last-Modified changed", func(s *rawServer, c net.Conn, q rawRequest) bool {
			date := "Thu, 01 Jan 2026 00:00:00 GMT"
			if q.n > 1 {
				date = "Fri, 02 Jan 2026 00:00:00 GMT"
			}
			return s.ok(c, q, "Last-Modified: "+date+"\r\n")
		}, ErrChanged, 2},
		{"Last-Modified the same", func(s *rawServer, c net.Conn, q rawRequest) bool {
			return s.ok(c, q, "Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n")
		}, nil, 2},
		{"ETag twice", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return s.ok(c, q, "ETag: \"v2\"\r\n")
		}), nil, 2}, // net/http's Get takes the first
		{"200 of the whole object", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nEtag: \"v1\"\r\n\r\n", len(s.data)), string(s.data))
		}), ErrBadResponse, 2},
		{"412", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, "HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n")
		}), ErrChanged, 2},
		{"503 with Retry-After, then 206", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			if q.n == 2 {
				return write(c, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 4\r\n\r\nbusy")
			}
			return s.ok(c, q, "")
		}), nil, 3},
		{"404", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone")
		}), ErrStatus, 2},
		{"head over the buffer", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return s.ok(c, q, "X-Pad: "+strings.Repeat("p", directBufSize)+"\r\n")
		}), nil, 2},
		{"garbage status line", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			write(c, "HTTP/1.1 2o6 Fine\r\n\r\n")
			return false
		}), nil, 0},
		{"bare LF", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return write(c, strings.ReplaceAll(s.head(q, ""), "\r\n", "\n"), string(s.data[q.first:q.last+1]))
		}), nil, 2},
		{"closed mid-body, then resumed", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			if q.n == 2 {
				write(c, s.head(q, ""), string(s.data[q.first:q.first+1000]))
				return false
			}
			if q.first != off+1000 {
				return write(c, "HTTP/1.1 500 Not Resumed\r\nContent-Length: 0\r\n\r\n")
			}
			return s.ok(c, q, "")
		}), nil, 3},
		{"extra bytes after the body", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return s.ok(c, q, "") && write(c, "HTTP/1.1 200 OK\r\n\r\n")
		}), nil, 2},
		{"Connection: close", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			s.ok(c, q, "Connection: close\r\n")
			return false
		}), nil, 2},
		{"HTTP/1.0", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			write(c, strings.Replace(s.head(q, ""), "HTTP/1.1", "HTTP/1.0", 1), string(s.data[q.first:q.last+1]))
			return false
		}), nil, 2},
		{"gzip", later(func(s *rawServer, c net.Conn, q rawRequest) bool {
			return s.ok(c, q, "Content-Encoding: gzip\r\n") // taken as it is, as net/http takes it
		}), nil, 2},
	} {
		for name, client := range clients(t) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				s := newRawServer(t, data, tc.answer)
				f, err := OpenFile(context.Background(), client, s.URL, Retries(1), StallTimeout(5*time.Second))
				require.NoError(t, err)
				before := directRequests.Load()
				p := make([]byte, n)
				_, err = f.ReadAt(p, off)
				if name == "direct" {
					assert.Greater(t, directRequests.Load(), before, "over the package's own connections")
				} else {
					assert.Equal(t, directRequests.Load(), before, "through net/http")
				}
				switch {
				case tc.want != nil:
					assert.ErrorIs(t, err, tc.want)
				case tc.requests == 0:
					assert.Error(t, err)
				default:
					require.NoError(t, err)
					assert.True(t, bytes.Equal(data[off:off+n], p), "the bytes")
				}
				if err != nil {
					assert.Contains(t, err.Error(), s.URL)
				}
				if tc.requests > 0 {
					assert.Equal(t, tc.requests, s.requests.Load())
				}
			})
		}
	}
}

// TestDirectReuse: a connection is used again only after a response read
// exactly to its end, from a server that keeps it open; a connection
// closed while idle is replaced, whether the close is seen before the
// next request or only when it fails, transparently.
func TestDirectReuse(t *testing.T) {
	data := testData()
	read := func(t *testing.T, s *rawServer, reads int) *File {
		f, err := OpenFile(context.Background(), &http.Client{Transport: &http.Transport{}}, s.URL, Retries(0))
		require.NoError(t, err)
		for i := range reads {
			p := make([]byte, 1000)
			_, err := f.ReadAt(p, probeLen+int64(i)*1000)
			require.NoError(t, err, "read %d", i)
			require.Equal(t, data[probeLen+i*1000:probeLen+(i+1)*1000], p)
			// Bytes a server sends after a response while the connection
			// is idle are seen then; those that come as a request takes
			// the connection are taken for the start of its response, as
			// net/http takes them.
			time.Sleep(20 * time.Millisecond)
		}
		return f
	}
	for _, tc := range []struct {
		name   string
		extra  string // in the head of each answer after the probe
		after  string // after the body
		reused bool
	}{
		{"kept alive", "", "", true},
		{"Connection: close", "Connection: close\r\n", "", false},
		{"extra bytes", "", "junk", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRawServer(t, data, func(s *rawServer, c net.Conn, q rawRequest) bool {
				if q.n == 1 {
					return s.ok(c, q, "")
				}
				if !s.ok(c, q, tc.extra) {
					return false
				}
				if tc.after != "" {
					io.WriteString(c, tc.after)
				}
				return tc.extra == "" // a server that says close closes
			})
			f := read(t, s, 4)
			want := int64(1 + 4) // the probe's, and one for each read
			if tc.reused {
				want = 2
			}
			assert.Equal(t, want, s.conns.Load(), "connections")
			assert.Equal(t, int64(5), f.Requests())
		})
	}

	// The server closes each connection after its second request, unread:
	// the next read on it fails before any byte of its response, and is
	// made again on a new connection, uncounted by Retries.
	s := newRawServer(t, data, func(s *rawServer, c net.Conn, q rawRequest) bool {
		if q.onConn == 2 {
			return false
		}
		return s.ok(c, q, "")
	})
	f := read(t, s, 3)
	assert.Equal(t, int64(1+3), s.conns.Load(), "the probe's; the first read's, closed at the second; the second's and third's")
	assert.Equal(t, int64(4), f.Requests(), "the transparent retry is not counted")

	// The server closes the connection once it is idle: the close is seen
	// before the next read, which dials a new one.
	s = newRawServer(t, data, func(s *rawServer, c net.Conn, q rawRequest) bool {
		s.ok(c, q, "")
		return q.n == 1
	})
	f = read(t, s, 1)
	time.Sleep(100 * time.Millisecond)
	p := make([]byte, 10)
	_, err := f.ReadAt(p, probeLen+5000)
	require.NoError(t, err)
	assert.Equal(t, data[probeLen+5000:probeLen+5010], p)
	assert.Equal(t, int64(3), s.requests.Load(), "no request on the closed connection")

	// Once the server is gone, so are the connections to it, their
	// goroutines and their pool.
	s = newRawServer(t, data, nil)
	read(t, s, 2)
	addr := strings.TrimPrefix(s.URL[:strings.LastIndex(s.URL, "/")], "http://")
	require.Equal(t, 1, openConns(addr), "idle")
	s.close()
	require.Eventually(t, func() bool { return openConns(addr) == 0 }, 10*time.Second, 10*time.Millisecond)
}

// openConns returns how many connections of the package's own to addr are
// open, and checks that a pool is kept only with connections.
func openConns(addr string) int {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	n := 0
	for k, p := range pools.m {
		if p.conns <= 0 {
			panic("a pool kept without connections")
		}
		if k.addr == addr {
			n += p.conns
		}
	}
	return n
}

// TestDirectStallsAndCancel: a server that never answers, or stops within
// the body, makes the read fail with ErrStalled after the stall timeout;
// a context cancelled mid-body ends the read at once with its cause, on
// both paths.
func TestDirectStallsAndCancel(t *testing.T) {
	data := testData()
	// hold answers nothing more until the client closes the connection,
	// or the server does.
	hold := func(c net.Conn) bool {
		io.Copy(io.Discard, c)
		return false
	}
	for _, tc := range []struct {
		name   string
		answer func(s *rawServer, c net.Conn, q rawRequest) bool
	}{
		{"no answer", func(s *rawServer, c net.Conn, q rawRequest) bool {
			return hold(c)
		}},
		{"mid-body", func(s *rawServer, c net.Conn, q rawRequest) bool {
			io.WriteString(c, s.head(q, "")+string(s.data[q.first:q.first+100]))
			return hold(c)
		}},
	} {
		for name, client := range clients(t) {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				answer := func(s *rawServer, c net.Conn, q rawRequest) bool {
					if q.n == 1 {
						return s.ok(c, q, "")
					}
					return tc.answer(s, c, q)
				}
				s := newRawServer(t, data, answer)
				f, err := OpenFile(context.Background(), client, s.URL, StallTimeout(100*time.Millisecond), Retries(1))
				require.NoError(t, err)
				start := time.Now()
				_, err = f.ReadAt(make([]byte, 1000), probeLen)
				assert.ErrorIs(t, err, ErrStalled)
				assert.Contains(t, err.Error(), s.URL)
				assert.Less(t, time.Since(start), 10*time.Second)
				assert.Equal(t, int64(3), s.requests.Load(), "the probe, and the stalled read twice")

				s = newRawServer(t, data, answer)
				f, err = OpenFile(context.Background(), client, s.URL, StallTimeout(0))
				require.NoError(t, err)
				ctx, cancel := context.WithCancelCause(context.Background())
				cause := errors.New("rank restarted")
				time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
				start = time.Now()
				_, err = f.ReadAtContext(ctx, make([]byte, 1000), probeLen)
				assert.ErrorIs(t, err, cause)
				assert.Less(t, time.Since(start), 10*time.Second)
				assert.Equal(t, int64(2), s.requests.Load(), "no retry after the context ended")
			})
		}
	}
}

// TestDirectRequest: the package's own request is the one net/http sends,
// field for field: the same request line, Host, User-Agent, caller's
// headers (values trimmed), Range and If-Range, and no Accept-Encoding.
func TestDirectRequest(t *testing.T) {
	data := testData()
	heads := map[string][]string{}
	for name, client := range clients(t) {
		s := newRawServer(t, data, nil)
		f, err := OpenFile(context.Background(), client, s.URL+"/x%20y?a=1&b=%2F", RequestHeader("Authorization", "Bearer t"),
			RequestHeader("X-Two", " a "), RequestHeader("X-Two", "b\t"), RequestHeader("Accept", "*/*"), RequestHeader("X-Empty", ""))
		require.NoError(t, err)
		_, err = f.ReadAt(make([]byte, 10), probeLen+7)
		require.NoError(t, err)
		s.mu.Lock()
		lines := strings.Split(strings.TrimSuffix(s.heads[1], "\r\n\r\n"), "\r\n")
		s.mu.Unlock()
		host := "Host: " + strings.TrimPrefix(s.URL[:strings.LastIndex(s.URL, "/")], "http://")
		require.Contains(t, lines, host)
		lines[slices.Index(lines, host)] = "Host: the server"
		slices.Sort(lines[1:])
		heads[name] = lines
	}
	assert.Equal(t, heads["net/http"], heads["direct"])
	assert.Contains(t, heads["direct"], "Range: bytes=65543-65552")
	assert.Contains(t, heads["direct"], `If-Range: "v1"`)
	assert.Contains(t, heads["direct"], "User-Agent: Go-http-client/1.1")
	assert.Contains(t, heads["direct"], "X-Two: a")
	assert.Contains(t, heads["direct"], "X-Empty: ")

	// A blank User-Agent sends none, as with net/http; the caller's
	// replaces net/http's.
	for _, ua := range []string{"", "loader/1.0"} {
		s := newRawServer(t, data, nil)
		f, err := OpenFile(context.Background(), nil, s.URL, RequestHeader("User-Agent", ua))
		require.NoError(t, err)
		require.NotNil(t, f.direct.Load())
		_, err = f.ReadAt(make([]byte, 10), probeLen)
		require.NoError(t, err)
		s.mu.Lock()
		probe, read := s.heads[0], s.heads[1]
		s.mu.Unlock()
		assert.Equal(t, strings.Contains(probe, "User-Agent"), strings.Contains(read, "User-Agent"), "%q", ua)
		assert.Equal(t, ua != "", strings.Contains(read, "User-Agent: "+ua+"\r\n"), "%q", ua)
	}
}

// TestDirectTLS reads over TLS, with httptest's TLS server and its
// client, over the package's own connections, which take the client's
// root certificates.
func TestDirectTLS(t *testing.T) {
	data := testData()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Etag", `"v1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	f, err := OpenFile(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	before := directRequests.Load()
	for i := range 3 {
		p := make([]byte, 5000)
		_, err = f.ReadAt(p, probeLen+int64(i)*5000)
		require.NoError(t, err)
		assert.Equal(t, data[probeLen+i*5000:probeLen+(i+1)*5000], p)
	}
	assert.Equal(t, int64(3), directRequests.Load()-before)
	assert.Equal(t, int64(2), conns.Load(), "the probe's, and one for the three reads")

	// A client that does not trust the server's certificate fails the
	// probe, and never gets this far; one that trusts it for the probe
	// only is not possible: the pool's TLS configuration is the
	// transport's.
	_, err = OpenFile(context.Background(), &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}, srv.URL, Retries(0))
	assert.Error(t, err)
}

// TestDirectEligible: which clients and servers get range reads over the
// package's own connections.
func TestDirectEligible(t *testing.T) {
	data := testData()
	s := newRawServer(t, data, nil)
	jar, _ := cookiejar.New(nil)
	proxyURL, _ := url.Parse("http://127.0.0.1:1")
	for _, tc := range []struct {
		name   string
		client *http.Client
		want   bool
	}{
		{"nil (DefaultClient)", nil, true},
		{"zero transport", &http.Client{Transport: &http.Transport{}}, true},
		{"nil transport", &http.Client{}, true},
		{"cookie jar", &http.Client{Jar: jar}, false},
		{"timeout", &http.Client{Timeout: time.Hour}, false},
		{"another RoundTripper", &http.Client{Transport: roundTripFunc(http.DefaultTransport.RoundTrip)}, false},
		{"no keep-alive", &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, false},
		{"connections per host", &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4}}, false},
		{"DialTLSContext", &http.Client{Transport: &http.Transport{DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, errors.New("no TLS here")
		}}}, false},
		{"proxy", &http.Client{Transport: &http.Transport{Proxy: func(r *http.Request) (*url.URL, error) {
			if r.URL.Host == proxyURL.Host {
				return nil, nil
			}
			return proxyURL, nil
		}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client
			if tc.name == "proxy" {
				// The proxy is the server itself, which answers a request
				// for any URL.
				client.Transport.(*http.Transport).Proxy = http.ProxyURL(mustParse(t, s.URL))
			}
			f, err := OpenFile(context.Background(), client, s.URL)
			require.NoError(t, err)
			assert.Equal(t, tc.want, f.direct.Load() != nil)
		})
	}

	// Redirected probe: through the client.
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.URL, http.StatusFound)
	}))
	defer hub.Close()
	f, err := OpenFile(context.Background(), hub.Client(), hub.URL)
	require.NoError(t, err)
	assert.Nil(t, f.direct.Load(), "redirected")

	// HTTP/2: through the client.
	h2 := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	h2.EnableHTTP2 = true
	h2.StartTLS()
	defer h2.Close()
	f, err = OpenFile(context.Background(), h2.Client(), h2.URL)
	require.NoError(t, err)
	assert.Nil(t, f.direct.Load(), "HTTP/2")
}

func mustParse(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// TestDirectRedirectLater: an object that moves after the probe (a 3xx to
// a range request) is read through the client from then on, which follows
// the redirect.
func TestDirectRedirectLater(t *testing.T) {
	data := testData()
	other := newRawServer(t, data, nil)
	s := newRawServer(t, data, func(s *rawServer, c net.Conn, q rawRequest) bool {
		if q.n == 1 {
			return s.ok(c, q, "")
		}
		_, err := io.WriteString(c, "HTTP/1.1 307 Temporary Redirect\r\nLocation: "+other.URL+"\r\nContent-Length: 0\r\n\r\n")
		return err == nil
	})
	f, err := OpenFile(context.Background(), &http.Client{Transport: &http.Transport{}}, s.URL)
	require.NoError(t, err)
	require.NotNil(t, f.direct.Load())
	for range 2 {
		p := make([]byte, 100)
		_, err = f.ReadAt(p, probeLen)
		require.NoError(t, err)
		assert.Equal(t, data[probeLen:probeLen+100], p)
	}
	assert.Nil(t, f.direct.Load())
	assert.Equal(t, int64(1+2+1), s.requests.Load(), "the probe, the redirect and the request through the client that follows it, the second read through the client")
	assert.Equal(t, int64(2), other.requests.Load())
}

// TestParseHead parses heads, without allocating, and judges them as
// net/http's parser does where it says they are plain.
func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		head string
		ok   bool
	}{
		{"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n", true},
		{"HTTP/1.1 206\r\ncontent-length:10\r\n\r\n", true},
		{"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Length: 10\r\n\r\n", false},
		{"HTTP/1.1 206 Partial Content\r\nContent-Length: +10\r\n\r\n", false},
		{"HTTP/1.1 206 Partial Content\r\n Folded: x\r\n\r\n", false},
		{"HTTP/1.1 206 Partial Content\r\nX: a\r\n b\r\n\r\n", false},
		{"HTTP/1.1 206 Partial Content\r\nBad Key: x\r\n\r\n", false},
		{"HTTP/1.1 206 Partial Content\r\nX: a\x00b\r\n\r\n", false},
		{"HTTP/1.1 206 Partial Content\nX: y\n\n", false},
		{"HTTP/1.0 206 Partial Content\r\n\r\n", false},
		{"HTTP/1.1 20 Partial Content\r\n\r\n", false},
		{"HTTP/1.1 2066\r\n\r\n", false},
		{"HTTP/1.1 099\r\n\r\n", false},
	} {
		end := headEnd([]byte(tc.head), 0)
		require.Equal(t, len(tc.head), end, "%q", tc.head)
		h := parseHead([]byte(tc.head))
		assert.Equal(t, tc.ok, h.ok, "%q", tc.head)
		checkHead(t, []byte(tc.head))
	}
	head := []byte("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 10\r\nETag: \"x\"\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\nConnection: keep-alive\r\n\r\n")
	o := &object{size: 100, etag: `"x"`}
	x := &exchange{o: o, off: 0, end: 9}
	var ok bool
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		h := parseHead(head[:headEnd(head, 0)])
		ok = h.ok && h.expected(x, 10)
	}))
	assert.True(t, ok)
}

// checkHead checks what parseHead says of head, a response head, against
// net/http's parser: where parseHead finds it plain, net/http reads it,
// with the same status and the same values of the fields that matter.
func checkHead(t testing.TB, head []byte) {
	end := headEnd(head, 0)
	if end == 0 {
		return
	}
	h := parseHead(head[:end])
	first, last, total, ok := parseContentRange(h.contentRange)
	f2, l2, t2, ok2 := parseContentRange(string(h.contentRange))
	if first != f2 || last != l2 || total != t2 || ok != ok2 {
		t.Fatalf("%q: parseContentRange of bytes and of a string differ", h.contentRange)
	}
	if !h.ok {
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(head[:end])), nil)
	if err != nil {
		t.Fatalf("%q: plain to parseHead, but net/http: %v", head[:end], err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode != h.status:
		t.Fatalf("%q: status %d, net/http %d", head[:end], h.status, resp.StatusCode)
	case resp.Header.Get("Content-Range") != string(h.contentRange),
		resp.Header.Get("Etag") != string(h.etag),
		resp.Header.Get("Last-Modified") != string(h.lastModified):
		t.Fatalf("%q: fields differ from net/http's %v", head[:end], resp.Header)
	case resp.Close && !h.close && h.contentLength >= 0:
		t.Fatalf("%q: net/http would close the connection", head[:end])
	case len(resp.TransferEncoding) > 0:
		t.Fatalf("%q: net/http sees a Transfer-Encoding", head[:end])
	case h.status == http.StatusPartialContent && h.contentLength >= 0 && resp.ContentLength != h.contentLength:
		t.Fatalf("%q: Content-Length %d, net/http %d", head[:end], h.contentLength, resp.ContentLength)
	case h.contentLength < 0 && resp.Header.Get("Content-Length") != "":
		t.Fatalf("%q: net/http sees a Content-Length", head[:end])
	case !h.encoded && resp.Header.Get("Content-Encoding") != "" && !strings.EqualFold(resp.Header.Get("Content-Encoding"), "identity"):
		t.Fatalf("%q: net/http sees a Content-Encoding", head[:end])
	}
}

// FuzzResponseHead: parseHead never panics, and where it finds a head
// plain, net/http's parser reads the same.
func FuzzResponseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
		"HTTP/1.1 206 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 206 OK\r\nContent-Encoding: identity\r\nLast-Modified: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
		"HTTP/1.1 206 OK\r\nContent-Range: bytes */5\r\n\r\n",
		"HTTP/1.0 206 OK\r\n\r\n",
		"HTTP/1.1 206 OK\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkHead(t, b)
	})
}

// TestDirectResponseHeaderTimeout: the transport's ResponseHeaderTimeout
// bounds the wait for a response's head on the package's own connections
// as on net/http's, whatever the stall timeout.
func TestDirectResponseHeaderTimeout(t *testing.T) {
	data := testData()
	for _, direct := range []bool{true, false} {
		s := newRawServer(t, data, func(s *rawServer, c net.Conn, q rawRequest) bool {
			if q.n == 1 {
				return s.ok(c, q, "")
			}
			io.Copy(io.Discard, c)
			return false
		})
		client := &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}}
		if !direct {
			client.Jar, _ = cookiejar.New(nil)
		}
		f, err := OpenFile(context.Background(), client, s.URL, StallTimeout(0), Retries(1))
		require.NoError(t, err)
		assert.Equal(t, direct, f.direct.Load() != nil)
		start := time.Now()
		_, err = f.ReadAt(make([]byte, 10), probeLen)
		assert.ErrorContains(t, err, "timeout awaiting response headers")
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.Equal(t, int64(3), s.requests.Load(), "retried")
	}
}

// TestDirectDialError: a server gone after the probe gives a dial error,
// which names the request and is not retried, on both paths.
func TestDirectDialError(t *testing.T) {
	data := testData()
	for name, client := range clients(t) {
		t.Run(name, func(t *testing.T) {
			s := newRawServer(t, data, func(s *rawServer, c net.Conn, q rawRequest) bool {
				s.ok(c, q, "")
				return false // no connection to reuse
			})
			f, err := OpenFile(context.Background(), client, s.URL, Retries(3))
			require.NoError(t, err)
			assert.Equal(t, name == "direct", f.direct.Load() != nil)
			s.close()
			_, err = f.ReadAt(make([]byte, 10), probeLen)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
			assert.Equal(t, "dial", op.Op)
			assert.ErrorContains(t, err, "GET "+s.URL+" bytes 65536-65545")
			assert.Equal(t, int64(2), f.Requests(), "the probe and one try")
		})
	}
}

// TestDirectTakenAtOnce: a connection made idle is taken by the next
// request at once, while its goroutine may still be done with the last
// one. Goroutines read in turns under a context that cannot end and one
// that can, so that a request with a context to watch takes a connection
// that one without just left: each gets its bytes, and the race detector
// sees the goroutine read only the watch it was handed (it read the
// connection's field, which the next request sets, in the first version).
func TestDirectTakenAtOnce(t *testing.T) {
	data := zooFile(t)
	s := newRangeServer(t, data, nil)
	f, err := OpenFile(context.Background(), s.Client(), s.URL)
	require.NoError(t, err)
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := directRequests.Load()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 100)
			for i := range 200 {
				ctx := context.Background()
				if (g+i)%2 == 1 {
					ctx = cancelable
				}
				off := int64(probeLen + (g*200+i)%(len(data)-probeLen-len(p)))
				if _, err := f.ReadAtContext(ctx, p, off); err != nil {
					t.Errorf("goroutine %d, read %d: %v", g, i, err)
					return
				}
				if !bytes.Equal(p, data[off:off+int64(len(p))]) {
					t.Errorf("goroutine %d, read %d: other bytes", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(800), directRequests.Load()-before, "requests over the package's own connections")
}
