package diff

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// raw returns a one-dimensional tensor of dtype d of the little-endian
// bytes of words, each size bytes.
func raw(name string, d safetensors.DType, size int, words ...uint64) safetensors.Tensor {
	data := make([]byte, size*len(words))
	for i, w := range words {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w)
		copy(data[size*i:], b[:size])
	}
	n := uint64(len(data) * 8 / d.Bits())
	return safetensors.Tensor{Name: name, DType: d, Shape: []uint64{n}, Data: data}
}

func bf16(t *testing.T, name string, shape []uint64, vals ...float32) safetensors.Tensor {
	tn, err := safetensors.TensorFromFloat32s(name, safetensors.BF16, shape, vals, safetensors.RoundNearestEven)
	require.NoError(t, err)
	return tn
}

// TestVerdicts gives every verdict and checks that each common tensor
// gets one, the counts adding up to the tensors.
func TestVerdicts(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	a := newHookSource(
		f32(t, "identical", []uint64{2}, 1, 2),
		f32(t, "zero", []uint64{2}, 0, 1),
		f32(t, "cast", []uint64{2}, 1, 0.5),
		raw("ints", safetensors.I64, 8, 1, 1<<40, math.MaxUint64), // 1, 2^40, -1
		f32(t, "close", []uint64{2}, 1, 2),
		f32(t, "far", []uint64{2}, 1, 2),
		raw("big", safetensors.I32, 4, 1<<24+1),
		raw("packed", safetensors.F4, 1, 0x21, 0x43),
		f32(t, "shape", []uint64{2}, 1, 2),
		raw("packedcast", safetensors.F4, 1, 0x21),
		f32(t, "unreadable", []uint64{1}, 1),
	)
	b := newHookSource(
		f32(t, "identical", []uint64{2}, 1, 2),
		f32(t, "zero", []uint64{2}, negZero, 1),
		bf16(t, "cast", []uint64{2}, 1, 0.5),
		raw("ints", safetensors.I32, 4, 1, 1<<40, math.MaxUint32), // 1, 0 (truncated), -1
		f32(t, "close", []uint64{2}, 1, 2.001),
		f32(t, "far", []uint64{2}, 1, 3),
		raw("big", safetensors.F32, 4, uint64(math.Float32bits(1<<24))), // 2^24+1 is no float32
		raw("packed", safetensors.F4, 1, 0x21, 0x53),
		f32(t, "shape", []uint64{1, 2}, 1, 2),
		raw("packedcast", safetensors.F8_E4M3, 1, 1, 2),
		f32(t, "unreadable", []uint64{1}, 1),
	)
	bad := &failingSource{hookSource: b, fail: "unreadable"}
	r, err := Compare(t.Context(), a, bad, nil, nil, Tolerance(0.01, 0))
	require.NoError(t, err)
	want := map[string]Verdict{
		"identical": Identical, "zero": Equal, "cast": Equal, "ints": Different, "close": Close, "far": Different,
		"big": Different, "packed": Different, "shape": Incomparable, "packedcast": Incomparable, "unreadable": Error,
	}
	got := map[string]Verdict{}
	byName := map[string]Tensor{}
	for _, tn := range r.Tensors {
		got[tn.Name] = tn.Verdict
		byName[tn.Name] = tn
	}
	assert.Equal(t, want, got)
	total := 0
	for v := Identical; v <= Error; v++ {
		total += r.Count(v)
	}
	assert.Equal(t, len(r.Tensors), total)
	assert.False(t, r.Equal())

	ints := byName["ints"]
	assert.Equal(t, []uint64{3, 1, 1}, []uint64{ints.Values, ints.Unequal, ints.Differing}, "2^40 against 0")
	assert.Equal(t, float64(1<<40), ints.MaxAbs)
	assert.True(t, math.IsInf(ints.MaxRel, 1), "against 0")
	assert.Equal(t, uint64(1), byName["big"].Differing, "I32 values are compared exactly, not as float32")
	packed := byName["packed"]
	assert.True(t, packed.ByBytes)
	assert.Equal(t, []uint64{4, 1, 1}, []uint64{packed.Values, packed.Unequal, packed.Differing})
	assert.Equal(t, []uint64{2, 1, 0}, []uint64{byName["close"].Values, byName["close"].Unequal, byName["close"].Differing})
	assert.Contains(t, byName["unreadable"].Err, "cannot read")
	assert.Zero(t, byName["shape"].Values)

	// Without the tolerance, close differs; with it and the others alone,
	// the sides are equal.
	r, err = Compare(t.Context(), a, bad, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, r.Count(Close))
	assert.Equal(t, 5, r.Count(Different)) // and ints, far, big, packed
	some := newHookSource(a.tensors["identical"], a.tensors["zero"], a.tensors["cast"], a.tensors["close"])
	other := newHookSource(b.tensors["identical"], b.tensors["zero"], b.tensors["cast"], b.tensors["close"])
	r, err = Compare(t.Context(), some, other, nil, nil, Tolerance(0.01, 0))
	require.NoError(t, err)
	assert.True(t, r.Equal())
	r, err = Compare(t.Context(), some, other, nil, nil)
	require.NoError(t, err)
	assert.False(t, r.Equal())
}

// failingSource is a hookSource that cannot read the tensor named fail.
type failingSource struct {
	*hookSource
	fail string
}

func (s *failingSource) Names() []string { return s.hookSource.Names() }

func (s *failingSource) TensorContext(ctx context.Context, name string) (safetensors.Tensor, error) {
	if name == s.fail {
		return safetensors.Tensor{}, errors.New("cannot read " + name)
	}
	return s.hookSource.TensorContext(ctx, name)
}

// TestResultJSON: the lists of a result are [] when empty, and infinite
// differences, which JSON has no number for, are null, as are those of a
// tensor whose values were not compared.
func TestResultJSON(t *testing.T) {
	a := newHookSource(f32(t, "w", []uint64{2}, 1, 2))
	r, err := Compare(t.Context(), a, a, nil, nil)
	require.NoError(t, err)
	data, err := json.Marshal(r)
	require.NoError(t, err)
	for _, list := range []string{"only_a", "only_b", "metadata"} {
		assert.Contains(t, string(data), `"`+list+`":[]`)
	}
	assert.Contains(t, string(data), `"verdict":"identical"`)

	nan := float32(math.NaN())
	b := newHookSource(f32(t, "w", []uint64{2}, 1, nan), raw("s", safetensors.F32, 4, 0))
	c := newHookSource(f32(t, "w", []uint64{2}, 1, 2), raw("s", safetensors.F32, 4, 0, 0))
	r, err = Compare(t.Context(), b, c, nil, nil)
	require.NoError(t, err)
	data, err = json.Marshal(r.Tensors)
	require.NoError(t, err)
	var got []map[string]any
	require.NoError(t, json.Unmarshal(data, &got))
	assert.Equal(t, "incomparable", got[0]["verdict"])
	assert.Equal(t, []any{1.0}, got[0]["shape_a"])
	assert.Nil(t, got[0]["max_abs_diff"])
	assert.Equal(t, "different", got[1]["verdict"])
	assert.Nil(t, got[1]["max_abs_diff"], "NaN against 2: +Inf")
	assert.Nil(t, got[1]["max_rel_diff"])
	assert.Equal(t, 1.0, got[1]["differing"])
}

// TestCrossDType: an F32 model of several pieces a tensor, compared with
// its conversion to BF16, value by value: within BF16's rounding (rtol
// 2^-8) every tensor is close and the sides are equal; exactly, they
// differ; the counts and the largest relative difference are those worked
// out here from the values.
func TestCrossDType(t *testing.T) {
	n := 2*diffChunk + 123
	var tf, tb []safetensors.Tensor
	wantRel := 0.0
	var wantUnequal uint64
	for k, name := range []string{"a", "b", "c"} {
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(math.Sin(float64(i*(k+1)))) * 0.02
		}
		tf = append(tf, f32(t, name, []uint64{uint64(n)}, vals...))
		c := bf16(t, name, []uint64{uint64(n)}, vals...)
		tb = append(tb, c)
		back, err := c.Float32s()
		require.NoError(t, err)
		for i, v := range vals {
			x, y := float64(v), float64(back[i])
			if x != y {
				wantUnequal++
				wantRel = max(wantRel, math.Abs(x-y)/math.Abs(y))
			}
		}
	}
	require.LessOrEqual(t, wantRel, 1.0/256)
	a, b := newHookSource(tf...), newHookSource(tb...)
	for _, workers := range []int{1, 3} {
		r, err := Compare(t.Context(), a, b, nil, nil, Tolerance(0, 1.0/256), Workers(workers))
		require.NoError(t, err)
		assert.True(t, r.Equal())
		assert.Equal(t, 3, r.Count(Close))
		var unequal uint64
		rel := 0.0
		for _, tn := range r.Tensors {
			assert.Equal(t, uint64(n), tn.Values)
			assert.Zero(t, tn.Differing)
			unequal += tn.Unequal
			rel = max(rel, tn.MaxRel)
		}
		assert.Equal(t, wantUnequal, unequal)
		assert.Equal(t, wantRel, rel)

		r, err = Compare(t.Context(), a, b, nil, nil, Workers(workers))
		require.NoError(t, err)
		assert.False(t, r.Equal())
		assert.Equal(t, 3, r.Count(Different))
	}
}

// TestNaNPieces: without EqualNaN a NaN is not close to a NaN, whether the
// piece that holds it has the same bytes on both sides (read again) or
// not; a tensor of the same bytes is identical all the same; with
// EqualNaN the NaNs are equal.
func TestNaNPieces(t *testing.T) {
	n := 2 * diffChunk
	nan := float32(math.NaN())
	va, vb := make([]float32, n), make([]float32, n)
	va[5], vb[5] = nan, nan                         // first piece: the same bytes
	va[diffChunk+1], vb[diffChunk+1] = nan, nan     // second piece, beside a difference
	va[diffChunk+2], vb[diffChunk+2] = 1, 1.0000001 // the difference
	a := newHookSource(f32(t, "w", []uint64{uint64(n)}, va...), f32(t, "same", []uint64{uint64(n)}, va...))
	b := newHookSource(f32(t, "w", []uint64{uint64(n)}, vb...), f32(t, "same", []uint64{uint64(n)}, va...))
	r, err := Compare(t.Context(), a, b, nil, nil, Tolerance(0, 1e-3))
	require.NoError(t, err)
	same, w := r.Tensors[0], r.Tensors[1]
	assert.Equal(t, Identical, same.Verdict)
	assert.Zero(t, same.Differing)
	assert.Equal(t, Different, w.Verdict)
	assert.Equal(t, []uint64{3, 2}, []uint64{w.Unequal, w.Differing}, "two NaNs and a close pair")
	assert.True(t, math.IsInf(w.MaxAbs, 1))

	r, err = Compare(t.Context(), a, b, nil, nil, Tolerance(0, 1e-3), EqualNaN())
	require.NoError(t, err)
	w = r.Tensors[1]
	assert.Equal(t, Close, w.Verdict)
	assert.Equal(t, []uint64{1, 0}, []uint64{w.Unequal, w.Differing})
	assert.InDelta(t, 1.19e-7, w.MaxAbs, 1e-9)
}

// TestProgress: the Progress function is called once a piece, from one
// goroutine at a time, with done increasing up to total, the bytes of the
// tensors in both whose shapes agree, on both sides.
func TestProgress(t *testing.T) {
	n := 3*diffChunk + 7
	a := newHookSource(f32(t, "w", []uint64{uint64(n)}, make([]float32, n)...), f32(t, "x", []uint64{2}, 1, 2), f32(t, "shape", []uint64{2}, 1, 2))
	b := newHookSource(bf16(t, "w", []uint64{uint64(n)}, make([]float32, n)...), f32(t, "x", []uint64{2}, 1, 3), f32(t, "shape", []uint64{1, 2}, 1, 2))
	var (
		mu     sync.Mutex
		calls  []uint64
		totals = map[uint64]bool{}
		inside atomic.Int32
	)
	progress := func(done, total uint64) {
		if inside.Add(1) != 1 {
			t.Error("two calls at once")
		}
		defer inside.Add(-1)
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, done)
		totals[total] = true
	}
	_, err := Compare(t.Context(), a, b, nil, nil, Workers(4), Progress(progress))
	require.NoError(t, err)
	want := uint64(n*4 + n*2 + 8 + 8)
	assert.Equal(t, map[uint64]bool{want: true}, totals)
	assert.Len(t, calls, 4+1, "four pieces of w, one of x")
	assert.True(t, slices.IsSorted(calls))
	assert.Equal(t, want, calls[len(calls)-1])
}

// TestToleranceOption: a tolerance that is negative, NaN or infinite fails
// Compare with ErrInvalidOption.
func TestToleranceOption(t *testing.T) {
	a := newHookSource(f32(t, "w", []uint64{1}, 1))
	for _, tol := range [][2]float64{{-1, 0}, {0, -1e-9}, {math.NaN(), 0}, {0, math.Inf(1)}} {
		_, err := Compare(t.Context(), a, a, nil, nil, Tolerance(tol[0], tol[1]))
		require.ErrorIs(t, err, safetensors.ErrInvalidOption, "%v", tol)
	}
	_, err := Compare(t.Context(), a, a, nil, nil, Tolerance(0, 0), Tolerance(1e-3, 1e-5))
	require.NoError(t, err)
}
