package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/rangeserver"
	"github.com/safetensors-go/safetensors/remote"
)

// BenchmarkReadSlice reads into the caller's buffer a 4 MiB BF16 matrix
// [2048, 1024], whole and one tensor-parallel rank's half of its columns
// (2048 runs of 1 KiB, 2 KiB apart), from every backend: a Reader mapped
// (Open), through an io.ReaderAt (an *os.File), and over HTTP (the remote
// package, against a loopback server), with Reader.ReadSlice; and from a
// checkpoint of two shards, on disk and over HTTP, with
// Checkpoint.ReadSlice. allocs/op is the point: 0 from files on disk.
// "elements" reads the first half of the elements with TensorElements
// instead, which allocates one thing of its own, the Shape of the Tensor
// it returns (and from a mapped Reader returns the mapping's bytes rather
// than copy them).
//
// Over HTTP the server is internal/rangeserver, which allocates nothing, so
// that allocs/op counts the client's alone: 0, the remote package's range
// reads going over HTTP/1.1 connections of its own (remote's package
// documentation says when), under a context that never ends (HTTP) and
// under one that can be cancelled (HTTP-cancelable). HTTP-client reads
// the same through net/http (a client with a cookie jar, which remote
// does not bypass), as remote read before; the ceiling=GET sub-benchmark
// makes the same requests (GETs/op) with net/http alone at its most
// frugal: an *http.Request for each range made beforehand and reused, the
// Range header's value made for each request, the body read with
// io.ReadFull into the same buffer. Its allocs/op is what net/http costs
// (a new *http.Request for each GET, as most code makes, would add 3 a
// request).
//
// The other ceilings: copying the same bytes from memory, ReadAt of them
// from the file.
func BenchmarkReadSlice(b *testing.B) {
	const rows, cols = 2048, 1024
	w := safetensors.Tensor{Name: "w", DType: safetensors.BF16, Shape: []uint64{rows, cols}, Data: make([]byte, rows*cols*2)}
	for i := range w.Data {
		w.Data[i] = byte(i*7 + 1)
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := safetensors.WriteFile(path, []safetensors.Tensor{w}, nil); err != nil {
		b.Fatal(err)
	}
	// The checkpoint: w in the second of two shards, behind a tensor of
	// the same size.
	ckptDir := filepath.Join(dir, "ckpt")
	first := safetensors.Tensor{Name: "a", DType: w.DType, Shape: w.Shape, Data: w.Data}
	if err := checkpoint.Write(ckptDir, []safetensors.Tensor{first, w}, checkpoint.Shards(2)); err != nil {
		b.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range []string{path, filepath.Join(ckptDir, "*")} {
		matches, _ := filepath.Glob(p)
		for _, m := range matches {
			data, err := os.ReadFile(m)
			if err != nil {
				b.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, m)
			files["/"+filepath.ToSlash(rel)] = data
		}
	}
	srv := rangeserver.Start(b, files)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	jar, err := cookiejar.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	viaClient := &http.Client{Transport: transport, Jar: jar}

	ctx := context.Background()
	cancelable, cancel := context.WithCancel(ctx)
	defer cancel()
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
	viaHTTP, err := remote.Open(ctx, client, srv.URL+"/m.safetensors")
	if err != nil {
		b.Fatal(err)
	}
	viaNetHTTP, err := remote.Open(ctx, viaClient, srv.URL+"/m.safetensors")
	if err != nil {
		b.Fatal(err)
	}
	ckpt, err := checkpoint.Open(ctx, ckptDir)
	if err != nil {
		b.Fatal(err)
	}
	defer ckpt.Close()
	ckptHTTP, err := checkpoint.Open(ctx, srv.URL+"/ckpt/model.safetensors.index.json", checkpoint.HTTPClient(client))
	if err != nil {
		b.Fatal(err)
	}
	defer ckptHTTP.Close()
	base := int64(viaFile.Header().DataOffset())

	type reader interface {
		ReadSlice(ctx context.Context, name string, dst []byte, sel ...safetensors.Selector) (int, error)
		TensorElements(ctx context.Context, name string, start, end uint64, buf []byte) (safetensors.Tensor, error)
	}
	dst := make([]byte, len(w.Data))
	for _, sel := range []struct {
		name     string
		idx      []safetensors.Selector
		elements bool // TensorElements of the first half of the elements
	}{
		{"whole", nil, false},
		{"columns", []safetensors.Selector{safetensors.All(), safetensors.Range(0, cols/2)}, false},
		{"elements", nil, true},
	} {
		want := w.Data[:len(w.Data)/2]
		if !sel.elements {
			part, err := w.Slice(sel.idx...)
			if err != nil {
				b.Fatal(err)
			}
			want = part.AppendTo(nil)
		}
		size := len(want)
		var gets []rangeserver.Request // those of Reader.ReadSlice over HTTP
		for _, rd := range []struct {
			name string
			r    reader
			ctx  context.Context
			http bool
		}{
			{"mapped", mapped, ctx, false},
			{"ReaderAt", viaFile, ctx, false},
			{"HTTP", viaHTTP, ctx, true},
			{"HTTP-cancelable", viaHTTP, cancelable, true},
			{"HTTP-client", viaNetHTTP, ctx, true},
			{"checkpoint", ckpt, ctx, false},
			{"checkpoint-HTTP", ckptHTTP, ctx, true},
		} {
			got := dst
			read := func() {
				var err error
				if sel.elements {
					var t safetensors.Tensor
					t, err = rd.r.TensorElements(rd.ctx, "w", 0, rows*cols/2, dst)
					got = t.Data // from a mapped Reader, the mapping
				} else {
					_, err = rd.r.ReadSlice(rd.ctx, "w", dst, sel.idx...)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			clear(dst)
			sent := srv.Record(read)
			if !bytes.Equal(got[:size], want) {
				b.Fatalf("%s/%s: not the selection's bytes", sel.name, rd.name)
			}
			if rd.name == "HTTP" {
				gets = sent
			}
			b.Run(sel.name+"/"+rd.name, func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					read()
				}
				if rd.http {
					b.ReportMetric(float64(len(sent)), "GETs/op")
				}
			})
		}
		// The ceiling: the same requests as Reader.ReadSlice over HTTP,
		// with net/http alone.
		b.Run(sel.name+"/ceiling=GET", func(b *testing.B) {
			g := newGETs(b, client, ctx, srv.URL, gets, dst)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				g.do()
			}
			b.ReportMetric(float64(len(gets)), "GETs/op")
		})
		if sel.elements {
			continue
		}
		// The HTTP reads side by side, in turns, each round in another
		// order, so that a busy machine slows each alike: "x" is the
		// median of the rounds' ratios of throughput over HTTP (remote's
		// own connections) to HTTP-client (through net/http), "x-GET"
		// to ceiling=GET.
		b.Run(sel.name+"/HTTP-ratios", func(b *testing.B) {
			g := newGETs(b, client, ctx, srv.URL, gets, dst)
			sides := []func(){
				func() {
					if _, err := viaHTTP.ReadSlice(ctx, "w", dst, sel.idx...); err != nil {
						b.Fatal(err)
					}
				},
				func() {
					if _, err := viaNetHTTP.ReadSlice(ctx, "w", dst, sel.idx...); err != nil {
						b.Fatal(err)
					}
				},
				g.do,
			}
			var x, xGET []float64
			b.SetBytes(int64(3 * size))
			round := 0
			for b.Loop() {
				var took [3]time.Duration
				for k := range sides {
					i := (k + round) % len(sides)
					start := time.Now()
					sides[i]()
					took[i] = time.Since(start)
				}
				round++
				x = append(x, float64(took[1])/float64(took[0]))
				xGET = append(xGET, float64(took[2])/float64(took[0]))
			}
			slices.Sort(x)
			slices.Sort(xGET)
			b.ReportMetric(x[len(x)/2], "x")
			b.ReportMetric(xGET[len(xGET)/2], "x-GET")
		})
	}
	// The other ceilings: the whole tensor's bytes copied from memory, and
	// read from the file with one ReadAt.
	b.Run("whole/ceiling=copy", func(b *testing.B) {
		b.SetBytes(int64(len(w.Data)))
		b.ReportAllocs()
		for b.Loop() {
			copy(dst, w.Data)
		}
	})
	b.Run("whole/ceiling=ReadAt", func(b *testing.B) {
		b.SetBytes(int64(len(w.Data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.ReadAt(dst, base); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// gets are range GETs made with net/http alone, at its most frugal: an
// *http.Request for each, made beforehand and reused (once its response's
// body is closed), with the If-Range that remote sends; only the Range
// header's value is made for each request.
type gets struct {
	b      testing.TB
	client *http.Client
	reqs   []*http.Request
	ranges [][]string // each request's Range header
	sent   []rangeserver.Request
	dst    []byte
}

func newGETs(b testing.TB, client *http.Client, ctx context.Context, base string, sent []rangeserver.Request, dst []byte) *gets {
	g := &gets{b: b, client: client, sent: sent, dst: dst}
	for _, s := range sent {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+s.Path, nil)
		if err != nil {
			b.Fatal(err)
		}
		rng := []string{""}
		req.Header["Range"] = rng
		req.Header["If-Range"] = []string{rangeserver.ETag}
		g.reqs, g.ranges = append(g.reqs, req), append(g.ranges, rng)
	}
	return g
}

// do makes the requests, each read into the start of dst.
func (g *gets) do() {
	for i, req := range g.reqs {
		s := g.sent[i]
		var buf [48]byte
		g.ranges[i][0] = string(strconv.AppendInt(append(strconv.AppendInt(append(buf[:0], "bytes="...), s.First, 10), '-'), s.Last, 10))
		resp, err := g.client.Do(req)
		if err != nil {
			g.b.Fatal(err)
		}
		if resp.StatusCode != http.StatusPartialContent {
			g.b.Fatalf("GET %s %s: %s", req.URL, g.ranges[i][0], resp.Status)
		}
		if _, err := io.ReadFull(resp.Body, g.dst[:s.Last-s.First+1]); err != nil {
			g.b.Fatal(err)
		}
		resp.Body.Close()
	}
}
