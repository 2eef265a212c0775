// Command remote reads a safetensors file over HTTP without downloading it:
// the header with one or two range requests, then only the tensors asked
// for, as a program reading a checkpoint from object storage would.
//
//	go run ./examples/remote URL [TENSOR...]
//
// httpReaderAt, the io.ReaderAt it gives safetensors.NewReaderAt, is the part
// to copy: any server that honours Range requests will do.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/safetensors-go/safetensors"
)

// httpReaderAt reads a remote object with HTTP range requests. It is safe
// for concurrent use, as io.ReaderAt requires.
type httpReaderAt struct {
	client   *http.Client
	url      string
	requests atomic.Int64 // for the curious, and the tests
}

// size asks the server for the object's size with a HEAD request.
func (h *httpReaderAt) size() (int64, error) {
	h.requests.Add(1)
	resp, err := h.client.Head(h.url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HEAD %s: %s", h.url, resp.Status)
	}
	if resp.ContentLength < 0 {
		return 0, fmt.Errorf("HEAD %s: no Content-Length", h.url)
	}
	return resp.ContentLength, nil
}

// ReadAt implements io.ReaderAt with one range request.
func (h *httpReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	h.requests.Add(1)
	req, err := http.NewRequest(http.MethodGet, h.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+int64(len(p))-1, 10))
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		return 0, io.EOF
	default:
		// A server that ignores Range would send the whole object.
		return 0, fmt.Errorf("GET %s bytes %d-%d: %s", h.url, off, off+int64(len(p))-1, resp.Status)
	}
	n, err := io.ReadFull(resp.Body, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF // the object ends within p
	}
	return n, err
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: remote URL [TENSOR...]")
		os.Exit(2)
	}
	if err := run(os.Stdout, http.DefaultClient, os.Args[1], os.Args[2:]...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run lists the tensors of the file at url, and the first bytes of the
// named ones.
func run(w io.Writer, client *http.Client, url string, names ...string) error {
	src := &httpReaderAt{client: client, url: url}
	size, err := src.size()
	if err != nil {
		return err
	}
	r, err := safetensors.NewReaderAt(src, size)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer r.Close()
	h := r.Header()
	fmt.Fprintf(w, "%s: %d bytes, %d tensors, header read in %d requests\n", url, size, len(h.Tensors), src.requests.Load())
	for _, name := range names {
		t, err := r.Tensor(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %v %v: % x\n", t.Name, t.DType, t.Shape, t.Data[:min(len(t.Data), 8)])
	}
	fmt.Fprintf(w, "%d requests in all\n", src.requests.Load())
	return nil
}
