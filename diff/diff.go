// Package diff compares two sets of tensors (files, or models as the
// checkpoint package opens them, on disk or over HTTP): the tensors only in one, those whose dtype or shape
// differ, and for the others whether their bytes are identical or, if not,
// the largest absolute and relative differences of their decoded values;
// and the metadata.
//
// [Paths] compares two models given by their paths or URLs; [Compare] compares any
// two [safetensors.TensorSource]s. Both read the common tensors in parallel
// and stop when their context is done.
package diff

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/parallel"
)

// An Option changes how a comparison is made. Pass options to [Compare]
// and [Paths].
type Option func(*settings) error

// settings holds the settings of Options.
type settings struct {
	workers int // 0: GOMAXPROCS
}

func newSettings(opts []Option) (*settings, error) {
	c := new(settings)
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Workers returns an option that sets how many goroutines compare tensors
// at once, each one tensor at a time: n must be 1 or more (GOMAXPROCS by
// default); otherwise Compare and Paths return an error wrapping
// safetensors.ErrInvalidOption.
func Workers(n int) Option {
	return func(c *settings) error {
		if n < 1 {
			return fmt.Errorf("%w: Workers(%d): want 1 or more", safetensors.ErrInvalidOption, n)
		}
		c.workers = n
		return nil
	}
}

// Tensor is the comparison of a tensor present on both sides.
type Tensor struct {
	Name   string            `json:"name"`
	DTypeA safetensors.DType `json:"dtype_a"`
	DTypeB safetensors.DType `json:"dtype_b"`
	ShapeA []uint64          `json:"shape_a"`
	ShapeB []uint64          `json:"shape_b"`
	// Identical is true when dtype, shape and bytes are the same.
	Identical bool `json:"identical"`
	// Compared is true when the values were compared: the shapes are the
	// same and both dtypes decode to numbers, and the bytes differ.
	// Differing counts the elements that differ; MaxAbs is the largest
	// |a - b| and MaxRel the largest |a - b| / max(|a|, |b|), over the
	// values decoded to float64 (NaN equals NaN; a NaN against a number,
	// or infinities that differ, count as +Inf).
	Compared  bool    `json:"compared"`
	Differing uint64  `json:"differing,omitempty"`
	MaxAbs    float64 `json:"max_abs_diff,omitempty"`
	MaxRel    float64 `json:"max_rel_diff,omitempty"`
	// Err says why a tensor could not be read or decoded, if it could not.
	Err string `json:"error,omitempty"`
}

// Metadata is one metadata key whose values differ; A or B is nil where
// the key is absent.
type Metadata struct {
	Key string  `json:"key"`
	A   *string `json:"a"`
	B   *string `json:"b"`
}

// Result is the comparison of two sets of tensors.
type Result struct {
	OnlyA    []string   `json:"only_a"`
	OnlyB    []string   `json:"only_b"`
	Tensors  []Tensor   `json:"tensors"` // every common tensor, by name
	Metadata []Metadata `json:"metadata"`
}

// Equal reports whether the two sides hold the same tensors with the same
// bytes and the same metadata.
func (r *Result) Equal() bool {
	if len(r.OnlyA)+len(r.OnlyB)+len(r.Metadata) > 0 {
		return false
	}
	for _, t := range r.Tensors {
		if !t.Identical {
			return false
		}
	}
	return true
}

// Compare compares the tensors of a and b, and metadata ma and mb, reading
// the common tensors in parallel (a and b must be safe for concurrent
// use). A file's metadata is its Reader's Metadata; a checkpoint's is
// its Metadata, not its IndexMetadata, which holds the checkpoint's
// bookkeeping.
//
// A tensor that cannot be read or decoded is no error: its Tensor.Err says
// why. Compare returns an error for an invalid option, and when ctx is done
// before the comparison is: an error wrapping ctx.Err() and
// context.Cause(ctx), returned as soon as the comparisons under way reach
// the end of a chunk of their tensors.
func Compare(ctx context.Context, a, b safetensors.TensorSource, ma, mb map[string]string, opts ...Option) (*Result, error) {
	c, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	return compare(ctx, a, b, ma, mb, c)
}

func compare(ctx context.Context, a, b safetensors.TensorSource, ma, mb map[string]string, c *settings) (*Result, error) {
	r := &Result{}
	na, nb := a.Names(), b.Names()
	inB := map[string]bool{}
	for _, n := range nb {
		inB[n] = true
	}
	var common []string
	for _, n := range na {
		if inB[n] {
			common = append(common, n)
			delete(inB, n)
		} else {
			r.OnlyA = append(r.OnlyA, n)
		}
	}
	r.OnlyB = slices.Sorted(maps.Keys(inB))
	slices.Sort(r.OnlyA)
	slices.Sort(common)
	r.Tensors = make([]Tensor, len(common))
	ea, eb := safetensors.AsElementSource(a), safetensors.AsElementSource(b)
	workers := c.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	bufs := make([]buffers, workers)
	err := parallel.For(ctx, len(common), workers, func(w, i int) error {
		var err error
		r.Tensors[i], err = compareTensor(ctx, ea, eb, common[i], &bufs[w])
		return err
	})
	if err != nil {
		// compareTensor fails only when ctx is done.
		return nil, fmt.Errorf("diff: stopped: %w", parallel.Stopped(ctx))
	}
	for _, k := range slices.Sorted(maps.Keys(union(ma, mb))) {
		va, oka := ma[k]
		vb, okb := mb[k]
		if oka && okb && va == vb {
			continue
		}
		m := Metadata{Key: k}
		if oka {
			m.A = &va
		}
		if okb {
			m.B = &vb
		}
		r.Metadata = append(r.Metadata, m)
	}
	return r, nil
}

func union(a, b map[string]string) map[string]bool {
	u := map[string]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// compareTensor compares the tensor name of a and b, a chunk of elements
// at a time, each read with TensorElements into the buffers of the
// goroutine, so that memory stays flat however large the tensors. What
// goes wrong with the tensor is said in the result's Err; the error is
// that of ctx done (context.Cause(ctx)), checked between chunks.
func compareTensor(ctx context.Context, a, b safetensors.ElementSource, name string, buf *buffers) (Tensor, error) {
	out := Tensor{Name: name}
	fail := func(err error) (Tensor, error) {
		if stopped := parallel.Stopped(ctx); stopped != nil {
			return out, stopped
		}
		out.Err = err.Error()
		return out, nil
	}
	if err := parallel.Stopped(ctx); err != nil {
		return out, err
	}
	ia, err := a.Info(name)
	if err != nil {
		return fail(err)
	}
	ib, err := b.Info(name)
	if err != nil {
		return fail(err)
	}
	out.DTypeA, out.DTypeB, out.ShapeA, out.ShapeB = ia.DType, ib.DType, ia.Shape, ib.Shape
	if !slices.Equal(ia.Shape, ib.Shape) {
		return out, nil
	}
	sameDType := ia.DType == ib.DType
	n := ia.NumElements()
	step := uint64(diffChunk)
	identical := sameDType
	for lo := uint64(0); lo < n; lo += step {
		if err := parallel.Stopped(ctx); err != nil {
			return out, err
		}
		hi := min(lo+step, n)
		buf.a = grow(buf.a, (hi-lo)*uint64(ia.DType.Bits())/8)
		buf.b = grow(buf.b, (hi-lo)*uint64(ib.DType.Bits())/8)
		ca, err := a.TensorElements(ctx, name, lo, hi, buf.a)
		if err != nil {
			return fail(err)
		}
		cb, err := b.TensorElements(ctx, name, lo, hi, buf.b)
		if err != nil {
			return fail(err)
		}
		// A file truncated while mapped gives an error, not SIGBUS.
		err = safetensors.GuardFaults(func() error {
			if sameDType && bytes.Equal(ca.Data, cb.Data) {
				return nil
			}
			identical = false
			var err error
			if buf.va, buf.tmp, err = decode(ca, buf.va[:0], buf.tmp); err != nil {
				return err
			}
			if buf.vb, buf.tmp, err = decode(cb, buf.vb[:0], buf.tmp); err != nil {
				return err
			}
			for i := range buf.va {
				x, y := buf.va[i], buf.vb[i]
				if x == y || math.IsNaN(x) && math.IsNaN(y) {
					continue
				}
				out.Differing++
				d := math.Abs(x - y)
				if math.IsNaN(d) {
					d = math.Inf(1)
				}
				out.MaxAbs = max(out.MaxAbs, d)
				out.MaxRel = max(out.MaxRel, d/max(math.Abs(x), math.Abs(y)))
			}
			return nil
		})
		if err != nil {
			out.Differing, out.MaxAbs, out.MaxRel = 0, 0, 0
			return fail(err)
		}
	}
	if identical {
		out.Identical = true
		return out, nil
	}
	out.Compared = true
	return out, nil
}

// grow returns b, or a new buffer if b cannot hold n bytes: what a source
// read through ReadAt reads a chunk into (a mapped one gives slices of its
// memory instead).
func grow(b []byte, n uint64) []byte {
	if uint64(cap(b)) >= n {
		return b
	}
	return make([]byte, n)
}

// buffers are the memory one goroutine compares tensors with, reused from
// chunk to chunk and tensor to tensor.
type buffers struct {
	a, b   []byte
	va, vb []float64
	tmp    []float32
}

// diffChunk is how many elements of each tensor are read and compared at
// a time: 1 MiB of F32, a multiple of 8, so that chunks of the packed
// dtypes fall on whole bytes. A goroutine's memory is about ten times
// that (both sides' bytes, and their values as float64), whatever the
// tensors' sizes.
const diffChunk = 1 << 18

// decode appends a tensor's values to dst as float64: F64 exactly, the
// others as Tensor.AppendFloat32s decodes them, through tmp, which it
// returns for reuse.
func decode(t safetensors.Tensor, dst []float64, tmp []float32) ([]float64, []float32, error) {
	if t.DType == safetensors.F64 {
		v, err := safetensors.Values[float64](t, dst)
		return v, tmp, err
	}
	tmp, err := t.AppendFloat32s(tmp[:0])
	if err != nil {
		return dst, tmp, err
	}
	dst = slices.Grow(dst, len(tmp)) // at once, not by doubling
	for _, v := range tmp {
		dst = append(dst, float64(v))
	}
	return dst, tmp, nil
}

// Paths compares the models at a and b, each any input that the
// checkpoint package's Open takes: a safetensors file, a sharded
// checkpoint's index, a folder of any library's layout, a model of several
// parts (whose tensors are named behind each part's name), a snapshot of
// the Hugging Face cache, or a URL of any of these. The metadata compared
// is each checkpoint's Metadata, so that a sharded checkpoint and a single
// file of the same tensors and metadata are equal. Its errors are those of
// Open and of Compare.
func Paths(ctx context.Context, a, b string, opts ...Option) (*Result, error) {
	c, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	sa, err := checkpoint.Open(ctx, a)
	if err != nil {
		return nil, err
	}
	defer sa.Close()
	sb, err := checkpoint.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	return compare(ctx, sa, sb, sa.Metadata(), sb.Metadata(), c)
}
