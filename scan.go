package safetensors

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// This file holds the JSON header scanner: one pass over the bytes that checks
// the syntax and the schema together, the way the reference's serde_json
// deserializer does, and builds the tensor list without reflection.
//
// The reference's rules, which the scanner follows:
//   - whitespace is space, tab, LF and CR, before and after the object too;
//   - strings may not hold raw control characters, escapes are the JSON ones,
//     and \u escapes of surrogates must come in valid pairs;
//   - numbers follow the JSON grammar, and numbers that overflow a float64
//     are errors even where the value is ignored;
//   - objects and arrays nest at most MaxDepth deep, the header object included;
//   - "__metadata__" may appear once, as null or an object of strings whose
//     duplicate keys keep the last value;
//   - any other key is a tensor, and a repeated name keeps the last entry, but
//     every entry must be valid;
//   - an entry is an object with "dtype", "shape" and "data_offsets", each
//     exactly once, other fields ignored; or an array of exactly those three;
//   - a dtype is a string, or an object with one key, the dtype, whose value is
//     null or {};
//   - dimensions and offsets are non-negative integers that fit in 64 bits,
//     written without a fraction or exponent.

// entry is one tensor entry while scanning.
type entry struct {
	info     TensorInfo
	dimStart int  // the shape is dims[dimStart:dimEnd]
	dimEnd   int  //
	dead     bool // replaced by a later entry of the same name
}

// scanner parses a JSON header.
type scanner struct {
	b       []byte // the JSON text
	s       string // the same bytes as a string, to cut names from
	i       int    // read position in b
	strict  bool
	scratch []byte // unescaped string contents

	entries []entry
	dims    []uint64
	meta    map[string]string
	metaSet bool // "__metadata__" was seen
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
			if err := p.member(); err != nil {
				return err
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
	var name string
	if esc {
		name = string(p.scratch)
	} else {
		name = p.s[start:end]
	}
	if err := p.tensor(name); err != nil {
		if _, ok := err.(*HeaderError); ok {
			return &TensorError{Name: name, Err: err}
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
	p.i++
	p.meta = make(map[string]string)
	p.skipSpace()
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		keyPos := p.i
		if p.peek() != '"' {
			return p.unexpected("a string key")
		}
		key, err := p.strValue()
		if err != nil {
			return err
		}
		if err := p.expect(':', "':'"); err != nil {
			return err
		}
		p.skipSpace()
		if p.peek() != '"' {
			return p.errorAt(p.i, "metadata value of "+strconv.Quote(key)+" is not a string")
		}
		val, err := p.strValue()
		if err != nil {
			return err
		}
		if p.strict {
			if _, dup := p.meta[key]; dup {
				return p.errorAt(keyPos, "duplicate metadata key "+strconv.Quote(key)+" (strict)")
			}
		}
		p.meta[key] = val
		p.skipSpace()
		c := p.peek()
		p.i++
		if c == '}' {
			return nil
		}
		if c != ',' {
			p.i--
			return p.unexpected("',' or '}'")
		}
		p.skipSpace()
	}
}

// Fields of a tensor entry, as bits.
const (
	fieldDType = 1 << iota
	fieldShape
	fieldOffsets
	allFields = fieldDType | fieldShape | fieldOffsets
)

// tensor scans one tensor entry and appends it to p.entries.
func (p *scanner) tensor(name string) error {
	e := entry{info: TensorInfo{Name: name}, dimStart: len(p.dims)}
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
					if err := p.field(field, &e); err != nil {
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
			if err := p.field(field, &e); err != nil {
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
	e.dimEnd = len(p.dims)
	p.entries = append(p.entries, e)
	return nil
}

// field scans the value of one known field of a tensor entry into e.
func (p *scanner) field(field int, e *entry) (err error) {
	switch field {
	case fieldDType:
		e.info.DType, err = p.dtype()
	case fieldShape:
		// A repeated field is an error, so this entry's dims are the last ones.
		e.dimStart = len(p.dims)
		err = p.shape()
	case fieldOffsets:
		e.info.DataOffsets, err = p.offsets()
	}
	return err
}

// dtype scans a dtype: "F32", or {"F32": null} or {"F32": {}} as serde
// accepts for a unit enum variant.
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
		switch p.peek() {
		case 'n':
			if err := p.literal("null"); err != nil {
				return 0, err
			}
		case '{':
			p.i++
			if err := p.expect('}', "'}': the value of a dtype key must be null or {}"); err != nil {
				return 0, err
			}
		default:
			return 0, p.errorAt(p.i, "the value of a dtype key must be null or {}")
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

// shape scans an array of dimensions onto p.dims.
func (p *scanner) shape() error {
	if p.peek() != '[' {
		return p.errorAt(p.i, "shape is not an array")
	}
	p.i++
	p.skipSpace()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		v, err := p.uint("dimension")
		if err != nil {
			return err
		}
		p.dims = append(p.dims, v)
		p.skipSpace()
		c := p.peek()
		p.i++
		if c == ']' {
			return nil
		}
		if c != ',' {
			p.i--
			return p.unexpected("',' or ']'")
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
	i := start
	for i < len(b) && plain[b[i]] {
		i++
	}
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

// strValue scans a string and returns it, cut from p.s when it has no escapes.
func (p *scanner) strValue() (string, error) {
	start, end, esc, err := p.str()
	if err != nil {
		return "", err
	}
	if esc {
		return string(p.scratch), nil
	}
	return p.s[start:end], nil
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

// number scans any JSON number. Like the reference, it rejects a number whose
// value overflows a float64 to infinity.
func (p *scanner) number() error {
	b, i, start := p.b, p.i, p.i
	digits := func() int {
		n := 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return p.errorAt(i, "invalid number")
	}
	simple := i-start <= 19
	if i < len(b) && b[i] == '.' {
		i++
		simple = false
		if digits() == 0 {
			return p.errorAt(i, "invalid number: no digit after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		simple = false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return p.errorAt(i, "invalid number: no digit in exponent")
		}
	}
	p.i = i
	if !simple {
		if f, _ := strconv.ParseFloat(string(b[start:i]), 64); math.IsInf(f, 0) {
			return p.errorAt(start, "number out of range")
		}
	}
	return nil
}
