package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/filekind"
)

// probeLen is how much the first request asks for: the first read of
// safetensors.NewReaderAt, which holds the whole header of most files.
const probeLen = 64 << 10

// A retryable error is one worth another request: a 5xx or 429 answer, a
// reset connection, a body that ended early, a stall.
type retryable struct {
	err   error
	after time.Duration // the answer's Retry-After, or 0
}

func (e *retryable) Error() string { return e.err.Error() }
func (e *retryable) Unwrap() error { return e.err }

// withRetries calls try until it succeeds, fails for good, or has been
// retried cfg.retries times, waiting between attempts.
func (o *object) withRetries(ctx context.Context, try func() error) error {
	for attempt := 0; ; attempt++ {
		err := try()
		if err == nil {
			return nil
		}
		var r *retryable // on the heap: declared here, it costs a success nothing
		if !errors.As(err, &r) {
			return err
		}
		if attempt >= o.cfg.retries || ctx.Err() != nil {
			return r.err
		}
		wait := min(100*time.Millisecond<<attempt, 5*time.Second)
		wait = wait/2 + rand.N(wait/2+1) // jitter, so that parallel readers spread out
		if r.after > 0 {
			wait = r.after
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (while waiting to retry after: %w)", ctx.Err(), r.err)
		case <-t.C:
		}
	}
}

// An exchange is one request and its response, watched for stalls: a
// timer ends the request's context when no progress was made for the
// stall timeout.
//
// Exchanges are pooled, so that a read allocates nothing of its own: one
// whose response was read to its end, whose body is closed and whose
// context has not ended is reused, with its context, its stall timer, its
// request and that request's header; any other is dropped. Reusing an
// *http.Request once its response's body is closed is what net/http's
// RoundTripper contract allows ("Callers should not mutate or reuse the
// request until the Response's Body has been closed"); one exchange has
// one request in flight at a time.
type exchange struct {
	o        *object
	off, end int64 // the range asked for; end < 0 for the whole object

	ctx    requestContext          // the request's context
	cancel context.CancelCauseFunc // ends ctx.done, with the cause
	timer  *time.Timer             // the stall timer: cancels with ErrStalled
	armed  bool                    // the timer was started for this request
	fired  bool                    // the timer fired during this request
	// stopWatch stops the watch of the caller's context that ends ctx when
	// it ends, or is nil for a caller's context that never ends.
	stopWatch   func() bool
	callerEnded func() // what the watch runs: cancel with the caller's cause

	req  *http.Request
	resp *http.Response
	ok   bool // the response was read whole: the exchange can be reused

	rangeBuf [len("bytes=-") + 2*20]byte // for the Range header's value
	rangeVal [1]string                   // the Range header's values
	extra    [1]byte                     // for the read that must find the body's end
}

// A requestContext is the context of an exchange's request: the caller's
// values and deadline, and the end of a context of the exchange's own,
// done, which the stall timer and the caller's end (through
// context.AfterFunc) cancel. done lives as long as the exchange; the
// caller's context changes with each request.
//
// done answers Value for the context package's own key, with its
// *cancelCtx, as the contexts of context.WithValue do: so net/http's
// context of each request, derived from this one, registers with done
// rather than watch it from a goroutine, and allocates nothing for it
// once warm.
//
// net/http may ask for a value after the request ended: a connection it
// dialed for the request, which got another one first, goes on dialing
// with the request's values (context.WithoutCancel). mu makes that safe;
// such a dial then gets no value, or those of the exchange's next
// request, while it runs.
type requestContext struct {
	done context.Context

	mu     sync.Mutex
	caller context.Context // nil between requests
}

func (c *requestContext) Done() <-chan struct{} { return c.done.Done() }
func (c *requestContext) Err() error            { return c.done.Err() }

func (c *requestContext) Deadline() (time.Time, bool) {
	if caller := c.get(); caller != nil {
		return caller.Deadline()
	}
	return time.Time{}, false
}

func (c *requestContext) Value(key any) any {
	// done holds no values but the context package's: every other key
	// is the caller's.
	if v := c.done.Value(key); v != nil {
		return v
	}
	if caller := c.get(); caller != nil {
		return caller.Value(key)
	}
	return nil
}

func (c *requestContext) get() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caller
}

func (c *requestContext) set(caller context.Context) {
	c.mu.Lock()
	c.caller = caller
	c.mu.Unlock()
}

// forget forgets the caller's context, between requests.
func (c *requestContext) forget() {
	c.mu.Lock()
	c.caller = nil
	c.mu.Unlock()
}

// exchanges holds the exchanges that can be reused.
var exchanges = sync.Pool{New: func() any { return newExchange() }}

func newExchange() *exchange {
	x := &exchange{}
	x.ctx.done, x.cancel = context.WithCancelCause(context.Background())
	x.timer = time.AfterFunc(time.Hour, func() { x.cancel(ErrStalled) })
	x.timer.Stop()
	x.callerEnded = func() { x.cancel(context.Cause(x.ctx.get())) }
	// The URL is the object's, set by send.
	x.req, _ = http.NewRequestWithContext(&x.ctx, http.MethodGet, "/", nil)
	return x
}

// send sends a GET of the object, for the bytes [off, end] when end >= 0,
// with the pinned version's preconditions, under ctx.
func (o *object) send(ctx context.Context, off, end int64) (*exchange, error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", o.what(off, end), context.Cause(ctx))
	}
	x := exchanges.Get().(*exchange)
	x.o, x.off, x.end = o, off, end
	x.ctx.set(ctx)
	if ctx.Done() != nil {
		x.stopWatch = context.AfterFunc(ctx, x.callerEnded)
	}
	if o.cfg.stall > 0 {
		x.timer.Reset(o.cfg.stall)
		x.armed = true
	}
	x.prepare()
	o.requests.Add(1)
	resp, err := o.client.Do(x.req)
	if err != nil {
		err = x.netError(err)
		x.close()
		return nil, err
	}
	x.resp = resp
	x.progress()
	return x, nil
}

// rangeHeader returns the Range header's value for the bytes [off, end],
// "bytes=OFF-END": the one allocation a request of this package's own. It
// cannot be a string over a buffer that the next request rewrites, as
// net/http keeps header values beyond the request: HTTP/2's header
// compression (HPACK) keeps them in the connection's table, to send an
// index instead of a value that repeats.
func (x *exchange) rangeHeader(off, end int64) string {
	b := append(x.rangeBuf[:0], "bytes="...)
	b = strconv.AppendInt(b, off, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, end, 10)
	return string(b)
}

// what describes a request for the bytes [off, end] of the object (the
// whole object when end < 0), for errors: "GET URL bytes A-B".
func (o *object) what(off, end int64) string {
	if end < 0 {
		return "GET " + o.url
	}
	return "GET " + o.url + " bytes " + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end, 10)
}

// what describes the exchange's request, for errors.
func (x *exchange) what() string { return x.o.what(x.off, x.end) }

// netError describes err, from a request or its body, and makes it
// retryable unless the caller's context ended.
func (x *exchange) netError(err error) error {
	if parent := x.ctx.get(); parent.Err() != nil {
		return fmt.Errorf("%s: %w", x.what(), context.Cause(parent))
	}
	if errors.Is(err, errConnStalled) || errors.Is(context.Cause(x.ctx.done), ErrStalled) {
		return &retryable{err: fmt.Errorf("%w: %s: nothing for %v", ErrStalled, x.what(), x.o.cfg.stall)}
	}
	err = fmt.Errorf("safetensors: %s: %w", x.what(), err)
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial" {
		return err // no server there: retrying would not help
	}
	return &retryable{err: err}
}

// progress restarts the stall timer.
func (x *exchange) progress() {
	if x.armed && !x.timer.Reset(x.o.cfg.stall) {
		x.fired = true // and ended the context, or is about to
	}
}

// close closes the response, if any, stops the timer and the watch of
// the caller's context, and puts the exchange back in the pool if it
// can be reused: only after a response read whole, whose context is
// still alive and will stay so (neither the timer's function nor the
// watch's has started).
func (x *exchange) close() {
	reuse := x.ok
	if x.resp != nil {
		x.resp.Body.Close()
	}
	if x.armed && !x.timer.Stop() || x.fired {
		reuse = false
	}
	if x.stopWatch != nil && !x.stopWatch() {
		reuse = false // callerEnded runs, or ran
	}
	if !reuse || x.ctx.done.Err() != nil {
		x.cancel(nil) // dropped: whatever net/http still does for it ends
		return
	}
	x.ctx.forget()
	x.o, x.resp, x.stopWatch = nil, nil, nil
	x.armed, x.ok = false, false
	exchanges.Put(x)
}

// Read reads the body, restarting the stall timer on progress.
func (x *exchange) Read(p []byte) (int, error) {
	n, err := x.resp.Body.Read(p)
	if n > 0 {
		x.progress()
	}
	return n, err
}

// readFull fills p from the body, which must hold exactly len(p) bytes
// more. It returns how many bytes arrived.
func (x *exchange) readFull(p []byte) (int, error) {
	n, err := io.ReadFull(x, p)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, x.shortBody(n, len(p))
	}
	if err != nil {
		return n, x.netError(err)
	}
	if m, _ := io.ReadFull(x, x.extra[:]); m > 0 {
		return n, fmt.Errorf("%w: %s: the response is longer than the %d bytes asked for", ErrBadResponse, x.what(), len(p))
	}
	x.ok = true
	return n, nil
}

// shortBody is the error for a body that ended after n of the want bytes
// it was to hold: retryable, the next request asking for what is missing.
func (x *exchange) shortBody(n, want int) error {
	return &retryable{err: fmt.Errorf("%w: %s: the response ended after %d of %d bytes: %w", ErrBadResponse, x.what(), n, want, io.ErrUnexpectedEOF)}
}

// statusError is the error for an unexpected status: a *StatusError,
// retryable for 408, 429 and 5xx but 501, with the Retry-After of the
// answer when it asks for a wait of at most MaxRetryAfter; ErrChanged for
// 412.
func (x *exchange) statusError() error {
	resp := x.resp
	if resp.StatusCode == http.StatusPreconditionFailed {
		return fmt.Errorf("%w: %s: %s: the object is no longer the version %s", ErrChanged, x.what(), resp.Status, x.o.version())
	}
	err := x.newStatusError()
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests || c == http.StatusRequestTimeout || c >= 500 && c != http.StatusNotImplemented:
		after, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if ok && after > MaxRetryAfter {
			return fmt.Errorf("%w; the server asks to retry after %v, more than %v", err, after.Round(time.Second), MaxRetryAfter)
		}
		return &retryable{err: err, after: after}
	}
	return err
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// version describes the pinned version, for errors.
func (o *object) version() string {
	switch {
	case o.etag != "":
		return "with ETag " + o.etag
	case o.weakETag != "":
		return "with ETag " + o.weakETag
	case o.lastModified != "":
		return "last modified " + o.lastModified
	}
	return "first seen"
}

// checkVersion checks that a response is of the pinned version, as far as
// its validators tell.
func (x *exchange) checkVersion() error {
	o, h := x.o, x.resp.Header
	etag := h.Get("ETag")
	switch versionOf(o, etag, h.Get("Last-Modified")) {
	case etagChanged:
		return fmt.Errorf("%w: %s: the ETag was %s and is now %s", ErrChanged, x.what(), o.etag+o.weakETag, etag)
	case etagGone:
		return fmt.Errorf("%w: %s: the ETag was %s and is now gone", ErrChanged, x.what(), o.etag+o.weakETag)
	case lastModifiedChanged:
		return fmt.Errorf("%w: %s: it was last modified %s and is now last modified %s", ErrChanged, x.what(), o.lastModified, h.Get("Last-Modified"))
	}
	return nil
}

// A versionDiff is what the validators of a response say of its version
// against the pinned one.
type versionDiff int

const (
	sameVersion versionDiff = iota // as far as the validators tell
	etagChanged
	etagGone
	lastModifiedChanged
)

// versionOf compares the validators of a response, its ETag and
// Last-Modified values ("" where it has none), with the pinned ones. It is
// generic so that the head of a response read by the package's own
// connections is judged in place, by the same rules, without a string.
func versionOf[T string | []byte](o *object, etag, lastModified T) versionDiff {
	switch {
	case o.etag != "" && len(etag) > 0 && !equal(etag, o.etag),
		o.weakETag != "" && len(etag) > 0 && !equal(etag, o.weakETag):
		return etagChanged
	case (o.etag != "" || o.weakETag != "") && len(etag) == 0:
		return etagGone
	case o.lastModified != "" && len(lastModified) > 0 && !equal(lastModified, o.lastModified):
		return lastModifiedChanged
	}
	return sameVersion
}

// equal reports whether a and b are the same bytes.
func equal[T string | []byte](a T, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(b) {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// parseContentRange parses "bytes FIRST-LAST/TOTAL"; total is -1 for "*".
// It is generic so that a response head is parsed in place, by the same
// rules, without a string.
func parseContentRange[T string | []byte](v T) (first, last, total int64, ok bool) {
	const prefix = "bytes "
	if len(v) < len(prefix) || !equal(v[:len(prefix)], prefix) {
		return 0, 0, 0, false
	}
	rest := v[len(prefix):]
	slash := indexByte(rest, '/')
	if slash < 0 {
		return 0, 0, 0, false
	}
	rng, tot := rest[:slash], rest[slash+1:]
	total = -1
	if !equal(tot, "*") {
		if total, ok = parseDigits(tot); !ok {
			return 0, 0, 0, false
		}
	}
	if equal(rng, "*") {
		return -1, -1, total, true
	}
	dash := indexByte(rng, '-')
	if dash < 0 {
		return 0, 0, 0, false
	}
	first, ok1 := parseDigits(rng[:dash])
	last, ok2 := parseDigits(rng[dash+1:])
	if !ok1 || !ok2 || last < first {
		return 0, 0, 0, false
	}
	return first, last, total, true
}

// indexByte returns the index of the first c in s, or -1.
func indexByte[T string | []byte](s T, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// parseDigits parses a non-negative decimal integer, digits only, that
// fits an int64.
func parseDigits[T string | []byte](s T) (int64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	n := int64(0)
	for i := range len(s) {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// readRange fills p with the object's bytes at off, with range requests,
// retried from where the last one stopped.
func (o *object) readRange(ctx context.Context, p []byte, off int64) (int, error) {
	n := 0
	err := o.withRetries(ctx, func() error {
		m, err := o.tryRange(ctx, p[n:], off+int64(n))
		n += m
		return err
	})
	return n, err
}

// tryRange fills p with the object's bytes at off with one range request,
// and returns how many arrived.
func (o *object) tryRange(ctx context.Context, p []byte, off int64) (int, error) {
	last := off + int64(len(p)) - 1
	var x *exchange
	if r := o.direct.Load(); r != nil {
		var n int
		var err error
		var done bool
		if x, n, done, err = o.directRange(ctx, r, p, off, last); done {
			return n, err
		}
		// x holds a response that tryRange judges below, or is nil for
		// a request to make through the client.
	}
	if x == nil {
		var err error
		if x, err = o.send(ctx, off, last); err != nil {
			return 0, err
		}
	}
	defer x.close()
	resp := x.resp
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		// If-Range asks for the whole object when the version differs.
		if err := x.checkVersion(); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %s: 200 OK with the whole object of the same version, from a server that honoured ranges before", ErrBadResponse, x.what())
	case http.StatusRequestedRangeNotSatisfiable:
		if _, _, total, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && total >= 0 && total != o.size {
			return 0, fmt.Errorf("%w: %s: %s: the size was %d bytes and is now %d", ErrChanged, x.what(), resp.Status, o.size, total)
		}
		return 0, fmt.Errorf("%w: %s: %s", ErrBadResponse, x.what(), resp.Status)
	default:
		return 0, x.statusError()
	}
	if err := x.checkVersion(); err != nil {
		return 0, err
	}
	cr := resp.Header.Get("Content-Range")
	first, end, total, ok := parseContentRange(cr)
	switch {
	case !ok || first < 0:
		return 0, fmt.Errorf("%w: %s: Content-Range %q", ErrBadResponse, x.what(), cr)
	case total >= 0 && total != o.size:
		return 0, fmt.Errorf("%w: %s: the size was %d bytes and is now %d (Content-Range %q)", ErrChanged, x.what(), o.size, total, cr)
	case first != off || end != last:
		return 0, fmt.Errorf("%w: %s: Content-Range %q is not the range asked for", ErrBadResponse, x.what(), cr)
	case resp.ContentLength >= 0 && resp.ContentLength != int64(len(p)):
		return 0, fmt.Errorf("%w: %s: Content-Length %d for %d bytes", ErrBadResponse, x.what(), resp.ContentLength, len(p))
	}
	return x.readFull(p)
}

// probe makes the first request, for the first probeLen bytes, and sets
// the object's size, version, head and whether it honours ranges.
func (o *object) probe(ctx context.Context) error {
	return o.withRetries(ctx, func() error { return o.tryProbe(ctx) })
}

func (o *object) tryProbe(ctx context.Context) error {
	x, err := o.send(ctx, 0, probeLen-1)
	if err != nil {
		return err
	}
	defer x.close()
	resp := x.resp
	what := x.what()
	switch resp.StatusCode {
	case http.StatusPartialContent, http.StatusOK:
	case http.StatusRequestedRangeNotSatisfiable:
		// An empty object has no byte 0.
		if _, _, total, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && total == 0 {
			o.size, o.ranged = 0, true
			o.setVersion(resp.Header)
			o.published = publishedOf(resp)
			return nil
		}
		return fmt.Errorf("%w: %s: %s", ErrBadResponse, what, resp.Status)
	default:
		return x.statusError()
	}
	o.setVersion(resp.Header)
	o.published = publishedOf(resp)
	if resp.StatusCode == http.StatusOK {
		return o.readHead(x)
	}
	cr := resp.Header.Get("Content-Range")
	first, last, total, ok := parseContentRange(cr)
	switch {
	case !ok || first < 0 || total < 0:
		return fmt.Errorf("%w: %s: Content-Range %q gives no size", ErrBadResponse, what, cr)
	case first != 0 || last != min(total, probeLen)-1:
		return fmt.Errorf("%w: %s: Content-Range %q is not the range asked for", ErrBadResponse, what, cr)
	case resp.ContentLength >= 0 && resp.ContentLength != last+1:
		return fmt.Errorf("%w: %s: Content-Length %d for %d bytes", ErrBadResponse, what, resp.ContentLength, last+1)
	}
	head := make([]byte, last+1)
	if _, err := x.readFull(head); err != nil {
		return err
	}
	o.size, o.head, o.ranged = total, head, true
	o.direct.Store(o.directRoute(x))
	return nil
}

// publishedOf returns what resp, and the redirects that led to it, say of
// the object's content: the first X-Linked-Etag and X-Linked-Size in the
// chain (the Hub sends them with its redirect to the storage), and the
// ETag of the first response (the Hub's, before any redirect).
func publishedOf(resp *http.Response) Published {
	p := Published{LinkedSize: -1}
	for r := resp; r != nil; {
		h := r.Header
		if v := h.Get("X-Linked-Etag"); v != "" {
			p.LinkedETag = unquoteETag(v)
			p.LinkedSize = -1
			if n, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
				p.LinkedSize = n
			}
		}
		p.ETag = unquoteETag(h.Get("ETag"))
		if r.Request == nil {
			break
		}
		r = r.Request.Response
	}
	return p
}

// unquoteETag returns the opaque part of an entity tag: W/"x" and "x" give x.
func unquoteETag(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	return v
}

// setVersion keeps the validators of the first response.
func (o *object) setVersion(h http.Header) {
	o.etag, o.weakETag = "", ""
	if etag := h.Get("ETag"); strings.HasPrefix(etag, "W/") {
		o.weakETag = etag
	} else {
		o.etag = etag
	}
	o.lastModified = h.Get("Last-Modified")
	// The If-Range of every later request: the strong ETag, else the
	// date. A weak ETag cannot be sent, as If-Range compares strongly.
	o.ifRange = nil
	switch {
	case o.etag != "":
		o.ifRange = []string{o.etag}
	case o.lastModified != "":
		o.ifRange = []string{o.lastModified}
	}
}

// readHead reads the start of a 200 OK answer to the probe, from a server
// that ignores Range: the first probeLen bytes, and the rest of the header
// when its length prefix says there is more, growing the buffer as bytes
// arrive so that a false length costs no more than the bytes sent.
func (o *object) readHead(x *exchange) error {
	size := x.resp.ContentLength
	if size < 0 {
		// Such as a web page, sent compressed: if its first bytes say
		// so, that is the error.
		head := make([]byte, filekind.Len)
		n, _ := io.ReadFull(x, head)
		if filekind.Of(head[:n]) != filekind.Unknown {
			if _, err := safetensors.NewReader(head[:n]); errors.Is(err, safetensors.ErrNotSafetensors) {
				return headerError(o.url, head[:n], err)
			}
		}
		return fmt.Errorf("%w: %s: 200 OK without Content-Length, so the size is unknown", ErrNoRange, x.what())
	}
	want := min(size, probeLen)
	if size >= 8 {
		var prefix [8]byte
		if _, err := io.ReadFull(x, prefix[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return &retryable{err: fmt.Errorf("%w: %s: the response ended early: %w", ErrBadResponse, x.what(), io.ErrUnexpectedEOF)}
			}
			return x.netError(err)
		}
		if n := binary.LittleEndian.Uint64(prefix[:]); n <= safetensors.MaxHeaderSize && int64(n) <= size-8 {
			want = max(want, 8+int64(n))
		}
		var buf bytes.Buffer
		buf.Write(prefix[:])
		if m, err := io.Copy(&buf, io.LimitReader(x, want-8)); err != nil {
			return x.netError(err)
		} else if m < want-8 {
			return &retryable{err: fmt.Errorf("%w: %s: the response ended after %d of %d bytes: %w", ErrBadResponse, x.what(), 8+m, size, io.ErrUnexpectedEOF)}
		}
		o.head = buf.Bytes()
	} else {
		o.head = make([]byte, size)
		if _, err := io.ReadFull(x, o.head); err == io.EOF || err == io.ErrUnexpectedEOF {
			return &retryable{err: fmt.Errorf("%w: %s: the response ended early: %w", ErrBadResponse, x.what(), io.ErrUnexpectedEOF)}
		} else if err != nil {
			return x.netError(err)
		}
	}
	o.size, o.ranged = size, false
	return nil
}
