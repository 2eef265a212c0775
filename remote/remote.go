// Package remote reads safetensors files and sharded checkpoints over HTTP
// without downloading them: the header with one range request (two for a
// header over 64 KiB), then only the tensors asked for, as a program reading
// a checkpoint from object storage or a model hub would. Any server that
// honours Range requests will do; one that does not still gives the header.
//
// It trusts nothing a server says. Every ranged response is checked: its
// status, its Content-Range (start, end and total) against the range asked
// for and the object's size, and its body's length. The version of the
// object seen by the first request is pinned: its strong ETag goes back as
// If-Range on every later request (or, without one, its Last-Modified
// date), and an answer for another version (the whole object, as If-Range
// asks for when the version differs; a 412 Precondition Failed; a different
// validator; a different size) fails with an error wrapping [ErrChanged];
// so bytes from two versions of an object never mix. If-Range rather than
// If-Match, because a server that redirects, as the Hugging Face Hub does to
// its content delivery network, could apply If-Match to the redirect, whose
// ETag is not the object's; If-Range applies only where a range is served.
// Every response's own ETag and Last-Modified are compared with the pinned
// ones too, which catches a server that ignores If-Range. A weak ETag
// (W/"...") cannot be sent in If-Range, which compares strongly: it is
// compared on every response instead, with Last-Modified sent where the
// server gives one. A server that gives no validator at all can have its
// object replaced by one of the same size without this package noticing:
// only the size is checked.
//
// No call can hang forever. Every function that reads over the network
// takes a [context.Context] first, which governs its later reads too, and
// takes [Option]s last; every request fails after
// [DefaultStallTimeout] without progress, waiting for the response or for
// the next bytes of its body: a timeout on stalls, never on the whole
// request, so that a slow read of a large tensor is not cut. Reads are
// idempotent, so a 5xx or 429 answer (after its Retry-After, up to a cap), a
// reset connection or a stall are retried a bounded number of times with
// exponential backoff; see [Retries].
//
// The first request of an object, ReadFile and every request of a client
// that the package cannot stand in for go through the caller's
// [http.Client]. The range reads that follow go over HTTP/1.1 connections
// the package keeps itself, with no allocation per read (net/http
// allocates some 45 objects a request), where that changes nothing else:
// the first request was answered over HTTP/1.1 with 206 Partial Content,
// not redirected, through a client with no cookie jar and no Timeout,
// whose Transport is an *http.Transport (nil meaning
// http.DefaultTransport, so [DefaultClient] qualifies) that uses no proxy
// for the URL, no DialTLS or DialTLSContext and no MaxConnsPerHost, with
// keep-alives on. Those connections are dialed with the transport's
// DialContext and its TLSClientConfig, and honour its TLSHandshakeTimeout,
// ResponseHeaderTimeout, MaxIdleConnsPerHost, IdleConnTimeout (90 s when
// zero) and MaxResponseHeaderBytes; the request is the one net/http would
// send, field for field. A response other than the one expected (another
// status, a chunked or compressed body, a head over 16 KiB...) is read by
// net/http's parser and judged as any other; a redirect sends the
// object's reads back to the client. Each connection has a goroutine,
// parked while the connection is idle, that finds a server's close and
// ends the connection at its idle timeout; CloseIdleConnections of the
// transport does not reach them.
//
// # Models
//
// The checkpoint package opens a model over HTTP as it opens one on disk,
// through this package: a file's URL, an index's, or the base URL of a
// model's folder or repository revision, in every library's layout. A
// load package Loader then loads its tensors at the network's speed: it
// reads them with several range requests at once, in chunks, into memory
// it bounds and reuses (or the caller's), hands each tensor over as soon
// as it has arrived, and aborts the requests in flight when its context is
// done (a File is a safetensors.ReaderAtContext):
//
//	ckpt, err := checkpoint.Open(ctx, "https://huggingface.co/org/model/resolve/main")
//	loader := &load.Loader{Concurrency: 16, MemoryLimit: 1 << 30}
//	for t, err := range loader.Load(ctx, ckpt) {
//		// t.Data is valid until the next iteration
//	}
//
// # Hugging Face Hub
//
// A file of a repository on the Hub is at
//
//	https://huggingface.co/{repo}/resolve/{revision}/{file}
//
// such as https://huggingface.co/openai-community/gpt2/resolve/main/model.safetensors,
// where {revision} is a branch, a tag or a commit hash (pin a commit hash to
// read the same bytes tomorrow). The Hub redirects to a content delivery
// network; the client follows. The checkpoint package's Open of
// https://huggingface.co/{repo}/resolve/{revision} opens the model as its
// library does: model.safetensors, else model.safetensors.index.json, and
// so on.
// Gated and private repositories want a token (HF_TOKEN in the Hugging Face
// tools), sent with [RequestHeader]:
//
//	remote.RequestHeader("Authorization", "Bearer "+os.Getenv("HF_TOKEN"))
//
// Without one, their files answer 401 Unauthorized (403 Forbidden with a
// token that has no access): the error, a [*StatusError], says so, with
// the Hub's message. The URL of the Hub's web page of a file,
// https://huggingface.co/{repo}/blob/{revision}/{file}, gives a web page,
// not the file: the error of Open names the file's URL.
//
// net/http's Client does not forward the Authorization header on a redirect
// to another host, so the token is not sent to the content delivery network
// (whose URLs are signed).
//
// It is a separate package so that programs reading local files do not link
// net/http.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/safetensors-go/safetensors"
)

var (
	// ErrChanged is returned when the object at a URL is not the version
	// the first request saw: the server answered a range request with the
	// whole object (as If-Range asks for when the version differs) or with
	// 412 Precondition Failed, or gave another ETag, Last-Modified or total
	// size. The error names the URL and what
	// changed. Open the object again to read the new version.
	ErrChanged = errors.New("safetensors: remote object changed")

	// ErrNoRange is returned for a read of bytes past the header from a
	// server that answers Range requests with the whole object (200 OK),
	// such as Python's http.server: download the file instead.
	ErrNoRange = errors.New("safetensors: server does not support range requests")

	// ErrBadResponse is returned for a response that does not answer its
	// request: a Content-Range other than the range asked for, or none, a
	// body shorter or longer than that range, a 200 OK from a server that
	// honoured ranges before.
	ErrBadResponse = errors.New("safetensors: invalid response")

	// ErrStalled is returned when a request made no progress for the stall
	// timeout: no response, or no new byte of its body.
	ErrStalled = errors.New("safetensors: remote read stalled")
)

// The defaults of the options.
const (
	// DefaultStallTimeout is how long a request may wait for its response,
	// or for the next bytes of its body, before it fails with ErrStalled
	// (and is retried).
	DefaultStallTimeout = 30 * time.Second

	// DefaultRetries is how many times a failed read is retried.
	DefaultRetries = 4

	// MaxRetryAfter is the longest Retry-After a read waits; a server that
	// asks for more gets an error instead.
	MaxRetryAfter = 30 * time.Second
)

// An Option changes how a File or a Reader is read: [Open], [OpenFile]
// and [ReadFile] take them all, except that OpenFile and ReadFile, which
// make no Reader, ignore [ReadOptions].
type Option func(*config) error

type config struct {
	header   http.Header
	stall    time.Duration
	retries  int
	readOpts []safetensors.ReadOption
}

func newConfig(opts []Option) (*config, error) {
	c := &config{header: make(http.Header), stall: DefaultStallTimeout, retries: DefaultRetries}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// RequestHeader returns an option that adds an HTTP header to every
// request, such as ("Authorization", "Bearer "+token) for a gated
// repository or a private bucket. net/http's Client drops Authorization, Cookie and
// WWW-Authenticate on a redirect to another domain.
func RequestHeader(key, value string) Option {
	return func(c *config) error {
		if key == "" || strings.ContainsAny(key, " :\r\n") || strings.ContainsAny(value, "\r\n") {
			return fmt.Errorf("%w: RequestHeader: invalid request header %q", safetensors.ErrInvalidOption, key)
		}
		c.header.Add(key, value)
		return nil
	}
}

// StallTimeout returns an option that sets how long a request may wait for
// its response or for the next bytes of its body (DefaultStallTimeout). It
// bounds stalls, not the whole request: a read that keeps receiving bytes
// never times out. Zero or less means no limit.
func StallTimeout(d time.Duration) Option {
	return func(c *config) error {
		c.stall = d
		return nil
	}
}

// Retries returns an option that sets how many times a request is retried
// after a 5xx or 429 answer, a reset connection, a response that ends early
// or a stall (DefaultRetries), but not after a failure to connect: after
// about 0.1 s, 0.2 s, 0.4 s and so on, up to 5 s, or after the answer's
// Retry-After when it gives one of at most MaxRetryAfter. Zero means no
// retry.
func Retries(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: Retries(%d): negative retry count", safetensors.ErrInvalidOption, n)
		}
		c.retries = n
		return nil
	}
}

// ReadOptions returns an option that passes options to the
// safetensors.NewReaderAt that Open calls, such as safetensors.Strict().
// OpenFile and ReadFile ignore it.
func ReadOptions(opts ...safetensors.ReadOption) Option {
	return func(c *config) error {
		c.readOpts = append(c.readOpts, opts...)
		return nil
	}
}

// DefaultClient is the client used when a nil one is given: one with
// http.DefaultTransport's settings and timeouts on each step that can stall
// (dial 30 s, TLS handshake 10 s, response header 30 s, which a longer
// StallTimeout does not lengthen), no timeout on the whole request, and up
// to 64 idle connections per host, so that parallel range reads reuse
// them.
var DefaultClient = &http.Client{Transport: defaultTransport()}

func defaultTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = DefaultStallTimeout
	t.TLSHandshakeTimeout = 10 * time.Second
	t.MaxIdleConnsPerHost = 64
	return t
}

// File is a remote object read with HTTP range requests, pinned to the
// version its first request saw. It implements io.ReaderAt and is safe for
// concurrent use, as io.ReaderAt requires.
//
// A File keeps the context it was made with, as an http.Request does: its
// reads fail once that context is done. WithContext gives a File that reads
// the same object under another context, as f.WithContext(ctx).ReadAt(p,
// off) reads under ctx.
type File struct {
	*object
	ctx context.Context
}

// object is what the Files of one object share.
type object struct {
	client *http.Client
	url    string
	cfg    *config
	size   int64
	ranged bool   // the server honours Range requests
	head   []byte // the object's first bytes, from the first request

	// The validators of the first response, which every later one must
	// match: etag only when strong, weakETag otherwise.
	etag, weakETag, lastModified string

	requests  atomic.Int64
	published Published

	// What each request is sent with: the URL parsed once, and
	// the If-Range that pins the version (nil until the first response).
	reqURL  *url.URL
	reqHost string
	ifRange []string

	// direct is how range reads go over connections of the package's
	// own (direct.go), or nil for through the client.
	direct atomic.Pointer[directRoute]
}

// newObject returns the object at rawURL, before any request.
func newObject(client *http.Client, rawURL string, cfg *config) (*object, error) {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if client == nil {
		client = DefaultClient
	}
	return &object{client: client, url: rawURL, cfg: cfg, reqURL: req.URL, reqHost: req.Host}, nil
}

// OpenFile returns a File that reads the object at url, after one
// ranged GET of its first 64 KiB, which gives its size (from
// Content-Range), its version (ETag, Last-Modified) and the bytes that hold
// the header of most safetensors files, kept so that reading them again
// costs no request. From a server that ignores Range, it reads the start of
// the whole object it is sent, enough for the header and at most 8 bytes
// more than safetensors.MaxHeaderSize, and closes the connection; the
// File's later reads past those bytes fail with ErrNoRange. A nil client
// means DefaultClient.
//
// ctx governs the File's later reads too: they fail once it is done; a
// read under another context is ReadAtContext's. A failed request gives a
// *StatusError (wrapping ErrStatus), which for an object that the server
// does not have (404 Not Found) matches fs.ErrNotExist. A 200 OK of unknown
// size whose first bytes are those of another kind of file than
// safetensors, such as a web page, gives the error that Open gives for it,
// which wraps safetensors.ErrNotSafetensors.
func OpenFile(ctx context.Context, client *http.Client, url string, opts ...Option) (*File, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	o, err := newObject(client, url, cfg)
	if err != nil {
		return nil, err
	}
	if err := o.probe(ctx); err != nil {
		return nil, err
	}
	return &File{object: o, ctx: ctx}, nil
}

// Open reads and validates the header of the safetensors file at url, as
// safetensors.NewReaderAt does, with one range request (two for a header
// longer than 64 KiB), and returns a Reader that fetches each tensor with
// one more range request when it is asked for; see OpenFile. A nil client
// means DefaultClient. To open a model (a sharded checkpoint, a folder of
// any library's layout) over HTTP, use the checkpoint package's Open.
//
// ctx governs the Reader's later reads too: they fail once it is done;
// Reader.TensorContext reads under another context. Pass the options of
// safetensors.NewReaderAt with ReadOptions.
//
// The errors of NewReaderAt come with the URL in front. A URL whose object
// is a web page that shows a file rather than the file, such as
// https://huggingface.co/{repo}/blob/{revision}/{file}, gives an error
// (wrapping safetensors.ErrNotSafetensors) that names the file's URL,
// https://huggingface.co/{repo}/resolve/{revision}/{file}.
func Open(ctx context.Context, client *http.Client, url string, opts ...Option) (*safetensors.Reader, error) {
	f, err := OpenFile(ctx, client, url, opts...)
	if err != nil {
		return nil, err
	}
	r, err := safetensors.NewReaderAt(f, f.Size(), f.cfg.readOpts...)
	if err != nil {
		return nil, headerError(url, f.head, err)
	}
	return r, nil
}

// WithContext returns a File reading the same object, with the same
// pinned version and request count, under ctx.
func (f *File) WithContext(ctx context.Context) *File {
	return &File{object: f.object, ctx: ctx}
}

// URL returns the object's URL.
func (f *File) URL() string { return f.url }

// Size returns the object's size in bytes, as the server gave it.
func (f *File) Size() int64 { return f.size }

// Version returns the validator that pins the object's version: its strong
// ETag, else its weak ETag, else its Last-Modified date, else "".
func (f *File) Version() string {
	switch {
	case f.etag != "":
		return f.etag
	case f.weakETag != "":
		return f.weakETag
	}
	return f.lastModified
}

// Published is what a server said of an object's content beside serving
// it, in the answer to OpenFile's first request or a redirect before it:
// what the Hugging Face Hub says so that a client can check the bytes it
// gets.
type Published struct {
	// LinkedETag and LinkedSize are the Hub's X-Linked-Etag and
	// X-Linked-Size, sent for a file stored in Git LFS or Xet: the
	// SHA-256 of its content, in hex, and its size; "" and -1 if none.
	LinkedETag string
	LinkedSize int64
	// ETag is the entity tag of the first answer, unquoted: for a small
	// file the Hub keeps in git, the git blob SHA-1 of its content.
	ETag string
}

// Published returns what the server said of the object's content when
// the File was opened; see Published.
func (f *File) Published() Published { return f.published }

// Ranged reports whether the server honours Range requests. If not, only
// the first bytes that OpenFile read can be read.
func (f *File) Ranged() bool { return f.ranged }

// Requests returns the number of HTTP requests made so far, the first and
// retries included.
func (f *File) Requests() int64 { return f.requests.Load() }

// ReadAtContext is ReadAt under ctx rather than the File's own context:
// ctx's end aborts the request in flight. It makes a File a
// safetensors.ReaderAtContext, which Reader.TensorContext and the load
// package's Loader read through.
func (f *File) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	return f.WithContext(ctx).ReadAt(p, off)
}

// ReadAt implements io.ReaderAt with one range request, or none for the
// bytes the first request brought. It retries as Retries says, and fails
// with an error wrapping ErrChanged, ErrBadResponse, ErrNoRange or
// ErrStalled when the server does not give the bytes of the pinned version.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, fmt.Errorf("safetensors: GET %s: negative offset %d", f.url, off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), f.size-off)]
	if off+int64(len(want)) <= int64(len(f.head)) {
		copy(want, f.head[off:])
	} else if !f.ranged {
		return 0, fmt.Errorf("%w: GET %s answered a Range request with the whole object (200 OK); only its first %d bytes were read, and bytes %d-%d are wanted: download the file",
			ErrNoRange, f.url, len(f.head), off, off+int64(len(want))-1)
	} else if n, err := f.readRange(f.ctx, want, off); err != nil {
		return n, err
	}
	if len(want) < len(p) {
		return len(want), io.EOF // the object ends within p
	}
	return len(p), nil
}

// ReadFile GETs the whole object at url, of at most limit bytes, such as a
// model's config.json or a checkpoint's index, with the retries, stall
// timeout and headers of the options, and returns its bytes. A failed
// request gives a *StatusError, which for an object that the server does
// not have (404 Not Found) matches fs.ErrNotExist; a larger one an error, without reading more than limit
// bytes and one. A nil client means DefaultClient.
func ReadFile(ctx context.Context, client *http.Client, url string, limit int64, opts ...Option) ([]byte, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	o, err := newObject(client, url, cfg)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = o.withRetries(ctx, func() error {
		x, err := o.send(ctx, 0, -1)
		if err != nil {
			return err
		}
		defer x.close()
		switch code := x.resp.StatusCode; {
		case code != http.StatusOK:
			return x.statusError()
		case x.resp.ContentLength > limit:
			return fmt.Errorf("safetensors: %s: %d bytes, more than %d", x.what(), x.resp.ContentLength, limit)
		}
		body, err := io.ReadAll(io.LimitReader(x, limit+1))
		if err != nil {
			return x.netError(err)
		}
		if int64(len(body)) > limit {
			return fmt.Errorf("safetensors: %s: more than %d bytes", x.what(), limit)
		}
		x.ok = true // read to its end
		data = body
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}
