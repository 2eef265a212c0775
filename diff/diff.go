// Package diff compares two sets of tensors (files, or models as the
// checkpoint package opens them, on disk or over HTTP): the tensors only in
// one, the metadata keys whose values differ, and for each tensor in both a
// [Verdict]: identical bytes, equal values, values within a tolerance,
// values beyond it, or tensors that cannot be compared; with the number of
// values that differ and the largest absolute and relative differences.
//
// Values are compared as numbers, whatever their dtypes, each decoded to
// float64 exactly (F16, BF16 and the F8 types as
// [safetensors.Tensor.AppendFloat32s] decodes them, the integers and BOOL
// as numbers), but for the 64-bit integers, rounded to the nearest float64
// (beyond 2^53, two that differ by less than the spacing of float64 there
// compare equal). An F32 model
// and its conversion to BF16 agree within the tolerance that BF16's
// rounding allows ([Tolerance](0, 1.0/256)). The tolerance is
// numpy.allclose's.
//
// [Paths] compares two models given by their paths or URLs; [Compare]
// compares any two [safetensors.TensorSource]s. Both read the tensors a
// piece at a time, in parallel, in memory of a bounded size, and stop when
// their context is done.
package diff

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/parallel"
)

// A Verdict is what the comparison of a tensor present on both sides
// found: each such tensor gets exactly one.
type Verdict int

// The verdicts, from the best to the worst.
const (
	// Identical: the same dtype, shape and bytes.
	Identical Verdict = iota
	// Equal: the same shape and values, in other bytes: another dtype
	// holding the same numbers, or -0 where the other side has 0 (or NaNs
	// of other bits, with EqualNaN).
	Equal
	// Close: some values differ, every one within the tolerance; the
	// dtypes may differ.
	Close
	// Different: some values beyond the tolerance or, for a dtype compared
	// by its bits (see Tensor.ByBytes), some elements that differ.
	Different
	// Incomparable: the shapes differ, or the dtypes differ and one has no
	// real values (C64, F4, F6_E2M3, F6_E3M2).
	Incomparable
	// Error: a side could not be read; Tensor.Err says why.
	Error
)

var verdictNames = [...]string{"identical", "equal", "close", "different", "incomparable", "error"}

// String returns the verdict's name in lower case: "identical", "equal",
// "close", "different", "incomparable" or "error".
func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return fmt.Sprintf("Verdict(%d)", int(v))
	}
	return verdictNames[v]
}

// MarshalText returns the verdict's String.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Tensor is the comparison of a tensor present on both sides.
type Tensor struct {
	Name    string            `json:"name"`
	Verdict Verdict           `json:"verdict"`
	DTypeA  safetensors.DType `json:"dtype_a"`
	DTypeB  safetensors.DType `json:"dtype_b"`
	ShapeA  []uint64          `json:"shape_a"`
	ShapeB  []uint64          `json:"shape_b"`
	// ByBytes is true for a tensor whose dtype, the same on both sides, has
	// no real values (C64, F4, F6_E2M3, F6_E3M2): its elements are compared
	// by their bits, so that Unequal and Differing count the elements whose
	// bits differ, and MaxAbs and MaxRel stay 0. The elements of F4 and F6
	// are counted within groups of whole bytes (a byte of two F4, three
	// bytes of four F6), each group read as a little-endian number whose
	// lowest bits are its first element.
	ByBytes bool `json:"by_bytes"`
	// Values is the number of elements compared: the tensor's, unless its
	// verdict is Incomparable or Error (then 0). Unequal counts those whose
	// values differ (a != b; a NaN against anything, unless EqualNaN),
	// Differing those beyond the tolerance (as many without Tolerance).
	Values    uint64 `json:"values"`
	Unequal   uint64 `json:"unequal"`
	Differing uint64 `json:"differing"`
	// MaxAbs is the largest |a - b| and MaxRel the largest |a - b| / |b|,
	// B being the reference as in Tolerance (and as numpy and
	// torch.testing report their relative difference), over the values
	// decoded to float64: the smallest atol that Tolerance(atol, 0) and the
	// smallest rtol that Tolerance(0, rtol) would accept. MaxRel is +Inf
	// where b is 0 and a is not, and both are +Inf where a pair's
	// difference is not finite: a NaN against anything (but a NaN with
	// EqualNaN), an infinity against anything but itself. Both are 0 for
	// an Identical tensor and where no values were compared.
	MaxAbs float64 `json:"max_abs_diff"`
	MaxRel float64 `json:"max_rel_diff"`
	// Err says why a tensor could not be read, if its verdict is Error.
	Err string `json:"error,omitempty"`
}

// MarshalJSON encodes t with the field names of its tags, shapes as arrays
// (never null) and MaxAbs and MaxRel as null where they are infinite,
// which JSON has no number for, or no values were compared (ByBytes,
// Incomparable, Error).
func (t Tensor) MarshalJSON() ([]byte, error) {
	type plain Tensor
	number := func(x float64) *float64 {
		if math.IsInf(x, 0) || t.ByBytes || t.Verdict >= Incomparable {
			return nil
		}
		return &x
	}
	return json.Marshal(struct {
		plain
		ShapeA []uint64 `json:"shape_a"`
		ShapeB []uint64 `json:"shape_b"`
		MaxAbs *float64 `json:"max_abs_diff"`
		MaxRel *float64 `json:"max_rel_diff"`
	}{plain(t), orEmpty(t.ShapeA), orEmpty(t.ShapeB), number(t.MaxAbs), number(t.MaxRel)})
}

// orEmpty returns s, or an empty slice for nil.
func orEmpty(s []uint64) []uint64 {
	if s == nil {
		return []uint64{}
	}
	return s
}

// Metadata is one metadata key whose values differ; A or B is nil where
// the key is absent.
type Metadata struct {
	Key string  `json:"key"`
	A   *string `json:"a"`
	B   *string `json:"b"`
}

// Result is the comparison of two sets of tensors. Its lists are empty,
// not nil, when nothing is in them, so that its JSON holds [] for them.
type Result struct {
	OnlyA    []string   `json:"only_a"`
	OnlyB    []string   `json:"only_b"`
	Tensors  []Tensor   `json:"tensors"` // every common tensor, by name
	Metadata []Metadata `json:"metadata"`
}

// Equal reports whether the two sides match within the tolerance: they
// hold tensors of the same names and the same metadata, and every tensor's
// verdict is Identical, Equal or Close. Without Tolerance, that is the
// same values, though the dtypes may differ.
func (r *Result) Equal() bool {
	if len(r.OnlyA)+len(r.OnlyB)+len(r.Metadata) > 0 {
		return false
	}
	for _, t := range r.Tensors {
		if t.Verdict > Close {
			return false
		}
	}
	return true
}

// Count returns the number of tensors whose verdict is v. The counts of
// the six verdicts add up to len(r.Tensors).
func (r *Result) Count(v Verdict) int {
	n := 0
	for _, t := range r.Tensors {
		if t.Verdict == v {
			n++
		}
	}
	return n
}

// Compare compares the tensors of a and b, and metadata ma and mb, reading
// the common tensors a piece at a time, in parallel (a and b must be safe
// for concurrent use). A file's metadata is its Reader's Metadata; a
// checkpoint's is its Metadata, not its IndexMetadata, which holds the
// checkpoint's bookkeeping.
//
// A tensor that cannot be read is no error: its verdict is Error and its
// Tensor.Err says why. Compare returns an error for an invalid option, and
// when ctx is done before the comparison is: an error wrapping ctx.Err()
// and context.Cause(ctx), returned as soon as the comparisons under way
// reach the end of a piece of their tensors.
func Compare(ctx context.Context, a, b safetensors.TensorSource, ma, mb map[string]string, opts ...Option) (*Result, error) {
	c, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	return compare(ctx, a, b, ma, mb, c)
}

// diffChunk is how many elements of a tensor are read and compared at a
// time, one goroutine's work item: 1 MiB of F32, a multiple of 8, so that
// pieces of the packed dtypes fall on whole bytes. A goroutine's memory is
// about twice that (both sides' bytes, for sources read through ReadAt),
// and blocks of decoded values of a few pages, whatever the tensors' sizes.
const diffChunk = 1 << 18

// comparison is a Compare under way.
type comparison struct {
	a, b    safetensors.ElementSource
	tol     tolerance
	workers int

	progressMu  sync.Mutex
	progress    func(done, total uint64)
	done, total uint64
}

// plan is the comparison of one tensor present on both sides, which its
// pieces add to.
type plan struct {
	out       *Tensor
	n         uint64 // elements
	sameDType bool
	byBytes   bool

	mu    sync.Mutex
	tally tally
	err   error // the first piece that could not be read
	// sameBits are the pieces whose bytes are the same on both sides, in
	// a dtype that has NaNs: their NaNs count as values that differ
	// (without EqualNaN) if the tensor is not identical.
	sameBits []piece
}

// piece is a work item: the elements [lo, hi) of a tensor, and their
// bytes on both sides.
type piece struct {
	p      *plan
	lo, hi uint64
	bytes  uint64
}

// buffers are the memory one goroutine compares pieces with, reused from
// piece to piece.
type buffers struct {
	a, b   []byte
	da, db decoder
}

func compare(ctx context.Context, a, b safetensors.TensorSource, ma, mb map[string]string, c *settings) (*Result, error) {
	r := &Result{OnlyA: []string{}, Metadata: []Metadata{}}
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
	if r.OnlyB == nil {
		r.OnlyB = []string{}
	}
	slices.Sort(r.OnlyA)
	slices.Sort(common)

	cm := &comparison{
		a:        safetensors.AsElementSource(a),
		b:        safetensors.AsElementSource(b),
		tol:      tolerance{atol: c.atol, rtol: c.rtol, equalNaN: c.equalNaN},
		workers:  cmp.Or(c.workers, runtime.GOMAXPROCS(0)),
		progress: c.progress,
	}
	r.Tensors = make([]Tensor, len(common))
	plans := make([]*plan, len(common))
	// The tensors' entries, in parallel: a source that is not an
	// ElementSource reads each tensor whole here.
	err := parallel.For(ctx, len(common), cm.workers, func(_, i int) error {
		plans[i] = cm.plan(common[i], &r.Tensors[i])
		return nil
	})
	if err == nil {
		err = parallel.Stopped(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("diff: stopped: %w", parallel.Stopped(ctx))
	}
	var pieces []piece
	for _, p := range plans {
		if p == nil {
			continue // decided from the entries
		}
		bitsA, bitsB := uint64(p.out.DTypeA.Bits()), uint64(p.out.DTypeB.Bits())
		for lo := uint64(0); lo < p.n; lo += diffChunk {
			hi := min(lo+diffChunk, p.n)
			size := (hi-lo)*bitsA/8 + (hi-lo)*bitsB/8
			pieces = append(pieces, piece{p: p, lo: lo, hi: hi, bytes: size})
			cm.total += size
		}
	}
	bufs := make([]buffers, cm.workers)
	err = parallel.For(ctx, len(pieces), cm.workers, func(w, i int) error {
		return cm.compare(ctx, pieces[i], &bufs[w])
	})
	if err == nil {
		// The NaNs of the pieces with the same bits in tensors that are
		// not identical, read again.
		var again []piece
		for _, p := range plans {
			if p != nil && p.tally.bytesDiffer {
				again = append(again, p.sameBits...)
			}
		}
		err = parallel.For(ctx, len(again), cm.workers, func(w, i int) error {
			return cm.countNaNs(ctx, again[i], &bufs[w])
		})
	}
	if err != nil {
		// compare and countNaNs fail only when ctx is done.
		return nil, fmt.Errorf("diff: stopped: %w", parallel.Stopped(ctx))
	}
	for _, p := range plans {
		if p != nil {
			p.finish()
		}
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

// plan reads the entries of the tensor name on both sides into out, and
// returns the plan of its comparison, or nil when the entries decide its
// verdict: Error for an entry that cannot be read, Incomparable for shapes
// that differ or dtypes whose values cannot be compared.
func (c *comparison) plan(name string, out *Tensor) *plan {
	out.Name = name
	fail := func(err error) *plan {
		out.Verdict, out.Err = Error, err.Error()
		return nil
	}
	ia, err := c.a.Info(name)
	if err != nil {
		return fail(err)
	}
	ib, err := c.b.Info(name)
	if err != nil {
		return fail(err)
	}
	out.DTypeA, out.DTypeB, out.ShapeA, out.ShapeB = ia.DType, ib.DType, ia.Shape, ib.Shape
	p := &plan{out: out, sameDType: ia.DType == ib.DType}
	realA, realB := hasValues(ia.DType), hasValues(ib.DType)
	switch {
	case !slices.Equal(ia.Shape, ib.Shape):
		out.Verdict = Incomparable
		return nil
	case p.sameDType && !realA:
		p.byBytes, out.ByBytes = true, true
	case !realA || !realB:
		out.Verdict = Incomparable
		return nil
	}
	p.n = ia.NumElements()
	if nb := ib.NumElements(); nb != p.n {
		return fail(fmt.Errorf("%w: %s holds %d elements in A and %d in B, for the shape %v", safetensors.ErrSizeMismatch, name, p.n, nb, ia.Shape))
	}
	return p
}

// hasValues reports whether the elements of dtype d have real values, as
// Tensor.AppendFloat32s decodes them.
func hasValues(d safetensors.DType) bool {
	_, err := safetensors.Tensor{DType: d}.AppendFloat32s(nil)
	return err == nil
}

// compare compares a piece of a tensor and adds what it found to the
// tensor's plan; a piece that cannot be read fails the tensor, not the
// comparison. The error is that of ctx done.
func (c *comparison) compare(ctx context.Context, it piece, buf *buffers) error {
	p := it.p
	defer c.report(it.bytes)
	if p.failed() {
		return nil
	}
	name := p.out.Name
	n := it.hi - it.lo
	buf.a = grow(buf.a, n*uint64(p.out.DTypeA.Bits())/8)
	buf.b = grow(buf.b, n*uint64(p.out.DTypeB.Bits())/8)
	pa, err := c.a.TensorElements(ctx, name, it.lo, it.hi, buf.a)
	if err != nil {
		return p.fail(ctx, err)
	}
	pb, err := c.b.TensorElements(ctx, name, it.lo, it.hi, buf.b)
	if err != nil {
		return p.fail(ctx, err)
	}
	var t tally
	sameBits := false
	// A file truncated while mapped gives an error, not SIGBUS.
	err = safetensors.GuardFaults(func() error {
		if p.sameDType && bytes.Equal(pa.Data, pb.Data) {
			t.values = n
			if !p.byBytes && !c.tol.equalNaN && p.out.DTypeA.HasNaN() {
				// The same bits, but a NaN is not close to a NaN: that
				// counts if another piece differs. nanPieces counts them
				// then, so that identical tensors are not scanned.
				sameBits = true
			}
			return nil
		}
		t.bytesDiffer = true
		if p.byBytes {
			t.values = n
			t.unequal = differingElements(pa.Data, pb.Data, p.out.DTypeA.Bits())
			t.differing = t.unequal
			return nil
		}
		return compareDecoded(pa, pb, c.tol, &buf.da, &buf.db, &t)
	})
	if err != nil {
		return p.fail(ctx, err)
	}
	p.mu.Lock()
	p.tally.merge(t)
	if sameBits {
		p.sameBits = append(p.sameBits, it)
	}
	p.mu.Unlock()
	return nil
}

// countNaNs reads a piece of a tensor again, one whose bytes are the same
// on both sides in a tensor whose other pieces differ, and adds its NaNs
// to the tensor's plan as values that differ. The error is that of ctx
// done.
func (c *comparison) countNaNs(ctx context.Context, it piece, buf *buffers) error {
	p := it.p
	if p.failed() {
		return nil
	}
	buf.a = grow(buf.a, (it.hi-it.lo)*uint64(p.out.DTypeA.Bits())/8)
	pa, err := c.a.TensorElements(ctx, p.out.Name, it.lo, it.hi, buf.a)
	if err != nil {
		return p.fail(ctx, err)
	}
	var nan uint64
	err = safetensors.GuardFaults(func() error {
		var err error
		nan, err = nanCount(pa, &buf.da)
		return err
	})
	if err != nil {
		return p.fail(ctx, err)
	}
	if nan > 0 {
		p.mu.Lock()
		p.tally.merge(tally{unequal: nan, differing: nan, maxAbs: math.Inf(1), maxRel: math.Inf(1)})
		p.mu.Unlock()
	}
	return nil
}

// report adds n bytes to those dealt with, and calls the Progress
// function, if any.
func (c *comparison) report(n uint64) {
	if c.progress == nil {
		return
	}
	c.progressMu.Lock()
	defer c.progressMu.Unlock()
	c.done += n
	c.progress(c.done, c.total)
}

// failed reports whether a piece of the tensor could not be read.
func (p *plan) failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil
}

// fail records err, for a piece that could not be read, unless ctx is
// done: then it returns ctx's error.
func (p *plan) fail(ctx context.Context, err error) error {
	if stopped := parallel.Stopped(ctx); stopped != nil {
		return stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	return nil
}

// finish sets the tensor's verdict and counts from what its pieces found.
func (p *plan) finish() {
	out, t := p.out, p.tally
	switch {
	case p.err != nil:
		out.Verdict, out.Err = Error, p.err.Error()
		return
	case p.sameDType && !t.bytesDiffer:
		out.Verdict, out.Values = Identical, p.n
		return
	case p.byBytes || t.differing > 0:
		out.Verdict = Different
	case t.unequal > 0:
		out.Verdict = Close
	default:
		out.Verdict = Equal
	}
	out.Values, out.Unequal, out.Differing, out.MaxAbs, out.MaxRel = t.values, t.unequal, t.differing, t.maxAbs, t.maxRel
}

// grow returns b, or a new buffer if b cannot hold n bytes: what a source
// read through ReadAt reads a piece into (a mapped one gives slices of its
// memory instead).
func grow(b []byte, n uint64) []byte {
	if uint64(cap(b)) >= n {
		return b
	}
	return make([]byte, n)
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
