package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
	"github.com/safetensors-go/safetensors/remote"
)

// serveFile stands for object storage or a model hub: any server that
// honours Range requests.
func serveFile(data []byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(data))
	}))
}

func ExampleOpen() {
	var file bytes.Buffer
	err := safetensors.Write(&file, []safetensors.Tensor{
		{Name: "embed", DType: safetensors.BF16, Shape: []uint64{2, 2}, Data: []byte{0x80, 0x3f, 0, 0x40, 0x40, 0x40, 0x80, 0x40}},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	srv := serveFile(file.Bytes())
	defer srv.Close()

	r, err := remote.Open(context.Background(), srv.Client(), srv.URL+"/model.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Names())
	t, err := r.Tensor("embed") // one more range request
	if err != nil {
		log.Fatal(err)
	}
	vals, err := t.Float32s()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(vals)
	// Output:
	// [embed]
	// [1 2 3 4]
}

// OpenFile gives a File, an io.ReaderAt, to pass to safetensors.NewReaderAt
// with options, and to count the requests.
func ExampleOpenFile() {
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{{Name: "x", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{7}}}, nil); err != nil {
		log.Fatal(err)
	}
	srv := serveFile(file.Bytes())
	defer srv.Close()

	f, err := remote.OpenFile(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		log.Fatal(err)
	}
	r, err := safetensors.NewReaderAt(f, f.Size(), safetensors.Strict())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Printf("%d bytes, %d tensor, %d requests\n", f.Size(), len(r.Names()), f.Requests())
	// Output: 65 bytes, 1 tensor, 1 requests
}

// Gated and private repositories of the Hugging Face Hub want the user's
// token (HF_TOKEN in the Hugging Face tools) as a bearer token; the URL of a
// file is https://huggingface.co/{repo}/resolve/{revision}/{file}. Here a
// local server stands for the Hub.
func ExampleHeader() {
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{{Name: "x", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{7}}}, nil); err != nil {
		log.Fatal(err)
	}
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer hf_example" {
			http.Error(w, "Access to model org/gated is restricted.", http.StatusUnauthorized)
			return
		}
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(file.Bytes()))
	}))
	defer hub.Close()
	url := hub.URL + "/org/gated/resolve/main/model.safetensors"

	token := "hf_example" // os.Getenv("HF_TOKEN")
	r, err := remote.Open(context.Background(), nil, url, remote.RequestHeader("Authorization", "Bearer "+token))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Names())

	_, err = remote.Open(context.Background(), nil, url) // without the token
	fmt.Println(err != nil)
	// Output:
	// [x]
	// true
}

// The checkpoint package's Open opens a model by its base URL, as
// transformers finds it, through this package, and a load package Loader
// reads its tensors with parallel range requests, handing each over as it
// arrives. A local server stands for the Hugging Face Hub, whose base URLs
// are https://huggingface.co/{repo}/resolve/{revision}.
func Example_checkpoint() {
	dir, err := os.MkdirTemp("", "model")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var tensors []safetensors.Tensor
	for i := range 4 {
		data := bytes.Repeat([]byte{byte(i)}, 1000)
		tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("layers.%d.weight", i), DType: safetensors.U8, Shape: []uint64{1000}, Data: data})
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(2000)); err != nil {
		log.Fatal(err)
	}
	hub := httptest.NewServer(http.StripPrefix("/org/model/resolve/main", http.FileServer(http.Dir(dir))))
	defer hub.Close()

	ckpt, err := checkpoint.Open(context.Background(), hub.URL+"/org/model/resolve/main")
	if err != nil {
		log.Fatal(err)
	}
	defer ckpt.Close()
	fmt.Println(ckpt.Files())
	var total int
	loader := &load.Loader{Concurrency: 8}
	for t, err := range loader.Load(context.Background(), ckpt) {
		if err != nil {
			log.Fatal(err)
		}
		total += len(t.Data) // hand t to the device here
	}
	fmt.Println(total, "bytes")
	// Output:
	// [model-00001-of-00002.safetensors model-00002-of-00002.safetensors]
	// 4000 bytes
}

// Options tune the reads: how many times a failed request is retried, how
// long a request may stall, and the options of safetensors.NewReaderAt.
// Here the server fails the first request with 503 Service Unavailable,
// and the retry succeeds.
func ExampleRetries() {
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{{Name: "x", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{7}}}, nil); err != nil {
		log.Fatal(err)
	}
	var failed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !failed.Swap(true) {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(file.Bytes()))
	}))
	defer srv.Close()

	ctx := context.Background()
	opts := []remote.Option{remote.Retries(2), remote.StallTimeout(10 * time.Second)}
	f, err := remote.OpenFile(ctx, srv.Client(), srv.URL, opts...)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes after %d requests\n", f.Size(), f.Requests())

	r, err := remote.Open(ctx, srv.Client(), srv.URL, append(opts, remote.ReadOptions(safetensors.Strict()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Names())
	// Output:
	// 65 bytes after 2 requests
	// [x]
}
