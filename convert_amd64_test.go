//go:build amd64 && !purego

package safetensors

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestKernels runs each float32 to 16-bit kernel on this CPU, including
// those that the dispatch passes over where a faster one exists (the AVX2
// rounding to BF16 where AVX-512 has its own), with and without streaming
// stores, against the scalar conversions.
func TestKernels(t *testing.T) {
	if !useAsm {
		t.Skip("no F16C/AVX2")
	}
	xs := special()
	rng := rand.New(rand.NewPCG(9, 10))
	for len(xs)%32 != 0 || len(xs) < 1<<16 {
		xs = append(xs, rng.Uint32())
	}
	src := make([]float32, len(xs))
	for i, x := range xs {
		src[i] = math.Float32frombits(x)
	}
	buf := make([]uint16, len(src)+32)
	dst := buf
	for uintptr(unsafe.Pointer(&dst[0]))%64 != 0 {
		dst = dst[1:]
	}
	dst = dst[:len(src)]
	kernels := []struct {
		name string
		k    narrow
		one  func(float32) uint16
	}{
		{"F16/nearest", f32ToF16NearestAVX2, func(f float32) uint16 { return F32ToF16(f, RoundNearestEven) }},
		{"F16/truncate", f32ToF16TruncAVX2, func(f float32) uint16 { return F32ToF16(f, Truncate) }},
		{"BF16/nearest", f32ToBF16NearestAVX2, func(f float32) uint16 { return F32ToBF16(f, RoundNearestEven) }},
		{"BF16/truncate", f32ToBF16TruncAVX2, func(f float32) uint16 { return F32ToBF16(f, Truncate) }},
	}
	if useAVX512BF16 {
		kernels = append(kernels, struct {
			name string
			k    narrow
			one  func(float32) uint16
		}{"BF16/nearest/AVX-512", f32ToBF16NearestAVX512, func(f float32) uint16 { return F32ToBF16(f, RoundNearestEven) }})
	}
	for _, kc := range kernels {
		for _, stream := range []bool{false, true} {
			clear(dst)
			kc.k(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), len(src), stream)
			for i, f := range src {
				if want := kc.one(f); dst[i] != want {
					t.Fatalf("%s (stream %v): %#08x gives %#04x, want %#04x", kc.name, stream, xs[i], dst[i], want)
				}
			}
		}
	}
}
