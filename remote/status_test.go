package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingTransport counts the bytes of the response bodies read through
// it.
type countingTransport struct {
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestStatusError: a 401, 403 or 404 answer gives a *StatusError that
// names the request and the status, says what would help, and ends with
// the server's message, on one line, through Open, OpenFile and ReadFile.
func TestStatusError(t *testing.T) {
	const gated = "Access to model org/gated is restricted. You must have access to it and be authenticated to access it. Please log in."
	for _, tt := range []struct {
		name      string
		code      int
		header    map[string]string // of the answer
		body      string
		token     bool   // the request sends an Authorization header
		want      string // in the message, after the request and the status
		wantBody  string // StatusError.Body
		notExists bool
	}{
		{name: "401", code: 401, body: gated + "\n",
			want:     `: the server wants credentials: send a token with remote.RequestHeader("Authorization", "Bearer "+token) (for the Hugging Face Hub, a token from HF_TOKEN, with access to the repository); the server says: ` + gated,
			wantBody: gated},
		{name: "403_token", code: 403, body: `{"error":"Access to model org/gated is restricted and you are not in the authorized list."}`, token: true,
			want:     ": the credentials sent (the Authorization header) were refused: check that the token is valid and may read this object",
			wantBody: `{"error":"Access to model org/gated is restricted and you are not in the authorized list."}`},
		{name: "401_repo_not_found", code: 401, header: map[string]string{"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
			want:     `: no such repository, or a private one: check its name, or send a token with remote.RequestHeader("Authorization", "Bearer "+token) (a token from HF_TOKEN); the server says: Repository not found`,
			wantBody: "Repository not found"},
		{name: "403_gated", code: 403, header: map[string]string{"X-Error-Code": "GatedRepo"}, body: "Cannot access gated repo.", token: true,
			want:     ": a gated repository: accept its terms on its page on the Hub; the server says: Cannot access gated repo.",
			wantBody: "Cannot access gated repo."},
		{name: "404", code: 404, body: "Entry not found", want: "; the server says: Entry not found", wantBody: "Entry not found", notExists: true},
		{name: "404_html", code: 404, body: "<!DOCTYPE html>\n<html><head><title>404 Not Found</title><style>p { color: red }</style></head>\n<body><h1>Not Found</h1><!-- x --><p>The requested URL was not found\ton this server.</p></body></html>\n",
			want:      "; the server says: 404 Not Found Not Found The requested URL was not found on this server.",
			wantBody:  "404 Not Found Not Found The requested URL was not found on this server.",
			notExists: true},
		{name: "404_no_body", code: 404, want: "404 Not Found", notExists: true},
		{name: "410", code: 410, body: "\x00\x01gone\x1b[31m\r\n", want: "410 Gone; the server says: gone [31m", wantBody: "gone [31m"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.code)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			url := srv.URL + "/org/gated/resolve/main/model.safetensors"
			var opts []Option
			if tt.token {
				opts = append(opts, RequestHeader("Authorization", "Bearer hf_x"))
			}
			ctx := context.Background()
			_, errOpen := Open(ctx, nil, url, opts...)
			_, errFile := OpenFile(ctx, nil, url, opts...)
			_, errRead := ReadFile(ctx, nil, url, 1000, opts...)
			for i, err := range []error{errOpen, errFile, errRead} {
				what := "GET " + url + " bytes 0-65535: "
				if i == 2 {
					what = "GET " + url + ": "
				}
				require.ErrorIs(t, err, ErrStatus)
				var se *StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tt.code, se.Code)
				assert.Equal(t, url, se.URL)
				assert.Equal(t, tt.wantBody, se.Body)
				assert.Equal(t, tt.notExists, errors.Is(err, fs.ErrNotExist))
				msg := err.Error()
				assert.True(t, strings.HasPrefix(msg, "safetensors: "+what+se.Status), msg)
				assert.Contains(t, msg, tt.want)
				assert.NotContains(t, msg, "\n")
				assert.True(t, utf8.ValidString(msg))
			}
		})
	}
}

// TestStatusErrorBounded: the server's message is read no further than
// MaxErrorBody bytes, and kept to 200 characters, cut with an ellipsis.
func TestStatusErrorBounded(t *testing.T) {
	huge := strings.Repeat("Forbidden. ", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The client reads the bound and closes the connection, which
		// fails this write at once on Linux; under Wine it can wait on the
		// closed connection, and srv.Close with it, until a deadline.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(2 * time.Second))
		http.Error(w, huge, http.StatusForbidden)
	}))
	defer srv.Close()
	ct := &countingTransport{}
	_, err := OpenFile(context.Background(), &http.Client{Transport: ct}, srv.URL)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.LessOrEqual(t, ct.read.Load(), int64(MaxErrorBody), "read no more than the bound")
	assert.Equal(t, 201, utf8.RuneCountInString(se.Body))
	assert.True(t, strings.HasSuffix(se.Body, "…"), se.Body)
	assert.True(t, strings.HasPrefix(se.Body, "Forbidden. Forbidden."), se.Body)
}

// TestStatusErrorRetried: a 503 is retried, and the last answer's
// StatusError is the error.
func TestStatusErrorRetried(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := OpenFile(context.Background(), nil, srv.URL, Retries(1), StallTimeout(time.Second))
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusServiceUnavailable, se.Code)
	assert.EqualError(t, err, "safetensors: GET "+srv.URL+" bytes 0-65535: 503 Service Unavailable; the server says: down for maintenance")
	assert.Equal(t, int64(2), n.Load())
}

func TestExcerpt(t *testing.T) {
	for _, tt := range []struct {
		in   string
		more bool
		want string
	}{
		{"", false, ""},
		{"  \r\n\t ", true, ""},
		{"Entry not found", false, "Entry not found"},
		{"Entry not found", true, "Entry not found…"},
		{"a\n\nb\tc\x00d\xffe\u200bf", false, "a b c d e f"},
		{"<?xml version=\"1.0\"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>", false, "AccessDenied Access Denied"},
		{"<html><script>var x = '<p>';</script><p>Moved", false, "Moved"},
		{"<html><p>cut in a ta", false, "cut in a ta"},
		{"<html><p>cut in <a href", false, "cut in"},
		{strings.Repeat("é", 300), false, strings.Repeat("é", 200) + "…"},
		{strings.Repeat("x", 199) + " " + "y", false, strings.Repeat("x", 199) + "…"},
	} {
		got := excerpt([]byte(tt.in), tt.more)
		assert.Equal(t, tt.want, got, "%q", tt.in)
		for _, r := range got {
			assert.True(t, unicode.IsPrint(r), "%q", got)
		}
	}
}

// TestWebPage: the URL of the Hugging Face Hub's web page of a file gives a
// web page, not the file: the error names the file's URL, whether the page
// comes with its size or not, and matches the sentinels of a file that is
// not a safetensors file. Another URL's web page gets the general advice.
func TestWebPage(t *testing.T) {
	page := "<!DOCTYPE html>\n<html class=\"\"><head><title>model.safetensors · org/model at main</title></head><body>" + strings.Repeat("<div>x</div>", 10000) + "</body></html>"
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			if chunked {
				w.(http.Flusher).Flush() // no Content-Length
			} else {
				w.Header().Set("Content-Length", strconv.Itoa(len(page)))
			}
			io.WriteString(w, page)
		}))
		blob := srv.URL + "/org/model/blob/main/model.safetensors"
		_, err := Open(context.Background(), nil, blob)
		require.ErrorIs(t, err, safetensors.ErrNotSafetensors, "chunked %v", chunked)
		require.ErrorIs(t, err, safetensors.ErrHeaderTooLarge)
		assert.EqualError(t, err, "safetensors: "+blob+" is a web page (HTML), not a safetensors file: use the resolve/ form of its URL, "+srv.URL+"/org/model/resolve/main/model.safetensors")

		other := srv.URL + "/login"
		_, err = Open(context.Background(), nil, other)
		require.ErrorIs(t, err, safetensors.ErrNotSafetensors)
		assert.EqualError(t, err, other+": safetensors: a web page (HTML), not a safetensors file: download the file itself; for the Hugging Face Hub, use the resolve/ form of its URL, https://huggingface.co/REPO/resolve/REVISION/FILE, not the page's blob/ form")
		srv.Close()
	}
}

// TestOpenNotSafetensors: a Git LFS pointer, an index or a PyTorch
// checkpoint served where a safetensors file is expected: the error names
// the URL and says what the file is.
func TestOpenNotSafetensors(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 5000000\n",
			"a Git LFS pointer, not the file it points to (oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393, 5000000 bytes): run 'git lfs pull'"},
		{`{"metadata": {"total_size": 4}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}`, "a sharded checkpoint's index (JSON with a weight_map), not a safetensors file: open it with the checkpoint package's Open"},
		{"PK\x03\x04\x00\x00\x08\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x12\x00archive/data.pkl" + strings.Repeat("\x00", 100), "a PyTorch checkpoint (torch.save's zip format), not a safetensors file"},
		{"GGUF\x03\x00\x00\x00" + strings.Repeat("\x00", 100), "a GGUF file (llama.cpp's format), not a safetensors file"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader([]byte(tt.body)))
		}))
		url := srv.URL + "/org/model/resolve/main/model.safetensors"
		_, err := Open(context.Background(), nil, url)
		require.ErrorIs(t, err, safetensors.ErrNotSafetensors)
		assert.True(t, strings.HasPrefix(err.Error(), url+": safetensors: "+tt.want), err.Error())
		srv.Close()
	}
}
