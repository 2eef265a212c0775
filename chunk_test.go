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

// TestElements cuts tensors of every width into ranges, and checks their
// bytes, and their decoding against that of the whole tensor.
func TestElements(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dtype := range []DType{F32, F16, BF16, F64, U8, I16, F8_E4M3, BOOL} {
		width := uint64(dtype.Bits() / 8)
		data := make([]byte, 1000*width)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		tensor := Tensor{Name: "w", DType: dtype, Shape: []uint64{10, 100}, Data: data}
		all, err := tensor.Float32s()
		require.NoError(t, err)
		for range 50 {
			start := rng.Uint64N(1001)
			end := start + rng.Uint64N(1001-start)
			part, err := tensor.Elements(start, end)
			require.NoError(t, err)
			assert.Equal(t, []uint64{end - start}, part.Shape)
			assert.Equal(t, data[start*width:end*width], part.Data)
			dst := make([]float32, 3, 10)
			got, err := tensor.AppendFloat32sRange(dst, start, end)
			require.NoError(t, err)
			assert.Equal(t, dst, got[:3], "appended after what dst held")
			// Compare bits: NaNs do not compare equal.
			require.Len(t, got, 3+int(end-start))
			for i, v := range got[3:] {
				require.Equal(t, math.Float32bits(all[start+uint64(i)]), math.Float32bits(v), "%v element %d", dtype, start+uint64(i))
			}
		}
		_, err = tensor.Elements(5, 1001)
		assert.True(t, errors.Is(err, ErrInvalidSlice), "%v", err)
		_, err = tensor.Elements(6, 5)
		assert.True(t, errors.Is(err, ErrInvalidSlice), "%v", err)
		got, err := tensor.AppendFloat32sRange([]float32{1}, 0, 2000)
		assert.True(t, errors.Is(err, ErrInvalidSlice), "%v", err)
		assert.Equal(t, []float32{1}, got, "dst as it was")
	}

	// Packed dtypes: ranges on whole bytes only.
	f4 := Tensor{Name: "q", DType: F4, Shape: []uint64{8}, Data: []byte{0x10, 0x32, 0x54, 0x76}}
	part, err := f4.Elements(2, 6)
	require.NoError(t, err)
	assert.Equal(t, []byte{0x32, 0x54}, part.Data)
	_, err = f4.Elements(1, 4)
	assert.True(t, errors.Is(err, ErrMisalignedSlice), "%v", err)
	f6 := Tensor{Name: "q", DType: F6_E3M2, Shape: []uint64{8}, Data: []byte{1, 2, 3, 4, 5, 6}}
	part, err = f6.Elements(4, 8)
	require.NoError(t, err)
	assert.Equal(t, []byte{4, 5, 6}, part.Data)
	_, err = f6.Elements(2, 8)
	assert.True(t, errors.Is(err, ErrMisalignedSlice), "%v", err)
	_, err = f4.AppendFloat32sRange(nil, 0, 2)
	assert.True(t, errors.Is(err, ErrDTypeMismatch), "F4 has no float32 decoding: %v", err)
}

// TestStatsMerge summarizes tensors in random parts, merged in random
// order, and compares with the whole tensor's statistics: counts and
// extremes exactly, mean and standard deviation within a relative 1e-12.
func TestStatsMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name   string
		dtype  DType
		value  func(i int) float64
		relTol float64
	}{
		{"normal", F32, func(int) float64 { return rng.NormFloat64() }, 1e-12},
		{"large mean", F64, func(int) float64 { return 1e6 + rng.Float64() }, 1e-9},
		{"NaN and Inf", F32, func(i int) float64 {
			switch i % 97 {
			case 3:
				return math.NaN()
			case 5:
				return math.Inf(-1)
			}
			return rng.Float64()*10 - 5
		}, 1e-12},
		{"BF16", BF16, func(int) float64 { return rng.ExpFloat64() }, 1e-12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 100_000
			values := make([]float32, n)
			var data []byte
			if tc.dtype == F64 {
				f := make([]float64, n)
				for i := range f {
					f[i] = tc.value(i)
				}
				data = le64(f)
			} else {
				for i := range values {
					values[i] = float32(tc.value(i))
				}
				tensor, err := TensorFromFloat32s("w", tc.dtype, []uint64{n}, values, RoundNearestEven)
				require.NoError(t, err)
				data = tensor.Data
			}
			tensor := Tensor{Name: "w", DType: tc.dtype, Shape: []uint64{n}, Data: data}
			whole, err := tensor.Stats()
			require.NoError(t, err)
			for range 20 {
				// Random cuts, some parts empty, merged in a random order.
				cuts := []uint64{0, n}
				for range rng.IntN(12) {
					cuts = append(cuts, rng.Uint64N(n+1))
				}
				slices.Sort(cuts)
				var parts []Stats
				for i := 0; i+1 < len(cuts); i++ {
					part, err := tensor.Elements(cuts[i], cuts[i+1])
					require.NoError(t, err)
					s, err := part.Stats()
					require.NoError(t, err)
					parts = append(parts, s)
				}
				rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
				var merged Stats
				for _, p := range parts {
					if rng.IntN(2) == 0 {
						merged.Merge(p)
					} else {
						p.Merge(merged)
						merged = p
					}
				}
				assert.Equal(t, whole.Count, merged.Count)
				assert.Equal(t, whole.NaN, merged.NaN)
				assert.Equal(t, whole.Inf, merged.Inf)
				assert.Equal(t, whole.Min, merged.Min)
				assert.Equal(t, whole.Max, merged.Max)
				assert.InEpsilon(t, whole.Mean, merged.Mean, tc.relTol)
				assert.InEpsilon(t, whole.StdDev, merged.StdDev, tc.relTol)
			}
		})
	}

	// No finite value on one side, or on both.
	nan := Tensor{DType: F32, Shape: []uint64{2}, Data: le32([]float32{float32(math.NaN()), float32(math.Inf(1))})}
	one := Tensor{DType: F32, Shape: []uint64{1}, Data: le32([]float32{2})}
	sn, err := nan.Stats()
	require.NoError(t, err)
	s1, err := one.Stats()
	require.NoError(t, err)
	merged := func(a, b Stats) Stats {
		a.Merge(b)
		return a
	}
	for _, m := range []Stats{merged(sn, s1), merged(s1, sn)} {
		assert.Equal(t, Stats{Count: 3, NaN: 1, Inf: 1, Min: 2, Max: 2, Mean: 2, StdDev: 0}, m)
	}
	both := sn
	both.Merge(both) // into itself
	assert.Equal(t, uint64(4), both.Count)
	assert.True(t, math.IsNaN(both.Mean) && math.IsNaN(both.Min) && math.IsNaN(both.StdDev))
	var zero Stats
	zero.Merge(s1)
	assert.Equal(t, s1, zero, "the zero Stats is the identity")
	before := s1
	s1.Merge(Stats{})
	assert.Equal(t, before, s1, "merging the zero Stats changes nothing")
}

func le32(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func le64(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}
