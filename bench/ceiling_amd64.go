package bench

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// readHalfWrite is the memory traffic of a narrowing conversion without the
// conversion: it reads the 4n bytes at src and writes 2n bytes to dst, 128
// and 64 at a time (n is a multiple of 32), with non-temporal stores if
// stream is true (dst then aligned to 64 bytes). A float32 to 16-bit
// conversion moves at least these bytes, so where bandwidth is the limit it
// can at best match this loop (within the noise of a run): the ceiling the
// narrowing benchmarks report against.
//
//go:noescape
func readHalfWrite(dst, src unsafe.Pointer, n int, stream bool)

// readHalfWrite512 is readHalfWrite with AVX-512 registers.
//
//go:noescape
func readHalfWrite512(dst, src unsafe.Pointer, n int, stream bool)

// narrowCeilings returns readHalfWrite over src and dst with plain and with
// non-temporal stores, with AVX2 and, where the CPU has it, AVX-512
// registers: the benchmarks keep the fastest.
func narrowCeilings() []func(dst []uint16, src []float32) {
	var kernels []func(dst, src unsafe.Pointer, n int, stream bool)
	if cpu.X86.HasAVX2 {
		kernels = append(kernels, readHalfWrite)
	}
	if cpu.X86.HasAVX512F {
		kernels = append(kernels, readHalfWrite512)
	}
	var fs []func(dst []uint16, src []float32)
	for _, k := range kernels {
		for _, stream := range []bool{false, true} {
			fs = append(fs, func(dst []uint16, src []float32) {
				n := min(len(dst), len(src)) &^ 31
				if n > 0 {
					aligned := uintptr(unsafe.Pointer(&dst[0]))%64 == 0
					k(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), n, stream && aligned)
				}
			})
		}
	}
	return fs
}
