package checkpoint

import (
	"encoding/binary"
	"sync"
)

// The MXFP4 kernel: gpt-oss's blocks [rows, groups, 16] of an expert, two
// E2M1 codes a byte (the low nibble first), each row's group of 32 codes
// scaled by its E8M0 exponent, dequantized and transposed to the output's
// [groups*32, rows], BF16 or F32 (convert_moe_packed_tensors).
//
// It goes by tiles of mxfp4Tile input rows and one group: the tile's
// blocks (16 bytes of each row) are decoded into a small buffer laid out
// as the output, 32 rows of mxfp4Tile values, then each of these rows is
// copied to the output at once, a whole cache line of BF16. Written in
// place, each value would go to another output row, megabytes apart at a
// power of two, and miss the cache; read in place for each output row,
// each value would come from another input row.

// mxfp4Tile is how many input rows a tile of the kernel holds: a BF16
// output row's piece of it is 64 bytes, a cache line.
const mxfp4Tile = 32

// mxfp4Pairs returns, for each E8M0 scale and byte of two E2M1 codes, the
// BF16 bits of its two values, the low nibble's in the low 16 bits: from
// mxfp4BF16, the exact table.
var mxfp4Pairs = sync.OnceValue(func() *[256][256]uint32 {
	var t [256][256]uint32
	bf := mxfp4BF16()
	for e := range 256 {
		for b := range 256 {
			t[e][b] = bf[e][b&15] | bf[e][b>>4]<<16
		}
	}
	return &t
})

// mxfp4Expert dequantizes the groups [0, width) of the rows [0, rows) of
// an expert into out, BF16 (size 2) or F32 (size 4): the output row
// g*32+c holds at r (size bytes at ((g*32+c)*rows+r)*size) the value of
// code c of row r's block of group g, blocks[r*bstride+g*16:][:16], of
// scale scales[r*sstride+g]. out must hold width*32*rows values.
func mxfp4Expert(out []byte, size, rows, width int, blocks []byte, bstride int, scales []byte, sstride int) {
	tab := mxfp4Pairs()
	var tile [32 * 4 * mxfp4Tile]byte
	var scratch [512]byte
	line := rows * size // an output row
	for g := range width {
		for r0 := 0; r0 < rows; r0 += mxfp4Tile {
			n := min(mxfp4Tile, rows-r0)
			b := blocks[r0*bstride+g*16:]
			s := scales[r0*sstride+g:]
			at := g*32*line + r0*size
			if n == mxfp4Tile && mxfp4TileFast(out[at:], size, line, b, bstride, s, sstride, &scratch) {
				continue
			}
			if size == 2 {
				mxfp4Tile16(&tile, b, bstride, s, sstride, n, tab)
			} else {
				mxfp4Tile32(&tile, b, bstride, s, sstride, n, tab)
			}
			// Row c of the tile, n values, to output row g*32+c.
			w := n * size
			for c := range 32 {
				copy(out[at+c*line:at+c*line+w], tile[c*mxfp4Tile*size:])
			}
		}
	}
}

// The E8M0 scales for which every E2M1 value times 2^(scale-127) is a
// normal float (in BF16 and float32 alike): its bits are those of the
// value at scale 127 with (scale-127)<<7 added to BF16's exponent, as the
// AVX2 kernel computes them. The exact table has the others: subnormal
// results and overflows to Inf.
const (
	mxfp4SafeMin = 2   // 0.5 * 2^-125
	mxfp4SafeMax = 252 // 6 * 2^125
)

// mxfp4LUTSize is the size of mxfp4LUT's table.
const mxfp4LUTSize = 160

// mxfp4LUT returns the AVX2 kernel's constants: the low bytes of the BF16
// bits of the 16 codes at scale 127 (from the exact table), twice; their
// high bytes, twice; 32 bytes 0x0f; 16 words 0x7fff; 16 words 127.
var mxfp4LUT = sync.OnceValue(func() *[mxfp4LUTSize]byte {
	var t [mxfp4LUTSize]byte
	bf := mxfp4BF16()
	for i := range 32 {
		t[i] = byte(bf[127][i%16])
		t[32+i] = byte(bf[127][i%16] >> 8)
		t[64+i] = 0x0f
	}
	for i := range 16 {
		binary.LittleEndian.PutUint16(t[96+2*i:], 0x7fff)
		binary.LittleEndian.PutUint16(t[128+2*i:], 127)
	}
	return &t
})

// mxfp4Tile16 decodes the blocks of n (at most mxfp4Tile) rows,
// blocks[i*bstride:][:16] of scale scales[i*sstride], into tile: its row
// c (of mxfp4Tile BF16 values) holds code c of each row.
func mxfp4Tile16(tile *[32 * 4 * mxfp4Tile]byte, blocks []byte, bstride int, scales []byte, sstride int, n int, tab *[256][256]uint32) {
	const row = 2 * mxfp4Tile // the bytes of a row of the tile
	for i := range n {
		b := blocks[i*bstride : i*bstride+16]
		t := &tab[scales[i*sstride]]
		lo, hi := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		at := 2 * (i & (mxfp4Tile - 1))
		for k := range 8 {
			v := t[byte(lo>>(8*k))]
			binary.LittleEndian.PutUint16(tile[(2*k)*row+at:], uint16(v))
			binary.LittleEndian.PutUint16(tile[(2*k+1)*row+at:], uint16(v>>16))
			v = t[byte(hi>>(8*k))]
			binary.LittleEndian.PutUint16(tile[(2*k+16)*row+at:], uint16(v))
			binary.LittleEndian.PutUint16(tile[(2*k+17)*row+at:], uint16(v>>16))
		}
	}
}

// mxfp4Tile32 is mxfp4Tile16 for F32 values, whose bits are those of
// the BF16 ones followed by 16 zeros: every value of MXFP4 is exact in
// BF16.
func mxfp4Tile32(tile *[32 * 4 * mxfp4Tile]byte, blocks []byte, bstride int, scales []byte, sstride int, n int, tab *[256][256]uint32) {
	const row = 4 * mxfp4Tile
	for i := range n {
		b := blocks[i*bstride : i*bstride+16]
		t := &tab[scales[i*sstride]]
		lo, hi := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		at := 4 * (i & (mxfp4Tile - 1))
		for k := range 8 {
			v := t[byte(lo>>(8*k))]
			binary.LittleEndian.PutUint32(tile[(2*k)*row+at:], v<<16)
			binary.LittleEndian.PutUint32(tile[(2*k+1)*row+at:], v&0xffff0000)
			v = t[byte(hi>>(8*k))]
			binary.LittleEndian.PutUint32(tile[(2*k+16)*row+at:], v<<16)
			binary.LittleEndian.PutUint32(tile[(2*k+17)*row+at:], v&0xffff0000)
		}
	}
}
