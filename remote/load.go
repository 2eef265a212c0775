package remote

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors"
)

// DefaultMemoryLimit is how many bytes of tensors Load holds at once by
// default: read or being read, and not yet handed over.
const DefaultMemoryLimit = 1 << 30

// MemoryLimit returns an option that sets how many bytes of tensors Load
// holds at once (DefaultMemoryLimit): it starts reading a tensor only when
// the tensors it holds and that one fit in n bytes, or when it holds none,
// so that one tensor larger than n is still read, alone.
func MemoryLimit(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("safetensors: memory limit %d is not positive", n)
		}
		c.memory = n
		return nil
	}
}

// Into returns an option that makes Load read each tensor into memory the
// caller supplies: alloc gets the tensor's name and size in bytes and
// returns a slice of at least that length, whose first size bytes become
// the Data of the Tensor yielded. Load calls alloc from several goroutines
// at once, when it starts reading the tensor; the memory is the caller's
// again once the tensor is yielded, so that a loader can reuse a pool of
// buffers, or read straight into pinned memory for a device.
func Into(alloc func(name string, size int64) []byte) Option {
	return func(c *config) error {
		c.alloc = alloc
		return nil
	}
}

// Load returns an iterator over the named tensors of s, or over all that
// it lists when names is empty, which reads them Concurrency at a time
// (each with its range request, checked and pinned as ReadAt's are) and
// yields each as soon as it has arrived, in the order they arrive: the way
// to load a checkpoint over HTTP at the network's speed. It is meant for a
// checkpoint from OpenIndex, and works for any Sharded.
//
// Memory is bounded by MemoryLimit: a tensor is read only when it fits
// with those read and not yet handed over. Each tensor's Data is new
// memory, which belongs to the caller, or memory from the Into option's
// function. Tensors larger than
// safetensors.MaxTensorAlloc give an error wrapping
// safetensors.ErrTensorTooLarge; read those with the Reader's
// TensorReader.
//
// The first error is yielded, with a zero Tensor, and ends the iteration.
// Breaking out of the loop, or cancelling ctx, stops the reads not yet
// started, and waits for those in flight (which the checkpoint's own
// context governs).
func Load(ctx context.Context, s *safetensors.Sharded, names []string, opts ...Option) iter.Seq2[safetensors.Tensor, error] {
	return func(yield func(safetensors.Tensor, error) bool) {
		cfg, err := newConfig(opts)
		if err != nil {
			yield(safetensors.Tensor{}, err)
			return
		}
		jobs, err := plan(s, names)
		if err != nil {
			yield(safetensors.Tensor{}, err)
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		mem := newBudget(cfg.memory)
		todo := make(chan job)
		type result struct {
			t    safetensors.Tensor
			err  error
			size int64
		}
		results := make(chan result)
		var wg sync.WaitGroup
		for range min(cfg.concurrency, len(jobs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range todo {
					t, err := readTensor(s, j, cfg.alloc)
					select {
					case results <- result{t, err, j.size}:
					case <-ctx.Done():
						mem.release(j.size)
					}
				}
			}()
		}
		go func() {
			defer func() {
				close(todo)
				wg.Wait()
				close(results)
			}()
			for _, j := range jobs {
				if !mem.acquire(ctx, j.size) {
					return
				}
				select {
				case todo <- j:
				case <-ctx.Done():
					mem.release(j.size)
					return
				}
			}
		}()
		defer func() {
			cancel()
			for range results { // let the workers finish
			}
		}()
		for r := range results {
			if r.err == nil && ctx.Err() != nil {
				r.err = ctx.Err()
			}
			if r.err != nil {
				yield(safetensors.Tensor{}, r.err)
				return
			}
			if !yield(r.t, nil) {
				return
			}
			mem.release(r.size)
		}
		if err := ctx.Err(); err != nil {
			yield(safetensors.Tensor{}, err)
		}
	}
}

// A job is one tensor to read.
type job struct {
	name  string
	shard string
	off   uint64
	size  int64
	info  safetensors.TensorInfo
}

// readTensor reads the tensor of j, into memory from alloc if it is not
// nil.
func readTensor(s *safetensors.Sharded, j job, alloc func(string, int64) []byte) (safetensors.Tensor, error) {
	if alloc == nil {
		return s.Tensor(j.name)
	}
	t := safetensors.Tensor{Name: j.name, DType: j.info.DType, Shape: j.info.Shape}
	buf := alloc(j.name, j.size)
	if int64(len(buf)) < j.size {
		return t, &safetensors.TensorError{Name: j.name, Err: fmt.Errorf("safetensors: Into gave %d bytes for a tensor of %d", len(buf), j.size)}
	}
	t.Data = buf[:j.size:j.size]
	r, err := s.TensorReader(j.name)
	if err != nil {
		return t, err
	}
	if _, err := r.ReadAt(t.Data, 0); err != nil && !(err == io.EOF && j.size == 0) {
		return t, &safetensors.TensorError{Name: j.name, Err: err}
	}
	return t, nil
}

// plan lists the tensors to read, shard by shard in file order, so that
// the requests go through each object from start to end.
func plan(s *safetensors.Sharded, names []string) ([]job, error) {
	if len(names) == 0 {
		names = s.Names()
	}
	infos := make(map[string]safetensors.TensorInfo)
	for _, shard := range s.Shards() {
		h, err := s.Header(shard)
		if err != nil {
			return nil, err
		}
		for _, t := range h.Tensors {
			infos[t.Name] = t
		}
	}
	jobs := make([]job, 0, len(names))
	for _, name := range names {
		shard, err := s.Shard(name)
		if err != nil {
			return nil, err
		}
		info := infos[name]
		size := info.DataOffsets[1] - info.DataOffsets[0]
		if size > safetensors.MaxTensorAlloc {
			return nil, &safetensors.TensorError{Name: name, Err: fmt.Errorf("%w: %d bytes, more than %d; read it with TensorReader", safetensors.ErrTensorTooLarge, size, int64(safetensors.MaxTensorAlloc))}
		}
		jobs = append(jobs, job{name: name, shard: shard, off: info.DataOffsets[0], size: int64(size), info: info})
	}
	slices.SortFunc(jobs, func(a, b job) int {
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.off, b.off))
	})
	return jobs, nil
}

// A budget counts bytes held against a limit.
type budget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	held  int64
}

func newBudget(limit int64) *budget {
	b := &budget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire waits until n more bytes fit, or none are held, and takes them;
// it returns false if ctx ends first.
func (b *budget) acquire(ctx context.Context, n int64) bool {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.held > 0 && b.held+n > b.limit {
		if ctx.Err() != nil {
			return false
		}
		b.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	b.held += n
	return true
}

// release gives n bytes back.
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.held -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}
