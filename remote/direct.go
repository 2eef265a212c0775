package remote

// Range reads over HTTP/1.1 connections of the package's own.
//
// net/http allocates some 45 objects for each request (the Client's
// bookkeeping, the transport's connection machinery, the Response and its
// Header). A range read after the probe is a request whose every byte is
// known and whose answer, when all is well, is known too, but for its
// body: so it goes over connections kept here, where its request is
// written from a buffer of the connection and its response's head is
// parsed in place, and nothing is allocated. That changes nothing a caller
// could observe but the allocations, and is done only where it does not:
// see directRoute for when. Anything but the answer expected goes to
// net/http's own parser (http.ReadResponse) and is judged by tryRange as
// any response, and a redirect makes the object's reads go back to the
// client.
//
// Each connection has a goroutine of its own. While the connection is
// idle, it reads from it, as net/http's connections do: it finds the
// server's close, or bytes the server should not have sent, before the
// connection is used again, and its read deadline, the idle timeout,
// closes the connection with no timer. While a request is in flight
// under a context that can end, it watches the context, and ends the
// request's reads and writes at once when it ends (a deadline in the
// past): handed the context's Done channel through a channel, it costs no
// allocation, where context.AfterFunc costs two a request.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// directBufSize is the read buffer of a connection: a response head
	// that does not fit in it is read by net/http's parser.
	directBufSize = 16 << 10

	// max1xx is how many informational (1xx) heads may come before a
	// response, as net/http allows.
	max1xx = 5

	// The transport's settings when they are zero: net/http's own
	// (MaxIdleConnsPerHost, MaxResponseHeaderBytes) or
	// http.DefaultTransport's (the dial timeout and keep-alive, the idle
	// timeout).
	defaultDialTimeout     = 30 * time.Second
	defaultIdleConnTimeout = 90 * time.Second
	defaultMaxHeaderBytes  = 10 << 20
)

var (
	// errConnStalled is a connection's read or write that made no
	// progress for the stall timeout (its deadline passed); netError
	// makes it an ErrStalled.
	errConnStalled = errors.New("stalled")
	// errHeadTimeout is the transport's ResponseHeaderTimeout passed.
	errHeadTimeout = errors.New("timeout awaiting response headers (the transport's ResponseHeaderTimeout)")
	// errCanceled is a read or write ended by the request's context;
	// netError replaces it with the context's cause.
	errCanceled = errors.New("the request's context ended")
	// errHeadTooLong is a response head over MaxResponseHeaderBytes.
	errHeadTooLong = errors.New("the response's head exceeds the transport's MaxResponseHeaderBytes")
)

// aLongTimeAgo is a deadline that has passed: it ends a read or a write
// in flight at once.
var aLongTimeAgo = time.Unix(1, 0)

// directRequests counts the requests sent over the package's own
// connections, for tests.
var directRequests atomic.Int64

// A directRoute is how an object's range reads go over the package's own
// connections: to which pool, with which bytes before the Range header.
type directRoute struct {
	key  poolKey
	head []byte // the request line, Host, User-Agent, the caller's headers, If-Range
}

// A poolKey names the connections that a request can use: those of one
// transport to one server.
type poolKey struct {
	t      *http.Transport
	scheme string
	addr   string // host:port
}

// directRoute returns the route of the object's range reads over the
// package's own connections, or nil where they must go through the
// client, given x, the probe: a 206 over HTTP/1.1, not redirected, from a
// client with no cookie jar and no timeout (which the package would not
// honour), whose transport is an *http.Transport (nil meaning
// http.DefaultTransport) that dials itself (no DialTLS or DialTLSContext),
// keeps connections alive, puts no limit on connections per host, and
// sends the request to no proxy; an http or https URL, with no user
// information, whose host, path and headers are plain ASCII that
// net/http would send as they are; not on js or wasip1. A server that answered over HTTP/2
// stays on it, through the client: HTTP/1.1 connections instead of one
// would be seen.
func (o *object) directRoute(x *exchange) *directRoute {
	resp, c, u := x.resp, o.client, o.reqURL
	if c.Jar != nil || c.Timeout != 0 || resp.StatusCode != http.StatusPartialContent ||
		resp.Request != x.req || resp.ProtoMajor != 1 || resp.ProtoMinor != 1 || u.User != nil {
		return nil
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	//lint:ignore SA1019 a transport that still sets DialTLS dials TLS itself: not bypassed
	if !ok || t.DialTLSContext != nil || t.DialTLS != nil || t.DisableKeepAlives || t.MaxConnsPerHost != 0 {
		return nil
	}
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		return nil // net/http fetches there (js), or dials what the host allows
	}
	port := u.Port()
	switch u.Scheme {
	case "http":
		port = cmp(port, "80")
	case "https":
		port = cmp(port, "443")
	default:
		return nil
	}
	if t.Proxy != nil {
		if proxy, err := t.Proxy(x.req); err != nil || proxy != nil {
			return nil
		}
	}
	host, uri := u.Hostname(), u.RequestURI()
	if !plain(host, false) || !plain(o.reqHost, false) || !plain(uri, true) {
		return nil
	}
	b := make([]byte, 0, 256)
	b = append(b, "GET "...)
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, o.reqHost...)
	b = append(b, "\r\n"...)
	h := o.cfg.header
	ua := "Go-http-client/1.1" // net/http's, unless the header has one, which may be blank
	if v, ok := h["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if b, ok = appendField(b, "User-Agent", ua); !ok {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer", "Range":
			continue // written above or by each request, or not at all, as net/http does
		case "If-Range":
			if o.ifRange != nil {
				continue // replaced by the pinned version's
			}
		case "Connection", "Te", "Upgrade", "Expect", "Keep-Alive", "Proxy-Connection":
			return nil // a header that changes how the connection is used
		}
		if !token(k) {
			return nil
		}
		for _, v := range h[k] {
			if b, ok = appendField(b, k, v); !ok {
				return nil
			}
		}
	}
	for _, v := range o.ifRange {
		if b, ok = appendField(b, "If-Range", v); !ok {
			return nil
		}
	}
	return &directRoute{key: poolKey{t, u.Scheme, net.JoinHostPort(host, port)}, head: b}
}

// cmp returns a, or b if a is empty.
func cmp(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// plain reports whether s is non-empty printable ASCII without a space
// (or, for a host, a percent sign: an IPv6 zone, which net/http removes).
func plain(s string, percent bool) bool {
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '%' && !percent {
			return false
		}
	}
	return s != ""
}

// appendField appends the header field "key: value", value trimmed of
// spaces and tabs, as net/http writes it (which writes no User-Agent with
// an empty value). It reports false for a value that holds a control
// character, which could end the field: RequestHeader refuses CR and LF,
// and this holds whatever filled the header.
func appendField(b []byte, key, value string) ([]byte, bool) {
	for i := range len(value) {
		if !fieldValueByte(value[i]) {
			return b, false
		}
	}
	value = trimOWS(value)
	if value == "" && key == "User-Agent" {
		return b, true
	}
	b = append(b, key...)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, "\r\n"...), true
}

// A hostPool keeps the idle connections of one poolKey, and the settings
// of its transport, read when the pool was made.
type hostPool struct {
	key  poolKey
	tls  *tls.Config // a clone of the transport's, made once; nil for http
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	handshakeTimeout time.Duration
	headerTimeout    time.Duration // the transport's ResponseHeaderTimeout, or 0
	idleTimeout      time.Duration
	maxIdle          int
	maxHeader        int64

	// Under pools.mu:
	idle  []*conn // the most recently used last
	conns int     // open connections, idle or in use
}

// pools holds the pools that have connections, or are about to.
var pools struct {
	mu sync.Mutex
	m  map[poolKey]*hostPool
}

// poolFor returns the pool of key, made if there is none.
func poolFor(key poolKey) *hostPool {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	if p := pools.m[key]; p != nil {
		return p
	}
	t := key.t
	p := &hostPool{
		key:              key,
		handshakeTimeout: t.TLSHandshakeTimeout,
		headerTimeout:    t.ResponseHeaderTimeout,
		idleTimeout:      t.IdleConnTimeout,
		maxIdle:          t.MaxIdleConnsPerHost,
		maxHeader:        t.MaxResponseHeaderBytes,
	}
	if p.idleTimeout <= 0 {
		p.idleTimeout = defaultIdleConnTimeout
	}
	if p.maxIdle == 0 {
		p.maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	if p.maxHeader <= 0 {
		p.maxHeader = defaultMaxHeaderBytes
	}
	switch {
	case t.DialContext != nil:
		p.dial = t.DialContext
	//lint:ignore SA1019 a transport that still sets Dial dials with it, as net/http does
	case t.Dial != nil:
		p.dial = func(_ context.Context, network, addr string) (net.Conn, error) {
			return t.Dial(network, addr) //lint:ignore SA1019 as above
		}
	default:
		d := &net.Dialer{Timeout: defaultDialTimeout, KeepAlive: defaultDialTimeout}
		p.dial = d.DialContext
	}
	if key.scheme == "https" {
		cfg := &tls.Config{}
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(key.addr)
		}
		cfg.NextProtos = []string{"http/1.1"}
		p.tls = cfg
	}
	if pools.m == nil {
		pools.m = make(map[poolKey]*hostPool)
	}
	pools.m[key] = p
	return p
}

// dropped counts a connection closed; the pool is forgotten with its last
// one. Under pools.mu.
func (p *hostPool) dropped() {
	p.conns--
	if p.conns == 0 && pools.m[p.key] == p {
		delete(pools.m, p.key)
	}
}

// get returns an idle connection, or a new one; fresh says which.
func (p *hostPool) get(ctx context.Context, stall time.Duration) (c *conn, fresh bool, err error) {
	pools.mu.Lock()
	if n := len(p.idle); n > 0 {
		c = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	}
	pools.mu.Unlock()
	if c != nil {
		return c, false, nil
	}
	c, err = p.dialConn(ctx, stall)
	return c, true, err
}

// put keeps c, whose response was read exactly to its end, as idle, or
// closes it if the pool has enough. Its goroutine reads from it until a
// request takes it or its idle timeout passes.
func (p *hostPool) put(c *conn) {
	c.idling = true
	c.nc.SetReadDeadline(time.Now().Add(p.idleTimeout))
	pools.mu.Lock()
	if len(p.idle) >= p.maxIdle {
		pools.mu.Unlock()
		c.close()
		return
	}
	p.idle = append(p.idle, c)
	pools.mu.Unlock()
	c.ctl <- struct{}{}
}

// leave takes c out of the idle connections if it is there, and reports
// whether it was.
func (p *hostPool) leave(c *conn) bool {
	pools.mu.Lock()
	defer pools.mu.Unlock()
	i := slices.Index(p.idle, c)
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	p.dropped()
	return true
}

// dialConn dials a new connection, under ctx and the stall timeout, with
// TLS for https.
func (p *hostPool) dialConn(ctx context.Context, stall time.Duration) (*conn, error) {
	dctx := ctx
	if stall > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeoutCause(ctx, stall, ErrStalled)
		defer cancel()
	}
	nc, err := p.dial(dctx, "tcp", p.key.addr)
	if err == nil && nc == nil {
		err = errors.New("the transport's DialContext returned no connection")
	}
	if err == nil && p.tls != nil {
		hctx := dctx
		if p.handshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(dctx, p.handshakeTimeout)
			defer cancel()
		}
		tc := tls.Client(nc, p.tls)
		if err = tc.HandshakeContext(hctx); err != nil {
			err = fmt.Errorf("TLS handshake: %w", err)
		} else if proto := tc.ConnectionState().NegotiatedProtocol; proto != "" && proto != "http/1.1" {
			err = fmt.Errorf("TLS handshake: the server chose the protocol %q, not http/1.1", proto)
		}
		if err != nil {
			nc.Close()
		}
		nc = tc
	}
	if err != nil {
		pools.mu.Lock()
		if p.conns == 0 && pools.m[p.key] == p {
			delete(pools.m, p.key) // made for this dial, or emptied meanwhile
		}
		pools.mu.Unlock()
		if ctx.Err() == nil && errors.Is(context.Cause(dctx), ErrStalled) {
			return nil, errConnStalled
		}
		return nil, err
	}
	c := &conn{pool: p, nc: nc, ctl: make(chan struct{}), finish: make(chan struct{}), peeked: make(chan error), watching: make(chan (<-chan struct{}))}
	c.br = bufio.NewReaderSize(c, directBufSize)
	pools.mu.Lock()
	p.conns++
	pools.mu.Unlock()
	go c.run()
	return c, nil
}

// A conn is a connection of the package's own, with its goroutine (run).
// One request at a time uses it.
type conn struct {
	pool *hostPool
	nc   net.Conn
	br   *bufio.Reader // over the conn itself: its Read
	wbuf []byte        // the request, written at once

	ctl       chan struct{}          // to the goroutine: wait for the first byte; closed with the connection
	peeked    chan error             // from the goroutine: the first byte came, or why not
	watching  chan (<-chan struct{}) // to the goroutine, after peeked: what to watch, or nil
	finish    chan struct{}          // to the goroutine: stop watching the request's context
	cancelled atomic.Bool            // the request's context ended: deadlines passed

	// The request's context's Done, or nil: the request's own, handed to
	// the goroutine through watching once the first byte came. Not read
	// by the goroutine from here: the next request, which may take the
	// connection as soon as it is idle, sets it while the goroutine may
	// still be done with the last one.
	watch <-chan struct{}

	reused bool // a request before this one used it

	// How Read reads, set by the request before each use.
	idling bool          // the goroutine waits for the first byte: nothing but the read
	stall  time.Duration // each read's deadline, after now; 0 for none
	inHead bool          // the response's head is being read
	headBy time.Time     // the transport's ResponseHeaderTimeout, as a deadline, or zero
	limit  int64         // bytes that the head may still take
}

// run is the connection's goroutine. Each time it is told, it waits for
// the first byte that comes, while the connection is idle and then while
// a request that took it (or, new, is about to use it) waits for its
// response: so it finds a server's close, or bytes that no request asked
// for, before a request takes the connection, and closes the connection
// at the idle timeout (its read deadline while idle) with no timer; a
// request that takes the connection sets another deadline, which the read
// then waits for, with no interruption (which would allocate its error).
// The first byte, or the reason for none, goes to the request; then, for
// a request under a context that can end, the goroutine watches the
// context and, when it ends, ends the request's reads and writes at once
// (a deadline in the past), until the request tells it to stop. It ends
// when the connection is closed.
func (c *conn) run() {
	for range c.ctl {
		_, err := c.br.Peek(1)
		if c.pool.leave(c) {
			// Idle, and nobody took it: its idle timeout passed, or the
			// server closed it or sent bytes unasked.
			c.nc.Close()
			return
		}
		c.peeked <- err // to the request that took it
		if watch := <-c.watching; watch != nil {
			select {
			case <-watch:
				c.cancel()
				<-c.finish
			case <-c.finish:
			}
		}
	}
}

// cancel ends the connection's reads and writes in flight and to come.
func (c *conn) cancel() {
	c.cancelled.Store(true)
	c.nc.SetDeadline(aLongTimeAgo)
}

// Read reads from the connection for its bufio.Reader, with the deadline
// of a stall (and of the transport's ResponseHeaderTimeout for the head),
// and turns a deadline that passed into the reason for it.
func (c *conn) Read(p []byte) (int, error) {
	if c.idling {
		return c.nc.Read(p)
	}
	if c.inHead {
		if c.limit <= 0 {
			return 0, errHeadTooLong
		}
		if int64(len(p)) > c.limit {
			p = p[:c.limit]
		}
	}
	c.nc.SetReadDeadline(c.deadline())
	if c.cancelled.Load() { // after the deadline set: it may have undone the watch's
		return 0, errCanceled
	}
	n, err := c.nc.Read(p)
	if c.inHead {
		c.limit -= int64(n)
	}
	return n, c.reason(err)
}

// deadline returns the deadline of the next read: after the stall
// timeout from now, or for the head the ResponseHeaderTimeout if sooner.
func (c *conn) deadline() time.Time {
	var d time.Time
	if c.stall > 0 {
		d = time.Now().Add(c.stall)
	}
	if c.inHead && !c.headBy.IsZero() && (d.IsZero() || c.headBy.Before(d)) {
		d = c.headBy
	}
	return d
}

// reason returns err, or for a deadline that passed the reason for it.
func (c *conn) reason(err error) error {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	switch {
	case c.cancelled.Load():
		return errCanceled
	case c.inHead && !c.headBy.IsZero() && !time.Now().Before(c.headBy):
		return errHeadTimeout
	}
	return errConnStalled
}

// write writes the request.
func (c *conn) write(b []byte) error {
	var deadline time.Time
	if c.stall > 0 {
		deadline = time.Now().Add(c.stall)
	}
	c.nc.SetWriteDeadline(deadline)
	if c.cancelled.Load() {
		return errCanceled
	}
	_, err := c.nc.Write(b)
	return c.reason(err)
}

// end ends c's request: the watch of its context stops, and c is kept as
// idle if reuse says so and the context did not end it, else closed.
func (c *conn) end(reuse bool) {
	if c.watch != nil {
		c.finish <- struct{}{}
		c.watch = nil
	}
	if !reuse || c.cancelled.Load() {
		c.close()
		return
	}
	c.reused = true
	c.pool.put(c)
}

// close closes c, which a request holds, and ends its goroutine.
func (c *conn) close() {
	close(c.ctl)
	c.nc.Close()
	pools.mu.Lock()
	c.pool.dropped()
	pools.mu.Unlock()
}

// directRange fills p with the object's bytes [off, last] with one range
// request over the package's own connections. done says whether that was
// all: n bytes arrived, or err says why not. Otherwise x holds a response
// that was not the one expected, for tryRange to judge as any other, or
// is nil: the object moved (a redirect), and its reads go through the
// client from now on, this one first.
func (o *object) directRange(ctx context.Context, r *directRoute, p []byte, off, last int64) (x *exchange, n int, done bool, err error) {
	if ctx.Err() != nil {
		return nil, 0, true, fmt.Errorf("%s: %w", o.what(off, last), context.Cause(ctx))
	}
	x = exchanges.Get().(*exchange)
	x.o, x.off, x.end = o, off, last
	x.ctx.set(ctx)
	o.requests.Add(1)
	directRequests.Add(1)
	pool := poolFor(r.key)
	for retried := false; ; retried = true {
		c, fresh, err := pool.get(ctx, o.cfg.stall)
		if err != nil {
			err = x.netError(err)
			x.close()
			return nil, 0, true, err
		}
		resp, n, err, retry := c.do(ctx, x, r, p, fresh)
		switch {
		case retry && !retried:
			// A connection kept idle, which failed before any byte of
			// its response: the server closed it meanwhile. Once more
			// on a new one, as net/http does.
			continue
		case err != nil:
			x.close()
			return nil, n, true, err
		case resp == nil:
			x.ok = true
			x.close()
			return nil, n, true, nil
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			resp.Body.Close()
			o.direct.Store(nil)
			x.close()
			return nil, 0, false, nil
		}
		x.resp = resp
		return x, 0, false, nil
	}
}

// do makes x's request over c, for p, and returns how many bytes of p
// arrived, or the response that was not the one expected (which closes c
// with its body), or the error; retry says that the error is c's, failed
// before any byte of the response after being kept idle, which another
// connection may not have. c is closed or idle again when it returns,
// but with resp.
func (c *conn) do(ctx context.Context, x *exchange, r *directRoute, p []byte, fresh bool) (resp *http.Response, n int, err error, retry bool) {
	o := x.o
	c.stall, c.inHead, c.limit = o.cfg.stall, true, c.pool.maxHeader
	c.headBy = time.Time{}
	if c.pool.headerTimeout > 0 {
		c.headBy = time.Now().Add(c.pool.headerTimeout)
	}
	c.watch = ctx.Done()
	// The deadline of the first byte; the goroutine's read waits for it.
	firstBy := c.deadline()
	c.nc.SetReadDeadline(firstBy)
	if fresh {
		c.idling = true
		c.ctl <- struct{}{}
	}
	b := append(c.wbuf[:0], r.head...)
	b = append(b, "Range: bytes="...)
	b = strconv.AppendInt(b, x.off, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, x.end, 10)
	b = append(b, "\r\n\r\n"...)
	c.wbuf = b
	werr := c.write(b)
	if werr != nil {
		c.nc.SetReadDeadline(aLongTimeAgo) // no response will come: end the wait for one
	}
	select {
	case err = <-c.peeked:
	case <-c.watch:
		c.cancel()
		err = <-c.peeked
	}
	c.watching <- c.watch // end calls finish if not nil
	c.idling = false
	if werr != nil || err != nil {
		if werr != nil {
			err = werr
		}
		// The idle timeout that passed as the request took the
		// connection, or the server's close, or a reset: the
		// connection's own failure.
		idleTimeout := werr == nil && errors.Is(err, os.ErrDeadlineExceeded) && !c.cancelled.Load() &&
			(firstBy.IsZero() || time.Now().Before(firstBy))
		err = c.reason(err)
		retry := c.reused && c.br.Buffered() == 0 && (idleTimeout || err != errCanceled && err != errConnStalled && err != errHeadTimeout)
		err = x.netError(err)
		c.end(false)
		return nil, 0, err, retry
	}
	var h respHead
	for n1xx := 0; ; n1xx++ {
		if h, err = c.readHead(); err != nil {
			err = x.netError(err)
			c.end(false)
			return nil, 0, err, false
		}
		if !h.ok || h.status < 100 || h.status > 199 || h.status == http.StatusSwitchingProtocols || n1xx == max1xx {
			break
		}
		c.br.Discard(h.size)
	}
	if h.ok && h.expected(x, len(p)) {
		c.inHead = false
		c.br.Discard(h.size)
		n, err := io.ReadFull(c.br, p)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			err = x.shortBody(n, len(p))
		case err != nil:
			err = x.netError(err)
		}
		// Reused only if the body ended where its Content-Length says and
		// nothing follows it yet.
		c.end(err == nil && !h.close && c.br.Buffered() == 0)
		return nil, n, err, false
	}
	// Anything else: net/http's parser reads it, for tryRange to judge.
	x.prepare()
	for n1xx := 0; ; n1xx++ {
		if resp, err = http.ReadResponse(c.br, x.req); err != nil {
			err = x.netError(err)
			c.end(false)
			return nil, 0, err, false
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols || n1xx == max1xx {
			break
		}
	}
	c.inHead = false
	resp.Body = &directBody{ReadCloser: resp.Body, c: c}
	return resp, 0, nil, false
}

// A directBody is the body of a response read by http.ReadResponse from
// a connection of the package's own: closing it closes the connection,
// which is not used again.
type directBody struct {
	io.ReadCloser
	c      *conn
	closed bool
}

func (b *directBody) Close() error {
	if !b.closed {
		b.closed = true
		b.c.end(false)
	}
	return nil
}

// readHead waits for a response's head in c's buffer and parses it in
// place, without taking it from the buffer. A head that does not fit in
// the buffer is not ok.
func (c *conn) readHead() (respHead, error) {
	scanned := 0
	for want := 1; ; {
		if want > c.br.Size() {
			return respHead{}, nil
		}
		if _, err := c.br.Peek(want); err != nil {
			return respHead{}, err
		}
		b, _ := c.br.Peek(c.br.Buffered())
		if end := headEnd(b, scanned); end > 0 {
			return parseHead(b[:end]), nil
		}
		scanned, want = len(b), len(b)+1
	}
}

// headEnd returns the length of the head at the start of b, up to and
// with the empty line that ends it, or 0 if b holds no empty line after
// from.
func headEnd(b []byte, from int) int {
	for i := max(from-2, 0); i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		}
	}
	return 0
}

// A respHead is what a response's head says of what matters here, as
// parseHead reads it. Its byte slices are the head's own.
type respHead struct {
	size int  // the head's length
	ok   bool // an HTTP/1.1 head, well formed, no field of those below twice

	status        int
	contentLength int64 // -1 without Content-Length
	contentRange  []byte
	etag          []byte // ETag, "" without
	lastModified  []byte
	encoded       bool // a Content-Encoding other than identity
	close         bool // Connection: close
}

// parseHead parses b, a response head up to and with the empty line that
// ends it, without allocating. Anything not plain (a line that does not
// end with CR LF, a folded line, a field name that is not a token, a
// control character in a value, a field of interest twice, a
// Transfer-Encoding, another version than HTTP/1.1) leaves it not ok: for
// net/http's parser to read.
func parseHead(b []byte) (h respHead) {
	h.size, h.contentLength = len(b), -1
	line, rest, ok := nextLine(b)
	if !ok || len(line) < len("HTTP/1.1 200") || !equal(line[:len("HTTP/1.1 ")], "HTTP/1.1 ") ||
		len(line) > len("HTTP/1.1 200") && line[len("HTTP/1.1 200")] != ' ' {
		return h
	}
	for _, c := range line[len("HTTP/1.1 200"):] {
		if !fieldValueByte(c) {
			return h
		}
	}
	code, ok := parseDigits(line[len("HTTP/1.1 "):len("HTTP/1.1 200")])
	if !ok || code < 100 {
		return h
	}
	h.status = int(code)
	var seen [5]bool // Content-Length, Content-Range, Content-Encoding, ETag, Last-Modified
	for {
		if line, rest, ok = nextLine(rest); !ok {
			return h
		}
		if len(line) == 0 {
			break
		}
		colon := indexByte(line, ':')
		if colon <= 0 {
			return h // a folded line too: it starts with a space
		}
		key, v := line[:colon], line[colon+1:]
		if !token(key) {
			return h
		}
		for _, c := range v {
			if !fieldValueByte(c) {
				return h
			}
		}
		v = trimOWS(v)
		field := -1
		switch {
		case equalFold(key, "content-length"):
			field = 0
			if h.contentLength, ok = parseDigits(v); !ok {
				return h
			}
		case equalFold(key, "content-range"):
			field, h.contentRange = 1, v
		case equalFold(key, "content-encoding"):
			field, h.encoded = 2, !equalFold(v, "identity")
		case equalFold(key, "etag"):
			field, h.etag = 3, v
		case equalFold(key, "last-modified"):
			field, h.lastModified = 4, v
		case equalFold(key, "transfer-encoding"):
			return h // chunked, or an encoding net/http refuses: its parser says which
		case equalFold(key, "connection"):
			h.close = h.close || containsFold(v, "close")
		}
		if field >= 0 {
			if seen[field] {
				return h
			}
			seen[field] = true
		}
	}
	h.ok = len(rest) == 0
	return h
}

// expected reports whether h is the head of the response expected for
// x's request of n bytes: 206 with exactly the range asked for, of the
// object's size, a body of n bytes as they are, of the pinned version.
// Anything else goes to tryRange, which says what is wrong, if anything.
func (h *respHead) expected(x *exchange, n int) bool {
	o := x.o
	if h.status != http.StatusPartialContent || h.encoded || h.contentLength != int64(n) {
		return false
	}
	first, last, total, ok := parseContentRange(h.contentRange)
	return ok && first == x.off && last == x.end && total == o.size &&
		versionOf(o, h.etag, h.lastModified) == sameVersion
}

// nextLine returns the line at the start of b without its CR LF, and what
// follows it; false for a line that does not end with CR LF.
func nextLine(b []byte) (line, rest []byte, ok bool) {
	i := indexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return nil, nil, false
	}
	return b[:i-1], b[i+1:], true
}

// trimOWS trims spaces and tabs from both ends of s.
func trimOWS[T string | []byte](s T) T {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// token reports whether s is a token (RFC 9110), as a field name must be.
func token[T string | []byte](s T) bool {
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case indexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return len(s) > 0
}

// fieldValueByte reports whether c may be in a field's value, as
// net/textproto allows: visible ASCII, space, tab, and bytes over 0x7f.
func fieldValueByte(c byte) bool {
	return c >= ' ' && c != 0x7f || c == '\t'
}

// equalFold reports whether s is lower, ASCII case ignored; lower is
// lower case.
func equalFold(s []byte, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := range len(lower) {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// containsFold reports whether s contains lower, ASCII case ignored.
func containsFold(s []byte, lower string) bool {
	for i := 0; i+len(lower) <= len(s); i++ {
		if equalFold(s[i:i+len(lower)], lower) {
			return true
		}
	}
	return false
}

// prepare sets x's request as send does, for net/http's parser, which
// gives it to the response (sentCredentials reads its header).
func (x *exchange) prepare() {
	o, req := x.o, x.req
	req.URL, req.Host = o.reqURL, o.reqHost
	h := req.Header
	clear(h) // of the last request, which a cookie jar may have added to
	for k, v := range o.cfg.header {
		h[k] = v
	}
	if x.end >= 0 {
		x.rangeVal[0] = x.rangeHeader(x.off, x.end)
		h["Range"] = x.rangeVal[:]
		if o.ifRange != nil {
			h["If-Range"] = o.ifRange
		}
	}
}
