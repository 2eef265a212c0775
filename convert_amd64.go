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

// Each converts n elements, a multiple of 32, from src to dst, with
// non-temporal stores if stream is true, which needs dst aligned to 64
// bytes.
//
//go:noescape
func f32ToF16NearestAVX2(dst, src unsafe.Pointer, n int, stream bool)

//go:noescape
func f32ToF16TruncAVX2(dst, src unsafe.Pointer, n int, stream bool)

//go:noescape
func f32ToBF16NearestAVX2(dst, src unsafe.Pointer, n int, stream bool)

//go:noescape
func f32ToBF16TruncAVX2(dst, src unsafe.Pointer, n int, stream bool)

//go:noescape
func f32ToBF16NearestAVX512(dst, src unsafe.Pointer, n int, stream bool)

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

// hasAVX512BF16 reports whether the CPU has AVX-512 with its BF16
// conversions and the operating system saves the AVX-512 registers.
func hasAVX512BF16() bool {
	if maxID, _, _, _ := cpuid(0, 0); maxID < 7 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&0xe6 != 0xe6 { // the XMM, YMM, opmask and ZMM state
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	eax71, _, _, _ := cpuid(7, 1)
	return ebx7&(1<<16) != 0 && eax71&(1<<5) != 0 // AVX512F, AVX512_BF16
}

// useAsm reports whether the assembly is in use, for tests and benchmarks;
// useAVX512BF16 whether the AVX-512 kernel rounds float32 to BF16.
var (
	useAsm        = hasF16CAVX2()
	useAVX512BF16 = useAsm && hasAVX512BF16()
)

// widen is an assembly conversion to float32 of n elements, a multiple of 16.
type widen func(dst, src unsafe.Pointer, n int)

// widenPrefix runs k on the longest prefix of n elements that it takes, and
// returns its length; the caller converts the rest.
func widenPrefix(k widen, dst, src unsafe.Pointer, n int) int {
	n &^= 15
	if n > 0 {
		k(dst, src, n)
	}
	return n
}

// narrow is an assembly conversion from float32 of n elements, a multiple
// of 32, optionally with non-temporal stores.
type narrow func(dst, src unsafe.Pointer, n int, stream bool)

// streamBytes is the result size from which the narrowing conversions write
// around the cache: a result this large would evict most of the cache on
// its way to memory, and reading each line before writing it costs a third
// of the memory traffic. Below it, the result stays in the cache for its
// reader.
const streamBytes = 8 << 20

// narrowRange converts, with k, the elements [lo, hi) of the n at src to
// the 16-bit values at dst, and returns lo and hi; the caller converts the
// others. lo is 0 unless the result is large, when it is the first element
// whose result starts a 64-byte line of dst, so that k can stream.
func narrowRange(k narrow, dst, src unsafe.Pointer, n int) (lo, hi int) {
	stream := 2*n >= streamBytes && uintptr(dst)%2 == 0
	if stream {
		lo = min(int(-uintptr(dst)%64)/2, n)
	}
	hi = lo + (n-lo)&^31
	if hi > lo {
		k(unsafe.Add(dst, 2*lo), unsafe.Add(src, 4*lo), hi-lo, stream)
	}
	return lo, hi
}

// f16Kernel and bf16Kernel return the kernel for a rounding.
func f16Kernel(r Rounding) narrow {
	if r == Truncate {
		return f32ToF16TruncAVX2
	}
	return f32ToF16NearestAVX2
}

func bf16Kernel(r Rounding) narrow {
	switch {
	case r == Truncate:
		return f32ToBF16TruncAVX2
	case useAVX512BF16:
		return f32ToBF16NearestAVX512
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
		n := widenPrefix(f16ToF32AVX2, ptr(dst), ptr(src), len(src))
		f16ToF32sGo(dst[n:], src[n:])
	}
	bf16ToF32s = func(dst []float32, src []uint16) {
		n := widenPrefix(bf16ToF32AVX2, ptr(dst), ptr(src), len(src))
		bf16ToF32sGo(dst[n:], src[n:])
	}
	f16BytesToF32s = func(dst []float32, src []byte) {
		n := widenPrefix(f16ToF32AVX2, ptr(dst), ptr(src), len(src)/2)
		f16BytesToF32sGo(dst[n:], src[2*n:])
	}
	bf16BytesToF32s = func(dst []float32, src []byte) {
		n := widenPrefix(bf16ToF32AVX2, ptr(dst), ptr(src), len(src)/2)
		bf16BytesToF32sGo(dst[n:], src[2*n:])
	}
	f32ToF16s = func(dst []uint16, src []float32, r Rounding) {
		lo, hi := narrowRange(f16Kernel(r), ptr(dst), ptr(src), len(src))
		f32ToF16sGo(dst[:lo], src[:lo], r)
		f32ToF16sGo(dst[hi:], src[hi:], r)
	}
	f32ToBF16s = func(dst []uint16, src []float32, r Rounding) {
		lo, hi := narrowRange(bf16Kernel(r), ptr(dst), ptr(src), len(src))
		f32ToBF16sGo(dst[:lo], src[:lo], r)
		f32ToBF16sGo(dst[hi:], src[hi:], r)
	}
	f32sToF16Bytes = func(dst []byte, src []float32, r Rounding) {
		lo, hi := narrowRange(f16Kernel(r), ptr(dst), ptr(src), len(src))
		f32sToF16BytesGo(dst[:2*lo], src[:lo], r)
		f32sToF16BytesGo(dst[2*hi:], src[hi:], r)
	}
	f32sToBF16Bytes = func(dst []byte, src []float32, r Rounding) {
		lo, hi := narrowRange(bf16Kernel(r), ptr(dst), ptr(src), len(src))
		f32sToBF16BytesGo(dst[:2*lo], src[:lo], r)
		f32sToBF16BytesGo(dst[2*hi:], src[hi:], r)
	}
}
