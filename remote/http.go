package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
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
		var r *retryable
		if err == nil || !errors.As(err, &r) {
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
// timer cancels its context when no progress was made for the stall
// timeout.
type exchange struct {
	o      *object
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	resp   *http.Response
	what   string // "GET URL bytes A-B", for errors
}

// send sends a GET of the object, for the bytes [off, end] when end >= 0,
// with the pinned version's preconditions.
func (o *object) send(ctx context.Context, off, end int64, what string) (*exchange, error) {
	x := &exchange{o: o, what: what}
	x.ctx, x.cancel = context.WithCancelCause(ctx)
	if o.cfg.stall > 0 {
		x.timer = time.AfterFunc(o.cfg.stall, func() { x.cancel(ErrStalled) })
	}
	req, err := http.NewRequestWithContext(x.ctx, http.MethodGet, o.url, nil)
	if err != nil {
		x.close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	for k, v := range o.cfg.header {
		req.Header[k] = v
	}
	if end >= 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(end, 10))
	}
	if end >= 0 {
		switch {
		case o.etag != "":
			req.Header.Set("If-Range", o.etag)
		case o.lastModified != "":
			req.Header.Set("If-Range", o.lastModified)
		}
	}
	o.requests.Add(1)
	resp, err := o.client.Do(req)
	if err != nil {
		err = x.netError(ctx, err)
		x.close()
		return nil, err
	}
	x.resp = resp
	x.progress()
	return x, nil
}

// netError describes err, from a request or its body, and makes it
// retryable unless the caller's context ended.
func (x *exchange) netError(parent context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("%s: %w", x.what, context.Cause(parent))
	}
	if errors.Is(context.Cause(x.ctx), ErrStalled) {
		return &retryable{err: fmt.Errorf("%w: %s: nothing for %v", ErrStalled, x.what, x.o.cfg.stall)}
	}
	err = fmt.Errorf("safetensors: %s: %w", x.what, err)
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &dns) || errors.As(err, &op) && op.Op == "dial" {
		return err // no server there: retrying would not help
	}
	return &retryable{err: err}
}

// progress restarts the stall timer.
func (x *exchange) progress() {
	if x.timer != nil {
		x.timer.Reset(x.o.cfg.stall)
	}
}

// close closes the response, if any, and stops the timer.
func (x *exchange) close() {
	if x.timer != nil {
		x.timer.Stop()
	}
	if x.resp != nil {
		x.resp.Body.Close()
	}
	x.cancel(nil)
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
// more; parent is the caller's context. It returns how many bytes arrived.
func (x *exchange) readFull(parent context.Context, p []byte) (int, error) {
	n, err := io.ReadFull(x, p)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, &retryable{err: fmt.Errorf("%w: %s: the response ended after %d of %d bytes: %w", ErrBadResponse, x.what, n, len(p), io.ErrUnexpectedEOF)}
	}
	if err != nil {
		return n, x.netError(parent, err)
	}
	var extra [1]byte
	if m, _ := io.ReadFull(x, extra[:]); m > 0 {
		return n, fmt.Errorf("%w: %s: the response is longer than the %d bytes asked for", ErrBadResponse, x.what, len(p))
	}
	return n, nil
}

// statusError is the error for an unexpected status: a *StatusError,
// retryable for 408, 429 and 5xx but 501, with the Retry-After of the
// answer when it asks for a wait of at most MaxRetryAfter; ErrChanged for
// 412.
func (x *exchange) statusError() error {
	resp := x.resp
	if resp.StatusCode == http.StatusPreconditionFailed {
		return fmt.Errorf("%w: %s: %s: the object is no longer the version %s", ErrChanged, x.what, resp.Status, x.o.version())
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
	switch {
	case o.etag != "" && etag != "" && etag != o.etag,
		o.weakETag != "" && etag != "" && etag != o.weakETag:
		return fmt.Errorf("%w: %s: the ETag was %s and is now %s", ErrChanged, x.what, o.etag+o.weakETag, etag)
	case (o.etag != "" || o.weakETag != "") && etag == "":
		return fmt.Errorf("%w: %s: the ETag was %s and is now gone", ErrChanged, x.what, o.etag+o.weakETag)
	}
	if lm := h.Get("Last-Modified"); o.lastModified != "" && lm != "" && lm != o.lastModified {
		return fmt.Errorf("%w: %s: it was last modified %s and is now last modified %s", ErrChanged, x.what, o.lastModified, lm)
	}
	return nil
}

// parseContentRange parses "bytes FIRST-LAST/TOTAL"; total is -1 for "*".
func parseContentRange(v string) (first, last, total int64, ok bool) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, 0, false
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, false
	}
	total = -1
	if tot != "*" {
		var err error
		if total, err = parseInt(tot); err != nil {
			return 0, 0, 0, false
		}
	}
	if rng == "*" {
		return -1, -1, total, true
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, false
	}
	var err1, err2 error
	first, err1 = parseInt(a)
	last, err2 = parseInt(b)
	if err1 != nil || err2 != nil || last < first {
		return 0, 0, 0, false
	}
	return first, last, total, true
}

// parseInt parses a non-negative decimal integer, digits only.
func parseInt(s string) (int64, error) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
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
	what := fmt.Sprintf("GET %s bytes %d-%d", o.url, off, last)
	x, err := o.send(ctx, off, last, what)
	if err != nil {
		return 0, err
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
		return 0, fmt.Errorf("%w: %s: 200 OK with the whole object of the same version, from a server that honoured ranges before", ErrBadResponse, what)
	case http.StatusRequestedRangeNotSatisfiable:
		if _, _, total, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && total >= 0 && total != o.size {
			return 0, fmt.Errorf("%w: %s: %s: the size was %d bytes and is now %d", ErrChanged, what, resp.Status, o.size, total)
		}
		return 0, fmt.Errorf("%w: %s: %s", ErrBadResponse, what, resp.Status)
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
		return 0, fmt.Errorf("%w: %s: Content-Range %q", ErrBadResponse, what, cr)
	case total >= 0 && total != o.size:
		return 0, fmt.Errorf("%w: %s: the size was %d bytes and is now %d (Content-Range %q)", ErrChanged, what, o.size, total, cr)
	case first != off || end != last:
		return 0, fmt.Errorf("%w: %s: Content-Range %q is not the range asked for", ErrBadResponse, what, cr)
	case resp.ContentLength >= 0 && resp.ContentLength != int64(len(p)):
		return 0, fmt.Errorf("%w: %s: Content-Length %d for %d bytes", ErrBadResponse, what, resp.ContentLength, len(p))
	}
	return x.readFull(ctx, p)
}

// probe makes the first request, for the first probeLen bytes, and sets
// the object's size, version, head and whether it honours ranges.
func (o *object) probe(ctx context.Context) error {
	return o.withRetries(ctx, func() error { return o.tryProbe(ctx) })
}

func (o *object) tryProbe(ctx context.Context) error {
	what := fmt.Sprintf("GET %s bytes 0-%d", o.url, probeLen-1)
	x, err := o.send(ctx, 0, probeLen-1, what)
	if err != nil {
		return err
	}
	defer x.close()
	resp := x.resp
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
		return o.readHead(ctx, x)
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
	if _, err := x.readFull(ctx, head); err != nil {
		return err
	}
	o.size, o.head, o.ranged = total, head, true
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
}

// readHead reads the start of a 200 OK answer to the probe, from a server
// that ignores Range: the first probeLen bytes, and the rest of the header
// when its length prefix says there is more, growing the buffer as bytes
// arrive so that a false length costs no more than the bytes sent.
func (o *object) readHead(ctx context.Context, x *exchange) error {
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
		return fmt.Errorf("%w: %s: 200 OK without Content-Length, so the size is unknown", ErrNoRange, x.what)
	}
	want := min(size, probeLen)
	if size >= 8 {
		var prefix [8]byte
		if _, err := io.ReadFull(x, prefix[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return &retryable{err: fmt.Errorf("%w: %s: the response ended early: %w", ErrBadResponse, x.what, io.ErrUnexpectedEOF)}
			}
			return x.netError(ctx, err)
		}
		if n := binary.LittleEndian.Uint64(prefix[:]); n <= safetensors.MaxHeaderSize && int64(n) <= size-8 {
			want = max(want, 8+int64(n))
		}
		var buf bytes.Buffer
		buf.Write(prefix[:])
		if m, err := io.Copy(&buf, io.LimitReader(x, want-8)); err != nil {
			return x.netError(ctx, err)
		} else if m < want-8 {
			return &retryable{err: fmt.Errorf("%w: %s: the response ended after %d of %d bytes: %w", ErrBadResponse, x.what, 8+m, size, io.ErrUnexpectedEOF)}
		}
		o.head = buf.Bytes()
	} else {
		o.head = make([]byte, size)
		if _, err := io.ReadFull(x, o.head); err == io.EOF || err == io.ErrUnexpectedEOF {
			return &retryable{err: fmt.Errorf("%w: %s: the response ended early: %w", ErrBadResponse, x.what, io.ErrUnexpectedEOF)}
		} else if err != nil {
			return x.netError(ctx, err)
		}
	}
	o.size, o.ranged = size, false
	return nil
}
