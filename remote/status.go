package remote

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/filekind"
)

// ErrStatus is wrapped by the error for a response whose status says that
// the request failed, such as 401 Unauthorized, 403 Forbidden, 404 Not
// Found or 503 Service Unavailable: the error is a [*StatusError]. (A 412
// Precondition Failed gives ErrChanged, a 416 Range Not Satisfiable
// ErrBadResponse.)
var ErrStatus = errors.New("safetensors: HTTP request failed")

// MaxErrorBody is how many bytes of the body of a failed response are read
// at most, for the server's message that a StatusError keeps the start of.
const MaxErrorBody = 1024

// maxExcerpt is how many characters of the server's message a StatusError
// keeps.
const maxExcerpt = 200

// A StatusError reports a response whose status says that the request
// failed. It matches ErrStatus with errors.Is, and fs.ErrNotExist too for
// 404 Not Found. Its message names the request and the status, says what
// would help where it can (credentials, for 401 and 403), and ends with the
// start of what the server said:
//
//	safetensors: GET https://huggingface.co/org/gated/resolve/main/model.safetensors bytes 0-65535: 401 Unauthorized: the server wants credentials: send a token with remote.RequestHeader("Authorization", "Bearer "+token) (for the Hugging Face Hub, a token from HF_TOKEN, with access to the repository); the server says: Access to model org/gated is restricted.
type StatusError struct {
	Code   int    // the status code, such as 401
	Status string // the status, such as "401 Unauthorized"
	URL    string // the URL requested
	// Body is the start of the server's message: of the response's body
	// (of which at most MaxErrorBody bytes are read), or where it has none,
	// of its X-Error-Message header. It is one line of printable text of at
	// most 200 characters, markup removed, an ellipsis (…) at its end where
	// it was cut.
	Body string

	what       string // the request, "GET URL bytes A-B"
	credential bool   // the request had an Authorization header
	hubError   string // the Hugging Face Hub's X-Error-Code, such as "GatedRepo"
}

// Error returns the message.
func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString("safetensors: ")
	b.WriteString(e.what)
	b.WriteString(": ")
	b.WriteString(e.Status)
	if e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden {
		switch {
		case e.hubError == "RepoNotFound":
			b.WriteString(": no such repository, or a private one: check its name, or send a token")
			if e.credential {
				b.WriteString(" with access to it (the one sent has none)")
			} else {
				b.WriteString(` with remote.RequestHeader("Authorization", "Bearer "+token) (a token from HF_TOKEN)`)
			}
		case e.hubError == "GatedRepo":
			b.WriteString(": a gated repository: accept its terms on its page on the Hub")
			if !e.credential {
				b.WriteString(`, and send a token with remote.RequestHeader("Authorization", "Bearer "+token) (a token from HF_TOKEN)`)
			}
		case e.credential:
			b.WriteString(": the credentials sent (the Authorization header) were refused: check that the token is valid and may read this object (for the Hugging Face Hub, that it has access to the repository; a gated repository's terms are accepted on its page)")
		default:
			b.WriteString(`: the server wants credentials: send a token with remote.RequestHeader("Authorization", "Bearer "+token) (for the Hugging Face Hub, a token from HF_TOKEN, with access to the repository)`)
		}
	}
	if e.Body != "" {
		b.WriteString("; the server says: ")
		b.WriteString(e.Body)
	}
	return b.String()
}

// Unwrap returns ErrStatus.
func (e *StatusError) Unwrap() error { return ErrStatus }

// Is reports whether target is fs.ErrNotExist and the status 404 Not
// Found.
func (e *StatusError) Is(target error) bool {
	return target == fs.ErrNotExist && e.Code == http.StatusNotFound
}

// newStatusError returns the StatusError for the response of x, reading at
// most MaxErrorBody bytes of its body.
func (x *exchange) newStatusError() *StatusError {
	resp := x.resp
	body := make([]byte, MaxErrorBody)
	n, _ := io.ReadFull(io.LimitReader(x, MaxErrorBody), body)
	msg := excerpt(body[:n], n == MaxErrorBody)
	if msg == "" {
		msg = excerpt([]byte(resp.Header.Get("X-Error-Message")), false)
	}
	return &StatusError{
		Code:       resp.StatusCode,
		Status:     resp.Status,
		URL:        x.o.url,
		Body:       msg,
		what:       x.what(),
		credential: sentCredentials(resp, x.o.cfg),
		hubError:   resp.Header.Get("X-Error-Code"),
	}
}

// sentCredentials reports whether the request that got resp carried an
// Authorization header: the last one, after redirects, which net/http
// strips of it on the way to another host.
func sentCredentials(resp *http.Response, cfg *config) bool {
	if resp.Request == nil {
		return cfg.header.Get("Authorization") != ""
	}
	return resp.Request.Header.Get("Authorization") != ""
}

// excerpt returns the start of a server's message b as one line of
// printable text: markup (of a web page, of XML) removed, every run of
// white space, control characters and invalid bytes made one space, at
// most maxExcerpt characters, with an ellipsis where it was cut, or where
// more followed b.
func excerpt(b []byte, more bool) string {
	if k := filekind.Of(b); k == filekind.HTML || k == filekind.XML {
		b = stripMarkup(b)
	}
	var text []rune
	space := false
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if r == utf8.RuneError && size == 1 || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = len(text) > 0
			continue
		}
		if space {
			text = append(text, ' ')
			space = false
		}
		text = append(text, r)
	}
	if len(text) > maxExcerpt {
		text, more = text[:maxExcerpt], true
	}
	out := strings.TrimRight(string(text), " ")
	if more && out != "" {
		out += "…"
	}
	return out
}

// stripMarkup returns b without its tags (<...>), the contents of its
// script and style elements and its comments, each replaced by a space.
func stripMarkup(b []byte) []byte {
	var out []byte
	lower := strings.ToLower(string(b))
	for i := 0; i < len(b); {
		if b[i] != '<' {
			out = append(out, b[i])
			i++
			continue
		}
		end := ">"
		switch rest := lower[i:]; {
		case strings.HasPrefix(rest, "<!--"):
			end = "-->"
		case strings.HasPrefix(rest, "<script"):
			end = "</script>"
		case strings.HasPrefix(rest, "<style"):
			end = "</style>"
		}
		j := strings.Index(lower[i:], end)
		if j < 0 {
			break // cut within a tag
		}
		i += j + len(end)
		out = append(out, ' ')
	}
	return out
}

// pageError is the error for the URL of a web page that shows a file, such
// as the Hugging Face Hub's .../blob/REVISION/FILE, given for the file's:
// it names the file's URL. It wraps the error of reading the page as a
// safetensors file, which matches safetensors.ErrNotSafetensors.
type pageError struct {
	url, file string
	err       error
}

func (e *pageError) Error() string {
	return "safetensors: " + e.url + " is a web page (HTML), not a safetensors file: use the resolve/ form of its URL, " + e.file
}

func (e *pageError) Unwrap() error { return e.err }

// headerError returns err, the error of reading as a safetensors file the
// object at url whose first bytes are head, naming url: for a web page at
// the URL of a page that shows a file, a pageError that says the file's
// URL.
func headerError(url string, head []byte, err error) error {
	if errors.Is(err, safetensors.ErrNotSafetensors) && filekind.Of(head) == filekind.HTML {
		if file := filekind.ResolveURL(url); file != "" {
			return &pageError{url: url, file: file, err: err}
		}
	}
	return fmt.Errorf("%s: %w", url, err)
}
