package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/safetensors-go/safetensors"
)

// BenchmarkRow times the per-row kernels on one goroutine, 4096 elements a
// row in the per-core cache, against a float32 sum of the same row.
func BenchmarkRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.02)
	}
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	q := make([]byte, len(x))
	for _, d := range []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32} {
		t, _ := safetensors.TensorFromFloat32s("x", d, []uint64{1, uint64(len(x))}, x, safetensors.RoundNearestEven)
		xd, _ := t.Float32s()
		s := scaleOf(m, d)
		b.Run(d.String()+"/quant", func(b *testing.B) {
			b.SetBytes(int64(len(t.Data)))
			for b.Loop() {
				if d == safetensors.BF16 {
					quantRowBF16(q, t.Data, s, m)
				} else {
					quantRow(q, xd, s, m, d)
				}
			}
		})
		b.Run(d.String()+"/max", func(b *testing.B) {
			b.SetBytes(int64(len(t.Data)))
			for b.Loop() {
				if d == safetensors.BF16 {
					rowMaxAbsBF16(t.Data)
				} else {
					rowMaxAbs(xd)
				}
			}
		})
	}
	b.Run("sum", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		var sink float32
		for b.Loop() {
			var s float32
			for _, v := range x {
				s += v
			}
			sink += s
		}
	})
}
