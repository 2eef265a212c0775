package interop

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/quant"
)

// quantInputs returns weights for the quantization rules: random ones of
// each dtype and shape, and the edge cases: rows of zeros, a tensor of
// zeros, ties, a dominant negative minimum, subnormals, huge values, one
// column.
func quantInputs(t *testing.T) []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []safetensors.Tensor
	add := func(name string, d safetensors.DType, rows, cols int, gen func(r, c int) float32) {
		vals := make([]float32, rows*cols)
		for r := range rows {
			for c := range cols {
				vals[r*cols+c] = gen(r, c)
			}
		}
		tn, err := safetensors.TensorFromFloat32s(name, d, []uint64{uint64(rows), uint64(cols)}, vals, safetensors.RoundNearestEven)
		require.NoError(t, err)
		out = append(out, tn)
	}
	for _, d := range []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32} {
		for _, shape := range [][2]int{{1, 1}, {7, 33}, {64, 1000}, {300, 17}} {
			add(fmt.Sprintf("%v.normal.%dx%d", d, shape[0], shape[1]), d, shape[0], shape[1], func(r, c int) float32 {
				if r == 3 {
					return 0 // a row of zeros
				}
				return float32(rng.NormFloat64() * 0.05 * float64(1+r%5))
			})
		}
		add(fmt.Sprintf("%v.zeros", d), d, 4, 8, func(int, int) float32 { return 0 })
		// Multiples of max/127.5 that are halfway between integers, and
		// the validator's ties (-0.5, 0.5 * k/127 ...).
		add(fmt.Sprintf("%v.ties", d), d, 3, 256, func(r, c int) float32 {
			switch r {
			case 0:
				return float32(c-128) + 0.5
			case 1:
				return []float32{-0.5, -0.25, 0.1, 0.5}[c%4]
			}
			return float32(c%16) / 16
		})
		// The validator's ties: max|x| = 127 makes x * (127 / max_abs) = x.
		add(fmt.Sprintf("%v.validator-ties", d), d, 2, 128, func(r, c int) float32 {
			if r == 0 && c == 0 {
				return 127
			}
			return float32(c-64) + 0.5
		})
		add(fmt.Sprintf("%v.negative", d), d, 5, 40, func(r, c int) float32 {
			if c == 0 {
				return -3
			}
			return float32(rng.Float64()*2 - 1)
		})
		add(fmt.Sprintf("%v.tiny", d), d, 4, 64, func(r, c int) float32 {
			return float32(rng.NormFloat64()) * float32(math.Pow(2, float64(-20-r*10)))
		})
		big := float32(60000)
		if d != safetensors.F16 {
			big = 3e38
		}
		add(fmt.Sprintf("%v.huge", d), d, 2, 32, func(r, c int) float32 { return big * (float32(c-16) / 16) })
		add(fmt.Sprintf("%v.column", d), d, 50, 1, func(r, c int) float32 { return float32(rng.NormFloat64()) })
	}
	return out
}

// TestQuantizationReference compares the quant package's rules with the
// NumPy implementation in quant/reference.py, bit for bit. It runs when
// SAFETENSORS_QUANT_PYTHON names a Python with numpy and ml_dtypes (CI
// installs them, pinned by quant/requirements.txt).
func TestQuantizationReference(t *testing.T) {
	python := os.Getenv("SAFETENSORS_QUANT_PYTHON")
	if python == "" {
		t.Skip("SAFETENSORS_QUANT_PYTHON is not set")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
	inputs := quantInputs(t)
	require.NoError(t, safetensors.WriteFile(in, inputs, nil))
	cmd := exec.Command(python, filepath.Join("quant", "reference.py"), in, out)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Run())
	r, err := safetensors.Open(out)
	require.NoError(t, err)
	defer r.Close()
	want := func(name string) safetensors.Tensor {
		tn, err := r.Tensor(name)
		require.NoError(t, err)
		return tn
	}
	for _, w := range inputs {
		for _, s := range []quant.Strategy{quant.PerChannel, quant.PerTensor} {
			q, scale, err := quant.CompressWeight(w, s)
			require.NoError(t, err, w.Name)
			wq, ws := want(w.Name+"."+s.String()+".q"), want(w.Name+"."+s.String()+".scale")
			assert.Equal(t, wq.Data, q.Data, "%s per %v: q", w.Name, s)
			assert.Equal(t, wq.Shape, q.Shape, "%s per %v: q's shape", w.Name, s)
			assert.Equal(t, ws.Data, scale.Data, "%s per %v: scale", w.Name, s)
			assert.Equal(t, ws.DType, scale.DType, "%s per %v: scale's dtype", w.Name, s)
			assert.Equal(t, ws.Shape, scale.Shape, "%s per %v: scale's shape", w.Name, s)
		}
		x, err := w.Float32s()
		require.NoError(t, err)
		q, scale, err := quant.Quantize(nil, x)
		require.NoError(t, err)
		wq := want(w.Name + ".validator.q")
		got := make([]byte, len(q))
		for i, v := range q {
			got[i] = byte(v)
		}
		assert.Equal(t, wq.Data, got, "%s: validator's q", w.Name)
		ws := want(w.Name + ".validator.scale")
		assert.Equal(t, binary.LittleEndian.Uint32(ws.Data), math.Float32bits(scale), "%s: validator's scale", w.Name)
	}
}
