package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
)

// BenchmarkReadSlice reads into the caller's buffer, with
// Reader.ReadSlice, a 4 MiB BF16 matrix [2048, 1024] whole and one
// tensor-parallel rank's half of its columns (2048 runs of 1 KiB, 2 KiB
// apart), from each kind of Reader: mapped (Open), through an io.ReaderAt
// (an *os.File), and over HTTP (the remote package, a loopback server).
// allocs/op is the point: 0 for the mapped and io.ReaderAt Readers; over
// HTTP, the allocations of net/http's requests, which the ceiling,
// plain range GETs of the same bytes with net/http, shows in the same run.
// The other ceilings: copying the same bytes from memory, ReadAt of them
// from the file.
func BenchmarkReadSlice(b *testing.B) {
	const rows, cols = 2048, 1024
	data := make([]byte, rows*cols*2)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	path := filepath.Join(b.TempDir(), "m.safetensors")
	if err := safetensors.WriteFile(path, []safetensors.Tensor{{Name: "w", DType: safetensors.BF16, Shape: []uint64{rows, cols}, Data: data}}, nil); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	mapped, err := safetensors.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer mapped.Close()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Stat()
	viaFile, err := safetensors.NewReaderAt(f, info.Size())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fh, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer fh.Close()
		http.ServeContent(w, r, "m.safetensors", time.Unix(1, 0), fh)
	}))
	defer srv.Close()
	viaHTTP, err := remote.Open(ctx, srv.Client(), srv.URL+"/m.safetensors")
	if err != nil {
		b.Fatal(err)
	}
	base := int64(viaFile.Header().DataOffset())

	dst := make([]byte, len(data))
	half := []safetensors.Selector{safetensors.All(), safetensors.Range(0, cols/2)}
	for _, sel := range []struct {
		name string
		idx  []safetensors.Selector
		size int
	}{{"whole", nil, len(data)}, {"columns", half, len(data) / 2}} {
		for _, rd := range []struct {
			name string
			r    *safetensors.Reader
		}{{"mapped", mapped}, {"ReaderAt", viaFile}, {"HTTP", viaHTTP}} {
			b.Run(sel.name+"/"+rd.name, func(b *testing.B) {
				b.SetBytes(int64(sel.size))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := rd.r.ReadSlice(ctx, "w", dst, sel.idx...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// The ceilings: the whole tensor's bytes copied from memory, read from
	// the file with one ReadAt, and fetched with one range GET.
	b.Run("whole/ceiling=copy", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			copy(dst, data)
		}
	})
	b.Run("whole/ceiling=ReadAt", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.ReadAt(dst, base); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole/ceiling=GET", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		rng := "bytes=" + strconv.FormatInt(base, 10) + "-" + strconv.FormatInt(base+int64(len(data))-1, 10)
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/m.safetensors", nil)
			req.Header.Set("Range", rng)
			resp, err := srv.Client().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, dst); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}
