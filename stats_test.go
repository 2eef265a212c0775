package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refStats computes the statistics of vs, decoded by the caller, the plain
// way: two passes over every value.
func refStats(vs []float64) Stats {
	s := Stats{Count: uint64(len(vs)), Min: math.Inf(1), Max: math.Inf(-1)}
	var sum, n float64
	for _, v := range vs {
		switch {
		case math.IsNaN(v):
			s.NaN++
		case math.IsInf(v, 0):
			s.Inf++
		default:
			sum += v
			n++
			s.Min, s.Max = min(s.Min, v), max(s.Max, v)
		}
	}
	if n == 0 {
		nan := math.NaN()
		s.Min, s.Max, s.Mean, s.StdDev = nan, nan, nan, nan
		return s
	}
	s.Mean = sum / n
	var m2 float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			m2 += (v - s.Mean) * (v - s.Mean)
		}
	}
	s.StdDev = math.Sqrt(m2 / n)
	return s
}

func assertStats(t *testing.T, want, got Stats, msg string) {
	t.Helper()
	assert.Equal(t, want.Count, got.Count, msg)
	assert.Equal(t, want.NaN, got.NaN, msg)
	assert.Equal(t, want.Inf, got.Inf, msg)
	for _, f := range []struct {
		name      string
		want, got float64
	}{{"min", want.Min, got.Min}, {"max", want.Max, got.Max}, {"mean", want.Mean, got.Mean}, {"std", want.StdDev, got.StdDev}} {
		if math.IsNaN(f.want) {
			assert.True(t, math.IsNaN(f.got), "%s: %s = %v, want NaN", msg, f.name, f.got)
			continue
		}
		assert.InDelta(t, f.want, f.got, 1e-9*max(1, math.Abs(f.want)), "%s: %s", msg, f.name)
	}
}

func f32Bytes(vs []float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func TestStats(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{0, 1, 2, 3, statsChunk - 1, statsChunk, 3*statsChunk + 5} {
		for _, special := range []bool{false, true} {
			vs := make([]float32, n)
			for i := range vs {
				vs[i] = float32(rng.NormFloat64()*3 + 1)
				if special && rng.IntN(50) == 0 {
					vs[i] = [...]float32{nan, inf, -inf}[rng.IntN(3)]
				}
			}
			ref := make([]float64, n)
			for i, v := range vs {
				ref[i] = float64(v)
			}
			want := refStats(ref)
			data := f32Bytes(vs)
			got, err := Tensor{DType: F32, Data: data}.Stats()
			require.NoError(t, err)
			assertStats(t, want, got, "F32 view")

			// Misaligned: decoded a chunk at a time instead of viewed.
			shifted := make([]byte, len(data)+1)[1:]
			copy(shifted, data)
			got, err = Tensor{DType: F32, Data: shifted}.Stats()
			require.NoError(t, err)
			assertStats(t, want, got, "F32 decoded")

			// F64: the same values, not rounded to float32.
			d64 := make([]byte, 8*n)
			for i, v := range ref {
				binary.LittleEndian.PutUint64(d64[8*i:], math.Float64bits(v))
			}
			got, err = Tensor{DType: F64, Data: d64}.Stats()
			require.NoError(t, err)
			assertStats(t, want, got, "F64")
			got, err = Tensor{DType: F64, Data: append(make([]byte, 1, 8*n+1), d64...)[1:]}.Stats()
			require.NoError(t, err)
			assertStats(t, want, got, "F64 decoded")

			// BF16: the values its bits decode to.
			bf := F32sToBF16Bytes(nil, vs, RoundNearestEven)
			back, err := Tensor{DType: BF16, Data: bf}.Float32s()
			require.NoError(t, err)
			for i, v := range back {
				ref[i] = float64(v)
			}
			got, err = Tensor{DType: BF16, Data: bf}.Stats()
			require.NoError(t, err)
			assertStats(t, refStats(ref), got, "BF16")
		}
	}
}

// TestStatsLargeMean checks the accuracy the chunked formulas give where
// the sum of squares would cancel: a tiny spread around a large mean.
func TestStatsLargeMean(t *testing.T) {
	vs := make([]float64, 100_000)
	for i := range vs {
		vs[i] = 1e9 + float64(i%2) // mean 1e9 + 0.5, standard deviation 0.5
	}
	d := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(v))
	}
	s, err := Tensor{DType: F64, Data: d}.Stats()
	require.NoError(t, err)
	assert.InDelta(t, 0.5, s.StdDev, 1e-9)
	assert.InDelta(t, 1e9+0.5, s.Mean, 1e-6)
}

func TestStatsDTypes(t *testing.T) {
	s, err := Tensor{DType: I8, Data: []byte{0xff, 3, 0x80}}.Stats() // -1, 3, -128
	require.NoError(t, err)
	assert.Equal(t, -128.0, s.Min)
	assert.Equal(t, 3.0, s.Max)
	assert.InDelta(t, -42.0, s.Mean, 1e-12)

	s, err = Tensor{DType: F8_E4M3, Data: []byte{0x38, 0x7f}}.Stats() // 1, NaN
	require.NoError(t, err)
	assert.Equal(t, Stats{Count: 2, NaN: 1, Min: 1, Max: 1, Mean: 1, StdDev: 0}, s)

	s, err = Tensor{DType: F16, Data: []byte{0x00, 0x7c, 0x00, 0xfc}}.Stats() // +Inf, -Inf
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s.Inf)
	assert.True(t, math.IsNaN(s.Mean) && math.IsNaN(s.Min))

	_, err = Tensor{Name: "c", DType: C64, Data: make([]byte, 8)}.Stats()
	assert.True(t, errors.Is(err, ErrDTypeMismatch), "%v", err)
	_, err = Tensor{Name: "h", DType: F16, Data: make([]byte, 3)}.Stats()
	assert.True(t, errors.Is(err, ErrSizeMismatch), "%v", err)
	_, err = Tensor{Name: "d", DType: F64, Data: make([]byte, 12)}.Stats()
	assert.True(t, errors.Is(err, ErrSizeMismatch), "%v", err)
}
