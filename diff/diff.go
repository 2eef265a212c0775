// Package diff compares two sets of tensors (files, sharded checkpoints or
// model directories): the tensors only in one, those whose dtype or shape
// differ, and for the others whether their bytes are identical or, if not,
// the largest absolute and relative differences of their decoded values;
// and the metadata.
//
// [Paths] compares two models given by their paths; [Compare] compares any
// two [safetensors.TensorSource]s. Both read the common tensors in parallel
// and stop when their context is done.
package diff

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
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
// use). A file's metadata is its Reader's Metadata; a sharded checkpoint's
// is ModelMetadata, not Sharded.Metadata, which is the index's own and
// holds the checkpoint's bookkeeping.
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
	err := parallel.For(ctx, len(common), c.workers, func(_, i int) error {
		var err error
		r.Tensors[i], err = compareTensor(ctx, a, b, common[i])
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

// compareTensor compares the tensor name of a and b. What goes wrong with
// the tensor is said in the result's Err; the error is that of ctx done
// (ctx.Err()), checked between chunks of the tensors.
func compareTensor(ctx context.Context, a, b safetensors.TensorSource, name string) (Tensor, error) {
	out := Tensor{Name: name}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	ta, err := a.Tensor(name)
	if err != nil {
		out.Err = err.Error()
		return out, nil
	}
	tb, err := b.Tensor(name)
	if err != nil {
		out.Err = err.Error()
		return out, nil
	}
	out.DTypeA, out.DTypeB, out.ShapeA, out.ShapeB = ta.DType, tb.DType, ta.Shape, tb.Shape
	sameShape := slices.Equal(ta.Shape, tb.Shape)
	same := false
	if ta.DType == tb.DType && sameShape {
		// A file truncated while mapped gives an error, not SIGBUS.
		var stopped error
		err := safetensors.GuardFaults(func() error {
			same, stopped = equal(ctx, ta.Data, tb.Data)
			return nil
		})
		if stopped != nil {
			return out, stopped
		}
		if err != nil {
			out.Err = err.Error()
			return out, nil
		}
	}
	if same {
		out.Identical = true
		return out, nil
	}
	if !sameShape {
		return out, nil
	}
	// Compare in chunks, so that memory stays flat however large the
	// tensors.
	n := uint64(1)
	for _, d := range ta.Shape {
		n *= d // the tensors hold these elements, so this cannot overflow
	}
	var va, vb []float64
	var tmp []float32
	for lo := uint64(0); lo < n; lo += diffChunk {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		hi := min(lo+diffChunk, n)
		ca, err := ta.Elements(lo, hi)
		if err == nil {
			va, tmp, err = decode(ca, va[:0], tmp)
		}
		if err != nil {
			out.Err = err.Error()
			return out, nil
		}
		cb, err := tb.Elements(lo, hi)
		if err == nil {
			vb, tmp, err = decode(cb, vb[:0], tmp)
		}
		if err != nil {
			out.Err = err.Error()
			return out, nil
		}
		for i := range va {
			x, y := va[i], vb[i]
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
	}
	out.Compared = true
	return out, nil
}

// equalChunk is how many bytes of two tensors equal compares between looks
// at the context.
const equalChunk = 16 << 20

// equal reports whether a and b hold the same bytes, compared equalChunk
// at a time; its error is ctx.Err() once ctx is done.
func equal(ctx context.Context, a, b []byte) (bool, error) {
	if len(a) != len(b) {
		return false, nil
	}
	for lo := 0; lo < len(a); lo += equalChunk {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		hi := min(lo+equalChunk, len(a))
		if !bytes.Equal(a[lo:hi], b[lo:hi]) {
			return false, nil
		}
	}
	return true, nil
}

// diffChunk is how many elements of each tensor are decoded at a time: a
// multiple of 4, so that chunks of the packed dtypes fall on whole bytes.
const diffChunk = 1 << 16

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
	for _, v := range tmp {
		dst = append(dst, float64(v))
	}
	return dst, tmp, nil
}

// Paths compares the tensors at paths a and b, each any input that
// safetensors.OpenModel takes: a safetensors file, a sharded checkpoint's
// index, or a model directory (a Hugging Face cache snapshot too). The
// metadata compared is a file's header metadata, or a checkpoint's
// ModelMetadata, so that a sharded checkpoint and a single file of the
// same tensors and metadata are equal. Its errors are those of OpenModel
// and of Compare.
func Paths(ctx context.Context, a, b string, opts ...Option) (*Result, error) {
	c, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	sa, ma, err := open(a)
	if err != nil {
		return nil, err
	}
	defer sa.Close()
	sb, mb, err := open(b)
	if err != nil {
		return nil, err
	}
	defer sb.Close()
	return compare(ctx, sa, sb, ma, mb, c)
}

// open opens the model at path, and returns its metadata.
func open(path string) (*safetensors.Model, map[string]string, error) {
	m, err := safetensors.OpenModel(path)
	if err != nil {
		return nil, nil, err
	}
	return m, ModelMetadata(m.Sharded), nil
}

// indexBookkeeping lists the keys of an index's metadata that describe the
// checkpoint rather than the model: the Hugging Face libraries write
// total_size (the tensors' bytes) and transformers total_parameters.
var indexBookkeeping = []string{"total_parameters", "total_size"}

// ModelMetadata returns the metadata of the model that s holds, as Compare
// takes it: the metadata of its shards' headers, such as {"format": "pt"},
// which the Hugging Face libraries write into every shard, together with
// the index's own metadata less its bookkeeping of the checkpoint
// (total_size and total_parameters, which a single file of the same
// tensors does not have). For a single file opened with OpenIndex, it is
// the file's metadata. A key on which the shards, or the shards and the
// index, disagree, or that only some shards have, gets a value that says
// so and gives each one's value, such as
//
//	differs within the checkpoint: model-00001-of-00002.safetensors "pt", model-00002-of-00002.safetensors none
//
// so that the model compares unequal to any single file. It is nil when
// there is no such metadata.
func ModelMetadata(s *safetensors.Sharded) map[string]string {
	shards := s.Shards()
	metas := make([]map[string]string, 0, len(shards)+1)
	names := make([]string, 0, len(shards)+1)
	keys := map[string]bool{}
	for _, shard := range shards {
		h, err := s.Header(shard)
		if err != nil {
			continue // cannot happen: shard is one of Shards()
		}
		metas = append(metas, h.Metadata)
		names = append(names, shard)
		for k := range h.Metadata {
			keys[k] = true
		}
	}
	nShards := len(metas)
	index := s.Metadata()
	for _, k := range indexBookkeeping {
		// A single file's own key of that name stays: its shard gives it.
		delete(index, k)
	}
	if len(index) > 0 {
		metas = append(metas, index)
		names = append(names, "the index")
		for k := range index {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for k := range keys {
		// The value of the first source that has the key; the shards
		// must all have it, the index need not.
		inShards := anyHas(metas[:nShards], k)
		v, agree, seen := "", true, false
		for i, m := range metas {
			mv, ok := m[k]
			switch {
			case !ok && i < nShards && inShards:
				agree = false
			case !ok:
			case !seen:
				v, seen = mv, true
			case mv != v:
				agree = false
			}
		}
		if agree {
			out[k] = v
			continue
		}
		var b strings.Builder
		b.WriteString("differs within the checkpoint:")
		for i, m := range metas {
			mv, ok := m[k]
			if !ok && i >= nShards {
				continue
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(" " + names[i] + " ")
			if ok {
				b.WriteString(strconv.Quote(mv))
			} else {
				b.WriteString("none")
			}
		}
		out[k] = b.String()
	}
	return out
}

// anyHas reports whether one of the maps has the key.
func anyHas(metas []map[string]string, key string) bool {
	for _, m := range metas {
		if _, ok := m[key]; ok {
			return true
		}
	}
	return false
}
