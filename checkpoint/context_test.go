package checkpoint

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors/load"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stallingServer serves the checkpoint in dir, but holds every read of a
// tensor (a ranged GET past the first bytes of a file) until the request's
// context is done, and reports on aborted when it is.
func stallingServer(t *testing.T, dir string) (base string, aborted chan time.Time) {
	aborted = make(chan time.Time, 16)
	srv := serveDirDelayed(t, dir, 0, func(w http.ResponseWriter, r *http.Request) bool {
		if rg := r.Header.Get("Range"); rg == "" || strings.HasPrefix(rg, "bytes=0-") {
			return false
		}
		<-r.Context().Done()
		aborted <- time.Now()
		return true
	})
	return srv.base, aborted
}

// TestTensorContext: cancelling the context of TensorContext aborts the
// request in flight at once: the server sees its request end within
// 100 ms; and Tensor reads under the context Open was given.
func TestTensorContext(t *testing.T) {
	// Tensors larger than the first read of a file (64 KiB), so that
	// reading them takes a request of their own.
	dir := layers(t, 4, 100_000, 200_000)
	base, aborted := stallingServer(t, dir)
	noRetry := RemoteOptions(remote.StallTimeout(0), remote.Retries(3))
	c, err := Open(context.Background(), base, noRetry)
	require.NoError(t, err)
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var cancelled atomic.Int64 // when, in Unix nanoseconds
	time.AfterFunc(50*time.Millisecond, func() {
		cancelled.Store(time.Now().UnixNano())
		cancel()
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.TensorContext(ctx, "layers.1.weight")
		done <- err
	}()
	select {
	case at := <-aborted:
		assert.Less(t, at.Sub(time.Unix(0, cancelled.Load())), 100*time.Millisecond, "the server saw the request end")
	case <-time.After(10 * time.Second):
		t.Fatal("the request in flight was not aborted")
	}
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorContains(t, err, "model-00001-of-00002.safetensors")
	case <-time.After(10 * time.Second):
		t.Fatal("TensorContext did not return")
	}
	select {
	case <-aborted:
		t.Error("a retry after the context ended")
	case <-time.After(50 * time.Millisecond):
	}

	// A context already done sends nothing.
	_, err = c.TensorContext(ctx, "layers.2.weight")
	assert.ErrorIs(t, err, context.Canceled)

	// Tensor reads under Open's context.
	openCtx, cancelOpen := context.WithCancel(context.Background())
	c2, err := Open(openCtx, base, noRetry)
	require.NoError(t, err)
	defer c2.Close()
	time.AfterFunc(50*time.Millisecond, func() {
		cancelled.Store(time.Now().UnixNano())
		cancelOpen()
	})
	_, err = c2.Tensor("layers.3.weight")
	assert.ErrorIs(t, err, context.Canceled)
	select {
	case at := <-aborted:
		assert.Less(t, at.Sub(time.Unix(0, cancelled.Load())), 100*time.Millisecond)
	case <-time.After(10 * time.Second):
		t.Fatal("the request in flight was not aborted")
	}
}

// TestLoaderCancelRemote: a load package Loader of a checkpoint over HTTP
// whose server stalls ends when its context's deadline passes, within
// 100 ms, and the server sees each request in flight end then; no request
// is left behind.
func TestLoaderCancelRemote(t *testing.T) {
	dir := layers(t, 6, 100_000, 200_000)
	base, aborted := stallingServer(t, dir)
	c, err := Open(context.Background(), base, RemoteOptions(remote.StallTimeout(0)))
	require.NoError(t, err)
	defer c.Close()

	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	var last error
	n := 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for _, err := range (&load.Loader{Concurrency: 4, ChunkSize: 64 << 10}).Load(ctx, c) {
			n++
			last = err
		}
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the load did not end after its deadline: the reads in flight were not aborted")
	}
	took := time.Since(start)
	require.Error(t, last)
	assert.ErrorIs(t, last, context.DeadlineExceeded)
	assert.Equal(t, 1, n, "no tensor arrives from a stalled server")
	assert.Less(t, took, deadline+100*time.Millisecond, "the loop ended once the deadline passed")
	// Each of the Loader's reads in flight was a request that the server
	// saw end when the deadline passed.
	ends := 0
	wait := time.After(time.Until(start.Add(deadline + 100*time.Millisecond)))
collect:
	for {
		select {
		case at := <-aborted:
			assert.Less(t, at.Sub(start), deadline+100*time.Millisecond)
			ends++
		case <-wait:
			break collect
		}
	}
	assert.Positive(t, ends, "the server saw the requests in flight end within 100 ms of the deadline")
}
