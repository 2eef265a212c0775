package safetensors

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// This file holds the JSON header scanner: one pass over the bytes that checks
// the syntax and the schema together, the way the reference's serde_json
// deserializer does, and builds the tensor list without reflection.
//
// The reference's rules, which the scanner follows:
//   - whitespace is space, tab, LF and CR, before and after the object too;
//   - strings may not hold raw control characters, escapes are the JSON ones,
//     and \u escapes of surrogates must come in valid pairs;
//   - numbers follow the JSON grammar, and a number is an error, even where
//     its value is ignored, when serde_json's own float parsing (not
//     correctly rounded; see number) overflows on it;
//   - objects and arrays nest at most MaxDepth deep, the header object included;
//   - "__metadata__" may appear once, as null or an object of strings whose
//     duplicate keys keep the last value;
//   - any other key is a tensor, and a repeated name keeps the last entry, but
//     every entry must be valid;
//   - an entry is an object with "dtype", "shape" and "data_offsets", each
//     exactly once, other fields ignored; or an array of exactly those three;
//   - a dtype is a string, or an object with one key, the dtype, whose value is
//     null;
//   - dimensions and offsets are non-negative integers that fit in 64 bits,
//     written without a fraction or exponent.

// scanner parses a JSON header.
type scanner struct {
	b       []byte // the JSON text
	s       string // the same bytes, unsafely; see strAt
	i       int    // read position in b
	strict  bool
	scratch []byte   // unescaped string contents
	dimBuf  []uint64 // the dimensions of the shape being read

	tensors []TensorInfo // in the order of the JSON text
	meta    map[string]string
	metaSet bool // "__metadata__" was seen

	recounted bool // appendTensor counted the members left

	// The arena shapes are cut from, so that parsing allocates a few large
	// blocks rather than one per tensor.
	dims []uint64
}

// The shape arena grows in blocks of up to dimBlock dimensions; a longer
// shape gets a block of its own.
const dimBlock = 4 << 10

// newScanner returns a scanner for the JSON header hdr.
func newScanner(hdr []byte, strict bool) *scanner {
	p := &scanner{b: hdr, strict: strict}
	if len(hdr) > 0 {
		p.s = unsafe.String(&hdr[0], len(hdr))
	}
	// Every entry has a '{' or is an array; counting the braces is fast and
	// gives a good capacity. An entry takes at least minEntry bytes, which
	// bounds the estimate whatever the header holds.
	const minEntry = len(`"":{"dtype":"U8","shape":[],"data_offsets":[0,0]}`)
	n := min(bytes.Count(hdr, []byte{'{'}), len(hdr)/minEntry+1)
	p.tensors = make([]TensorInfo, 0, n)
	return p
}

// strAt returns the contents of the string that str scanned, as a string.
// Without escapes it is a view of the caller's bytes, valid only while
// parsing: own replaces every such string the result keeps with a copy, and
// errors that name a tensor clone the name.
func (p *scanner) strAt(start, end int, esc bool) string {
	if esc {
		return string(p.scratch)
	}
	return p.s[start:end]
}

// appendDim appends a dimension to p.dimBuf. Once a shape is long, it makes
// room for all of it at once, counting the commas up to the closing ']', so
// that a shape of a million dimensions costs one allocation of its size
// rather than a series of doublings.
func (p *scanner) appendDim(v uint64) {
	if len(p.dimBuf) == 256 {
		rest := p.b[p.i:]
		if end := bytes.IndexByte(rest, ']'); end >= 0 {
			rest = rest[:end]
		}
		if need := len(p.dimBuf) + bytes.Count(rest, []byte{','}) + 1; need > cap(p.dimBuf) {
			grown := make([]uint64, len(p.dimBuf), need)
			copy(grown, p.dimBuf)
			p.dimBuf = grown
		}
	}
	p.dimBuf = append(p.dimBuf, v)
}

// own replaces the names in tensors, which may be views of the caller's
// bytes, with copies in one block of memory. (The metadata's strings are
// copies from the start; see metadata.)
func (p *scanner) own(tensors []TensorInfo) {
	total := 0
	for i := range tensors {
		total += len(tensors[i].Name)
	}
	// The block is never written again once a string refers to it, and it
	// never grows, which makes unsafe.String safe here.
	block := make([]byte, 0, total)
	own := func(s string) string {
		if s == "" {
			return ""
		}
		off := len(block)
		block = append(block, s...)
		return unsafe.String(&block[off], len(s))
	}
	for i := range tensors {
		tensors[i].Name = own(tensors[i].Name)
	}
}

// nextBlock returns the size of the next arena block: first guess, then
// twice the last, at most max, and at least need.
func nextBlock(last, guess, limit, need int) int {
	n := guess
	if last > 0 {
		n = 2 * last
	}
	return max(min(n, limit), need, 16)
}

// internShape returns a copy of dims cut from the shape arena, with no spare
// capacity, or the shared empty shape.
func (p *scanner) internShape(dims []uint64) []uint64 {
	if len(dims) == 0 {
		return scalarShape
	}
	if len(dims) > dimBlock/4 {
		// A long shape keeps the buffer it was read into.
		p.dimBuf = nil
		return dims[:len(dims):len(dims)]
	}
	if cap(p.dims)-len(p.dims) < len(dims) {
		p.dims = make([]uint64, 0, nextBlock(cap(p.dims), len(p.b)/64, dimBlock, len(dims)))
	}
	off := len(p.dims)
	p.dims = p.dims[:off+len(dims)]
	shape := p.dims[off : off+len(dims) : off+len(dims)]
	for i, d := range dims { // shapes are short: a loop beats memmove
		shape[i] = d
	}
	return shape
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// plain[c] is true for the bytes a JSON string holds as they are.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (p *scanner) skipSpace() {
	for p.i < len(p.b) && isSpace(p.b[p.i]) {
		p.i++
	}
}

// peek returns the byte at the read position, or 0 at the end.
func (p *scanner) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// errorAt returns a *HeaderError at offset off.
func (p *scanner) errorAt(off int, msg string) error {
	return &HeaderError{Offset: int64(off), Msg: msg}
}

// unexpected describes the byte at the read position for an error.
func (p *scanner) unexpected(want string) error {
	if p.i >= len(p.b) {
		return p.errorAt(p.i, "unexpected end of header, want "+want)
	}
	c, _ := utf8.DecodeRune(p.b[p.i:])
	return p.errorAt(p.i, "unexpected "+strconv.QuoteRune(c)+", want "+want)
}

// expect consumes c, after optional whitespace.
func (p *scanner) expect(c byte, want string) error {
	p.skipSpace()
	if p.peek() != c {
		return p.unexpected(want)
	}
	p.i++
	return nil
}

// parse scans the whole header.
func (p *scanner) parse() error {
	p.skipSpace()
	if p.strict && p.i != 0 {
		return p.errorAt(0, "whitespace before '{' (strict)")
	}
	switch p.peek() {
	case '{':
	case '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return p.errorAt(p.i, "the header is not a JSON object")
	default:
		return p.unexpected("'{'")
	}
	p.i++
	p.skipSpace()
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			if !p.fastMember() {
				if err := p.member(); err != nil {
					return err
				}
			}
			p.skipSpace()
			c := p.peek()
			p.i++
			if c == '}' {
				break
			}
			if c != ',' {
				p.i--
				return p.unexpected("',' or '}'")
			}
			p.skipSpace()
		}
	}
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		if c == ' ' || !p.strict && isSpace(c) {
			continue
		}
		if p.strict && isSpace(c) {
			return p.errorAt(p.i, "header padded with other whitespace than spaces (strict)")
		}
		return p.errorAt(p.i, "trailing characters after the header object")
	}
	return nil
}

// fastMember scans a tensor's "name":{...} member written exactly as the
// reference writer writes it. It reports false, having consumed nothing, for
// anything else, which member then scans.
func (p *scanner) fastMember() bool {
	b, i := p.b, p.i
	n := len(p.tensors)
	if i >= len(b) || b[i] != '"' || n == cap(p.tensors) {
		return false
	}
	start := i + 1
	end := plainEnd(b, start)
	if end+1 >= len(b) || b[end] != '"' || b[end+1] != ':' || string(b[start:end]) == metadataKey {
		return false
	}
	// Scan straight into the slice.
	p.tensors = p.tensors[:n+1]
	t := &p.tensors[n]
	t.Name = p.s[start:end]
	p.i = end + 2
	if p.fastEntry(t) {
		return true
	}
	*t = TensorInfo{}
	p.tensors = p.tensors[:n]
	p.i = i
	return false
}

// member scans one "key": value pair of the header object.
func (p *scanner) member() error {
	keyPos := p.i
	if p.peek() != '"' {
		return p.unexpected("a string key")
	}
	start, end, esc, err := p.str()
	if err != nil {
		return err
	}
	var key []byte
	if esc {
		key = p.scratch
	} else {
		key = p.b[start:end]
	}
	if err := p.expect(':', "':'"); err != nil {
		return err
	}
	p.skipSpace()
	if string(key) == "__metadata__" {
		return p.metadata(keyPos)
	}
	name := p.strAt(start, end, esc)
	if err := p.tensor(name); err != nil {
		if _, ok := err.(*HeaderError); ok {
			return &TensorError{Name: strings.Clone(name), Err: err}
		}
		return err
	}
	return nil
}

// metadata scans the value of "__metadata__".
func (p *scanner) metadata(keyPos int) error {
	if p.metaSet {
		return p.errorAt(keyPos, `duplicate field "__metadata__"`)
	}
	p.metaSet = true
	switch p.peek() {
	case 'n':
		if err := p.literal("null"); err != nil {
			return err
		}
		if p.strict {
			return p.errorAt(keyPos, `"__metadata__" is null, want an object (strict)`)
		}
		return nil
	case '{':
	default:
		return p.errorAt(p.i, `"__metadata__" is not an object of strings`)
	}
	// Two passes: the first checks the object and counts its members and
	// the bytes of their strings, so that the second can make the map and
	// the block its strings are copied into at their final sizes. A map
	// grown from empty and then copied would cost about three times its
	// size, which for millions of keys is several times the header.
	// The first pass also estimates how many keys are distinct, so that
	// repeated keys do not make the map large.
	open := p.i
	keys := distinctCount{seed: maphash.MakeSeed()}
	count, size, err := p.metaMembers(nil, nil, &keys)
	if err != nil {
		return err
	}
	p.i = open
	p.meta = make(map[string]string, min(count, keys.estimate()))
	block := make([]byte, 0, size)
	_, _, err = p.metaMembers(p.meta, &block, nil) // only a strict duplicate fails now
	return err
}

// metaMembers scans the metadata object at the read position, '{'. Without a
// map it only checks the syntax, adds each key to keys, and returns the
// number of members and the bytes of their keys and values (escapes
// included, so at least their contents). With one, it puts each member into
// meta, its strings copied into *block, which should have the capacity that
// the first pass returned. Strings cut from the block stay valid: bytes once
// appended are never written again, even if the block had to grow.
func (p *scanner) metaMembers(meta map[string]string, block *[]byte, keys *distinctCount) (count, size int, err error) {
	p.i++
	p.skipSpace()
	if p.peek() == '}' {
		p.i++
		return 0, 0, nil
	}
	// own copies the string str scanned last.
	own := func(start, end int, esc bool) string {
		s := p.b[start:end]
		if esc {
			s = p.scratch
		}
		if len(s) == 0 {
			return ""
		}
		off := len(*block)
		*block = append(*block, s...)
		return unsafe.String(&(*block)[off], len(s))
	}
	for {
		keyPos := p.i
		if p.peek() != '"' {
			return 0, 0, p.unexpected("a string key")
		}
		kStart, kEnd, kEsc, err := p.str()
		if err != nil {
			return 0, 0, err
		}
		var key string
		if meta != nil {
			key = own(kStart, kEnd, kEsc)
		} else {
			keys.add(p.strAt(kStart, kEnd, kEsc))
		}
		if err := p.expect(':', "':'"); err != nil {
			return 0, 0, err
		}
		p.skipSpace()
		if p.peek() != '"' {
			return 0, 0, p.errorAt(p.i, "metadata value of "+strconv.Quote(p.strAt(kStart, kEnd, kEsc))+" is not a string")
		}
		vStart, vEnd, vEsc, err := p.str()
		if err != nil {
			return 0, 0, err
		}
		count++
		size += kEnd - kStart + vEnd - vStart
		if meta != nil {
			if p.strict {
				if _, dup := meta[key]; dup {
					return 0, 0, p.errorAt(keyPos, "duplicate metadata key "+strconv.Quote(key)+" (strict)")
				}
			}
			meta[key] = own(vStart, vEnd, vEsc)
		}
		p.skipSpace()
		c := p.peek()
		p.i++
		if c == '}' {
			return count, size, nil
		}
		if c != ',' {
			p.i--
			return 0, 0, p.unexpected("',' or '}'")
		}
		p.skipSpace()
	}
}

// distinctCount estimates how many distinct strings it was given, within a
// few percent, in constant memory: a HyperLogLog sketch of 2^12 registers
// (standard error 1.04/sqrt(4096), about 1.6%). Its zero value is an empty
// sketch. It keeps the two sums the estimate needs up to date as registers
// change, which after the first few thousand strings they rarely do, so
// that estimate takes a few operations rather than a pass over the
// registers: a header with a few metadata keys, as most have, pays for
// those keys only.
type distinctCount struct {
	seed maphash.Seed
	reg  [1 << 12]uint8 // the most leading zeros seen in each bucket, plus 1, at most maxRank
	used int            // the registers that are not 0
	// filled is the sum over the registers of 1 - 2^-reg, in units of
	// 2^-maxRank: 2^maxRank - 2^(maxRank-reg) each, below 2^63 in all.
	filled uint64
}

// maxRank is the largest value a register of distinctCount holds. Ranks
// above it, 52 and 53, come with odds below 2^-50 per string.
const maxRank = 51

func (d *distinctCount) add(s string) {
	h := maphash.String(d.seed, s)
	i := h >> 52 // the top 12 bits pick the register
	r := min(uint8(bits.LeadingZeros64(h<<12|1<<11))+1, maxRank)
	if old := d.reg[i]; r > old {
		if old == 0 {
			d.used++
		}
		d.filled += 1<<(maxRank-old) - 1<<(maxRank-r)
		d.reg[i] = r
	}
}

// estimate returns the estimate, rounded up by 5% and 16 so that the map
// it sizes rarely grows.
func (d *distinctCount) estimate() int {
	const m = float64(len(d.reg))
	// The sum of 2^-reg over the registers.
	sum := float64(uint64(len(d.reg))<<maxRank-d.filled) / (1 << maxRank)
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if zeros := len(d.reg) - d.used; e <= 2.5*m && zeros > 0 { // small counts: linear counting
		e = m * math.Log(m/float64(zeros))
	}
	return int(min(e*1.05+16, math.MaxInt32))
}

// appendTensor appends t to p.tensors. The capacity newScanner guessed
// counts the entries written as objects; when entries written as arrays
// overflow it, the members left in the header object are counted once, so
// that the slice grows once to its size rather than through a series of
// copies.
func (p *scanner) appendTensor(t TensorInfo) {
	if len(p.tensors) == cap(p.tensors) && !p.recounted {
		p.recounted = true
		// At most one entry per minArrayEntry bytes, whatever the header
		// holds; a valid header has no more members than that.
		const minArrayEntry = len(`"":["U8",[],[0,0]],`)
		rest := len(p.b) - p.i
		n := len(p.tensors) + 1 + min(countMembers(p.b[p.i:]), rest/minArrayEntry)
		grown := make([]TensorInfo, len(p.tensors), n)
		copy(grown, p.tensors)
		p.tensors = grown
	}
	p.tensors = append(p.tensors, t)
}

// countMembers counts the commas in b outside strings and nested values, up
// to the end of the object b is inside: for b just after a member of the
// header object, the number of members after it, if the JSON is valid.
func countMembers(b []byte) int {
	n, depth := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b); i++ {
				i = plainEnd(b, i)
				if i >= len(b) || b[i] == '"' {
					break
				}
				if b[i] == '\\' {
					i++ // the escaped byte
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return n
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}

// Fields of a tensor entry, as bits.
const (
	fieldDType = 1 << iota
	fieldShape
	fieldOffsets
	allFields = fieldDType | fieldShape | fieldOffsets
)

// tensor scans one tensor entry and appends it to p.tensors.
func (p *scanner) tensor(name string) error {
	t := TensorInfo{Name: name}
	if p.fastEntry(&t) {
		p.appendTensor(t)
		return nil
	}
	entryPos := p.i
	switch p.peek() {
	case '{':
		p.i++
		var seen int
		p.skipSpace()
		if p.peek() != '}' {
			for {
				keyPos := p.i
				if p.peek() != '"' {
					return p.unexpected("a string key")
				}
				start, end, esc, err := p.str()
				if err != nil {
					return err
				}
				key := p.b[start:end]
				if esc {
					key = p.scratch
				}
				if err := p.expect(':', "':'"); err != nil {
					return err
				}
				p.skipSpace()
				var field int
				switch string(key) {
				case "dtype":
					field = fieldDType
				case "shape":
					field = fieldShape
				case "data_offsets":
					field = fieldOffsets
				default:
					if p.strict {
						return p.errorAt(keyPos, "unknown field "+strconv.Quote(string(key))+" (strict)")
					}
					if err := p.skip(3); err != nil {
						return err
					}
				}
				if field != 0 {
					if seen&field != 0 {
						return p.errorAt(keyPos, "duplicate field "+strconv.Quote(string(key)))
					}
					seen |= field
					if err := p.field(field, &t); err != nil {
						return err
					}
				}
				p.skipSpace()
				c := p.peek()
				p.i++
				if c == '}' {
					break
				}
				if c != ',' {
					p.i--
					return p.unexpected("',' or '}'")
				}
				p.skipSpace()
			}
		} else {
			p.i++
		}
		if seen != allFields {
			missing := `"dtype"`
			if seen&fieldDType != 0 {
				missing = `"shape"`
				if seen&fieldShape != 0 {
					missing = `"data_offsets"`
				}
			}
			return p.errorAt(entryPos, "missing field "+missing)
		}
	case '[':
		if p.strict {
			return p.errorAt(entryPos, "tensor entry is an array, want an object (strict)")
		}
		p.i++
		for n, field := range [3]int{fieldDType, fieldShape, fieldOffsets} {
			p.skipSpace()
			if n > 0 {
				if p.peek() != ',' {
					if p.peek() == ']' {
						return p.errorAt(p.i, "tensor entry array has "+strconv.Itoa(n)+" elements, want 3")
					}
					return p.unexpected("','")
				}
				p.i++
				p.skipSpace()
			} else if p.peek() == ']' {
				return p.errorAt(p.i, "tensor entry array is empty, want 3 elements")
			}
			if err := p.field(field, &t); err != nil {
				return err
			}
		}
		p.skipSpace()
		if p.peek() != ']' {
			if p.peek() == ',' {
				return p.errorAt(p.i, "tensor entry array has more than 3 elements")
			}
			return p.unexpected("']'")
		}
		p.i++
	default:
		return p.errorAt(entryPos, "tensor entry is not an object")
	}
	p.appendTensor(t)
	return nil
}

// field scans the value of one known field of a tensor entry into t.
func (p *scanner) field(field int, t *TensorInfo) (err error) {
	switch field {
	case fieldDType:
		t.DType, err = p.dtype()
	case fieldShape:
		t.Shape, err = p.shape()
	case fieldOffsets:
		t.DataOffsets, err = p.offsets()
	}
	return err
}

// dtype scans a dtype: "F32", or {"F32": null} as serde accepts for a unit
// enum variant (not {"F32": {}}, which serde accepts only in other contexts).
func (p *scanner) dtype() (DType, error) {
	pos := p.i
	switch p.peek() {
	case '"':
		start, end, esc, err := p.str()
		if err != nil {
			return 0, err
		}
		name := p.b[start:end]
		if esc {
			name = p.scratch
		}
		if d := lookupDType(name); d != 0 {
			return d, nil
		}
		return 0, &HeaderError{Offset: int64(pos), Msg: "unknown dtype " + strconv.Quote(string(name)), Err: ErrUnknownDType}
	case '{':
		if p.strict {
			return 0, p.errorAt(pos, "dtype is an object, want a string (strict)")
		}
		p.i++
		p.skipSpace()
		if p.peek() != '"' {
			return 0, p.errorAt(pos, "dtype object must have exactly one key")
		}
		d, err := p.dtype()
		if err != nil {
			return 0, err
		}
		if err := p.expect(':', "':'"); err != nil {
			return 0, err
		}
		p.skipSpace()
		if p.peek() != 'n' {
			return 0, p.errorAt(p.i, "the value of a dtype key must be null")
		}
		if err := p.literal("null"); err != nil {
			return 0, err
		}
		p.skipSpace()
		if p.peek() != '}' {
			if p.peek() == ',' {
				return 0, p.errorAt(pos, "dtype object must have exactly one key")
			}
			return 0, p.unexpected("'}'")
		}
		p.i++
		return d, nil
	}
	return 0, p.errorAt(pos, "dtype is not a string")
}

// shape scans an array of dimensions.
func (p *scanner) shape() ([]uint64, error) {
	if p.peek() != '[' {
		return nil, p.errorAt(p.i, "shape is not an array")
	}
	p.i++
	p.skipSpace()
	if p.peek() == ']' {
		p.i++
		return scalarShape, nil
	}
	p.dimBuf = p.dimBuf[:0]
	for {
		v, err := p.uint("dimension")
		if err != nil {
			return nil, err
		}
		p.appendDim(v)
		p.skipSpace()
		c := p.peek()
		p.i++
		if c == ']' {
			return p.internShape(p.dimBuf), nil
		}
		if c != ',' {
			p.i--
			return nil, p.unexpected("',' or ']'")
		}
		p.skipSpace()
	}
}

// offsets scans [begin, end].
func (p *scanner) offsets() (off [2]uint64, err error) {
	pos := p.i
	if p.peek() != '[' {
		return off, p.errorAt(pos, "data_offsets is not an array")
	}
	p.i++
	for k := range off {
		p.skipSpace()
		if p.peek() == ']' {
			return off, p.errorAt(pos, "data_offsets has "+strconv.Itoa(k)+" elements, want 2")
		}
		if k > 0 {
			if p.peek() != ',' {
				return off, p.unexpected("','")
			}
			p.i++
			p.skipSpace()
		}
		if off[k], err = p.uint("offset"); err != nil {
			return off, err
		}
	}
	p.skipSpace()
	if p.peek() != ']' {
		if p.peek() == ',' {
			return off, p.errorAt(pos, "data_offsets has more than 2 elements")
		}
		return off, p.unexpected("']'")
	}
	p.i++
	return off, nil
}

// uint scans a non-negative integer that fits in 64 bits, written without a
// fraction or exponent: the only numbers the reference takes as usize.
func (p *scanner) uint(what string) (uint64, error) {
	b, i := p.b, p.i
	if i >= len(b) || b[i] < '0' || b[i] > '9' {
		if i < len(b) && b[i] == '-' {
			return 0, p.errorAt(i, what+" is negative")
		}
		return 0, p.unexpected("a non-negative integer " + what)
	}
	var v uint64
	if b[i] == '0' {
		i++
	} else {
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := uint64(b[i] - '0')
			if v > (math.MaxUint64-d)/10 {
				return 0, p.errorAt(p.i, what+" does not fit in 64 bits")
			}
			v = v*10 + d
		}
	}
	if i < len(b) {
		switch b[i] {
		case '.', 'e', 'E':
			return 0, p.errorAt(p.i, what+" has a fraction or exponent, want an integer")
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return 0, p.errorAt(p.i, "number with a leading zero")
		}
	}
	p.i = i
	return v, nil
}

// literal consumes the literal word, which must be at the read position.
func (p *scanner) literal(word string) error {
	if len(p.b)-p.i >= len(word) && string(p.b[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return nil
	}
	return p.unexpected(strconv.Quote(word))
}

// str scans the string at the read position, which is '"'. Without escapes
// its contents are b[start:end]; with them (esc), the unescaped contents are
// in p.scratch until the next call.
func (p *scanner) str() (start, end int, esc bool, err error) {
	b := p.b
	start = p.i + 1
	i := plainEnd(b, start)
	if i < len(b) && b[i] == '"' {
		p.i = i + 1
		return start, i, false, nil
	}
	p.scratch = append(p.scratch[:0], b[start:i]...)
	for {
		if i >= len(b) {
			return 0, 0, false, p.errorAt(len(b), "unterminated string")
		}
		c := b[i]
		switch {
		case c == '"':
			p.i = i + 1
			return start, i, true, nil
		case c < 0x20:
			return 0, 0, false, p.errorAt(i, "control character in string")
		case c != '\\':
			p.scratch = append(p.scratch, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return 0, 0, false, p.errorAt(len(b), "unterminated string")
		}
		switch b[i+1] {
		case '"', '\\', '/':
			p.scratch = append(p.scratch, b[i+1])
		case 'b':
			p.scratch = append(p.scratch, '\b')
		case 'f':
			p.scratch = append(p.scratch, '\f')
		case 'n':
			p.scratch = append(p.scratch, '\n')
		case 'r':
			p.scratch = append(p.scratch, '\r')
		case 't':
			p.scratch = append(p.scratch, '\t')
		case 'u':
			r, ok := hex4(b, i+2)
			if !ok {
				return 0, 0, false, p.errorAt(i, "invalid \\u escape")
			}
			i += 6
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, 0, false, p.errorAt(i-6, "lone low surrogate in \\u escape")
			case r >= 0xD800 && r <= 0xDBFF:
				if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
					return 0, 0, false, p.errorAt(i-6, "lone high surrogate in \\u escape")
				}
				r2, ok := hex4(b, i+2)
				if !ok {
					return 0, 0, false, p.errorAt(i, "invalid \\u escape")
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return 0, 0, false, p.errorAt(i, "high surrogate not followed by a low surrogate")
				}
				i += 6
				r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
			}
			p.scratch = utf8.AppendRune(p.scratch, r)
			continue
		default:
			return 0, 0, false, p.errorAt(i, "invalid escape")
		}
		i += 2
	}
}

// plainEnd returns the index of the first '"', '\\' or control character in
// b[i:], or len(b): where the plain bytes of a string starting at i end.
func plainEnd(b []byte, i int) int {
	// Eight bytes at a time: the lowest set bit of m marks the first such
	// byte exactly (borrows can only set bits above it).
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^(lsb*'"'), x^(lsb*'\\')
		if m := ((q - lsb) &^ q) | ((s - lsb) &^ s) | ((x - lsb*0x20) &^ x); m&msb != 0 {
			return i + bits.TrailingZeros64(m&msb)/8
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// hex4 decodes the 4 hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skip scans and discards any JSON value; depth is the nesting depth it has
// if it is an object or an array.
func (p *scanner) skip(depth int) error {
	switch p.peek() {
	case '"':
		_, _, _, err := p.str()
		return err
	case '{', '[':
		if depth > MaxDepth {
			return p.errorAt(p.i, "nesting deeper than "+strconv.Itoa(MaxDepth))
		}
		open := p.b[p.i]
		closing, want := byte(']'), "',' or ']'"
		if open == '{' {
			closing, want = '}', "',' or '}'"
		}
		p.i++
		p.skipSpace()
		if p.peek() == closing {
			p.i++
			return nil
		}
		for {
			if open == '{' {
				if p.peek() != '"' {
					return p.unexpected("a string key")
				}
				if _, _, _, err := p.str(); err != nil {
					return err
				}
				if err := p.expect(':', "':'"); err != nil {
					return err
				}
				p.skipSpace()
			}
			if err := p.skip(depth + 1); err != nil {
				return err
			}
			p.skipSpace()
			c := p.peek()
			p.i++
			if c == closing {
				return nil
			}
			if c != ',' {
				p.i--
				return p.unexpected(want)
			}
			p.skipSpace()
		}
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return p.number()
	}
	return p.unexpected("a value")
}

// number scans any JSON number and rejects it, as the reference does, when
// serde_json's default float parsing (without its "float_roundtrip" feature)
// gives infinity. The reference reads every number of a tensor entry, unknown
// fields included, into a buffered value first, so the rule applies to
// ignored numbers too. That parsing is not correctly rounded:
// 1.7976931348623158e308 is out of range and 1.79769313486231581e308 is not.
//
// serde_json's rule (de.rs, parse_integer to f64_from_parts): the digits are
// gathered into a u64 significand until the next digit would overflow it;
// later digits of the integer part raise the decimal exponent by one each,
// later digits of the fraction are dropped, and fraction digits that fit
// lower it by one each. An exponent of more than 2147483647 is out of range
// unless it is negative or the significand is zero. Then, with e the exponent
// in total, the number is out of range when the significand is not zero,
// e >= 0, and either e > 308 or float64(significand) * 1e<e> is infinite,
// 1e<e> being the float64 nearest to 10^e. Negative exponents never are, and
// integers that fit in a u64 are not floats at all.
func (p *scanner) number() error {
	b, i, start := p.b, p.i, p.i
	if b[i] == '-' {
		i++
	}
	var sig uint64 // the significand, as serde_json gathers it
	var exp int64  // the decimal exponent the significand is scaled by
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := uint64(b[i] - '0')
			if sig > (math.MaxUint64-d)/10 {
				// The significand is full: the remaining digits of the
				// integer part each scale it by ten.
				for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
					exp++
				}
				break
			}
			sig = sig*10 + d
		}
	default:
		return p.errorAt(i, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := uint64(b[i] - '0')
			if sig > (math.MaxUint64-d)/10 {
				// Full: the remaining digits of the fraction are dropped.
				for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
				}
				break
			}
			sig = sig*10 + d
			exp--
		}
		if i == j {
			return p.errorAt(i, "invalid number: no digit after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		j := i
		var e int64
		overflow := false
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := int64(b[i] - '0')
			if e > (math.MaxInt32-d)/10 {
				overflow = true // an i32 in serde_json: it stops here
			} else if !overflow {
				e = e*10 + d
			}
		}
		if i == j {
			return p.errorAt(i, "invalid number: no digit in exponent")
		}
		switch {
		case overflow && !neg && sig != 0:
			return p.errorAt(start, "number out of range")
		case overflow:
			p.i = i // zero, whatever the significand
			return nil
		case neg:
			exp -= e
		default:
			exp += e
		}
	}
	p.i = i
	// An integer that fits has exp 0; one that does not, a positive exp.
	if sig != 0 && exp >= minOverflowExp10 {
		if exp > 308 || math.IsInf(float64(sig)*pow10Top[exp-minOverflowExp10], 1) {
			return p.errorAt(start, "number out of range")
		}
	}
	return nil
}

// minOverflowExp10 is the least decimal exponent e for which a u64
// significand times 1e<e> can overflow a float64: (2^64-1) * 1e288 cannot.
const minOverflowExp10 = 289

// pow10Top holds the float64s nearest to 10^289 to 10^308, as the constants
// of serde_json's POW10 table are (Go rounds its constants to nearest too).
var pow10Top = [...]float64{
	1e289, 1e290, 1e291, 1e292, 1e293, 1e294, 1e295, 1e296, 1e297, 1e298,
	1e299, 1e300, 1e301, 1e302, 1e303, 1e304, 1e305, 1e306, 1e307, 1e308,
}

// fastEntry scans a tensor entry written exactly as the reference writer
// writes it, {"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}, into t. It
// reports false, having consumed nothing, for an entry written any other way,
// which the general path then scans: every entry fastEntry accepts, the
// general path accepts with the same result.
func (p *scanner) fastEntry(t *TensorInfo) bool {
	b, i := p.b, p.i
	// The comparisons of constant strings compile to a few word loads.
	if len(b)-i < 64 || string(b[i:i+10]) != `{"dtype":"` {
		return false
	}
	i += 10
	j := i
	for j < i+12 && b[j] != '"' {
		j++
	}
	if t.DType = lookupDType(b[i:j]); t.DType == 0 {
		return false
	}
	i = j
	if len(b)-i < 11+2+18+3+2 || string(b[i:i+11]) != `","shape":[` {
		return false
	}
	i += 11
	p.dimBuf = p.dimBuf[:0]
	if b[i] != ']' {
		for {
			v, j := digits(b, i)
			if !plainInt(b, i, j) {
				return false
			}
			if len(p.dimBuf) == 64 {
				return false // long shapes take the general path
			}
			p.dimBuf = append(p.dimBuf, v)
			i = j
			if i < len(b) && b[i] == ',' {
				i++
				continue
			}
			break
		}
	}
	if len(b)-i < 18+3+2 || string(b[i:i+9]) != `],"data_o` || string(b[i+9:i+18]) != `ffsets":[` {
		return false
	}
	i += 18
	v, j := digits(b, i)
	if !plainInt(b, i, j) || j >= len(b) || b[j] != ',' {
		return false
	}
	t.DataOffsets[0] = v
	i = j + 1
	v, j = digits(b, i)
	if !plainInt(b, i, j) || j+1 >= len(b) || b[j] != ']' || b[j+1] != '}' {
		return false
	}
	t.DataOffsets[1] = v
	p.i = j + 2
	t.Shape = p.internShape(p.dimBuf)
	return true
}

// digits decodes the decimal digits at b[i:], at most 19 of them, which
// cannot overflow, and returns their value and the index after them. It is
// small enough to be inlined.
func digits(b []byte, i int) (uint64, int) {
	var v uint64
	j := i
	for ; j < len(b) && j-i < 19; j++ {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	return v, j
}

// plainInt reports whether the digits b[i:j] that digits decoded are a
// whole JSON integer it decoded exactly: at least one digit, no leading
// zero, fewer than 19 digits (longer ones go to the general path, which
// checks for overflow) and no fraction or exponent after them.
func plainInt(b []byte, i, j int) bool {
	if j == i || j-i >= 19 || j-i > 1 && b[i] == '0' {
		return false
	}
	return j >= len(b) || b[j] != '.' && b[j] != 'e' && b[j] != 'E'
}
