// Package remote reads safetensors files over HTTP without downloading
// them: the header with one or two range requests, then only the tensors
// asked for, as a program reading a checkpoint from object storage or a
// model hub would. Any server that honours Range requests will do.
//
// It is a separate package so that programs reading local files do not link
// net/http.
package remote

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/safetensors-go/safetensors"
)

// File is a remote object read with HTTP range requests. It implements
// io.ReaderAt and is safe for concurrent use, as io.ReaderAt requires.
type File struct {
	client   *http.Client
	url      string
	size     int64
	requests atomic.Int64
}

// Stat asks the server for the size of the object at url, with a HEAD
// request or, where the server refuses HEAD (as URLs signed for GET alone
// do), a GET of its first byte, whose Content-Range gives the size; it
// returns a File that reads the object. A nil client means
// http.DefaultClient.
func Stat(client *http.Client, url string) (*File, error) {
	if client == nil {
		client = http.DefaultClient
	}
	f := &File{client: client, url: url}
	f.requests.Add(1)
	resp, err := client.Head(url)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK && resp.ContentLength >= 0:
		f.size = resp.ContentLength
		return f, nil
	case resp.StatusCode == http.StatusOK:
		return nil, fmt.Errorf("HEAD %s: no Content-Length", url)
	case resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("HEAD %s: %s", url, resp.Status)
	}
	size, err := f.sizeFromRange()
	if err != nil {
		return nil, err
	}
	f.size = size
	return f, nil
}

// sizeFromRange asks for the first byte of the object and returns the
// size that the Content-Range of the answer gives.
func (f *File) sizeFromRange() (int64, error) {
	f.requests.Add(1)
	req, err := http.NewRequest(http.MethodGet, f.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", "bytes=0-0")
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		return 0, fmt.Errorf("GET %s bytes 0-0: %s", f.url, resp.Status)
	}
	// Content-Range: bytes 0-0/SIZE
	cr := resp.Header.Get("Content-Range")
	i := strings.LastIndexByte(cr, '/')
	size, err := strconv.ParseInt(cr[i+1:], 10, 64)
	if i < 0 || err != nil || size < 1 {
		return 0, fmt.Errorf("GET %s bytes 0-0: Content-Range %q gives no size", f.url, cr)
	}
	return size, nil
}

// Open reads and validates the header of the safetensors file at url, as
// safetensors.NewReaderAt does, with a HEAD request and one or two range
// requests, and returns a Reader that fetches each tensor with one more
// range request when it is asked for. A nil client means
// http.DefaultClient.
func Open(client *http.Client, url string, opts ...safetensors.ReadOption) (*safetensors.Reader, error) {
	f, err := Stat(client, url)
	if err != nil {
		return nil, err
	}
	r, err := safetensors.NewReaderAt(f, f.Size(), opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return r, nil
}

// Size returns the object's size in bytes, as the server gave it.
func (f *File) Size() int64 { return f.size }

// Requests returns the number of HTTP requests made so far, Stat's
// included.
func (f *File) Requests() int64 { return f.requests.Load() }

// ReadAt implements io.ReaderAt with one range request.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if off < 0 {
		return 0, fmt.Errorf("GET %s: negative offset %d", f.url, off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), f.size) // exclusive
	f.requests.Add(1)
	req, err := http.NewRequest(http.MethodGet, f.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(end-1, 10))
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		// A server that ignores Range would send the whole object.
		return 0, fmt.Errorf("GET %s bytes %d-%d: %s", f.url, off, end-1, resp.Status)
	}
	n, err := io.ReadFull(resp.Body, p[:end-off])
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return n, fmt.Errorf("GET %s bytes %d-%d: the response ended after %d bytes: %w", f.url, off, end-1, n, err)
	}
	if err == nil && end-off < int64(len(p)) {
		err = io.EOF // the object ends within p
	}
	return n, err
}
