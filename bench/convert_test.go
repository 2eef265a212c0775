package bench

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/x448/float16"
)

// convSizes are the numbers of elements a bulk conversion handles: 64 Ki,
// whose 256 KiB of float32s and 128 KiB of 16-bit values stay in the
// per-core cache, as when a loader converts a tensor in chunks; 1 Mi, whose
// 6 MiB stay in the shared cache; and 16 Mi, whose 96 MiB go through
// memory, as when a whole large tensor is converted at once.
var convSizes = []int{64 << 10, 1 << 20, 16 << 20}

// BenchmarkConvert times each bulk conversion and, in alternating blocks of
// 5 ms, a copy of the same output bytes into a buffer allocated beforehand:
// "x" is copy time / conversion time (1 = as fast as copying the result).
// "x448-ns/elem" is github.com/x448/float16 one element at a time, for the
// F16 directions.
func BenchmarkConvert(b *testing.B) {
	for _, n := range convSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchmarkConvert(b, n) })
	}
}

func benchmarkConvert(b *testing.B, convElems int) {
	f32 := make([]float32, convElems)
	for i := range f32 {
		f32[i] = float32(math.Sin(float64(i)) * 3)
	}
	u16 := safetensors.F32ToF16s(nil, f32, safetensors.RoundNearestEven)
	out16 := make([]uint16, convElems)
	out32 := make([]float32, convElems)
	copy16 := make([]uint16, convElems)
	copy32 := make([]float32, convElems)

	cases := []struct {
		name string
		conv func()
		copy func()
		x448 func()
	}{
		{"F32ToF16/nearest", func() { safetensors.F32ToF16s(out16, f32, safetensors.RoundNearestEven) }, func() { copy(copy16, u16) },
			func() {
				for i, f := range f32 {
					out16[i] = float16.Fromfloat32(f).Bits()
				}
			}},
		{"F32ToF16/truncate", func() { safetensors.F32ToF16s(out16, f32, safetensors.Truncate) }, func() { copy(copy16, u16) }, nil},
		{"F32ToBF16/nearest", func() { safetensors.F32ToBF16s(out16, f32, safetensors.RoundNearestEven) }, func() { copy(copy16, u16) }, nil},
		{"F32ToBF16/truncate", func() { safetensors.F32ToBF16s(out16, f32, safetensors.Truncate) }, func() { copy(copy16, u16) }, nil},
		{"F16ToF32", func() { safetensors.F16ToF32s(out32, u16) }, func() { copy(copy32, f32) },
			func() {
				for i, h := range u16 {
					out32[i] = float16.Frombits(h).Float32()
				}
			}},
		{"BF16ToF32", func() { safetensors.BF16ToF32s(out32, u16) }, func() { copy(copy32, f32) }, nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			sides := []func(){c.conv, c.copy}
			if c.x448 != nil {
				sides = append(sides, c.x448)
			}
			best := make([]float64, len(sides)) // ns per call in the fastest block
			round := 0
			for b.Loop() {
				for k := range sides {
					i := (k + round) % len(sides)
					calls := 0
					start := time.Now()
					for time.Since(start) < 5*time.Millisecond {
						sides[i]()
						calls++
					}
					ns := float64(time.Since(start).Nanoseconds()) / float64(calls)
					if best[i] == 0 || ns < best[i] {
						best[i] = ns
					}
				}
				round++
			}
			b.ReportMetric(best[0]/float64(convElems), "ns/elem")
			b.ReportMetric(best[1]/best[0], "x")
			if len(best) > 2 {
				b.ReportMetric(best[2]/float64(convElems), "x448-ns/elem")
			}
		})
	}
}
