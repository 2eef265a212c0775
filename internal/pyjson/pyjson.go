// Package pyjson writes JSON as Python's json module writes it, for the
// files that Python tools write and that are compared byte for byte with
// theirs: the index of a sharded checkpoint (transformers' save_pretrained)
// and the config.json of a quantized model (compressed-tensors).
package pyjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DecodeObject decodes data, a JSON object (what follows it is not read),
// as Append takes it: with encoding/json's UseNumber, so that numbers keep
// their text when written back.
func DecodeObject(data []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, errors.New("not a JSON object")
	}
	return v, nil
}

// Append appends v, a value decoded by encoding/json with
// UseNumber, as Python's json.dump(v, f, indent=2, sort_keys=True) writes
// it: what compressed-tensors' update_config writes config.json with.
// Numbers with a fraction or an exponent are Python floats and printed as
// repr prints them; the others are ints and kept as written.
//
// indent is the indentation of the line v starts on, 0 for a whole file.
// A value of any other type than encoding/json gives (with UseNumber) is
// an error.
func Append(dst []byte, v any, indent int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return AppendString(dst, v), nil
	case json.Number:
		return appendNumber(dst, string(v))
	case []any:
		if len(v) == 0 {
			return append(dst, "[]"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, indent+2)
			var err error
			if dst, err = Append(dst, e, indent+2); err != nil {
				return nil, err
			}
		}
		return append(newline(dst, indent), ']'), nil
	case map[string]any:
		if len(v) == 0 {
			return append(dst, "{}"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // UTF-8 byte order is code point order, Python's
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, indent+2)
			dst = AppendString(dst, k)
			dst = append(dst, ": "...)
			var err error
			if dst, err = Append(dst, v[k], indent+2); err != nil {
				return nil, err
			}
		}
		return append(newline(dst, indent), '}'), nil
	}
	return nil, fmt.Errorf("pyjson: no JSON for %T", v)
}

func newline(dst []byte, indent int) []byte {
	dst = append(dst, '\n')
	return append(dst, bytes.Repeat([]byte{' '}, indent)...)
}

// AppendString appends s quoted as Python's json.dumps quotes it by default
// (ensure_ascii): \" \\ \b \f \n \r \t, other characters outside the
// printable ASCII range as \u escapes in lowercase hexadecimal, those
// beyond the Basic Multilingual Plane as surrogate pairs. A byte of s that
// is not valid UTF-8 is written as U+FFFD, \ufffd.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\b':
			dst = append(dst, `\b`...)
		case r == '\f':
			dst = append(dst, `\f`...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r >= ' ' && r <= '~':
			dst = append(dst, byte(r))
		case r > 0xffff:
			r -= 0x10000
			dst = u(dst, 0xd800+r>>10)
			dst = u(dst, 0xdc00+r&0x3ff)
		default:
			dst = u(dst, r)
		}
	}
	return append(dst, '"')
}

// appendNumber appends the JSON number n as Python prints what
// json.load made of it.
func appendNumber(dst []byte, n string) ([]byte, error) {
	if !strings.ContainsAny(n, ".eE") {
		if n == "-0" {
			n = "0"
		}
		return append(dst, n...), nil
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, err
	}
	return appendFloat(dst, f), nil
}

// appendFloat appends repr(f): the shortest digits that read back as
// f, in positional notation when the exponent is in [-4, 16), with ".0"
// for integers, and in scientific notation with a two-digit exponent
// otherwise.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp >= -4 && exp < 16 {
		out := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(out, ".") {
			out += ".0"
		}
		return append(dst, out...)
	}
	dst = append(dst, mant...)
	dst = append(dst, 'e')
	if exp < 0 {
		dst = append(dst, '-')
		exp = -exp
	} else {
		dst = append(dst, '+')
	}
	return fmt.Appendf(dst, "%02d", exp)
}
