package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync"
)

// The BF16 path of CompressWeight looks q up in a table instead of
// dividing. For a BF16 x and a normal BF16 scale s, q = toInt8(roundBF16(x /
// s)) depends only on x's sign, x's mantissa, s's mantissa and the
// difference of their exponents, as long as x and x / s are normal: the
// powers of two factor out of the float32 division and of both roundings.
// |x| < 2^(e-1), where 2^e <= s, gives |x / s| < 1/2 and q = 0; |x| <
// 2^(e+8) holds for every x of a row whose scale is its max|x| / 127.5.
// So one table per scale mantissa, of the 9 binades of x from 2^(e-1) to
// 2^(e+8), each value at both signs, gives every q.

// bf16Binades is how many binades of x, from the scale's exponent minus
// one, a table covers.
const bf16Binades = 9

// bf16Zero is the index of the table's last entry, 0, which the indices of
// the values below the table's range are clamped to.
const bf16Zero = 2 * bf16Binades * 128

// bf16Table holds q for x = ±m·2^k over the table's binades: the entry of
// the 16 bits u of x is at rotl16(u, 1) - 2·base (magnitude bits, then the
// sign), where base is the bits of the table's lowest binade.
type bf16Table [bf16Zero + 1]byte

var bf16Tables [128]struct {
	once sync.Once
	t    *bf16Table
}

// bf16TableFor returns the table of the scales whose mantissa bits are m,
// computed on first use by the rule's definition with a scale in [1, 2).
func bf16TableFor(m uint16) *bf16Table {
	e := &bf16Tables[m&0x7f]
	e.once.Do(func() {
		s := math.Float32frombits(uint32(127<<7|m&0x7f) << 16)
		const base = 126 << 7
		t := new(bf16Table)
		for k := range uint32(bf16Binades * 128) {
			for sign := range uint32(2) {
				x := math.Float32frombits((sign<<15 | (base + k)) << 16)
				t[2*k+sign] = toInt8(roundBF16(float32(x / s)))
			}
		}
		e.t = t
	})
	return e.t
}

// bf16Fast returns the table and the offset (2·base) that quantRowBF16Table
// uses for scale s and a row or tensor whose max|x| is m, and false where
// the table does not apply: s subnormal or with x below the table's range
// subnormal, or a value beyond the table's range.
func bf16Fast(s, m float32) (*bf16Table, uint32, bool) {
	sb := math.Float32bits(s) >> 16
	e := sb >> 7 & 0xff
	if sb&0x8000 != 0 || e < 2 {
		return nil, 0, false
	}
	base := (e - 1) << 7
	if mb := math.Float32bits(m) >> 16; mb >= base+bf16Binades*128 {
		return nil, 0, false
	}
	return bf16TableFor(uint16(sb)), 2 * base, true
}

// quantRowBF16Table writes q for a row of BF16 bytes with the table t and
// offset off of bf16Fast, eight elements an iteration.
func quantRowBF16Table(q, raw []byte, t *bf16Table, off uint32) {
	n := min(len(q), len(raw)/2)
	q, raw = q[:n], raw[:2*n]
	idx := func(u uint16) uint32 {
		return min(uint32(bits.RotateLeft16(u, 1))-off, bf16Zero)
	}
	le := binary.LittleEndian
	i := 0
	for ; i+8 <= n; i += 8 {
		r := raw[2*i : 2*i+16 : 2*i+16]
		o := q[i : i+8 : i+8]
		o[0] = t[idx(le.Uint16(r[0:]))]
		o[1] = t[idx(le.Uint16(r[2:]))]
		o[2] = t[idx(le.Uint16(r[4:]))]
		o[3] = t[idx(le.Uint16(r[6:]))]
		o[4] = t[idx(le.Uint16(r[8:]))]
		o[5] = t[idx(le.Uint16(r[10:]))]
		o[6] = t[idx(le.Uint16(r[12:]))]
		o[7] = t[idx(le.Uint16(r[14:]))]
	}
	for ; i < n; i++ {
		q[i] = t[idx(le.Uint16(raw[2*i:]))]
	}
}
