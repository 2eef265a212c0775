package pyjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendString(t *testing.T) {
	// Python: json.dumps(s) for each s.
	for s, want := range map[string]string{
		"plain.name":    `"plain.name"`,
		"a\"b\\c/d":     `"a\"b\\c/d"`,
		"\b\f\n\r\t":    `"\b\f\n\r\t"`,
		"\x00\x1f\x7f":  `"\u0000\u001f\u007f"`,
		"é€😀\U0010ffff": `"\u00e9\u20ac\ud83d\ude00\udbff\udfff"`,
	} {
		assert.Equal(t, want, string(AppendString(nil, s)), "%q", s)
	}
	// Not valid UTF-8, which Python's strings cannot be: U+FFFD.
	assert.Equal(t, `"a\ufffdb"`, string(AppendString(nil, "a\xffb")))
}

func TestPythonJSON(t *testing.T) {
	// The expected texts are Python's: json.dumps(json.loads(s)) and
	// json.dumps(v, indent=2, sort_keys=True).
	for in, want := range map[string]string{
		"1e-5": "1e-05", "10000.0": "10000.0", "1e16": "1e+16", "1e15": "1000000000000000.0",
		"0.0001": "0.0001", "0.00001": "1e-05", "1.5e-7": "1.5e-07", "0.02": "0.02", "-0.0": "-0.0",
		"1E22": "1e+22", "123456789.123": "123456789.123", "1e400": "Infinity", "5": "5", "-0": "0",
		"12345678901234567890": "12345678901234567890", "2.5e-5": "2.5e-05",
	} {
		got, err := appendNumber(nil, in)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), in)
	}
	d := json.NewDecoder(strings.NewReader(`{"b":[1,{"x":[]}],"a":{},"é😀\n":"\u0001\u007f"}`))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	got, err := Append(nil, v, 0)
	require.NoError(t, err)
	assert.Equal(t, `{
  "a": {},
  "b": [
    1,
    {
      "x": []
    }
  ],
  "\u00e9\ud83d\ude00\n": "\u0001\u007f"
}`, string(got))
}

// TestDecodeObject decodes an object as Append takes it, numbers as
// written, and refuses anything else.
func TestDecodeObject(t *testing.T) {
	v, err := DecodeObject([]byte(`{"a": 1.50, "b": [1e3, "x"], "c": null}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": json.Number("1.50"), "b": []any{json.Number("1e3"), "x"}, "c": nil}, v)
	text, err := Append(nil, v, 0)
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"a\": 1.5,\n  \"b\": [\n    1000.0,\n    \"x\"\n  ],\n  \"c\": null\n}", string(text))
	for _, bad := range []string{"null", "[1]", "1", `"s"`, "{", ""} {
		_, err := DecodeObject([]byte(bad))
		assert.Error(t, err, bad)
	}
	_, err = DecodeObject([]byte("null"))
	assert.EqualError(t, err, "not a JSON object")
}
