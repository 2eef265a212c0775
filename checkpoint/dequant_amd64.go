//go:build amd64 && !purego

package checkpoint

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 kernels of dequant_amd64.s run where the CPU and the operating
// system support AVX2 (the purego build tag turns them off): MXFP4's
// tiles of mxfp4Tile rows whose every scale gives normal, finite values
// (in [mxfp4SafeMin, mxfp4SafeMax]), FP8's lookups of a block's products,
// and compressed-tensors' lookups (a code a byte, gathered; two a byte,
// shuffled) and tables of a BF16 scale's products; the pure-Go loops do
// the rest.

// useDequantAVX2 reports whether the AVX2 kernels are used.
var useDequantAVX2 = cpu.X86.HasAVX2

// mxfp4TileAVX2 writes the values of the 32 rows blocks+i*bstride (16
// bytes each), of scales scales[i] (each in [mxfp4SafeMin,
// mxfp4SafeMax]), transposed: code c of row i at out+c*line+2*i in BF16,
// or out+c*line+4*i in F32 with f32; scratch is its memory, lut
// mxfp4LUT's.
//
//go:noescape
func mxfp4TileAVX2(out *byte, line int, blocks *byte, bstride int, scales *[32]byte, scratch *[512]byte, lut *[mxfp4LUTSize]byte, f32 bool)

// mxfp4TileFast writes the tile of 32 rows of blocks (16 bytes at each
// i*bstride) and scales (at each i*sstride) to out as mxfp4TileAVX2
// does, values of size bytes (2 or 4), and reports whether it could:
// false where AVX2 is missing or a scale is outside [mxfp4SafeMin,
// mxfp4SafeMax].
func mxfp4TileFast(out []byte, size, line int, blocks []byte, bstride int, scales []byte, sstride int, scratch *[512]byte) bool {
	if !useDequantAVX2 {
		return false
	}
	var s [32]byte
	_ = scales[31*sstride]
	for i := range s {
		e := scales[i*sstride]
		if e < mxfp4SafeMin || e > mxfp4SafeMax {
			return false
		}
		s[i] = e
	}
	// Bounds: the last row's block and the last output row's values.
	_ = blocks[31*bstride+15]
	_ = out[31*line+32*size-1]
	mxfp4TileAVX2(unsafe.SliceData(out), line, unsafe.SliceData(blocks), bstride, &s, scratch, mxfp4LUT(), size == 4)
	return true
}

// fp8LookupAVX2 writes lut[src[i]] for each of the n bytes of src (a
// multiple of 16) to dst: the entries' low 16 bits, little-endian, or
// with f32 all 32.
//
//go:noescape
func fp8LookupAVX2(dst *byte, src *byte, n int, lut *[256]uint32, f32 bool)

// fp8LookupFast writes lut[b], size bytes (2 or 4), for the bytes b of
// src's first multiple of 16 to dst, and returns how many it wrote: none
// where AVX2 is missing.
func fp8LookupFast(dst, src []byte, lut *[256]uint32, size int) int {
	n := len(src) &^ 15
	if !useDequantAVX2 || n == 0 {
		return 0
	}
	_ = dst[n*size-1]
	fp8LookupAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n, lut, size == 4)
	return n
}

// mxLookupAVX2 writes, for each of the groups groups of 32 bytes b of
// src, tabs[scales[g]*256+b] to dst: the entries' low 16 bits,
// little-endian, or with f32 all 32.
//
//go:noescape
func mxLookupAVX2(dst *byte, src *byte, groups int, scales *byte, tabs *uint32, f32 bool)

// mxLookupFast writes the groups of 32 bytes of src, each through its
// scale's table of 256 entries in tabs (scale e's at tabs[e*256:]), as
// ctRows does for the MX formats of a code a byte, values of size bytes
// (2 or 4), and reports whether it could: false where AVX2 is missing.
func mxLookupFast(dst, src, scales []byte, tabs []uint32, size int) bool {
	g := len(scales)
	if !useDequantAVX2 || g == 0 {
		return useDequantAVX2
	}
	_ = src[32*g-1]
	_ = dst[32*g*size-1]
	_ = tabs[256*256-1]
	mxLookupAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), g, unsafe.SliceData(scales), unsafe.SliceData(tabs), size == 4)
	return true
}

// nibblesAVX2 writes lut[c] for the codes c of the n bytes of src (a
// multiple of 16), two a byte, the low nibble first, to dst: the
// entries' low 16 bits, little-endian, or with f32 all 32.
//
//go:noescape
func nibblesAVX2(dst *byte, src *byte, n int, lut *[16]uint32, f32 bool)

// nibblesFast writes lut[c], size bytes (2 or 4), for the codes c of the
// first multiple of 16 bytes of src, two a byte, the low nibble first, to
// dst, and returns how many bytes of src it read: none where AVX2 is
// missing.
func nibblesFast(dst, src []byte, lut *[16]uint32, size int) int {
	n := len(src) &^ 15
	if !useDequantAVX2 || n == 0 {
		return 0
	}
	_ = dst[2*n*size-1]
	nibblesAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), n, lut, size == 4)
	return n
}

// bf16TableAVX2 sets tab[i], for the n codes (a multiple of 8), to the
// BF16 bits of codes[i]-z rounded to BF16, times s, rounded to BF16,
// shifted left by shift bits.
//
//go:noescape
func bf16TableAVX2(tab *uint32, codes *float32, n int, s, z float32, shift uint64)

// bf16TableFast sets tab[i] to bf16Bits(bf16(codes[i]-z)*s) << shift for
// each code, as ctTable does for a BF16 scale, and reports whether it
// could: false where AVX2 is missing or the codes are not a multiple of 8.
func bf16TableFast(tab []uint32, codes []float32, s, z float32, shift uint) bool {
	n := len(codes)
	if !useDequantAVX2 || n == 0 || n%8 != 0 {
		return false
	}
	_ = tab[n-1]
	bf16TableAVX2(unsafe.SliceData(tab), unsafe.SliceData(codes), n, s, z, uint64(shift))
	return true
}

// nibbleGroupsAVX2 writes the steps steps of 16 bytes of src, two codes a
// byte, each half of a step through the table of its scale: the first's
// scales[0], the second's scales[second], scales moving on by second+1
// a step; scale e's table is luts[64*e:], bytes k of its 16 entries at
// 16*k (nibbleLUTs). The entries' low 16 bits, little-endian, or with
// f32 all 32.
//
//go:noescape
func nibbleGroupsAVX2(dst *byte, src *byte, steps int, scales *byte, second int, luts *byte, f32 bool)

// nibbleGroupsFast writes the groups of a row src of codes two a byte,
// group codes each (16 or 32), the group g through the table of its scale
// scales[g] in luts (nibbleLUTs), values of size bytes (2 or 4), and
// returns how many groups it wrote: those of whole steps of 16 bytes,
// none where AVX2 is missing.
func nibbleGroupsFast(dst, src, scales []byte, group uint64, luts *[256 * 64]byte, size int) int {
	if !useDequantAVX2 || group != 16 && group != 32 {
		return 0
	}
	g, steps, second := len(scales), len(scales), 0
	if group == 16 {
		g, steps, second = len(scales)&^1, len(scales)/2, 1
	}
	if steps == 0 {
		return 0
	}
	n := steps * 16 // bytes of src
	_ = src[n-1]
	_ = dst[2*n*size-1]
	nibbleGroupsAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), steps, unsafe.SliceData(scales), second, &luts[0], size == 4)
	return g
}

// mx6LookupAVX2 writes, for each of the groups groups of 24 bytes of src
// (32 codes of 6 bits, four in three bytes, little-endian),
// tabs[scales[g]*64+c] for each code c to dst: the entries' low 16 bits,
// little-endian, or with f32 all 32.
//
//go:noescape
func mx6LookupAVX2(dst *byte, src *byte, groups int, scales *byte, tabs *uint32, f32 bool)

// mx6LookupFast writes the groups of 24 bytes of src (MXFP6's 32 codes),
// each through its scale's table of 64 entries in tabs (scale e's at
// tabs[e*64:]), as ctRows does, values of size bytes (2 or 4), and
// reports whether it could: false where AVX2 is missing.
func mx6LookupFast(dst, src, scales []byte, tabs []uint32, size int) bool {
	g := len(scales)
	if !useDequantAVX2 || g == 0 {
		return useDequantAVX2
	}
	_ = src[24*g-1]
	_ = dst[32*g*size-1]
	_ = tabs[256*64-1]
	mx6LookupAVX2(unsafe.SliceData(dst), unsafe.SliceData(src), g, unsafe.SliceData(scales), unsafe.SliceData(tabs), size == 4)
	return true
}
