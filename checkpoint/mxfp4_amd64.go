//go:build amd64 && !purego

package checkpoint

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 kernel of mxfp4_amd64.s decodes the tiles of mxfp4Tile rows to
// BF16 where the CPU and the operating system support AVX2 (the purego
// build tag turns it off) and every scale of the tile gives normal,
// finite values (mxfp4Safe); the pure-Go loops do the rest.

// useMXFP4AVX2 reports whether the AVX2 kernel is used.
var useMXFP4AVX2 = cpu.X86.HasAVX2

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
	if !useMXFP4AVX2 {
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
