package parallel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestForEveryIndexOnce: each index is handed out once, with workers
// goroutines at work at once and never more, each worker number in use by
// one call at a time.
func TestForEveryIndexOnce(t *testing.T) {
	const n, workers = 1000, 3
	calls := make([]atomic.Int32, n)
	var busy [workers]atomic.Bool
	var active, most atomic.Int32
	var barrier sync.WaitGroup
	barrier.Add(workers)
	err := For(context.Background(), n, workers, func(w, i int) error {
		if !busy[w].CompareAndSwap(false, true) {
			return errors.New("two calls with one worker number")
		}
		defer busy[w].Store(false)
		a := active.Add(1)
		defer active.Add(-1)
		for m := most.Load(); a > m && !most.CompareAndSwap(m, a); m = most.Load() {
		}
		if i < workers {
			// The first items go to distinct goroutines, each blocked
			// here until all of them are: workers run at once.
			barrier.Done()
			barrier.Wait()
		}
		calls[i].Add(1)
		return nil
	})
	require.NoError(t, err)
	for i := range calls {
		assert.Equal(t, int32(1), calls[i].Load(), "index %d", i)
	}
	assert.Equal(t, int32(workers), most.Load())
}

func TestForSequential(t *testing.T) {
	var order []int
	require.NoError(t, For(context.Background(), 5, 1, func(w, i int) error {
		assert.Zero(t, w)
		order = append(order, i)
		return nil
	}))
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	require.NoError(t, For(context.Background(), 0, 4, func(int, int) error { panic("no items") }))
}

// TestForFirstError: the first error stops the work and is returned.
func TestForFirstError(t *testing.T) {
	boom := errors.New("boom")
	for _, workers := range []int{1, 4} {
		const n = 1 << 20
		var calls atomic.Int64
		err := For(context.Background(), n, workers, func(_, i int) error {
			calls.Add(1)
			if i == 3 {
				return boom
			}
			return nil
		})
		assert.Same(t, boom, err)
		if workers == 1 {
			assert.Equal(t, int64(4), calls.Load())
		} else {
			assert.Less(t, calls.Load(), int64(n), "no more items after the error")
		}
	}
}

// TestForCancel: a cancelled context stops the work with its cause.
func TestForCancel(t *testing.T) {
	cause := errors.New("stop")
	for _, workers := range []int{1, 4} {
		ctx, cancel := context.WithCancelCause(context.Background())
		var calls atomic.Int64
		err := For(ctx, 1<<20, workers, func(_, i int) error {
			if calls.Add(1) == 10 {
				cancel(cause)
			}
			return nil
		})
		assert.Same(t, cause, err, "workers %d", workers)
		if workers == 1 {
			assert.Equal(t, int64(10), calls.Load())
		}
		ctx, cancel = context.WithCancelCause(context.Background())
		cancel(cause)
		err = For(ctx, 10, workers, func(int, int) error { return errors.New("called") })
		assert.Same(t, cause, err, "a done context calls nothing")
	}
}

// TestStopped: the error of a stopped context wraps ctx.Err() and the
// cause, once each; nil while the context runs.
func TestStopped(t *testing.T) {
	assert.NoError(t, Stopped(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Same(t, context.Canceled, Stopped(ctx))

	cause := errors.New("stop")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(cause)
	err := Stopped(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause)
	assert.Equal(t, "context canceled: stop", err.Error())
}

// TestForProgress: report gets the running total of the amounts, on the
// calling goroutine (no lock needed: -race), growing to the sum; f's error
// stops the work and is returned.
func TestForProgress(t *testing.T) {
	for _, workers := range []int{1, 3} {
		var got []uint64
		err := ForProgress(context.Background(), 100, workers, func(w, i int) (uint64, error) {
			return uint64(i % 3), nil // some calls do nothing
		}, func(done uint64) { got = append(got, done) })
		require.NoError(t, err)
		require.NotEmpty(t, got)
		assert.Equal(t, uint64(99), got[len(got)-1], "workers %d", workers) // 33*(0+1+2) + 0
		assert.IsIncreasing(t, got, "workers %d", workers)
		assert.Len(t, got, 66, "a report per call that did work")

		boom := errors.New("boom")
		err = ForProgress(context.Background(), 100, workers, func(w, i int) (uint64, error) {
			if i == 10 {
				return 1, boom
			}
			return 1, nil
		}, func(uint64) {})
		assert.ErrorIs(t, err, boom)
		err = ForProgress(context.Background(), 10, workers, func(w, i int) (uint64, error) { return 1, nil }, nil)
		assert.NoError(t, err, "no report")
	}
}

// TestOrdered: every item consumed once, in order, on the calling
// goroutine (no lock: -race); the slot of an item is its own until it is
// consumed; at most window items are produced and not consumed; an error
// of produce or consume stops the work and is returned.
func TestOrdered(t *testing.T) {
	for _, c := range []struct{ n, workers, window int }{{0, 3, 0}, {1, 3, 0}, {100, 1, 1}, {100, 1, 4}, {1000, 4, 0}, {1000, 4, 5}} {
		var (
			got    []int
			busy   = make([]atomic.Int32, max(c.window, 2*max(1, min(c.workers, c.n))+2))
			ahead  atomic.Int32
			most   atomic.Int32
			failed atomic.Bool
		)
		err := Ordered(context.Background(), c.n, c.workers, c.window, func(slot, i int) (int, error) {
			if busy[slot].Add(1) != 1 {
				failed.Store(true)
			}
			a := ahead.Add(1)
			for m := most.Load(); a > m && !most.CompareAndSwap(m, a); m = most.Load() {
			}
			return i * 2, nil
		}, func(i, v int) error {
			got = append(got, v/2)
			window := c.window
			if window <= 0 {
				window = 2*max(1, min(c.workers, c.n)) + 2
			}
			busy[i%window].Add(-1)
			ahead.Add(-1)
			return nil
		})
		require.NoError(t, err, "%+v", c)
		require.Len(t, got, c.n, "%+v", c)
		for i, v := range got {
			require.Equal(t, i, v, "%+v", c)
		}
		assert.False(t, failed.Load(), "%+v: a slot in use twice", c)
		if c.window > 0 && c.n > 1 {
			assert.LessOrEqual(t, int(most.Load()), c.window, "%+v", c)
		}
	}
	boom := errors.New("boom")
	for _, bad := range []string{"produce", "consume"} {
		var consumed int
		err := Ordered(context.Background(), 1000, 4, 0, func(slot, i int) (int, error) {
			if bad == "produce" && i == 500 {
				return 0, boom
			}
			return i, nil
		}, func(i, v int) error {
			consumed++
			if bad == "consume" && i == 500 {
				return boom
			}
			return nil
		})
		assert.ErrorIs(t, err, boom, bad)
		assert.Equal(t, map[string]int{"produce": 500, "consume": 501}[bad], consumed, bad)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop")
	err := Ordered(ctx, 1000, 4, 0, func(slot, i int) (int, error) { return i, nil }, func(i, v int) error {
		if i == 10 {
			cancel(stop)
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
}
