package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"
	"unsafe"

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
//
// A narrowing conversion reads twice the bytes it writes, which the copy of
// its result does not, so two more sides bound what any code can reach:
// "ceil-x" is the copy against an assembly loop that moves a narrowing's
// bytes and converts nothing (the fastest of its variants: AVX2 or AVX-512,
// plain or non-temporal stores),
// "of-ceil" the conversion against that loop (1 = at the ceiling), and, for
// the pure-Go loops, "gofloor-x" the copy against the fastest pure-Go loop
// we have that moves a narrowing's bytes and converts nothing
// (packTopHalves).
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

	type side struct {
		metric string
		run    func()
	}
	var bounds []side // for the narrowing directions
	for _, ceil := range narrowCeilings() {
		bounds = append(bounds, side{"ceil", func() { ceil(out16, f32) }})
	}
	bounds = append(bounds, side{"gofloor", func() { packTopHalves(out16, f32) }})
	x448F16 := side{"x448", func() {
		for i, f := range f32 {
			out16[i] = float16.Fromfloat32(f).Bits()
		}
	}}
	x448F32 := side{"x448", func() {
		for i, h := range u16 {
			out32[i] = float16.Frombits(h).Float32()
		}
	}}
	copyF16 := func() { copy(copy16, u16) }
	copyF32 := func() { copy(copy32, f32) }

	cases := []struct {
		name  string
		conv  func()
		copy  func()
		other []side
	}{
		{"F32ToF16/nearest", func() { safetensors.F32ToF16s(out16, f32, safetensors.RoundNearestEven) }, copyF16,
			append([]side{x448F16}, bounds...)},
		{"F32ToF16/truncate", func() { safetensors.F32ToF16s(out16, f32, safetensors.Truncate) }, copyF16, bounds},
		{"F32ToBF16/nearest", func() { safetensors.F32ToBF16s(out16, f32, safetensors.RoundNearestEven) }, copyF16, bounds},
		{"F32ToBF16/truncate", func() { safetensors.F32ToBF16s(out16, f32, safetensors.Truncate) }, copyF16, bounds},
		{"F16ToF32", func() { safetensors.F16ToF32s(out32, u16) }, copyF32, []side{x448F32}},
		{"BF16ToF32", func() { safetensors.BF16ToF32s(out32, u16) }, copyF32, nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			sides := append([]side{{"conv", c.conv}, {"copy", c.copy}}, c.other...)
			best := make([]float64, len(sides)) // ns per call in the fastest block
			round := 0
			for b.Loop() {
				for k := range sides {
					i := (k + round) % len(sides)
					calls := 0
					start := time.Now()
					for time.Since(start) < 5*time.Millisecond {
						sides[i].run()
						calls++
					}
					ns := float64(time.Since(start).Nanoseconds()) / float64(calls)
					if best[i] == 0 || ns < best[i] {
						best[i] = ns
					}
				}
				round++
			}
			// The fastest of the sides with each metric name.
			fastest := map[string]float64{}
			for i, s := range sides {
				if t, ok := fastest[s.metric]; !ok || best[i] < t {
					fastest[s.metric] = best[i]
				}
			}
			conv, cp := fastest["conv"], fastest["copy"]
			b.ReportMetric(conv/float64(convElems), "ns/elem")
			b.ReportMetric(cp/conv, "x")
			if t, ok := fastest["x448"]; ok {
				b.ReportMetric(t/float64(convElems), "x448-ns/elem")
			}
			if t, ok := fastest["ceil"]; ok {
				b.ReportMetric(cp/t, "ceil-x")
				b.ReportMetric(t/conv, "of-ceil")
			}
			if t, ok := fastest["gofloor"]; ok {
				b.ReportMetric(cp/t, "gofloor-x")
			}
		})
	}
}

// packTopHalves writes the top 16 bits of each float32 of src to dst, four
// elements a 64-bit word: the loads, stores and packing of a pure-Go
// float32 to 16-bit conversion, without converting. (A loop of one element
// at a time is slower.)
func packTopHalves(dst []uint16, src []float32) {
	le := binary.LittleEndian
	d := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 2*len(dst))
	s := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(src))), 4*len(src))
	for len(s) >= 16 && len(d) >= 8 {
		a, b := le.Uint64(s[0:8]), le.Uint64(s[8:16])
		le.PutUint64(d[0:8], a>>16&0xffff|a>>32&0xffff0000|b<<16&0xffff_00000000|b&0xffff0000_00000000)
		s, d = s[16:], d[8:]
	}
}
