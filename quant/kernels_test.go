package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kernelInputs returns float32 values for the row loops: every value within
// 8 units in the last place of each half-integer and integer multiple of
// scale from -140 to 140 (the ties and the clamps), random values at
// several magnitudes, zeros of both signs, subnormals and the extremes.
func kernelInputs(rng *rand.Rand, scale float32) []float32 {
	var x []float32
	for k := -280; k <= 280; k++ {
		for _, c := range []float32{float32(k) / 2 * scale, float32(float64(k) / 2 * float64(scale))} {
			up, down := c, c
			x = append(x, c)
			for range 8 {
				up = math.Nextafter32(up, float32(math.Inf(1)))
				down = math.Nextafter32(down, float32(math.Inf(-1)))
				x = append(x, up, down)
			}
		}
	}
	for range 4000 {
		x = append(x, float32(rng.NormFloat64()*float64(scale)*float64([]float32{1, 40, 1e6}[rng.IntN(3)])))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 0x1p-149, -0x1p-149, 0x1p-126, math.MaxFloat32, -math.MaxFloat32)
	for i, v := range x {
		if math.IsInf(float64(v), 0) {
			x[i] = 0
		}
	}
	rng.Shuffle(len(x), func(i, j int) { x[i], x[j] = x[j], x[i] })
	return x
}

// kernelScales returns the scales and factors the loops are tried with.
func kernelScales(rng *rand.Rand) []float32 {
	s := []float32{1, 1 / 127.5, 0x1p-23, 0x1p-126, 0x1p-140, 0x1p-149, 3e38, math.MaxFloat32}
	for range 60 {
		s = append(s, float32(math.Exp(rng.Float64()*170-85)))
	}
	return s
}

// TestKernelsMatchGo checks the float32 row loops against their
// definitions bit for bit, for every length from 0 to 100 and at every
// alignment of the input and output (the vector loops take 32 elements at
// a time and leave the rest to Go), with the loops in use on this machine:
// AVX2 where it has it.
func TestKernelsMatchGo(t *testing.T) {
	if !useAVX2 {
		t.Log("no AVX2 loops on this machine: checking the pure-Go loops alone")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, s := range kernelScales(rng) {
		x := kernelInputs(rng, s)
		q := make([]byte, len(x)+64)
		qi := make([]int8, len(x)+64)
		for _, span := range [][2]int{{0, len(x)}, {1, len(x) - 3}, {5, 5 + 96}, {7, 7 + 31}, {3, 3 + 33}, {2, 2}} {
			xs := x[span[0]:span[1]]
			off := rng.IntN(32)
			got := q[off : off+len(xs)]
			quantRowF32(got, xs, s, 1/s, math.MaxFloat32)
			for i, v := range xs {
				if want := toInt8(float32(v / s)); got[i] != want {
					t.Fatalf("x / %v: x[%d] = %v: got %d, want %d", s, i, v, int8(got[i]), int8(want))
				}
			}
			bits := maxAbsBits(xs)
			var m float32
			for _, v := range xs {
				m = max(m, float32(math.Abs(float64(v))))
			}
			require.Equal(t, math.Float32bits(m), bits, "max|x| of %d values", len(xs))

			gotA := qi[off : off+len(xs)]
			roundAway(gotA, xs, s)
			for i, v := range xs {
				y := min(max(float32(v*s), -128), 127)
				if want := int8(math.Round(float64(y))); gotA[i] != want {
					t.Fatalf("x * %v: x[%d] = %v: got %d, want %d", s, i, v, gotA[i], want)
				}
			}
		}
	}
	for n := range 100 {
		x := kernelInputs(rng, 0.01)[:n]
		q := make([]byte, n)
		quantRowF32(q, x, 0.01, 100, math.MaxFloat32)
		for i, v := range x {
			require.Equal(t, toInt8(float32(v/0.01)), q[i], "length %d, element %d", n, i)
		}
	}
}

// TestMaxAbsBitsNotFinite checks that a NaN or an infinity anywhere in a
// row, in the vector loop's part or the rest, is found.
func TestMaxAbsBitsNotFinite(t *testing.T) {
	x := make([]float32, 100)
	for i := range x {
		x[i] = float32(i) - 50
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, at := range []int{0, 31, 32, 63, 64, 95, 96, 99} {
			y := append([]float32(nil), x...)
			y[at] = bad
			m, i := rowMaxAbs(y)
			assert.Equal(t, at, i, "%v at %d (max %v)", bad, at, m)
		}
	}
}

// TestQuantizeTinyMax checks a tensor whose max|x| is so small that 127 /
// max|x| overflows float32: q still spans [-127, 127] and dequantizes
// within half a scale. The scale is subnormal there, so it and each q·scale
// are rounded to float32's subnormal grid (steps of 2^-149): the bound adds
// half a step for the rounded scale, once in scale/2 and |q| times in
// q·scale, and half a step for the product.
func TestQuantizeTinyMax(t *testing.T) {
	m := float32(0x1p-126)
	x := []float32{m, m / 2, -m, 0, m / 4, -m * 3 / 4}
	for range 200 {
		x = append(x, m*float32(rand.Float64()*2-1))
	}
	q, scale, err := Quantize(nil, x)
	require.NoError(t, err)
	assert.Equal(t, []int8{127, 64, -127, 0, 32, -95}, q[:6]) // 63.5 rounds away from zero; 31.75 to 32; -95.25 to -95
	assert.Equal(t, m/127, scale)
	const halfStep = 0x1p-150
	for i, v := range Dequantize(nil, q, scale) {
		bound := float64(scale)/2 + halfStep + float64(max(int(q[i]), -int(q[i]))+1)*halfStep
		assert.LessOrEqual(t, math.Abs(float64(v)-float64(x[i])), bound, "element %d", i)
	}
}
