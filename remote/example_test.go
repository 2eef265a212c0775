package remote_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/safetensors-go/safetensors"
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

	r, err := remote.Open(srv.Client(), srv.URL+"/model.safetensors")
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

// Stat gives a File, an io.ReaderAt, to pass to safetensors.NewReaderAt
// with options, and to count the requests.
func ExampleStat() {
	var file bytes.Buffer
	if err := safetensors.Write(&file, []safetensors.Tensor{{Name: "x", DType: safetensors.U8, Shape: []uint64{1}, Data: []byte{7}}}, nil); err != nil {
		log.Fatal(err)
	}
	srv := serveFile(file.Bytes())
	defer srv.Close()

	f, err := remote.Stat(srv.Client(), srv.URL)
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
	r, err := remote.OpenContext(context.Background(), nil, url, remote.Header("Authorization", "Bearer "+token))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println(r.Names())

	_, err = remote.Open(nil, url) // without the token
	fmt.Println(err != nil)
	// Output:
	// [x]
	// true
}
