package safetensors

import (
	"encoding/binary"
	"unsafe"
)

// The pure-Go decoding of BF16 works on four elements at a time in 64-bit
// words ("SWAR": SIMD within a register), 1.5x as fast as one at a time
// here. It reads and writes little-endian bytes, so that one unaligned
// 64-bit load or store, which the compiler makes of binary.LittleEndian's
// calls, moves several elements; on a big-endian host the slices of
// numbers are not little-endian bytes, and the element-wise loop runs
// instead. Truncating float32s to BF16 takes the top halves of two elements
// a word, 1.4-1.5x as fast as the element-wise loop; rounding them, which
// needs more operations a word, ran slower that way and stays element-wise.

// asBytes returns the memory of s as bytes.
func asBytes[T uint16 | float32](s []T) []byte {
	var elem T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(elem)))
}

// swarBF16ToF32 converts the little-endian BF16 of src to the float32s of
// dst, 4 at a time.
func swarBF16ToF32(dst, src []byte) int {
	le := binary.LittleEndian
	n := min(len(src)/8, len(dst)/16)
	for i := range n {
		v := le.Uint64(src[8*i : 8*i+8])
		d := dst[16*i : 16*i+16]
		le.PutUint64(d, v<<16&0xffff0000|v<<32&0xffff0000_00000000)
		le.PutUint64(d[8:], v>>16&0xffff0000|v&0xffff0000_00000000)
	}
	return 4 * n
}

// swarF32ToBF16Trunc truncates the little-endian float32s of src to the BF16
// of dst, 8 at a time, and returns how many it converted.
func swarF32ToBF16Trunc(dst, src []byte) int {
	le := binary.LittleEndian
	n := min(len(src)/32, len(dst)/16)
	s, d := src[:32*n], dst[:16*n]
	for len(s) >= 32 && len(d) >= 16 {
		a, b := quietNaNs(le.Uint64(s[0:8])), quietNaNs(le.Uint64(s[8:16]))
		c, e := quietNaNs(le.Uint64(s[16:24])), quietNaNs(le.Uint64(s[24:32]))
		le.PutUint64(d[0:8], topHalves(a, b))
		le.PutUint64(d[8:16], topHalves(c, e))
		s, d = s[32:], d[16:]
	}
	return 8 * n
}

// quietNaNs sets the quiet bit of the float32s in the two lanes of v that
// are NaNs: a magnitude above 0x7f800000 carries into bit 31 of its lane
// when 0x007fffff is added to it, and that bit shifted down 9 is the quiet
// bit, 0x00400000. The addition cannot carry out of a lane.
func quietNaNs(v uint64) uint64 {
	return v | ((v&0x7fffffff_7fffffff)+0x007fffff_007fffff)&0x80000000_80000000>>9
}

// topHalves packs the top 16 bits of the four 32-bit lanes of a and b into
// one word, a's low lane first.
func topHalves(a, b uint64) uint64 {
	return a>>16&0xffff | a>>32&0xffff0000 | b<<16&0xffff_00000000 | b&0xffff0000_00000000
}
