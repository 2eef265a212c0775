package rangeserver

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServe asks for a file whole, for ranges of it, for one past its end
// and for a file it does not have, with net/http's client, and checks the
// answers against the file's bytes; Record gives the requests.
func TestServe(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	s := Start(t, map[string][]byte{"/f": data})
	get := func(path, rng string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
		require.NoError(t, err)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, body
	}
	var resp *http.Response
	var body []byte
	reqs := s.Record(func() { resp, body = get("/f?x=1", "") })
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, data, body)
	assert.Equal(t, ETag, resp.Header.Get("ETag"))
	assert.Equal(t, []Request{{Path: "/f", First: 0, Last: -1}}, reqs)

	for _, tc := range []struct {
		rng         string
		first, last int
	}{{"bytes=10-19", 10, 19}, {"bytes=990-", 990, 999}, {"bytes=0-5000", 0, 999}, {"bytes=999-999", 999, 999}} {
		reqs := s.Record(func() { resp, body = get("/f", tc.rng) })
		assert.Equal(t, http.StatusPartialContent, resp.StatusCode, tc.rng)
		assert.Equal(t, data[tc.first:tc.last+1], body, tc.rng)
		assert.Equal(t, "bytes "+itoa(tc.first)+"-"+itoa(tc.last)+"/1000", resp.Header.Get("Content-Range"), tc.rng)
		assert.Equal(t, []Request{{Path: "/f", First: int64(tc.first), Last: int64(tc.last)}}, reqs, tc.rng)
	}
	for _, rng := range []string{"bytes=1000-1001", "bytes=5-4", "bytes=x-1", "lines=1-2"} {
		resp, body = get("/f", rng)
		assert.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, rng)
		assert.Equal(t, "bytes */1000", resp.Header.Get("Content-Range"), rng)
		assert.Empty(t, body)
	}
	resp, _ = get("/g", "")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// TestNoAllocations: the server allocates nothing per request. The client
// here, a raw connection writing a request it holds and reading the answer
// into a buffer it holds, allocates nothing of its own, so what
// AllocsPerRun counts is the server's, and the network's: the same
// exchange with a server that answers every request with the same bytes,
// and does nothing else, counts the network's alone (none on Linux).
func TestNoAllocations(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	s := Start(t, map[string][]byte{"/f": data})
	req := []byte("GET /f HTTP/1.1\r\nHost: x\r\nIf-Range: \"1\"\r\nRange: bytes=100-199\r\n\r\n")
	want := "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 100-199/1000\r\nContent-Length: 100\r\nEtag: \"1\"\r\n\r\n" + string(data[100:200])
	allocs := func(addr string) float64 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		got := make([]byte, len(want))
		exchange := func() {
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
		}
		exchange()
		require.Equal(t, want, string(got))
		n := testing.AllocsPerRun(200, exchange)
		assert.Equal(t, want, string(got))
		return n
	}

	// The server that always gives the same answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf, answer := make([]byte, len(req)), []byte(want)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	}()
	network := allocs(ln.Addr().String())
	assert.Equal(t, network, allocs(s.URL[len("http://"):]))
}
