package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestSlicesReference compares Tensor.Slice and Reader.ReadSlice with
// safetensors 0.8's get_slice (python/slices.py, one process for them
// all) on random selections of random tensors of every dtype: steps, ints
// from the end, an ellipsis, too many items, positions and bounds out of
// range, steps of 0 and below, negative bounds, F4 and F6 selections off
// byte boundaries. Where the reference gives a selection, Go gives the same
// bytes and shape (for F6, which the reference accepts but will not hand
// over, Go must accept too); where it refuses, Go refuses with
// ErrMisalignedSlice for its byte-boundary errors and ErrInvalidSlice for
// the others. Negative bounds and steps cannot be written in Go (the
// arguments are unsigned): the reference must refuse each of them.
//
// The reference has no rule for a range whose start is after its stop
// (Python's x[3:1], empty): its unsigned arithmetic wraps, and it fails
// without a slicing error (a Python SystemError for a negative size, a Rust
// panic, "capacity overflow", a reshape error), or, with a large step,
// returns a wrong selection (x[:, :, 3:1:2**62] of a 2x3x4 tensor gives the
// whole tensor, shape (2, 3, 4)); for F4 and F6, which byte-boundary
// checks it makes first depends on that arithmetic too. Go refuses such a
// range (with ErrMisalignedSlice where the reference's first checks find a
// selection off byte boundaries, else ErrInvalidSlice), and the test asks
// that it refuses.
func TestSlicesReference(t *testing.T) {
	python := need(t, "INTEROP_PYTHON", "the Python environment with safetensors and numpy")
	s := seed(t)
	r := rand.New(rand.NewPCG(s, 0x511ce))
	dir := t.TempDir()

	// Files of tensors of every dtype, shapes with dimensions of 0 to 6,
	// whole bytes for F4 and F6.
	var paths []string
	var files [][]safetensors.Tensor
	var dtypes []safetensors.DType
	for d := safetensors.BOOL; d <= safetensors.U64; d++ {
		dtypes = append(dtypes, d)
	}
	for f := range 4 {
		var tensors []safetensors.Tensor
		for i := range 40 {
			d := dtypes[(f*40+i)%len(dtypes)]
			shape := make([]uint64, r.IntN(5))
			for j := range shape {
				shape[j] = uint64(r.IntN(7))
				if r.IntN(8) != 0 && shape[j] == 0 {
					shape[j] = 1 + uint64(r.IntN(6))
				}
			}
			size, ok := byteSize(d.String(), shape)
			if !ok {
				if len(shape) == 0 {
					shape = []uint64{0}
				}
				shape[len(shape)-1] = 4 * (1 + uint64(r.IntN(2)))
				size, ok = byteSize(d.String(), shape)
				require.True(t, ok)
			}
			data := make([]byte, size)
			for k := range data {
				data[k] = byte(r.Uint32())
			}
			tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("t%d_%s", i, d), DType: d, Shape: shape, Data: data})
		}
		path := filepath.Join(dir, fmt.Sprintf("slices%d.safetensors", f))
		require.NoError(t, safetensors.WriteFile(path, tensors, nil))
		paths = append(paths, path)
		files = append(files, tensors)
	}

	type pyCase struct {
		File   int    `json:"file"`
		Tensor string `json:"tensor"`
		Index  []any  `json:"index"`
	}
	type goCase struct {
		tensor   safetensors.Tensor
		sel      []safetensors.Selector
		unsigned bool // false: a negative bound or step, which Go cannot write
		reversed bool // a range whose start is after its stop
	}
	n := 2 * count(t, 4000)
	py := make([]pyCase, n)
	cases := make([]goCase, n)
	for c := range n {
		f := r.IntN(len(files))
		tensor := files[f][r.IntN(len(files[f]))]
		rank := len(tensor.Shape)
		items := r.IntN(rank + 2)
		ellipsis := -1
		if r.IntN(3) == 0 {
			ellipsis = r.IntN(items + 1)
		}
		explicit := items
		var index []any
		gc := goCase{tensor: tensor, unsigned: true}
		// dim returns the size of the dimension of item k (0 past the
		// last), as the reference resolves the ellipsis.
		dim := func(k int) uint64 {
			d := k
			if ellipsis >= 0 && k > ellipsis {
				d = k - 1 + max(rank-explicit, 0)
			}
			if d < rank {
				return tensor.Shape[d]
			}
			return 0
		}
		for k := range items + boolInt(ellipsis >= 0) {
			if k == ellipsis || ellipsis >= 0 && r.IntN(40) == 0 {
				index = append(index, "...")
				gc.sel = append(gc.sel, safetensors.Ellipsis())
				continue
			}
			size := int64(dim(k))
			// A position or bound: mostly inside, sometimes out, sometimes
			// negative.
			num := func() int64 {
				switch r.IntN(10) {
				case 0:
					return -int64(r.IntN(int(size) + 3))
				case 1:
					return size + int64(r.IntN(3))
				}
				return int64(r.IntN(int(size) + 1))
			}
			if r.IntN(3) == 0 {
				i := num()
				index = append(index, map[string]int64{"int": i})
				if i >= 0 {
					gc.sel = append(gc.sel, safetensors.At(uint64(i)))
				} else {
					gc.sel = append(gc.sel, safetensors.AtFromEnd(uint64(-i)))
				}
				continue
			}
			var start, stop, step *int64
			if r.IntN(3) != 0 {
				v := num()
				start = &v
			}
			if r.IntN(3) != 0 {
				v := num()
				stop = &v
			}
			if r.IntN(2) == 0 {
				v := int64(1 + r.IntN(4))
				switch r.IntN(12) {
				case 0:
					v = 0
				case 1:
					v = -int64(1 + r.IntN(3))
				case 2:
					v = 1 + r.Int64N(1<<62)
				}
				step = &v
			}
			index = append(index, map[string][]*int64{"slice": {start, stop, step}})
			a, b, st := int64(0), size, int64(1)
			if start != nil {
				a = *start
			}
			if stop != nil {
				b = *stop
			}
			if step != nil {
				st = *step
			}
			if a < 0 || b < 0 || st < 0 {
				gc.unsigned = false
			}
			gc.reversed = gc.reversed || a > b
			if start == nil && stop == nil && step == nil {
				gc.sel = append(gc.sel, safetensors.All())
			} else {
				gc.sel = append(gc.sel, safetensors.RangeStep(uint64(a), uint64(b), uint64(st)))
			}
		}
		if index == nil {
			index = []any{}
		}
		py[c] = pyCase{File: f, Tensor: tensor.Name, Index: index}
		cases[c] = gc
	}

	in, err := json.Marshal(map[string]any{"files": paths, "cases": py})
	require.NoError(t, err)
	cmd := exec.Command(python, filepath.Join("python", "slices.py"))
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(cmd.Environ(), "RUST_BACKTRACE=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "python slices.py: %s", stderr.String())
	var resp struct {
		Results []struct {
			Shape   []uint64 `json:"shape"`
			Data    []byte   `json:"data"`
			Error   string   `json:"error"`
			Message string   `json:"message"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Len(t, resp.Results, n)

	readers := make([]*safetensors.Reader, len(paths))
	for i, p := range paths {
		readers[i], err = safetensors.Open(p)
		require.NoError(t, err)
		defer readers[i].Close()
	}
	tally := map[string]int{}
	dst := make([]byte, 1<<16)
	for c, ref := range resp.Results {
		gc := cases[c]
		desc := fmt.Sprintf("INTEROP_SEED=%d case %d: %s %v shape %v, Python index %s: reference %s %s", s, c, gc.tensor.Name, gc.tensor.DType, gc.tensor.Shape, pyIndex(py[c].Index), ref.Error, ref.Message)
		if !gc.unsigned {
			require.NotEmpty(t, ref.Error, "the reference accepts a negative bound or step: %s", desc)
			tally["negative bound or step: refused by both"]++
			continue
		}
		got, err := gc.tensor.Slice(gc.sel...)
		n, rerr := readers[py[c].File].ReadSlice(context.Background(), gc.tensor.Name, dst, gc.sel...)
		if err == nil {
			require.NoError(t, rerr, desc)
		} else {
			require.Equal(t, err.Error(), rerr.Error(), desc)
		}
		if gc.reversed {
			// What the reference checks before it fails depends on its
			// wrapped arithmetic: the test asks only that Go refuses.
			require.Error(t, err, desc)
			if ref.Error == "" {
				require.ErrorIs(t, err, safetensors.ErrInvalidSlice, desc)
				tally["reversed range: refused by Go, a wrong selection from the reference"]++
			} else {
				tally["reversed range: refused by both"]++
			}
			continue
		}
		isF6 := gc.tensor.DType == safetensors.F6_E2M3 || gc.tensor.DType == safetensors.F6_E3M2
		switch {
		case ref.Error == "" || isF6 && strings.HasPrefix(ref.Message, "Dtype not understood"):
			require.NoError(t, err, desc)
			if ref.Error == "" {
				require.Equal(t, ref.Shape, got.Shape, desc)
				require.Equal(t, ref.Data, got.AppendTo([]byte{}), desc)
				require.Equal(t, ref.Data, dst[:n], "ReadSlice: %s", desc)
			}
			tally["accepted by both"]++
		case strings.Contains(ref.Message, "byte boundary"):
			require.ErrorIs(t, err, safetensors.ErrMisalignedSlice, desc)
			tally["misaligned for both"]++
		case ref.Error == "SafetensorError":
			require.ErrorIs(t, err, safetensors.ErrInvalidSlice, desc)
			require.False(t, errors.Is(err, safetensors.ErrMisalignedSlice), desc)
			tally["invalid for both"]++
		default:
			t.Fatalf("the reference fails without a slicing error on a selection without a reversed range: %s", desc)
		}
	}
	t.Logf("INTEROP_SEED=%d: %d selections: %v", s, n, tally)
	for _, k := range []string{"accepted by both", "misaligned for both", "invalid for both", "negative bound or step: refused by both", "reversed range: refused by both"} {
		require.Greater(t, tally[k], 10, k)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pyIndex writes an index as Python does, for messages.
func pyIndex(index []any) string {
	var parts []string
	for _, it := range index {
		switch v := it.(type) {
		case string:
			parts = append(parts, v)
		case map[string]int64:
			parts = append(parts, fmt.Sprint(v["int"]))
		case map[string][]*int64:
			var s []string
			for _, p := range v["slice"] {
				if p == nil {
					s = append(s, "")
				} else {
					s = append(s, fmt.Sprint(*p))
				}
			}
			parts = append(parts, strings.Join(s, ":"))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
