//go:build amd64 && !purego

package safetensors

import "unsafe"

// The bulk conversions: the pure-Go loops, replaced at start-up by the
// F16C/AVX2 assembly in convert_amd64.s when the CPU and the operating
// system support it. Build with the purego tag to use the pure-Go loops
// only.
var (
	f16ToF32s       = f16ToF32sGo
	bf16ToF32s      = bf16ToF32sGo
	f32ToF16s       = f32ToF16sGo
	f32ToBF16s      = f32ToBF16sGo
	f16BytesToF32s  = f16BytesToF32sGo
	bf16BytesToF32s = bf16BytesToF32sGo
	f32sToF16Bytes  = f32sToF16BytesGo
	f32sToBF16Bytes = f32sToBF16BytesGo
)

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

// Each converts n elements, a multiple of 16, from src to dst.
//
//go:noescape
func f16ToF32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func bf16ToF32AVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func f32ToF16NearestAVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func f32ToF16TruncAVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func f32ToBF16NearestAVX2(dst, src unsafe.Pointer, n int)

//go:noescape
func f32ToBF16TruncAVX2(dst, src unsafe.Pointer, n int)

// hasF16CAVX2 reports whether the CPU has F16C and AVX2 and the operating
// system saves the AVX registers.
func hasF16CAVX2() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx, f16c = 1 << 27, 1 << 28, 1 << 29
	if ecx1&osxsave == 0 || ecx1&avx == 0 || ecx1&f16c == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // the XMM and YMM state
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0 // AVX2
}

// useAsm reports whether the assembly is in use, for tests and benchmarks.
var useAsm = hasF16CAVX2()

func init() {
	if !useAsm {
		return
	}
	f16ToF32s = func(dst []float32, src []uint16) {
		n := len(src) &^ 15
		if n > 0 {
			f16ToF32AVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
		}
		f16ToF32sGo(dst[n:], src[n:])
	}
	bf16ToF32s = func(dst []float32, src []uint16) {
		n := len(src) &^ 15
		if n > 0 {
			bf16ToF32AVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
		}
		bf16ToF32sGo(dst[n:], src[n:])
	}
	f32ToF16s = func(dst []uint16, src []float32, r Rounding) {
		n := len(src) &^ 15
		if n > 0 {
			if r == Truncate {
				f32ToF16TruncAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			} else {
				f32ToF16NearestAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			}
		}
		f32ToF16sGo(dst[n:], src[n:], r)
	}
	f32ToBF16s = func(dst []uint16, src []float32, r Rounding) {
		n := len(src) &^ 15
		if n > 0 {
			if r == Truncate {
				f32ToBF16TruncAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			} else {
				f32ToBF16NearestAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			}
		}
		f32ToBF16sGo(dst[n:], src[n:], r)
	}
	// The byte forms run the same code: the host is little-endian, and the
	// assembly does not need aligned memory.
	f16BytesToF32s = func(dst []float32, src []byte) {
		n := len(src) / 2 &^ 15
		if n > 0 {
			f16ToF32AVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
		}
		f16BytesToF32sGo(dst[n:], src[2*n:])
	}
	bf16BytesToF32s = func(dst []float32, src []byte) {
		n := len(src) / 2 &^ 15
		if n > 0 {
			bf16ToF32AVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
		}
		bf16BytesToF32sGo(dst[n:], src[2*n:])
	}
	f32sToF16Bytes = func(dst []byte, src []float32, r Rounding) {
		n := len(src) &^ 15
		if n > 0 {
			if r == Truncate {
				f32ToF16TruncAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			} else {
				f32ToF16NearestAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			}
		}
		f32sToF16BytesGo(dst[2*n:], src[n:], r)
	}
	f32sToBF16Bytes = func(dst []byte, src []float32, r Rounding) {
		n := len(src) &^ 15
		if n > 0 {
			if r == Truncate {
				f32ToBF16TruncAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			} else {
				f32ToBF16NearestAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n)
			}
		}
		f32sToBF16BytesGo(dst[2*n:], src[n:], r)
	}
}
