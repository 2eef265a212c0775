package quant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// appendPythonJSON appends v, a value decoded by encoding/json with
// UseNumber, as Python's json.dump(v, f, indent=2, sort_keys=True) writes
// it: what compressed-tensors' update_config writes config.json with.
// Numbers with a fraction or an exponent are Python floats and printed as
// repr prints them; the others are ints and kept as written.
func appendPythonJSON(dst []byte, v any, indent int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return appendPythonString(dst, v), nil
	case json.Number:
		return appendPythonNumber(dst, string(v))
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
			if dst, err = appendPythonJSON(dst, e, indent+2); err != nil {
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
			dst = appendPythonString(dst, k)
			dst = append(dst, ": "...)
			var err error
			if dst, err = appendPythonJSON(dst, v[k], indent+2); err != nil {
				return nil, err
			}
		}
		return append(newline(dst, indent), '}'), nil
	}
	return nil, fmt.Errorf("quant: no JSON for %T", v)
}

func newline(dst []byte, indent int) []byte {
	dst = append(dst, '\n')
	return append(dst, bytes.Repeat([]byte{' '}, indent)...)
}

// appendPythonString appends s quoted as json.dumps quotes it with
// ensure_ascii: non-ASCII as \uXXXX escapes (surrogate pairs beyond the
// BMP).
func appendPythonString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		switch r {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		default:
			switch {
			case r < 0x20 || r >= 0x7f && r < 0x10000:
				dst = fmt.Appendf(dst, `\u%04x`, r)
			case r >= 0x10000:
				a, b := utf16.EncodeRune(r)
				dst = fmt.Appendf(dst, `\u%04x\u%04x`, a, b)
			default:
				dst = append(dst, byte(r))
			}
		}
	}
	return append(dst, '"')
}

// appendPythonNumber appends the JSON number n as Python prints what
// json.load made of it.
func appendPythonNumber(dst []byte, n string) ([]byte, error) {
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
	return appendPythonFloat(dst, f), nil
}

// appendPythonFloat appends repr(f): the shortest digits that read back as
// f, in positional notation when the exponent is in [-4, 16), with ".0"
// for integers, and in scientific notation with a two-digit exponent
// otherwise.
func appendPythonFloat(dst []byte, f float64) []byte {
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
