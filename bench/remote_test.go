package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/load"
)

// remoteCheckpoint writes a checkpoint of n BF16 tensors of size bytes
// each, with non-zero bytes, in shards of 8 tensors, and returns its
// directory.
func remoteCheckpoint(b *testing.B, n, size int) string {
	dir := b.TempDir()
	tensors := make([]safetensors.Tensor, n)
	for i := range tensors {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		tensors[i] = safetensors.Tensor{Name: fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), DType: safetensors.BF16, Shape: []uint64{uint64(size / 2)}, Data: data}
	}
	if err := checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(int64(8*size)), checkpoint.FileMetadata(map[string]string{"format": "pt"})); err != nil {
		b.Fatal(err)
	}
	return dir
}

// byteRange is one tensor's bytes in its shard file.
type byteRange struct {
	file      string
	off, size int64
}

// tensorRanges lists the byte ranges of the tensors of the checkpoint in
// dir, as plain range GETs would ask for them.
func tensorRanges(b *testing.B, dir string) []byteRange {
	s, err := checkpoint.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var out []byteRange
	for _, shard := range s.Files() {
		h, err := s.Header(shard)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range h.Tensors {
			out = append(out, byteRange{shard, int64(h.DataOffset() + t.DataOffsets[0]), int64(t.DataOffsets[1] - t.DataOffsets[0])})
		}
	}
	return out
}

// plainGets fetches the ranges with workers concurrent plain range GETs
// into the buffers, one per range, allocated beforehand: the ceiling, an
// HTTP client that checks nothing but the status.
func plainGets(client *http.Client, base string, ranges []byteRange, bufs [][]byte, workers int) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := ranges[i]
				req, err := http.NewRequest(http.MethodGet, base+"/"+r.file, nil)
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Range", "bytes="+strconv.FormatInt(r.off, 10)+"-"+strconv.FormatInt(r.off+r.size-1, 10))
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, err = io.ReadFull(resp.Body, bufs[i])
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusPartialContent {
					errs <- fmt.Errorf("%s: %v %v", r.file, resp.Status, err)
					return
				}
			}
		}()
	}
	var err error
	for i := range ranges {
		select {
		case next <- i:
			continue
		case err = <-errs:
		}
		break
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}

// BenchmarkRemoteLoad loads every tensor of a checkpoint served by
// http.FileServer on loopback, opened with checkpoint.Open of its URL,
// with a load.Loader (8 reads at once, each range checked and pinned by
// remote) into a buffer reused from one load to the next, and into memory
// of its own; and, as the ceiling, fetches the same byte ranges with 8
// concurrent plain range GETs into buffers allocated beforehand.
// "delay20ms" delays each response by 20 ms, as an object store's latency
// would, and adds sequential plain range GETs. The sides alternate, each
// round in another order. Metrics: each side's fastest round in MB/s, and
// ratios taken round by round, their median: "x" is the loader's
// throughput over the ceiling's (≥ 0.8 wanted), "x-alloc" the same with
// the Loader's own memory, and "seq-x" the loader's speedup over sequential
// reads (≥ 5 wanted). The checkpoint is 64 tensors of 2 MiB (16 of 1 MiB
// with -short), in shards of 8 tensors.
func BenchmarkRemoteLoad(b *testing.B) {
	n, size := 64, 2<<20
	if testing.Short() {
		n, size = 16, 1<<20
	}
	dir := remoteCheckpoint(b, n, size)
	ranges := tensorRanges(b, dir)
	bufs := make([][]byte, len(ranges))
	for i, r := range ranges {
		bufs[i] = make([]byte, r.size)
		for j := range bufs[i] {
			bufs[i][j] = 1 // fault the buffers in before timing
		}
	}
	ring := make([]byte, n*(size+4096))
	for i := range ring {
		ring[i] = 1 // the same for the Loader's buffer
	}
	total := float64(n * size)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	client := &http.Client{Transport: transport}
	const workers = 8

	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		name := "plain"
		if delay > 0 {
			name = fmt.Sprintf("delay%dms", delay.Milliseconds())
		}
		b.Run(name, func(b *testing.B) {
			files := http.FileServer(http.Dir(dir))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(delay)
				files.ServeHTTP(w, r)
			}))
			defer srv.Close()
			s, err := checkpoint.Open(context.Background(), srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			loadAll := func(loader *load.Loader) error {
				got := 0
				for t, err := range loader.Load(context.Background(), s) {
					if err != nil {
						return err
					}
					got += len(t.Data)
				}
				if got != n*size {
					return fmt.Errorf("loaded %d bytes, want %d", got, n*size)
				}
				return nil
			}
			sides := []func() error{
				func() error { return plainGets(client, srv.URL, ranges, bufs, workers) },
				func() error { return loadAll(&load.Loader{Concurrency: workers, Buffer: ring}) },
				func() error { return loadAll(&load.Loader{Concurrency: workers}) },
			}
			if delay > 0 {
				sides = append(sides, func() error { return plainGets(client, srv.URL, ranges, bufs, 1) })
			}
			best := make([]time.Duration, len(sides))
			var ratios [][]float64 // per round: the ceiling's time over each side's
			round := 0
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				times := make([]time.Duration, len(sides))
				for k := range sides {
					i := (k + round) % len(sides)
					start := time.Now()
					if err := sides[i](); err != nil {
						b.Fatal(err)
					}
					times[i] = time.Since(start)
					if best[i] == 0 || times[i] < best[i] {
						best[i] = times[i]
					}
				}
				r := make([]float64, len(sides))
				for i := range sides {
					r[i] = times[0].Seconds() / times[i].Seconds()
				}
				ratios = append(ratios, r)
				round++
			}
			median := func(f func(r []float64) float64) float64 {
				v := make([]float64, len(ratios))
				for k, r := range ratios {
					v[k] = f(r)
				}
				slices.Sort(v)
				return v[len(v)/2]
			}
			mbps := func(d time.Duration) float64 { return total / d.Seconds() / 1e6 }
			b.ReportMetric(mbps(best[0]), "ceiling-MB/s")
			b.ReportMetric(mbps(best[1]), "load-MB/s")
			b.ReportMetric(mbps(best[2]), "load-alloc-MB/s")
			b.ReportMetric(median(func(r []float64) float64 { return r[1] }), "x")
			b.ReportMetric(median(func(r []float64) float64 { return r[2] }), "x-alloc")
			if delay > 0 {
				b.ReportMetric(mbps(best[3]), "seq-MB/s")
				b.ReportMetric(median(func(r []float64) float64 { return r[1] / r[3] }), "seq-x")
			}
		})
	}
}
