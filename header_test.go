package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// file returns a file image: the 8-byte length of header, header, and data.
func file(header string, data ...byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// prefixed returns the 8-byte length n followed by rest.
func prefixed(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

// TestErrors has one case per error of the reference, most of them ported
// from the reference's own tests (test_header_too_large and so on), with the
// details each message must give.
func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		input   []byte
		want    error
		tensor  string   // the name a *TensorError must carry, if any
		details []string // parts of the message
	}{
		{"header_too_small/empty", nil, ErrHeaderTooSmall, "", []string{"file is 0 bytes"}},
		{"header_too_small/7_bytes", []byte("<\x00\x00\x00\x00\x00\x00"), ErrHeaderTooSmall, "", []string{"file is 7 bytes"}},
		{"header_too_large", prefixed(100_000_001, `{}`), ErrHeaderTooLarge, "", []string{"100000001", "100000000"}},
		{"header_too_large/u64_max", prefixed(1<<64-1, `{}`), ErrHeaderTooLarge, "", []string{"18446744073709551615"}},
		{"invalid_header_length", prefixed(60, `{"test":{"dtype":"I32"}}`), ErrInvalidHeaderLength, "", []string{"header length 60", "24 bytes"}},
		{"invalid_header_non_utf8", file("{\"\xff\": 1}"), ErrHeaderNotUTF8, "", []string{"0xff at header byte 2 (file offset 10)"}},
		{"invalid_header_not_json", file(`{"test":{`), ErrInvalidHeader, "test", []string{"at byte 9 (file offset 17)"}},
		{"json_attack", file(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,0],"x":` + strings.Repeat("[", 200) + "}}"),
			ErrInvalidHeader, "a", []string{"nesting deeper than 127"}},
		{"unknown_dtype", file(`{"w":{"dtype":"F128","shape":[],"data_offsets":[0,0]}}`), ErrInvalidHeader, "w", []string{`unknown dtype "F128"`, "at byte 14"}},
		{"missing_field", file(`{"w":{"dtype":"F32","shape":[]}}`), ErrInvalidHeader, "w", []string{`missing field "data_offsets"`}},
		{"metadata_not_string", file(`{"__metadata__":{"k":1}}`), ErrInvalidHeader, "", []string{`metadata value of "k" is not a string`}},
		{"leading_zero", file(`{"w":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}`), ErrInvalidHeader, "w", []string{"leading zero", "at byte 29"}},
		{"invalid_offset", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 0, 0), ErrInvalidOffset, "w",
			[]string{"data_offsets [1, 2]", "begin must be 0"}},
		{"invalid_offset/end_before_begin", file(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}`, 0, 0, 0, 0),
			ErrInvalidOffset, "b", []string{"data_offsets [4, 2]: end is before begin"}},
		{"validation_overflow", file(`{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}`), ErrShapeOverflow, "test",
			[]string{"shape [2 18446744073709551614]"}},
		{"validation_overflow/bits", file(`{"test":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,16]}}`), ErrShapeOverflow, "test",
			[]string{"bits"}},
		{"misaligned_slice", file(`{"p":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 0, 0), ErrMisalignedSlice, "p", []string{"12 bits"}},
		{"invalid_info", file(`{"test":{"dtype":"I32","shape":[2,3],"data_offsets":[0,16]}}`, make([]byte, 16)...), ErrSizeMismatch, "test",
			[]string{"hold 16 bytes", "shape [2 3] of I32 needs 24"}},
		{"metadata_incomplete_buffer", file(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 17)...), ErrIncompleteBuffer, "",
			[]string{"cover 16 bytes but the data section is 17 bytes"}},
		{"metadata_incomplete_buffer/short", file(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 15)...), ErrIncompleteBuffer, "",
			[]string{"cover 16 bytes but the data section is 15 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(tt.input)
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, []error{tt.want}, matching(err), "the error matches exactly one sentinel")
			assert.True(t, strings.HasPrefix(err.Error(), "safetensors: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "safetensors: "), "prefix once: %s", err)
			for _, d := range tt.details {
				assert.Contains(t, err.Error(), d)
			}
			var te *TensorError
			if tt.tensor != "" {
				require.ErrorAs(t, err, &te)
				assert.Equal(t, tt.tensor, te.Name)
				assert.Contains(t, err.Error(), fmt.Sprintf("tensor %q", tt.tensor))
			} else {
				assert.False(t, errors.As(err, &te), "no tensor error expected: %s", err)
			}
		})
	}
}

func TestHeaderErrorOffset(t *testing.T) {
	_, err := NewReader(file(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`))
	var he *HeaderError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, int64(29), he.Offset, "the offset of 1.5")
	assert.Nil(t, he.Err)
	assert.ErrorIs(t, err, ErrInvalidHeader)

	_, err = NewReader(file(`{"a":{"dtype":"X","shape":[],"data_offsets":[0,0]}}`))
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrUnknownDType)
	assert.ErrorIs(t, err, ErrInvalidHeader)
}

// TestDuplicates checks the reference's last-wins rule for repeated tensor
// names and metadata keys.
func TestDuplicates(t *testing.T) {
	data := file(`{"__metadata__":{"k":"1","k":"2"},"w":{"dtype":"U8","shape":[9],"data_offsets":[0,9]},"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 1, 2)
	r, err := NewReader(data)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "2"}, r.Metadata())
	w, err := r.Tensor("w")
	require.NoError(t, err)
	assert.Equal(t, []uint64{2}, w.Shape)
	assert.Equal(t, []byte{1, 2}, w.Data)
	assert.Len(t, r.Header().Tensors, 1)

	// Every entry must be valid, even one that is replaced.
	_, err = NewReader(file(`{"w":{"dtype":"U8"},"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`))
	assert.ErrorIs(t, err, ErrInvalidHeader)

	// A name given three times, among others, out of order.
	r, err = NewReader(file(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[5],"data_offsets":[0,5]},`+
		`"a":{"dtype":"U8","shape":[7],"data_offsets":[0,7]},"c":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 7, 8))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, r.Names())
	for _, name := range r.Names() {
		_, err := r.Tensor(name)
		assert.NoError(t, err)
	}
	a, _ := r.Tensor("a")
	assert.Equal(t, []byte{7}, a.Data)
}

// TestLenient checks inputs the reference accepts although the format text
// forbids them, and that Strict rejects each.
func TestLenient(t *testing.T) {
	const w = `"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`
	tests := []struct {
		name, header, rule string
	}{
		{"leading_whitespace", " \t\r\n{" + w + "}", "whitespace before '{'"},
		{"trailing_newline", "{" + w + "}\n", "padded with other whitespace than spaces"},
		{"duplicate_name", "{" + w + "," + w + "}", "duplicate tensor name"},
		{"duplicate_metadata_key", `{"__metadata__":{"a":"1","a":"1"},` + w + "}", "duplicate metadata key"},
		{"metadata_null", `{"__metadata__":null,` + w + "}", `"__metadata__" is null`},
		{"array_form", `{"w":["U8",[1],[0,1]]}`, "tensor entry is an array"},
		{"dtype_map_null", `{"w":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}`, "dtype is an object"},
		{"dtype_map_spaces", `{"w":{"dtype":{ "U8" : null },"shape":[1],"data_offsets":[0,1]}}`, "dtype is an object"},
		{"unknown_field", `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":[1,{"x":null}]}}`, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := file(tt.header, 42)
			r, err := NewReader(data)
			require.NoError(t, err)
			w, err := r.Tensor("w")
			require.NoError(t, err)
			assert.Equal(t, Tensor{Name: "w", DType: U8, Shape: []uint64{1}, Data: []byte{42}}, w)

			_, err = NewReader(data, Strict())
			require.ErrorIs(t, err, ErrInvalidHeader)
			assert.Contains(t, err.Error(), tt.rule)
			assert.Contains(t, err.Error(), "(strict)")
			_, err = ReadHeader(bytes.NewReader(data), Strict())
			require.ErrorIs(t, err, ErrInvalidHeader)
		})
	}
	// Strict still accepts padding with spaces and pretty-printed JSON.
	_, err := NewReader(file("{\n  "+w+"\n}    ", 42), Strict())
	assert.NoError(t, err)
}

// TestJSONRules checks the reference's JSON rules on inputs that are not in
// the corpus: each either parses or fails with ErrInvalidHeader.
func TestJSONRules(t *testing.T) {
	entry := func(extra string) string {
		return `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":` + extra + `}}`
	}
	tests := []struct {
		value string
		ok    bool
	}{
		{`null`, true}, {`true`, true}, {`false`, true}, {`nul`, false}, {`True`, false},
		{`0`, true}, {`-0`, true}, {`-0.0e-0`, true}, {`1.5E+3`, true}, {`01`, false}, {`1.`, false}, {`.5`, false},
		{`1e`, false}, {`1e+`, false}, {`-`, false}, {`+1`, false}, {`0x10`, false}, {`NaN`, false}, {`Infinity`, false},
		{`1e308`, true}, {`1e309`, false}, {`-1e309`, false}, {`1.7976931348623157e308`, true}, {`1.7976931348623159e308`, false},
		{`1e-400`, true}, {`0e99999999999`, true}, {`1e99999999999`, false},
		{strings.Repeat("9", 308), true}, {strings.Repeat("9", 309), false},
		{`""`, true}, {`"\u0000"`, true}, {`"\ud83d\ude00"`, true}, {`"\ud83d"`, false}, {`"\ude00"`, false},
		{`"\ud83d\u0041"`, false}, {`"\ud83d\n"`, false}, {`"\x41"`, false}, {`"\u12"`, false}, {`"\U0041"`, false},
		{"\"\t\"", false}, {"\"\x7f\"", true}, {`"\/"`, true}, {`"a`, false},
		{`[]`, true}, {`[1,]`, false}, {`[,1]`, false}, {`[1 2]`, false}, {`{}`, true}, {`{"a":1,}`, false}, {`{"a"}`, false},
		{`{1:2}`, false}, {`{"a":1,"a":2}`, true}, {`[[[[]]]]`, true},
	}
	// The dtype's object form takes null as its value, and nothing else.
	for _, dtype := range []string{`{"U8":{}}`, `{"U8":[]}`, `{"U8":0}`, `{"U8":null,"U8":null}`, `{}`, `{"u8":null}`, `["U8"]`, `{"U8":nul}`} {
		_, err := NewReader(file(`{"w":{"dtype":`+dtype+`,"shape":[1],"data_offsets":[0,1]}}`, 0))
		assert.ErrorIs(t, err, ErrInvalidHeader, dtype)
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			_, err := NewReader(file(entry(tt.value), 0))
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidHeader)
			}
		})
	}
}

// TestNumberRange checks which numbers the reference rejects as out of range:
// serde_json without its "float_roundtrip" feature parses them with a rule of
// its own, not correctly rounded, and does so in the fields it ignores too.
// Every verdict here was obtained from the reference itself (the safetensors
// crate 0.8.0 with serde_json 1.0.154, default features), not derived from
// our rule; ok is true where it accepts the header.
func TestNumberRange(t *testing.T) {
	tests := []struct {
		value string
		ok    bool
	}{
		// Correct rounding would give the opposite verdict on these.
		{`1.7976931348623158e308`, false},
		{`-1.7976931348623158e308`, false},
		{`1.79769313486231581e308`, true},
		{`1.797693134862315708145274237317043567981e308`, false},
		{`17976931348623158e292`, false},
		{`179769313486231570000e288`, false},
		{`0.0179769313486231564140832e310`, false},
		{`0.00179769313486231572954660176691666e311`, false},
		{`-0.17976931348623156618358903579100845e309`, false},
		{`0.0000179769313486231574791536e313`, false},
		// Near the limit, both ways.
		{`1.7976931348623157e308`, true},
		{`1.7976931348623159e308`, false},
		{`17976931348623157e292`, true},
		{`0.17976931348623157e309`, true},
		{`0.17976931348623159122e309`, false},
		{`-0.0000179769313486231566e310`, true},
		{`1844674407370955917.8e285`, true},
		{`1844674407370955840395.148e287`, false},
		{`18446744073709551615e289`, false},
		{`18446744073709551616e288`, true},
		{`18446744073709551616.0e290`, false},
		{`1.8446744073709551616e307`, true},
		{`1e308`, true}, {`1E+308`, true}, {`1e309`, false}, {`10e308`, false}, {`0.1e309`, true}, {`-1e309`, false},
		// Long integers are floats to serde_json; a u64 is not.
		{`18446744073709551615`, true}, {`18446744073709551616`, true},
		{"1" + strings.Repeat("0", 308), true}, {"1" + strings.Repeat("0", 309), false},
		{"17976931348623157" + strings.Repeat("0", 292), false}, // 1.7976931348623157e308 written out
		{"179769313486231581" + strings.Repeat("0", 291), false},
		{"0." + strings.Repeat("0", 400) + "1e700", true},
		// Exponents beyond an i32, zeros, negative exponents, signs.
		{`1e2147483647`, false}, {`1e2147483648`, false}, {`0e2147483648`, true}, {`0e999999999999`, true},
		{`0.0e400`, true}, {`1e-2147483648`, true}, {`1e-99999999999`, true}, {`1E-400`, true},
		{`4.9e-324`, true}, {`2.5e-324`, true}, {`-0`, true}, {`-0.0`, true}, {`-0e5`, true}, {`0`, true},
		// Not numbers at all.
		{`00`, false}, {`1.e5`, false}, {`1e+`, false}, {`--1`, false}, {`1.5e+-3`, false},
	}
	headers := []func(string) string{
		func(v string) string { return `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":` + v + `}}` },
		func(v string) string {
			return `{"w":{"x":[{"y":[1,` + v + `]}],"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
		},
	}
	for _, tt := range tests {
		t.Run(tt.value[:min(len(tt.value), 40)], func(t *testing.T) {
			for _, h := range headers {
				_, err := NewReader(file(h(tt.value), 0))
				if tt.ok {
					assert.NoError(t, err)
				} else {
					assert.ErrorIs(t, err, ErrInvalidHeader)
				}
				_, err = ReadHeader(bytes.NewReader(file(h(tt.value), 0)))
				if tt.ok {
					assert.NoError(t, err)
				} else {
					assert.ErrorIs(t, err, ErrInvalidHeader)
				}
			}
		})
	}
}

// TestNotSafetensors checks the errors for files of other kinds, which the
// reference rejects with HeaderTooLarge since their first eight bytes make a
// huge header length: the verdict stays, the error matches
// ErrNotSafetensors too, and the message leads with what the file is and
// what to do, through NewReader, NewReaderAt and ReadHeader (which reads a
// few more bytes to tell).
func TestNotSafetensors(t *testing.T) {
	pad := func(s string) []byte { return append([]byte(s), make([]byte, 200)...) }
	const oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
	tests := []struct {
		name string
		data []byte
		want string // the message after "safetensors: "
	}{
		{"git_lfs", []byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + oid + "\nsize 548105171\n"),
			"a Git LFS pointer, not the file it points to (oid sha256:" + oid + ", 548105171 bytes): run 'git lfs pull' in its repository to fetch the file"},
		{"git_lfs/crlf", []byte("version https://git-lfs.github.com/spec/v1\r\noid sha256:" + oid + "\r\nsize 5000000\r\n"),
			"a Git LFS pointer, not the file it points to (oid sha256:" + oid + ", 5000000 bytes): run"},
		{"git_lfs/no_figures", []byte("version https://git-lfs.github.com/spec/v1\noid md5:abc\nsize -1\n"),
			"a Git LFS pointer, not the file it points to: run 'git lfs pull' in its repository to fetch the file"},
		{"html", []byte("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head></html>\n"),
			"a web page (HTML), not a safetensors file: download the file itself; for the Hugging Face Hub, use the resolve/ form of its URL, https://huggingface.co/REPO/resolve/REVISION/FILE"},
		{"html/bom_lower", []byte("\xef\xbb\xbf \n\t<!doctype html><html lang=en>"), "a web page (HTML), not a safetensors file: "},
		{"html/no_doctype", []byte("  <HTML>\n<BODY>Moved</BODY></HTML>"), "a web page (HTML), not a safetensors file: "},
		{"xhtml", []byte(`<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">`), "a web page (HTML)"},
		{"xml", []byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code></Error>`),
			`an XML document, such as an object store's error message, not a safetensors file: it starts "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied<"`},
		{"index", []byte(`{"metadata": {"total_size": 768}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}`),
			"a sharded checkpoint's index (JSON with a weight_map), not a safetensors file: open it with the checkpoint package's Open, or load the model whole with its Load (the safetensors command takes it as a MODEL)"},
		{"json", []byte("{\n  \"metadata\": {\n    \"total_size\": 768\n  }\n}\n"),
			`a JSON document, likely a sharded checkpoint's index, not a safetensors file: open an index with the checkpoint package's Open (the safetensors command takes it as a MODEL); it starts "{"`},
		{"json_error", []byte(`{"error":"Repository not found","url":"https://example.com/x"}`),
			`a JSON document, such as a server's error message, not a safetensors file: it starts "{\"error\":\"Repository not found\",\"url\":\"https://example.com/x\"}"`},
		{"pytorch_zip", pad("PK\x03\x04\x00\x00\x08\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x00\x12\x00archive/data.pkl"),
			"a PyTorch checkpoint (torch.save's zip format), not a safetensors file: convert it to safetensors first (in Python, with safetensors.torch.save_file)"},
		{"zip", pad("PK\x03\x04\x14\x00\x00\x00\x08\x00readme.txt"), "a zip archive, not a safetensors file"},
		{"pickle", pad("\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."),
			"a Python pickle, such as a PyTorch checkpoint in the legacy format, not a safetensors file: convert it to safetensors first"},
		{"pickle_v4", pad("\x80\x04\x95\x1d\x00\x00\x00\x00"), "a Python pickle"},
		{"gguf", pad("GGUF\x03\x00\x00\x00\x10\x00"), "a GGUF file (llama.cpp's format), not a safetensors file"},
		{"hdf5", pad("\x89HDF\r\n\x1a\n\x00\x00"), "an HDF5 file, such as Keras weights (.h5), not a safetensors file"},
		{"npy", pad("\x93NUMPY\x01\x00v\x00{'descr': '<f4'"), "a NumPy array (.npy), not a safetensors file"},
		{"gzip", pad("\x1f\x8b\x08\x00\x12\x34\x56\x78"), "a gzip-compressed file, not a safetensors file: decompress it first"},
		{"text", []byte("Entry not found\n"), `text, such as an error message saved in the file's place, not a safetensors file: it starts "Entry not found"`},
		{"text_utf8", []byte("Fichier introuvable : modèle absent, réessayez plus tard s'il vous plaît.\n"),
			`text, such as an error message saved in the file's place, not a safetensors file: it starts "Fichier introuvable : modèle absent, réessayez plus tard s'il "`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, ErrHeaderTooLarge, "the reference's verdict")
				require.ErrorIs(t, err, ErrNotSafetensors)
				assert.Equal(t, []error{ErrHeaderTooLarge}, matching(err))
				assert.True(t, strings.HasPrefix(err.Error(), "safetensors: "+tt.want), "%q\ndoes not start with\n%q", err, "safetensors: "+tt.want)
				assert.NotContains(t, err.Error(), "\n")
			}
			_, err := NewReader(tt.data)
			check(err)
			_, err = NewReaderAt(bytes.NewReader(tt.data), int64(len(tt.data)))
			check(err)
			_, err = ReadHeader(bytes.NewReader(tt.data))
			check(err)
		})
	}
	// A huge length that is neither text nor a known format: no guess, and
	// the figures.
	_, err := NewReader(prefixed(1<<40+5, "\x00\x01"))
	require.ErrorIs(t, err, ErrHeaderTooLarge)
	assert.NotErrorIs(t, err, ErrNotSafetensors)
	assert.EqualError(t, err, "safetensors: header too large: header length 1099511627781 is more than the limit of 100000000 bytes")
	_, err = NewReader(prefixed(100_000_001, `{"a":1}`))
	assert.NotErrorIs(t, err, ErrNotSafetensors)
	// A stream of another kind gives ReadHeader no more than 1 KiB to read.
	r := &countingReader{r: bytes.NewReader(append([]byte("<!DOCTYPE html>"), bytes.Repeat([]byte("<p>x</p>"), 1<<20)...))}
	_, err = ReadHeader(r)
	require.ErrorIs(t, err, ErrNotSafetensors)
	assert.LessOrEqual(t, r.n, 1024)
	// Binary data of no known format: the 8 bytes and no more.
	r = &countingReader{r: bytes.NewReader(prefixed(1<<40+5, strings.Repeat("\x00", 4096)))}
	_, err = ReadHeader(r)
	require.ErrorIs(t, err, ErrHeaderTooLarge)
	assert.Equal(t, 8, r.n)
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestNotSafetensorsShort: inputs of 0 to 16 bytes, the first bytes of
// every kind of file, give an error and no panic, and one that names the
// kind only from 8 bytes on.
func TestNotSafetensorsShort(t *testing.T) {
	for _, s := range []string{
		"version https://git-lfs.github.com/spec/v1\n", "<!DOCTYPE html>\n<html>", "\xef\xbb\xbf<html><body>",
		`{"weight_map": {}}`, "PK\x03\x04\x14\x00\x00\x00\x08\x00", "\x80\x02\x8a\x0al\xfc\x9cF\xf9",
		"GGUF\x03\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0",
	} {
		for n := range min(len(s), 16) + 1 {
			data := []byte(s[:n])
			_, err := NewReader(data)
			require.Error(t, err, "%q", data)
			if n < prefixLen {
				assert.ErrorIs(t, err, ErrHeaderTooSmall, "%q", data)
				assert.NotErrorIs(t, err, ErrNotSafetensors, "%q", data)
			}
			_, err = NewReaderAt(bytes.NewReader(data), int64(n))
			require.Error(t, err, "%q", data)
			_, err = ReadHeader(bytes.NewReader(data))
			require.Error(t, err, "%q", data)
		}
	}
}

// TestTruncated checks that a truncated file's error says how many bytes are
// missing.
func TestTruncated(t *testing.T) {
	whole := file(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 16)...)
	for _, cut := range []int{1, 15, 16, 17, len(whole) - 9} {
		data := whole[:len(whole)-cut]
		_, err := NewReader(data)
		if cut <= 16 {
			require.ErrorIs(t, err, ErrIncompleteBuffer)
			assert.Contains(t, err.Error(), fmt.Sprintf("the file is %d bytes, the tensors need %d more (a truncated file?)", len(data), cut))
		} else {
			require.ErrorIs(t, err, ErrInvalidHeaderLength)
			assert.Contains(t, err.Error(), fmt.Sprintf("the file is %d bytes, the header needs %d more (a truncated file?)", len(data), cut-16))
		}
		_, err = NewReaderAt(bytes.NewReader(data), int64(len(data)))
		assert.Contains(t, err.Error(), "a truncated file?")
	}
	_, err := NewReader(append(whole, 0, 0, 0))
	require.ErrorIs(t, err, ErrIncompleteBuffer)
	assert.Contains(t, err.Error(), "3 bytes after the last tensor")
	_, err = ReadHeader(bytes.NewReader(whole[:30]))
	require.ErrorIs(t, err, ErrInvalidHeaderLength)
	assert.Contains(t, err.Error(), "ended after 22 header bytes, 33 bytes short")
}

// TestDepth checks the nesting limit: 127 levels, the header object
// included, in every place where a value can nest.
func TestDepth(t *testing.T) {
	// The header object is level 1 and the entry level 2, so an unknown
	// field holds levels 3 and up.
	for _, depth := range []int{3, 126, 127, 128, 129, 100_000} {
		n := depth - 2
		for _, open := range []string{"[", `{"k":`} {
			value := strings.Repeat(open, n) + strings.Repeat("]", n)
			if open != "[" {
				value = strings.Repeat(open, n) + "null" + strings.Repeat("}", n)
			}
			_, err := NewReader(file(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":` + value + `}}`))
			if depth <= MaxDepth {
				assert.NoError(t, err, "depth %d %s", depth, open)
			} else {
				assert.ErrorIs(t, err, ErrInvalidHeader, "depth %d %s", depth, open)
			}
		}
	}
}

func TestReadHeader(t *testing.T) {
	data, err := writeBytes([]Tensor{{Name: "a", DType: F32, Shape: []uint64{2}, Data: make([]byte, 8)}}, map[string]string{"k": "v"})
	require.NoError(t, err)
	r := bytes.NewReader(data)
	h, err := ReadHeader(r)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "v"}, h.Metadata)
	assert.Equal(t, []TensorInfo{{Name: "a", DType: F32, Shape: []uint64{2}, DataOffsets: [2]uint64{0, 8}}}, h.Tensors)
	assert.Equal(t, uint64(len(data)), h.DataOffset()+h.DataLen())
	assert.Equal(t, int(h.DataOffset()), len(data)-r.Len(), "ReadHeader reads the header and no more")

	for n := range int(h.DataOffset()) {
		_, err := ReadHeader(bytes.NewReader(data[:n]))
		if n < prefixLen {
			assert.ErrorIs(t, err, ErrHeaderTooSmall, "cut at %d", n)
		} else {
			assert.ErrorIs(t, err, ErrInvalidHeaderLength, "cut at %d", n)
		}
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut at %d", n)
	}

	// Errors of the stream come back as they are.
	boom := errors.New("boom")
	_, err = ReadHeader(io.MultiReader(bytes.NewReader(data[:20]), iotestErrReader{boom}))
	assert.Same(t, boom, err)
	_, err = ReadHeader(iotestErrReader{boom})
	assert.Same(t, boom, err)
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileMetadata parses headers of many metadata keys (a million with
// the build tag slow): distinct, all the same, and escaped. Parsing may allocate at most 3 bytes per header
// byte more than the floor, a Go map of the same distinct entries made with
// the right size (bench's BenchmarkHeaderMetadataKeys measures the time
// too).
func TestHostileMetadata(t *testing.T) {
	n := 100_000
	switch {
	case slowTests:
		n = 1_000_000 // headers of 10 to 19 MB
	case testing.Short():
		t.Skip("headers of 1 to 2 MB")
	}
	for _, tt := range []struct {
		name string
		key  func(i int) string // the key as it is written in JSON
		want func(i int) string // as it reads
	}{
		{"distinct", func(i int) string { return fmt.Sprintf("%06x", i) }, func(i int) string { return fmt.Sprintf("%06x", i) }},
		{"same", func(int) string { return "key" }, func(int) string { return "key" }},
		{"escaped", func(i int) string { return fmt.Sprintf(`\u00e9%06x`, i) }, func(i int) string { return fmt.Sprintf("é%06x", i) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hdr strings.Builder
			hdr.WriteString(`{"__metadata__":{`)
			want := make(map[string]string)
			for i := range n {
				if i > 0 {
					hdr.WriteByte(',')
				}
				v := string(rune('a' + i%26))
				fmt.Fprintf(&hdr, `"%s":"%s"`, tt.key(i), v)
				want[tt.want(i)] = v
			}
			hdr.WriteString("}}")
			data := file(hdr.String())
			keys, values := slices.Collect(maps.Keys(want)), make([]string, 0, len(want))
			for _, k := range keys {
				values = append(values, want[k])
			}
			floor := allocated(func() {
				m := make(map[string]string, len(keys))
				for i, k := range keys {
					m[k] = values[i]
				}
				assert.Len(t, m, len(want))
			})
			var r *Reader
			ours := allocated(func() {
				var err error
				r, err = NewReader(data)
				require.NoError(t, err)
			})
			assert.True(t, maps.Equal(want, r.Header().Metadata))
			t.Logf("%d header bytes: %.2f bytes allocated per header byte, the floor %.2f", hdr.Len(),
				float64(ours)/float64(hdr.Len()), float64(floor)/float64(hdr.Len()))
			assert.LessOrEqual(t, ours, floor+3*uint64(hdr.Len()))
		})
	}
}

// TestDistinctCount checks the estimate that sizes the metadata map: within
// 8% (five standard errors) of the true count of distinct keys, plus the 5%
// and 16 it adds, however often each key repeats.
func TestDistinctCount(t *testing.T) {
	for _, n := range []int{0, 1, 10, 1000, 30_000, 300_000} {
		for _, repeat := range []int{1, 3} {
			d := distinctCount{seed: maphash.MakeSeed()}
			for range repeat {
				for i := range n {
					d.add(strconv.Itoa(i))
				}
			}
			want := 1.05*float64(n) + 16
			assert.InDelta(t, want, float64(d.estimate()), 0.08*float64(n)+1, "%d keys, each %d times", n, repeat)
		}
	}
}

// TestDistinctCountSums checks the sums that distinctCount keeps as it goes
// against the same sums taken over its registers, and its estimate against
// HyperLogLog's computed from them.
func TestDistinctCountSums(t *testing.T) {
	var d distinctCount
	d.seed = maphash.MakeSeed()
	for i := range 200_000 {
		d.add(strconv.Itoa(i % 150_000))
		if i%10_007 != 0 && i != 199_999 {
			continue
		}
		used, sum := 0, 0.0
		for _, r := range d.reg {
			if r != 0 {
				used++
			}
			sum += math.Ldexp(1, -int(r))
		}
		require.Equal(t, used, d.used, "after %d strings", i+1)
		const m = float64(len(d.reg))
		e := 0.7213 / (1 + 1.079/m) * m * m / sum
		if e <= 2.5*m && used < len(d.reg) {
			e = m * math.Log(m/float64(len(d.reg)-used))
		}
		require.Equal(t, int(min(e*1.05+16, math.MaxInt32)), d.estimate(), "after %d strings", i+1)
	}
}

// TestHostileEntries parses headers of many small entries written in the
// ways that the capacity newScanner guesses from the '{' count misses:
// arrays, one name repeated, escaped names. Each must stay within a small
// multiple of the header's size.
func TestHostileEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("headers of 2 to 6 MB")
	}
	const n = 100_000
	for _, tt := range []struct {
		name  string
		entry func(i int) string
		want  int     // tensors read
		bound float64 // bytes allocated per header byte
	}{
		{"arrays", func(i int) string { return fmt.Sprintf(`"%x":["U8",[0],[0,0]]`, i) }, n, 4.5},
		{"same_name", func(int) string { return `"a":["U8",[0],[0,0]]` }, 1, 6.5},
		{"escaped", func(i int) string { return fmt.Sprintf(`"\u00e9%x":["U8",[0],[0,0]]`, i) }, n, 4.5},
		{"objects", func(i int) string { return fmt.Sprintf(`"%x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`, i) }, n, 2.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var hdr strings.Builder
			hdr.WriteString("{")
			for i := range n {
				if i > 0 {
					hdr.WriteString(",")
				}
				hdr.WriteString(tt.entry(i))
			}
			hdr.WriteString("}")
			data := file(hdr.String())
			got := allocated(func() {
				r, err := NewReader(data)
				require.NoError(t, err)
				assert.Len(t, r.Header().Tensors, tt.want)
			})
			t.Logf("%d header bytes: %.2f bytes allocated per header byte", hdr.Len(), float64(got)/float64(hdr.Len()))
			assert.Less(t, float64(got), tt.bound*float64(hdr.Len()))
		})
	}
}

// TestHostileLengths checks that a large header length costs nothing when the
// bytes are not there.
func TestHostileLengths(t *testing.T) {
	data := prefixed(MaxHeaderSize, `{}`)
	n := allocated(func() {
		_, err := NewReader(data)
		assert.ErrorIs(t, err, ErrInvalidHeaderLength)
	})
	assert.Less(t, n, uint64(4<<10))

	// A stream that claims a 100 MB header and ends after a few bytes.
	n = allocated(func() {
		_, err := ReadHeader(bytes.NewReader(data))
		assert.ErrorIs(t, err, ErrInvalidHeaderLength)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	assert.Less(t, n, uint64(64<<10))
}

// TestHostileShapes checks that memory stays a small multiple of the header
// size for deep nesting and long shapes.
func TestHostileShapes(t *testing.T) {
	deep := file(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}}`)
	n := allocated(func() {
		_, err := NewReader(deep)
		var he *HeaderError
		require.ErrorAs(t, err, &he)
		assert.Contains(t, he.Msg, "nesting deeper than 127")
		assert.Less(t, he.Offset, int64(200), "fails at the 128th level")
	})
	assert.Less(t, n, uint64(3*len(deep)))

	const dims = 1_000_000
	long := file(`{"w":{"dtype":"F32","shape":[`+strings.Repeat("1,", dims-1)+`1],"data_offsets":[0,4]}}`, 0, 0, 0, 0)
	n = allocated(func() {
		r, err := NewReader(long)
		require.NoError(t, err)
		w, err := r.Tensor("w")
		require.NoError(t, err)
		assert.Len(t, w.Shape, dims)
	})
	// Each dimension takes 2 bytes of header and 8 of memory.
	assert.Less(t, n, uint64(6*len(long)))
}

// TestHostileManyTensors parses a header of a million tensors.
func TestHostileManyTensors(t *testing.T) {
	if testing.Short() {
		t.Skip("a 50 MB header")
	}
	const count = 1_000_000
	var hdr strings.Builder
	hdr.WriteString("{")
	for i := range count {
		if i > 0 {
			hdr.WriteString(",")
		}
		fmt.Fprintf(&hdr, `"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}`, i, i, i+1)
	}
	hdr.WriteString("}")
	data := file(hdr.String(), make([]byte, count)...)
	n := allocated(func() {
		r, err := NewReader(data)
		require.NoError(t, err)
		assert.Len(t, r.Header().Tensors, count)
		w, err := r.Tensor("t999999")
		require.NoError(t, err)
		assert.Equal(t, [2]uint64{999999, 1000000}, r.Header().Tensors[count-1].DataOffsets)
		assert.Len(t, w.Data, 1)
	})
	assert.Less(t, n, uint64(3*hdr.Len()))
}

// writeBytes returns what Write writes.
func writeBytes(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	err := Write(&buf, tensors, metadata)
	return buf.Bytes(), err
}
