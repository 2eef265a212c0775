package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
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

// refNonFinite counts the NaN and infinite values of t decoded, with
// math.IsNaN and math.IsInf: the reference for NonFinite.
func refNonFinite(t *testing.T, tn Tensor) (nan, inf uint64) {
	t.Helper()
	var vals []float64
	switch tn.DType {
	case F64:
		for i := 0; i < len(tn.Data); i += 8 {
			vals = append(vals, math.Float64frombits(binary.LittleEndian.Uint64(tn.Data[i:])))
		}
	default:
		f32, err := tn.Float32s()
		require.NoError(t, err)
		for _, v := range f32 {
			vals = append(vals, float64(v))
		}
	}
	for _, v := range vals {
		if math.IsNaN(v) {
			nan++
		} else if math.IsInf(v, 0) {
			inf++
		}
	}
	return nan, inf
}

// bitsTensor returns a tensor of dtype d whose elements have the given
// bits, little-endian.
func bitsTensor(d DType, bits ...uint64) Tensor {
	size := d.Bits() / 8
	data := make([]byte, 0, size*len(bits))
	for _, b := range bits {
		data = binary.LittleEndian.AppendUint64(data, b)[:len(data)+size]
	}
	return Tensor{Name: "x", DType: d, Shape: []uint64{uint64(len(bits))}, Data: data}
}

// oneAmong returns n elements of the finite bits one, but for v at index i.
func oneAmong(n, i int, one, v uint64) []uint64 {
	bits := make([]uint64, n)
	for k := range bits {
		bits[k] = one
	}
	bits[i] = v
	return bits
}

// TestNonFiniteEveryCode: every code of the 8- and 16-bit float types,
// alone among finite values both in the words of the fast pass and in the
// tail after them, counted as the decoded value says.
func TestNonFiniteEveryCode(t *testing.T) {
	for _, c := range []struct {
		d   DType
		one uint64 // the bits of a finite value
	}{{F16, 0x3c00}, {BF16, 0x3f80}, {F8_E5M2, 0x3c}, {F8_E4M3, 0x38}, {F8_E4M3FNUZ, 0x40}, {F8_E5M2FNUZ, 0x40}, {F8_E8M0, 0x7f}} {
		codes := uint64(1) << c.d.Bits()
		for code := range codes {
			for _, at := range []int{3, 16, 18} { // in a word of the fast pass, and in the tail, of 19 elements
				tn := bitsTensor(c.d, oneAmong(19, at, c.one, code)...)
				wantNaN, wantInf := refNonFinite(t, tn)
				nan, inf, err := tn.NonFinite()
				require.NoError(t, err)
				if nan != wantNaN || inf != wantInf {
					t.Fatalf("%v code %#x at %d: NaN %d, Inf %d; want %d, %d", c.d, code, at, nan, inf, wantNaN, wantInf)
				}
			}
		}
		// Every code at once.
		all := make([]uint64, codes)
		for i := range all {
			all[i] = uint64(i)
		}
		tn := bitsTensor(c.d, all...)
		wantNaN, wantInf := refNonFinite(t, tn)
		nan, inf, err := tn.NonFinite()
		require.NoError(t, err)
		assert.Equal(t, [2]uint64{wantNaN, wantInf}, [2]uint64{nan, inf}, "%v, every code", c.d)
		assert.NotZero(t, wantNaN, c.d)
	}
}

// TestNonFiniteWide: F32 and F64, the special patterns (each infinity and
// NaN payload edge, the largest finite values, zeros and subnormals) alone
// at every place of runs of every length to 40, and random bits, many of
// them with the exponent all ones, counted as the decoded values say.
func TestNonFiniteWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		d        DType
		one, exp uint64 // a finite value's bits; the exponent mask
		special  []uint64
	}{
		{F32, 0x3f800000, 0x7f800000, []uint64{0x7f800000, 0xff800000, 0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff, 0xffffffff, 0x7f7fffff, 0xff7fffff, 0, 0x80000000, 1, 0x807fffff, 0x00800000}},
		{F64, 0x3ff0000000000000, 0x7ff0000000000000, []uint64{0x7ff0000000000000, 0xfff0000000000000, 0x7ff0000000000001, 0xfff0000000000001, 0x7ff8000000000000, 0x7fffffffffffffff, 0xffffffffffffffff, 0x7fefffffffffffff, 0xffefffffffffffff, 0, 1 << 63, 1, 0x000fffffffffffff}},
	} {
		for _, v := range c.special {
			for n := 1; n <= 40; n++ {
				for at := range n {
					tn := bitsTensor(c.d, oneAmong(n, at, c.one, v)...)
					wantNaN, wantInf := refNonFinite(t, tn)
					nan, inf, err := tn.NonFinite()
					require.NoError(t, err)
					if nan != wantNaN || inf != wantInf {
						t.Fatalf("%v %#x at %d of %d: NaN %d, Inf %d; want %d, %d", c.d, v, at, n, nan, inf, wantNaN, wantInf)
					}
				}
			}
		}
		mask := uint64(1)<<c.d.Bits() - 1
		for round := range 200 {
			bits := make([]uint64, 1+rng.IntN(3000))
			for i := range bits {
				bits[i] = rng.Uint64() & mask
				if round%2 == 0 && rng.IntN(4) == 0 {
					bits[i] |= c.exp // NaN or Inf, or the largest exponent
				} else if round%2 == 1 {
					bits[i] &^= c.exp & (c.exp >> 1) // finite: never an exponent all ones
				}
			}
			tn := bitsTensor(c.d, bits...)
			wantNaN, wantInf := refNonFinite(t, tn)
			nan, inf, err := tn.NonFinite()
			require.NoError(t, err)
			require.Equal(t, [2]uint64{wantNaN, wantInf}, [2]uint64{nan, inf}, "%v, round %d", c.d, round)
		}
	}
}

// TestNonFiniteDTypes: the types with no NaN give zeros, C64 and a size
// that is not whole elements an error; Stats counts the same.
func TestNonFiniteDTypes(t *testing.T) {
	for _, d := range []DType{BOOL, U8, I8, I16, I32, I64, U64, F4, F6_E2M3} {
		nan, inf, err := (Tensor{Name: "x", DType: d, Data: []byte{0xff, 0xff, 0xff, 0xff}}).NonFinite()
		require.NoError(t, err, d)
		assert.Equal(t, [2]uint64{0, 0}, [2]uint64{nan, inf}, d)
	}
	_, _, err := (Tensor{Name: "x", DType: C64, Data: make([]byte, 8)}).NonFinite()
	assert.ErrorIs(t, err, ErrDTypeMismatch)
	_, _, err = (Tensor{Name: "x", DType: F32, Data: make([]byte, 6)}).NonFinite()
	assert.ErrorIs(t, err, ErrSizeMismatch)
	tn := bitsTensor(BF16, 0x7f80, 0xffc0, 0x3f80, 0x7fc1, 0xff80)
	nan, inf, err := tn.NonFinite()
	require.NoError(t, err)
	s, err := tn.Stats()
	require.NoError(t, err)
	assert.Equal(t, [2]uint64{s.NaN, s.Inf}, [2]uint64{nan, inf})
	assert.Equal(t, [2]uint64{2, 2}, [2]uint64{nan, inf})
}

// TestMomentsLanes: the kernel in use (the assembly on amd64 with AVX2)
// gives the lanes of momentsGo bit for bit, and the same extremes, over
// every length to 70 and every alignment of the start.
func TestMomentsLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := make([]float32, 80)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64()*1e3 + 7)
	}
	for off := range 8 {
		for n := 1; n <= 70; n++ {
			v := vals[off : off+n]
			k := float64(v[0])
			var got, want lanes
			glo, ghi := f32Moments(&got, v, k, v[0], v[0])
			wlo, whi := momentsGo(&want, v, k, v[0], v[0])
			require.Equal(t, want, got, "%d values from %d", n, off)
			require.Equal(t, [2]float32{wlo, whi}, [2]float32{glo, ghi}, "%d values from %d", n, off)
			lo, hi := slices.Min(v), slices.Max(v)
			require.Equal(t, [2]float32{lo, hi}, [2]float32{glo, ghi}, "%d values from %d", n, off)
		}
	}
}

// TestStatsShiftedSums: a chunk whose first value, about which its sums
// are taken, is far from the others loses no accuracy.
func TestStatsShiftedSums(t *testing.T) {
	vs := make([]float32, 3*statsChunk)
	for i := range vs {
		vs[i] = 1 + float32(i%2)*1e-3
	}
	want := make([]float64, len(vs))
	for c := 0; c < len(vs); c += statsChunk {
		vs[c] = 3e4 // the first of each chunk
	}
	for i, v := range vs {
		want[i] = float64(v)
	}
	s, err := Tensor{DType: F32, Data: f32Bytes(vs)}.Stats()
	require.NoError(t, err)
	assertStats(t, refStats(want), s, "outliers first")
}
