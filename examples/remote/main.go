// Command remote reads a safetensors file over HTTP without downloading it:
// the header with one range request (two for a header over 64 KiB), then
// only the tensors asked for, as a program reading a checkpoint from object
// storage or the Hugging Face Hub would.
//
//	go run ./examples/remote URL [TENSOR...]
//	HF_TOKEN=hf_... go run ./examples/remote https://huggingface.co/{repo}/resolve/main/model.safetensors
//
// For a gated or private repository, the token in HF_TOKEN goes with every
// request as "Authorization: Bearer ...", through remote.RequestHeader. Ctrl-C
// cancels the reads through their context.
//
// The remote package does the HTTP: remote.Open is all most programs need;
// this one uses remote.OpenFile and safetensors.NewReaderAt to count
// requests.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: remote URL [TENSOR...]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var opts []remote.Option
	if token := os.Getenv("HF_TOKEN"); token != "" {
		opts = append(opts, remote.RequestHeader("Authorization", "Bearer "+token))
	}
	if err := run(ctx, os.Stdout, nil, os.Args[1], os.Args[2:], opts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run lists the tensors of the file at url, and the first bytes of the
// named ones. A nil client is remote.DefaultClient, which times out on
// stalls, never on a slow but steady read.
func run(ctx context.Context, w io.Writer, client *http.Client, url string, names []string, opts ...remote.Option) error {
	src, err := remote.OpenFile(ctx, client, url, opts...)
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
