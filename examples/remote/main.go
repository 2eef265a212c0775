// Command remote reads a safetensors file over HTTP without downloading it:
// the header with one or two range requests, then only the tensors asked
// for, as a program reading a checkpoint from object storage would.
//
//	go run ./examples/remote URL [TENSOR...]
//
// The remote package does the HTTP: remote.Open is all most programs need;
// this one uses remote.Stat and safetensors.NewReaderAt to count requests.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
)

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
	src, err := remote.Stat(client, url)
	if err != nil {
		return err
	}
	size := src.Size()
	r, err := safetensors.NewReaderAt(src, size)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer r.Close()
	h := r.Header()
	fmt.Fprintf(w, "%s: %d bytes, %d tensors, header read in %d requests\n", url, size, len(h.Tensors), src.Requests())
	for _, name := range names {
		t, err := r.Tensor(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s %v %v: % x\n", t.Name, t.DType, t.Shape, t.Data[:min(len(t.Data), 8)])
	}
	fmt.Fprintf(w, "%d requests in all\n", src.Requests())
	return nil
}
