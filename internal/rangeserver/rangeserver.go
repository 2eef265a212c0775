// Package rangeserver serves files over HTTP/1.1 on the loopback
// interface, with range requests, allocating nothing of its own per
// request (nor does Linux's network poller): a test or a benchmark that
// counts the allocations of an HTTP client against it
// (testing.AllocsPerRun, allocs/op) counts the client's alone, where a
// net/http server in the same process would add its own, more than the
// client's.
//
// It answers GET only: a file whole (200 OK), a single range "bytes=A-B"
// or "bytes=A-" of it (206 Partial Content, with Content-Range; 416 Range
// Not Satisfiable past its end), 404 Not Found for any other path, each
// with a strong ETag, over kept-alive connections. It is for tests: it
// trusts its client, and a request over 8 KiB ends the connection.
package rangeserver

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"
)

// ETag is the entity tag of every file the server serves.
const ETag = `"1"`

// A Server serves files; see the package's documentation.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT, without a
	// slash at its end: a file is at URL+path.
	URL string

	files map[string][]byte // by path, such as "/m.safetensors"
	ln    net.Listener
	wg    sync.WaitGroup

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	recording bool
	requests  []Request
}

// A Request is a request the server answered, as Record gives it.
type Request struct {
	Path string
	// First and Last are the range asked for, the bytes [First, Last];
	// Last is -1 for the whole file.
	First, Last int64
}

// Start starts a server of files, by path ("/m.safetensors"), on the
// loopback interface, closed at the end of the test.
func Start(tb testing.TB, files map[string][]byte) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), files: files, ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(s.Close)
	return s
}

// Close stops the server and closes its connections, and returns once
// they are all closed.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Record calls f and returns the requests the server answered while it
// ran, in the order it answered them.
func (s *Server) Record(f func()) []Request {
	s.mu.Lock()
	s.recording, s.requests = true, nil
	s.mu.Unlock()
	f()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recording = false
	return s.requests
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers the requests of one connection until it ends.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	buf := make([]byte, 8<<10)
	out := make([]byte, 0, 256)
	n := 0
	for {
		end := bytes.Index(buf[:n], []byte("\r\n\r\n"))
		for end < 0 {
			if n == len(buf) {
				return
			}
			m, err := c.Read(buf[n:])
			if err != nil {
				return
			}
			n += m
			end = bytes.Index(buf[:n], []byte("\r\n\r\n"))
		}
		var body []byte
		out, body = s.answer(out[:0], buf[:end])
		if _, err := c.Write(out); err != nil {
			return
		}
		if len(body) > 0 {
			if _, err := c.Write(body); err != nil {
				return
			}
		}
		n = copy(buf, buf[end+4:n])
	}
}

// answer appends to out the response's status line and header for the
// request whose line and header are req, and returns its body.
func (s *Server) answer(out, req []byte) ([]byte, []byte) {
	line, headers, _ := bytes.Cut(req, []byte("\r\n"))
	method, rest, _ := bytes.Cut(line, []byte(" "))
	target, _, _ := bytes.Cut(rest, []byte(" "))
	path, _, _ := bytes.Cut(target, []byte("?"))
	data, found := s.files[string(path)]
	switch {
	case string(method) != "GET":
		return append(out, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"...), nil
	case !found:
		return append(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"...), nil
	}
	size := int64(len(data))
	first, last, ranged := int64(0), int64(-1), false
	for h := range bytes.SplitSeq(headers, []byte("\r\n")) {
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok || !bytes.EqualFold(k, []byte("Range")) {
			continue
		}
		ranged = true
		a, b, ok := bytes.Cut(bytes.TrimPrefix(bytes.TrimSpace(v), []byte("bytes=")), []byte("-"))
		first, last = parse(a), parse(b)
		if !ok || first < 0 || len(b) > 0 && last < first {
			first = size // not one range this server knows: not satisfiable
		}
		if len(b) == 0 || last >= size {
			last = size - 1
		}
	}
	s.record(path, first, last, ranged)
	switch {
	case !ranged:
		out = append(out, "HTTP/1.1 200 OK\r\nContent-Length: "...)
		out = strconv.AppendInt(out, size, 10)
		out = append(out, "\r\nAccept-Ranges: bytes\r\nEtag: "+ETag+"\r\n\r\n"...)
		return out, data
	case first >= size:
		out = append(out, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */"...)
		out = strconv.AppendInt(out, size, 10)
		return append(out, "\r\nContent-Length: 0\r\n\r\n"...), nil
	}
	out = append(out, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes "...)
	out = strconv.AppendInt(out, first, 10)
	out = append(out, '-')
	out = strconv.AppendInt(out, last, 10)
	out = append(out, '/')
	out = strconv.AppendInt(out, size, 10)
	out = append(out, "\r\nContent-Length: "...)
	out = strconv.AppendInt(out, last-first+1, 10)
	out = append(out, "\r\nEtag: "+ETag+"\r\n\r\n"...)
	return out, data[first : last+1]
}

// record keeps a request while Record runs.
func (s *Server) record(path []byte, first, last int64, ranged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recording {
		return
	}
	if !ranged {
		first, last = 0, -1
	}
	s.requests = append(s.requests, Request{Path: string(path), First: first, Last: last})
}

// parse parses a decimal number of at most 18 digits; -1 if b is not one.
func parse(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	n := int64(0)
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
