//go:build amd64 && !purego

package safetensors

import "unsafe"

// The F16C/AVX2 assembly in convert_amd64.s replaces the pure-Go bulk loops
// at start-up when the CPU and the operating system support it. Build with
// the purego tag to keep the pure-Go loops.

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

// kernel is an assembly conversion of n elements, a multiple of 16.
type kernel func(dst, src unsafe.Pointer, n int)

// runPrefix runs k on the longest prefix of n elements that it takes, and
// returns its length; the caller converts the rest.
func runPrefix(k kernel, dst, src unsafe.Pointer, n int) int {
	n &^= 15
	if n > 0 {
		k(dst, src, n)
	}
	return n
}

// toF16 and toBF16 return the kernels for a rounding.
func toF16(r Rounding) kernel {
	if r == Truncate {
		return f32ToF16TruncAVX2
	}
	return f32ToF16NearestAVX2
}

func toBF16(r Rounding) kernel {
	if r == Truncate {
		return f32ToBF16TruncAVX2
	}
	return f32ToBF16NearestAVX2
}

// ptr returns the address of s's first element, or nil for an empty s.
func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

func init() {
	if !useAsm {
		return
	}
	// The byte forms run the same kernels: the host is little-endian, and
	// the assembly does not need aligned memory.
	f16ToF32s = func(dst []float32, src []uint16) {
		n := runPrefix(f16ToF32AVX2, ptr(dst), ptr(src), len(src))
		f16ToF32sGo(dst[n:], src[n:])
	}
	bf16ToF32s = func(dst []float32, src []uint16) {
		n := runPrefix(bf16ToF32AVX2, ptr(dst), ptr(src), len(src))
		bf16ToF32sGo(dst[n:], src[n:])
	}
	f16BytesToF32s = func(dst []float32, src []byte) {
		n := runPrefix(f16ToF32AVX2, ptr(dst), ptr(src), len(src)/2)
		f16BytesToF32sGo(dst[n:], src[2*n:])
	}
	bf16BytesToF32s = func(dst []float32, src []byte) {
		n := runPrefix(bf16ToF32AVX2, ptr(dst), ptr(src), len(src)/2)
		bf16BytesToF32sGo(dst[n:], src[2*n:])
	}
	f32ToF16s = func(dst []uint16, src []float32, r Rounding) {
		n := runPrefix(toF16(r), ptr(dst), ptr(src), len(src))
		f32ToF16sGo(dst[n:], src[n:], r)
	}
	f32ToBF16s = func(dst []uint16, src []float32, r Rounding) {
		n := runPrefix(toBF16(r), ptr(dst), ptr(src), len(src))
		f32ToBF16sGo(dst[n:], src[n:], r)
	}
	f32sToF16Bytes = func(dst []byte, src []float32, r Rounding) {
		n := runPrefix(toF16(r), ptr(dst), ptr(src), len(src))
		f32sToF16BytesGo(dst[2*n:], src[n:], r)
	}
	f32sToBF16Bytes = func(dst []byte, src []float32, r Rounding) {
		n := runPrefix(toBF16(r), ptr(dst), ptr(src), len(src))
		f32sToBF16BytesGo(dst[2*n:], src[n:], r)
	}
}
