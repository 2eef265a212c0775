package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// f32Tensor returns an F32 tensor of the values, of shape [len(values)]
// unless shape is given.
func f32Tensor(t *testing.T, name string, values []float32, shape ...uint64) safetensors.Tensor {
	t.Helper()
	if shape == nil {
		shape = []uint64{uint64(len(values))}
	}
	tn, err := safetensors.TensorFromFloat32s(name, safetensors.F32, shape, values, safetensors.RoundNearestEven)
	require.NoError(t, err)
	return tn
}

// rawTensor returns a tensor of dtype d whose elements are the
// little-endian 64-bit words (F64, or halves of C64 elements).
func rawTensor(name string, d safetensors.DType, shape []uint64, words ...uint64) safetensors.Tensor {
	data := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(data[8*i:], w)
	}
	return safetensors.Tensor{Name: name, DType: d, Shape: shape, Data: data}
}

// verdictModels writes two files whose tensors get every verdict but
// "error", with a tensor only in each and a metadata key that differs, and
// returns their paths.
func verdictModels(t *testing.T) (string, string) {
	dir := t.TempDir()
	negZero := float32(math.Copysign(0, -1))
	f64 := func(vs ...float64) []uint64 {
		var w []uint64
		for _, v := range vs {
			w = append(w, math.Float64bits(v))
		}
		return w
	}
	a := []safetensors.Tensor{
		f32Tensor(t, "same", []float32{1, 2}),
		f32Tensor(t, "zero", []float32{0, 1}),
		f32Tensor(t, "cast", []float32{1, 0.5, -2}),
		f32Tensor(t, "close", []float32{1, 2, 3, 4}),
		f32Tensor(t, "far", []float32{1, 2}),
		f32Tensor(t, "shape", []float32{1, 2}),
		rawTensor("complex", safetensors.C64, []uint64{2}, 1, 2),
		rawTensor("bits", safetensors.C64, []uint64{2}, 1, 2),
		f32Tensor(t, "only_a", []float32{0}),
	}
	b := []safetensors.Tensor{
		f32Tensor(t, "same", []float32{1, 2}),
		f32Tensor(t, "zero", []float32{negZero, 1}),
		rawTensor("cast", safetensors.F64, []uint64{3}, f64(1, 0.5, -2)...),
		f32Tensor(t, "close", []float32{1, 2, 3, 4.001}),
		f32Tensor(t, "far", []float32{1, 3}),
		f32Tensor(t, "shape", []float32{1, 2}, 1, 2),
		f32Tensor(t, "complex", []float32{1, 2}),
		rawTensor("bits", safetensors.C64, []uint64{2}, 1, 3),
		f32Tensor(t, "only_b", []float32{0}),
	}
	pa, pb := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	require.NoError(t, safetensors.WriteFile(pa, a, map[string]string{"format": "pt"}))
	require.NoError(t, safetensors.WriteFile(pb, b, map[string]string{"format": "pt", "k": "v"}))
	return pa, pb
}

// TestDiffVerdicts: a line for each tensor that is not identical, one for
// each tensor only in one model and each metadata key that differs, and a
// summary whose counts are those of the lines; the same counts in the
// JSON, whose lists hold every tensor.
func TestDiffVerdicts(t *testing.T) {
	a, b := verdictModels(t)
	names := map[string]string{a: "a.safetensors", b: "b.safetensors"}
	status, stdout, stderr := runCmd("diff", "--atol", "0.01", a, b)
	assert.Equal(t, exitFail, status, stderr)
	golden(t, "diff.golden", redact(stdout, names))
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	assert.Len(t, lines, 2+7+1+1, "only in A and B, 7 tensors not identical, a metadata key, the summary")
	assert.True(t, strings.HasSuffix(lines[len(lines)-1], " differ: 1 tensor identical, 2 equal, 1 within tolerance, 2 different, 2 not comparable, 1 only in A, 1 only in B, 1 metadata key differs"), lines[len(lines)-1])

	status, stdout, stderr = runCmd("diff", "--json", "--atol", "0.01", a, b)
	assert.Equal(t, exitFail, status, stderr)
	golden(t, "diff-json.golden", redact(stdout, names))
	var doc diffJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	assert.Equal(t, a, doc.A)
	assert.Equal(t, 1, doc.Status)
	assert.False(t, doc.Equal)
	counts := doc.IdenticalCount + doc.EqualCount + doc.CloseCount + doc.DifferentCount + doc.IncomparableCount + doc.ErrorCount
	assert.Equal(t, len(doc.Tensors), counts, "every common tensor, once")
	assert.Equal(t, []int{1, 2, 1, 2, 2, 0}, []int{doc.IdenticalCount, doc.EqualCount, doc.CloseCount, doc.DifferentCount, doc.IncomparableCount, doc.ErrorCount})
	for _, e := range doc.Tensors {
		switch e.Name {
		case "close":
			assert.Equal(t, "close", e.Verdict)
			assert.Equal(t, []uint64{4, 1, 0}, []uint64{e.Values, e.Unequal, e.Differing})
			require.NotNil(t, e.MaxAbsDiff)
			assert.InDelta(t, 0.001, *e.MaxAbsDiff, 1e-6)
		case "shape", "complex", "bits":
			assert.Nil(t, e.MaxAbsDiff, "%s: no values compared", e.Name)
			assert.Nil(t, e.MaxRelDiff, "%s: no values compared", e.Name)
		}
	}

	// Without the tolerance, "close" differs.
	_, stdout, _ = runCmd("diff", a, b)
	assert.Contains(t, stdout, "\nclose: different: 1 of 4 values differs, max abs diff 0.000999928, max rel diff 0.000249919\n")
	assert.Contains(t, stdout, " differ: 1 tensor identical, 2 equal, 3 different, 2 not comparable, ")
}

// TestDiffJSONEmpty: the lists of two identical models are [], not null;
// the document gives the operands as given, the tolerance and the status.
func TestDiffJSONEmpty(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	require.NoError(t, safetensors.WriteFile(path, tinyLlama(), nil))
	status, stdout, stderr := runCmd("diff", "--json", "--rtol", "1e-3", path, path)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	for _, list := range []string{"only_a", "only_b", "metadata_keys"} {
		assert.Contains(t, stdout, `"`+list+`": [],`)
	}
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	assert.Equal(t, path, doc["a"])
	assert.Equal(t, path, doc["b"])
	assert.Equal(t, 0.0, doc["atol"])
	assert.Equal(t, 1e-3, doc["rtol"])
	assert.Equal(t, true, doc["equal"])
	assert.Equal(t, 0.0, doc["status"])
	assert.Equal(t, float64(len(tinyLlama())), doc["identical_count"])
	assert.Len(t, doc["tensors"], len(tinyLlama()))
}

// TestDiffBF16: an F32 model against its BF16 conversion differs exactly
// and matches within BF16's rounding, a relative 2^-8 of the BF16 value;
// a tighter rtol fails.
func TestDiffBF16(t *testing.T) {
	dir := t.TempDir()
	f32, bf16 := filepath.Join(dir, "f32.safetensors"), filepath.Join(dir, "bf16.safetensors")
	ts := tinyLlama()
	require.NoError(t, safetensors.WriteFile(f32, ts, nil))
	var converted []safetensors.Tensor
	for _, tn := range ts {
		v, err := tn.Float32s()
		require.NoError(t, err)
		c, err := safetensors.TensorFromFloat32s(tn.Name, safetensors.BF16, tn.Shape, v, safetensors.RoundNearestEven)
		require.NoError(t, err)
		converted = append(converted, c)
	}
	require.NoError(t, safetensors.WriteFile(bf16, converted, nil))
	for _, c := range []struct {
		rtol   string
		status int
		close  int
	}{{"0", exitFail, 0}, {"0.001", exitFail, 0}, {"0.00390625", exitOK, len(ts) - 9}} {
		status, stdout, stderr := runCmd("diff", "--json", "--rtol", c.rtol, f32, bf16)
		assert.Equal(t, c.status, status, "--rtol %s: %s", c.rtol, stderr)
		var doc diffJSON
		require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
		assert.Equal(t, c.status, doc.Status)
		if c.status == exitOK {
			// The norms are ones, which BF16 holds exactly.
			assert.Equal(t, c.close, doc.CloseCount, "--rtol %s", c.rtol)
			assert.Equal(t, 9, doc.EqualCount, "--rtol %s", c.rtol)
		}
	}
}

// TestDiffUsage: a tolerance that is not a finite number of 0 or more is
// a usage error, and prints nothing on stdout, even with --json.
func TestDiffUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--atol", "-1"}, {"--rtol", "NaN"}, {"--rtol", "+Inf"}, {"--json", "--atol", "-0.5"},
	} {
		status, stdout, stderr := runCmd(append(append([]string{"diff"}, args...), tinyModel, tinyModel)...)
		assert.Equal(t, exitTrouble, status, "%v", args)
		assert.Empty(t, stdout, "%v", args)
		assert.Contains(t, stderr, "must be a finite number of 0 or more", "%v", args)
	}
}
