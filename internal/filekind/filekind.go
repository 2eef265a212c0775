// Package filekind names the kind of a file from its first bytes, for the
// errors about an input that is not what was asked for: a Git LFS pointer
// where the weights were expected, a web page for a file's URL, a sharded
// checkpoint's index, a PyTorch checkpoint or a GGUF file where a
// safetensors file was expected. It is the module's one such guesser: the
// core package words its errors from it, the remote package tells a web
// page from a file with it, and the checkpoint package an index from a web
// page.
package filekind

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Len is how many of a file's first bytes Of looks at, and what a caller
// that reads them only to name the file needs to read: a Git LFS pointer
// whole, the first zip record's name, the start of a JSON index up to its
// weight_map.
const Len = 1024

// A Kind is a kind of file that is not a safetensors file.
type Kind uint8

// The kinds of files that Of knows.
const (
	Unknown    Kind = iota // none of the others: binary data of no known format
	LFSPointer             // a Git LFS pointer file, in place of the file it points to
	HTML                   // a web page
	XML                    // an XML document, such as an object store's error
	Index                  // a sharded checkpoint's index: JSON with a weight_map
	Pipeline               // a diffusers pipeline's model_index.json
	Modules                // a sentence-transformers model's modules.json
	JSONError              // a JSON object with an "error", such as a server's answer
	JSON                   // other JSON
	PyTorchZip             // a PyTorch checkpoint in torch.save's zip format
	Zip                    // another zip archive
	EmptyZip               // an empty zip archive
	Pickle                 // a Python pickle, such as PyTorch's legacy format
	GGUF                   // a GGUF file, as llama.cpp reads
	HDF5                   // an HDF5 file, such as Keras weights
	NumPy                  // a NumPy array (.npy)
	Gzip                   // a gzip-compressed file
	Zstd                   // a zstd-compressed file
	Text                   // other text, such as an error message
)

// magics are the binary formats, by their first bytes.
var magics = []struct {
	magic string
	kind  Kind
}{
	{"PK\x03\x04", Zip},
	{"PK\x05\x06", EmptyZip},
	{"\x80\x02", Pickle},
	{"\x80\x03", Pickle},
	{"\x80\x04", Pickle},
	{"\x80\x05", Pickle},
	{"GGUF", GGUF},
	{"\x89HDF\r\n\x1a\n", HDF5},
	{"\x93NUMPY", NumPy},
	{"\x1f\x8b", Gzip},
	{"\x28\xb5\x2f\xfd", Zstd},
}

// Of returns the kind of the file whose first bytes are b, as many as the
// caller has (it looks at the first Len at most), or Unknown. A text kind
// (a pointer, a page, JSON) may be preceded by a UTF-8 byte order mark and
// white space. Of never fails, whatever b's length: the fewer the bytes,
// the likelier Unknown.
func Of(b []byte) Kind {
	b = b[:min(len(b), Len)]
	for _, m := range magics {
		if bytes.HasPrefix(b, []byte(m.magic)) {
			if m.kind == Zip && bytes.Contains(b, []byte("data.pkl")) {
				return PyTorchZip // its first record is archive/data.pkl
			}
			return m.kind
		}
	}
	if !isText(b) {
		return Unknown
	}
	t := trimText(b)
	switch {
	case bytes.HasPrefix(t, []byte("version https://git-lfs")):
		return LFSPointer
	case hasPrefixFold(t, "<!doctype html") || hasPrefixFold(t, "<html"):
		return HTML
	case bytes.HasPrefix(t, []byte("<?xml")):
		if containsFold(t, "<html") {
			return HTML // XHTML
		}
		return XML
	case bytes.HasPrefix(t, []byte("{")) || bytes.HasPrefix(t, []byte("[")):
		switch {
		case bytes.Contains(t, []byte(`"weight_map"`)):
			return Index
		case bytes.Contains(t, []byte(`"_class_name"`)) && bytes.Contains(t, []byte(`"_diffusers_version"`)):
			return Pipeline
		case bytes.Contains(t, []byte(`"sentence_transformers.`)):
			return Modules
		case bytes.HasPrefix(t, []byte("{")) && bytes.Contains(t, []byte(`"error"`)):
			return JSONError
		}
		return JSON
	}
	return Text
}

// trimText returns b without a leading UTF-8 byte order mark and white
// space.
func trimText(b []byte) []byte {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	return bytes.TrimLeft(b, " \t\r\n")
}

// hasPrefixFold reports whether b starts with the ASCII prefix, in any
// case.
func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

// containsFold reports whether b holds the lower-case ASCII s, in any
// case.
func containsFold(b []byte, s string) bool {
	return bytes.Contains(bytes.ToLower(b), []byte(s))
}

// isText reports whether b starts with text: its first 8 bytes (the
// length prefix of a safetensors file, never text since its last four
// bytes are zero), after a byte order mark, are characters of UTF-8 other
// than the control characters but tab, line feed and carriage return.
func isText(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	for i := 0; i < min(len(b), 8); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 && i+utf8.UTFMax <= len(b) || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return false // a character cut off by the end of b is let pass
		}
		i += size
	}
	return true
}

// Excerpt returns the start of the text b as a Go string literal: its
// first line, of at most 64 bytes cut at a whole character.
func Excerpt(b []byte) string {
	t := trimText(b)
	t = t[:min(len(t), 64)]
	if i := bytes.IndexAny(t, "\r\n"); i >= 0 {
		t = t[:i]
	}
	for len(t) > 0 && !utf8.Valid(t) {
		t = t[:len(t)-1]
	}
	return strconv.Quote(string(t))
}

// LFS returns what the Git LFS pointer b says of the file it stands for:
// its object id ("sha256:" and 64 hex digits) and size in bytes; "" and -1
// for what it does not say.
func LFS(b []byte) (oid string, size int64) {
	size = -1
	for line := range strings.Lines(string(b[:min(len(b), Len)])) {
		line = strings.TrimRight(line, "\r\n")
		if v, ok := strings.CutPrefix(line, "oid sha256:"); ok && len(v) == 64 && isHex(v) {
			oid = "sha256:" + v
		} else if v, ok := strings.CutPrefix(line, "size "); ok && len(v) <= 19 {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 && v[0] != '+' {
				size = n
			}
		}
	}
	return oid, size
}

func isHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ResolveURL returns the URL of the file itself for rawURL, the URL of a
// web page that shows a file or folder of a repository as the Hugging Face
// Hub (and its mirrors) have them: .../{repo}/blob/{revision}/{file} and
// .../{repo}/tree/{revision}/{folder} become
// .../{repo}/resolve/{revision}/{file}. It returns "" for any other URL,
// and for those of the code forges whose blob/ URLs have no resolve/ form
// (GitHub, GitLab).
func ResolveURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	switch strings.ToLower(u.Hostname()) {
	case "github.com", "www.github.com", "gitlab.com", "bitbucket.org":
		return ""
	}
	for _, page := range []string{"/blob/", "/tree/"} {
		i := strings.Index(u.Path, page)
		if i <= 0 {
			continue // no repository before it
		}
		u.Path = u.Path[:i] + "/resolve/" + u.Path[i+len(page):]
		u.RawPath = ""
		u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
		return u.String()
	}
	return ""
}
