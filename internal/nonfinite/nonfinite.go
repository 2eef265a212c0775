// Package nonfinite counts the NaN and infinite values of a run of a
// tensor's elements, and those beyond a magnitude limit, with the index of
// the first of each: the one definition of what is NaN and what is
// infinite for each float format, for the core package's Tensor.Stats and
// the check package, so that the two agree on every value. It works on
// values and bits, not on the core package's types, which import it.
package nonfinite

import (
	"encoding/binary"
	"math"
)

// Counts are the results of a scan over a run of elements.
type Counts struct {
	NaN, Inf, Big                uint64 // Big: finite values beyond the limit
	FirstNaN, FirstInf, FirstBig uint64 // flat indices; valid when the count is not 0
	Nonzero                      bool   // some value is not ±0
}

// Merge adds the counts of another run to c, keeping the lowest first
// indices.
func (c *Counts) Merge(o Counts) {
	add := func(n *uint64, first *uint64, on, ofirst uint64) {
		if on == 0 {
			return
		}
		if *n == 0 || ofirst < *first {
			*first = ofirst
		}
		*n += on
	}
	add(&c.NaN, &c.FirstNaN, o.NaN, o.FirstNaN)
	add(&c.Inf, &c.FirstInf, o.Inf, o.FirstInf)
	add(&c.Big, &c.FirstBig, o.Big, o.FirstBig)
	c.Nonzero = c.Nonzero || o.Nonzero
}

// add counts element i as NaN, infinite, or beyond the limit.
func (c *Counts) add(i uint64, nan, inf, beyond bool) {
	switch {
	case nan:
		if c.NaN == 0 {
			c.FirstNaN = i
		}
		c.NaN++
	case inf:
		if c.Inf == 0 {
			c.FirstInf = i
		}
		c.Inf++
	case beyond:
		if c.Big == 0 {
			c.FirstBig = i
		}
		c.Big++
	}
}

// Finite reports whether x, element i, is finite; if it is not, it counts
// it as NaN or infinite. It is for code that works on each value anyway,
// such as Tensor.Stats's sums.
func (c *Counts) Finite(i uint64, x float64) bool {
	switch {
	case x != x:
		if c.NaN == 0 {
			c.FirstNaN = i
		}
		c.NaN++
	case x-x != 0:
		if c.Inf == 0 {
			c.FirstInf = i
		}
		c.Inf++
	default:
		return true
	}
	return false
}

// A Limit is a magnitude limit: for each format, the bits of the largest
// absolute value that is not beyond it, and Float, the limit itself. The
// limit +Inf counts no finite value as beyond it (NoLimit).
type Limit struct {
	F64       uint64
	F32       uint32
	BF16, F16 uint16
	Float     float64
}

// NoLimit is the limit that no finite value is beyond: Scan and Floats
// then count NaN and infinities only.
var NoLimit = Limit{F64: 0x7ff0000000000000, F32: 0x7f800000, BF16: 0x7f80, F16: 0x7c00, Float: math.Inf(1)}

// A Format is the layout of a float's bits that Scan reads.
type Format uint8

// The formats Scan reads: IEEE 754 binary64, binary32 and binary16, and
// bfloat16, little-endian; and those ScanF8 reads, the 8-bit formats that
// have NaN: E5M2 (with Inf, as binary16's top byte), E4M3 (OCP's E4M3FN:
// S.1111.111 is NaN, no Inf), the FNUZ formats (0x80 is NaN, no Inf, no
// -0) and E8M0 (0xff is NaN).
const (
	F64 Format = iota + 1
	F32
	F16
	BF16
	F8E5M2
	F8E4M3
	F8E4M3FNUZ
	F8E5M2FNUZ
	F8E8M0
)

// Scan counts the elements of data, little-endian values of format f, that
// are NaN, infinite, or beyond lim, the first of them element base. The
// common case, where all values are finite and within the limit, costs one
// pass that keeps the OR of the values' absolute bits and tests them
// against the limit, several values at a time in 64-bit words (orOver);
// the elements are looked at one by one only when that pass finds
// something.
func Scan(f Format, data []byte, base uint64, lim Limit) Counts {
	var c Counts
	le := binary.LittleEndian
	b := data
	tail := len(b) &^ (orOverBlock - 1) // where orOver stops
	switch f {
	case F32:
		// Two elements a word: adding 0x7fffffff - t to a lane's absolute
		// value sets the lane's top bit when the value is above t, without
		// carrying into the next lane. t is the limit, or the largest
		// finite value if that is lower, so that NaN and Inf always take
		// the slow path.
		top := min(lim.F32, 0x7f7fffff)
		or, over := orOver(b, 0x7fffffff7fffffff, uint64(0x7fffffff-top)*0x0000000100000001)
		slow := over&0x8000000080000000 != 0
		for i := tail; i+4 <= len(b); i += 4 {
			a := le.Uint32(b[i:]) & 0x7fffffff
			or |= uint64(a)
			slow = slow || a > top
		}
		c.Nonzero = or != 0
		if slow {
			for k := range len(b) / 4 {
				a := le.Uint32(b[4*k:]) & 0x7fffffff
				c.add(base+uint64(k), a > 0x7f800000, a == 0x7f800000, a > lim.F32)
			}
		}
	case BF16, F16:
		l, inf := lim.BF16, uint16(0x7f80)
		if f == F16 {
			l, inf = lim.F16, 0x7c00
		}
		// Four elements a word, as for F32 above.
		top := min(l, inf-1)
		or, over := orOver(b, 0x7fff7fff7fff7fff, uint64(0x7fff-top)*0x0001000100010001)
		slow := over&0x8000800080008000 != 0
		for i := tail; i+2 <= len(b); i += 2 {
			a := le.Uint16(b[i:]) & 0x7fff
			or |= uint64(a)
			slow = slow || a > top
		}
		c.Nonzero = or != 0
		if slow {
			for k := range len(b) / 2 {
				a := le.Uint16(b[2*k:]) & 0x7fff
				c.add(base+uint64(k), a > inf, a == inf, a > l)
			}
		}
	case F64:
		// The limit, or the largest finite value if that is lower, so that
		// Inf is looked at when the limit is off (+Inf), as for F32.
		top := min(lim.F64, 0x7fefffffffffffff)
		or, over := orOver(b, 0x7fffffffffffffff, 0x7fffffffffffffff-top)
		slow := over>>63 != 0
		for i := tail; i+8 <= len(b); i += 8 {
			a := le.Uint64(b[i:]) & 0x7fffffffffffffff
			or |= a
			slow = slow || a > top
		}
		c.Nonzero = or != 0
		if slow {
			for k := range len(b) / 8 {
				a := le.Uint64(b[8*k:]) & 0x7fffffffffffffff
				if a > top {
					c.add(base+uint64(k), a > 0x7ff0000000000000, a == 0x7ff0000000000000, true)
				}
			}
		}
	}
	return c
}

// orOverBlock is the bytes orOver reads an iteration.
const orOverBlock = 32

// orOver returns, over the 64-bit little-endian words of b's leading
// multiple of orOverBlock bytes, each ANDed with mask, the OR of the words
// and the OR of the words plus k: a lane of the words whose value plus
// k's lane reaches the lane's top bit sets it in over. It is the fast
// pass of Scan, kept apart so that its loop holds only its own values.
func orOver(b []byte, mask, k uint64) (or, over uint64) {
	le := binary.LittleEndian
	for len(b) >= orOverBlock {
		w0 := le.Uint64(b[0:8]) & mask
		w1 := le.Uint64(b[8:16]) & mask
		w2 := le.Uint64(b[16:24]) & mask
		w3 := le.Uint64(b[24:32]) & mask
		or |= (w0 | w1) | (w2 | w3)
		over |= ((w0 + k) | (w1 + k)) | ((w2 + k) | (w3 + k))
		b = b[orOverBlock:]
	}
	return or, over
}

// Floats counts the values of v, the first of them element base, that are
// NaN, infinite, or of a magnitude beyond limit: for the formats Scan does
// not read, decoded (the F8 types), and for values already decoded.
func Floats[T float32 | float64](v []T, base uint64, limit float64) Counts {
	var c Counts
	top := min(limit, math.MaxFloat64) // as for F64 in Scan
	for k, x := range v {
		a := math.Abs(float64(x))
		c.Nonzero = c.Nonzero || a != 0
		if !(a <= top) && c.Finite(base+uint64(k), a) {
			c.add(base+uint64(k), false, false, true)
		}
	}
	return c
}

// ScanF8 counts the elements of data, one byte each of the 8-bit format f
// (F8E5M2 to F8E8M0), that are NaN or infinite, the first of them element
// base, and sets Nonzero if one is not ±0 (every E8M0 value is not). It
// counts no value as beyond a limit: the check package decodes these
// formats for that (Floats). The common case, with no NaN or Inf, is one
// pass that tests eight values a 64-bit word, as Scan does; the elements
// are looked at one by one only when that pass finds something.
func ScanF8(f Format, data []byte, base uint64) Counts {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	// hasZero reports whether a byte of w is zero, exactly.
	hasZero := func(w uint64) bool { return (w-ones)&^w&tops != 0 }
	var c Counts
	var or uint64
	slow := false
	i := 0
	le := binary.LittleEndian
	for ; i+8 <= len(data) && !slow; i += 8 {
		w := le.Uint64(data[i:])
		switch f {
		case F8E5M2:
			// The exponent all ones: adding 4 to the lane's exponent
			// bits carries into its top bit, and from no other value.
			or |= w & 0x7f7f7f7f7f7f7f7f
			slow = (w&0x7c7c7c7c7c7c7c7c+0x0404040404040404)&tops != 0
		case F8E4M3:
			or |= w & 0x7f7f7f7f7f7f7f7f
			slow = (w&0x7f7f7f7f7f7f7f7f+ones)&tops != 0
		case F8E4M3FNUZ, F8E5M2FNUZ:
			or |= w
			slow = hasZero(w ^ tops)
		case F8E8M0:
			or |= ^uint64(0)
			slow = hasZero(^w)
		}
	}
	if slow {
		i = 0
	}
	for k := i; k < len(data); k++ {
		b := data[k]
		var nan, inf, nonzero bool
		switch f {
		case F8E5M2:
			a := b & 0x7f
			nan, inf, nonzero = a > 0x7c, a == 0x7c, a != 0
		case F8E4M3:
			nan, nonzero = b&0x7f == 0x7f, b&0x7f != 0
		case F8E4M3FNUZ, F8E5M2FNUZ:
			nan, nonzero = b == 0x80, b != 0
		case F8E8M0:
			nan, nonzero = b == 0xff, true
		}
		if nonzero {
			or = 1
		}
		c.add(base+uint64(k), nan, inf, false)
	}
	c.Nonzero = or != 0
	return c
}
