package dataset

import (
	"encoding/binary"
	"math"
)

// The connector encodes a float32 x it is given for a numeric array column
// through a double: it reads x as a double and writes (float) of it, which
// keeps every value but turns a signalling NaN into a quiet one (the quiet
// bit, 0x00400000, set; the payload kept). Then:
//
//   - BF16 is the top 16 bits of that float32: truncation.
//   - F16 is a truncation with a narrower range: every NaN becomes 0x7e00
//     (0xfe00 with the sign bit), an infinity stays one; a magnitude below
//     2^-14, the smallest normal F16, becomes a zero of the same sign (no
//     F16 subnormals); 65536 and above become infinity (65504 to 65535.99
//     truncate to 65504); the rest keep their exponent and the top 10 bits
//     of their mantissa.
//
// sparkF32 and the functions below give exactly those bits.

// sparkF32 returns the bits of float32 x after the connector's round trip
// through a double: a NaN gets its quiet bit.
func sparkF32(b uint32) uint32 {
	if b&0x7f800000 == 0x7f800000 && b&0x007fffff != 0 {
		return b | 0x00400000
	}
	return b
}

// sparkBF16 returns the connector's BF16 bits for float32 bits b.
func sparkBF16(b uint32) uint16 { return uint16(sparkF32(b) >> 16) }

// sparkF16 returns the connector's F16 bits for float32 bits b.
func sparkF16(b uint32) uint16 {
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff && mant != 0:
		return sign | 0x7e00
	case exp == 0xff:
		return sign | 0x7c00
	case exp == 0:
		return sign
	}
	e := exp - 127 + 15
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e <= 0:
		return sign
	}
	return sign | uint16(e)<<10 | uint16(mant>>13)
}

// appendSparkF16 appends the connector's F16 encoding of v, little-endian.
func appendSparkF16(dst []byte, v []float32) []byte {
	for _, f := range v {
		dst = binary.LittleEndian.AppendUint16(dst, sparkF16(math.Float32bits(f)))
	}
	return dst
}

// appendSparkBF16 appends the connector's BF16 encoding of v,
// little-endian.
func appendSparkBF16(dst []byte, v []float32) []byte {
	for _, f := range v {
		dst = binary.LittleEndian.AppendUint16(dst, sparkBF16(math.Float32bits(f)))
	}
	return dst
}
