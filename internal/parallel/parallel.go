// Package parallel runs a bounded number of goroutines over a range of
// work items: the one shape of parallel work in this module, where the
// core, check and quant each had their own worker pool.
package parallel

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// For calls f(worker, i) for each i in [0, n), from at most workers
// goroutines at once (GOMAXPROCS when workers <= 0), handing the indices
// out in increasing order as goroutines become free, so that items of
// uneven cost keep every goroutine busy to the end. worker, in [0,
// workers), tells which goroutine makes the call, so that f can keep
// per-goroutine state (a buffer) in a slice indexed by it; no two calls
// with the same worker run at once. With one worker, or n of 1, f runs on
// the calling goroutine.
//
// The first error f returns, or context.Cause(ctx) once ctx is done,
// stops the work: no more indices are handed out, the calls under way finish, and
// For returns that error. Otherwise it returns nil after every call has
// returned. A panic in f is not recovered.
func For(ctx context.Context, n, workers int, f func(worker, i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	done := ctx.Done()
	if workers <= 1 {
		for i := range n {
			select {
			case <-done:
				return context.Cause(ctx)
			default:
			}
			if err := f(0, i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next  atomic.Int64
		stop  atomic.Bool
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() { first = err })
		stop.Store(true)
	}
	wg.Add(workers)
	for w := range workers {
		go func() {
			defer wg.Done()
			for !stop.Load() {
				select {
				case <-done:
					fail(context.Cause(ctx))
					return
				default:
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(w, i); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// ForProgress is For where each call of f also returns how much work it
// did (the bytes it read), and report, unless nil, receives the running
// total after each call that did some: on the goroutine that called
// ForProgress, never from two goroutines at once, the total only growing,
// so that report may be a progress callback that is not safe for
// concurrent use. With more than one worker, For runs on a goroutine of
// its own and the amounts come through a channel; a slow report holds
// the workers back.
func ForProgress(ctx context.Context, n, workers int, f func(worker, i int) (uint64, error), report func(done uint64)) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var done uint64
	if report == nil || min(workers, n) <= 1 {
		return For(ctx, n, workers, func(w, i int) error {
			d, err := f(w, i)
			if d > 0 && report != nil {
				done += d
				report(done)
			}
			return err
		})
	}
	amounts := make(chan uint64, 4*workers)
	result := make(chan error, 1)
	go func() {
		result <- For(ctx, n, workers, func(w, i int) error {
			d, err := f(w, i)
			if d > 0 {
				amounts <- d
			}
			return err
		})
		close(amounts)
	}()
	for d := range amounts {
		done += d
		report(done)
	}
	return <-result
}

// Ordered calls produce for each i in [0, n) from at most workers
// goroutines at once (GOMAXPROCS when workers <= 0), and consume with
// each result on the calling goroutine, in the order of i: a pipeline
// whose work runs in parallel and whose output (the writes of a file)
// keeps its order. At most window items (2*workers+2 when window <= 0)
// are produced and not yet consumed, and slot, in [0, window), is the
// item's own until its consume returns, so that produce can fill memory
// kept per slot (a buffer) that consume then reads.
//
// The first error of produce (in the order of i) or consume, or
// context.Cause(ctx) once ctx is done, stops the work: no more items are
// consumed or handed out, the calls under way finish, and Ordered returns
// that error.
func Ordered[T any](ctx context.Context, n, workers, window int, produce func(slot, i int) (T, error), consume func(i int, v T) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	if window <= 0 {
		window = 2*workers + 2
	}
	done := ctx.Done()
	if workers == 1 && window == 1 || n <= 1 {
		for i := range n {
			select {
			case <-done:
				return context.Cause(ctx)
			default:
			}
			v, err := produce(0, i)
			if err != nil {
				return err
			}
			if err := consume(i, v); err != nil {
				return err
			}
		}
		return nil
	}
	type result struct {
		v   T
		err error
	}
	// Item i fills slot i % window: a token is taken before an index is
	// handed out and given back once the item is consumed, so that the
	// items under way are fewer than window past the last consumed.
	slots := make([]chan result, window)
	tokens := make(chan struct{}, window)
	for k := range slots {
		slots[k] = make(chan result, 1)
		tokens <- struct{}{}
	}
	quit := make(chan struct{})
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				select {
				case <-tokens:
				case <-quit:
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				v, err := produce(i%window, i)
				slots[i%window] <- result{v, err} // empty: its last item was consumed
			}
		}()
	}
	defer func() {
		close(quit)
		wg.Wait()
	}()
	for i := range n {
		var r result
		select {
		case r = <-slots[i%window]:
		case <-done:
			return context.Cause(ctx)
		}
		if r.err != nil {
			return r.err
		}
		if err := consume(i, r.v); err != nil {
			return err
		}
		tokens <- struct{}{}
	}
	return nil
}
