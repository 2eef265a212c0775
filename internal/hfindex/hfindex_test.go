package hfindex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture returns testdata/sharded's index, as transformers wrote it
// (make_index.py), and its total_parameters and total_size.
func fixture(t *testing.T) (data []byte, params, size uint64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "sharded", "model.safetensors.index.json"))
	require.NoError(t, err)
	return data, 2869, 6860
}

func TestParse(t *testing.T) {
	data, _, size := fixture(t)
	ix, err := Parse(data, len(data))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"total_parameters": "2869", "total_size": "6860"}, ix.Metadata)
	assert.Equal(t, json.RawMessage("6860"), ix.TotalSize)
	assert.Equal(t, "model-00007-of-00007.safetensors", ix.WeightMap["lm_head.weight"])
	assert.Len(t, ix.Files, 7)
	assert.IsIncreasing(t, ix.Files)
	for _, f := range ix.Files {
		assert.NotEmpty(t, keyOf(ix.WeightMap, f), "a file that no tensor is in: %s", f)
	}
	assert.NoError(t, ix.CheckTotalSize(size))
	assert.EqualError(t, ix.CheckTotalSize(size+1), "total_size is 6860, but the tensors' sizes add up to 6861")

	// No metadata: no bookkeeping to check.
	ix, err = Parse([]byte(`{"weight_map": {"a": "x.safetensors", "b": "x.safetensors"}}`), 1<<20)
	require.NoError(t, err)
	assert.Nil(t, ix.Metadata)
	assert.Equal(t, []string{"x.safetensors"}, ix.Files)
	assert.NoError(t, ix.CheckTotalSize(12345))
	// Values that are not strings are given as compact JSON.
	ix, err = Parse([]byte(`{"metadata": {"total_size": 1.6e1, "note": "a b", "list": [1, 2]}, "weight_map": {}}`), 1<<20)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"total_size": "1.6e1", "note": "a b", "list": "[1,2]"}, ix.Metadata)
	assert.NoError(t, ix.CheckTotalSize(16))
	ix, err = Parse([]byte(`{"metadata": {"total_size": "16"}, "weight_map": {}}`), 1<<20)
	require.NoError(t, err)
	assert.EqualError(t, ix.CheckTotalSize(16), `total_size is "16", not a number`)
}

// keyOf returns a tensor that file holds.
func keyOf(m map[string]string, file string) string {
	for k, v := range m {
		if v == file {
			return k
		}
	}
	return ""
}

func TestParseErrors(t *testing.T) {
	for data, want := range map[string]string{
		`{"weight_map": {}} {}`:                "data after the JSON object",
		`{"metadata": {}}`:                     `no "weight_map"`,
		`{"weight_map": []}`:                   "weight_map: not an object",
		`{"weight_map": {"a": 1}}`:             `weight_map: tensor "a": the file is not a string`,
		`{"weight_map": {"a": "x", "a": "y"}}`: `weight_map: tensor "a" is listed twice`,
		`[1]`:                                  "json: cannot unmarshal array",
		`{"weight_map": {}, "metadata": {"a": 1, "a"}}`: "invalid character",
	} {
		_, err := Parse([]byte(data), 1<<20)
		require.Error(t, err, data)
		assert.Contains(t, err.Error(), want, data)
	}
	_, err := Parse([]byte(`{"weight_map": {}}`), 17)
	assert.EqualError(t, err, "larger than 17 bytes")
}

func TestCount(t *testing.T) {
	for raw, want := range map[string]uint64{"0": 0, "6860": 6860, "1.6e10": 16000000000, "18446744073709551615": 1<<64 - 1, "2.0": 2} {
		n, ok := Count(json.RawMessage(raw))
		assert.True(t, ok, raw)
		assert.Equal(t, want, n, raw)
	}
	for _, raw := range []string{"", `"12"`, "-1", "1.5", "1e20", "18446744073709551616", "null", "true"} {
		_, ok := Count(json.RawMessage(raw))
		assert.False(t, ok, raw)
	}
}

func TestText(t *testing.T) {
	assert.Equal(t, "a\"b", Text(json.RawMessage(`"a\"b"`)))
	assert.Equal(t, `{"a":[1,2]}`, Text(json.RawMessage("{ \"a\" : [1, 2] }")))
	assert.Equal(t, "12", Text(json.RawMessage("12")))
}

// TestAppend writes the index byte for byte as transformers does: that of
// testdata/sharded, from its weight map.
func TestAppend(t *testing.T) {
	data, params, size := fixture(t)
	ix, err := Parse(data, len(data))
	require.NoError(t, err)
	assert.Equal(t, string(data), string(Append(nil, params, size, ix.WeightMap)))
	assert.Equal(t, "{\n  \"metadata\": {\n    \"total_parameters\": 0,\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n", string(Append(nil, 0, 0, nil)))
	// Python: json.dumps(index, indent=2, sort_keys=True) + "\n".
	assert.Equal(t, "{\n  \"metadata\": {\n    \"total_parameters\": 3,\n    \"total_size\": 12\n  },\n  \"weight_map\": {\n    \"a\": \"x-00001.safetensors\",\n    \"\\u00e9\\\"\": \"x-00002.safetensors\"\n  }\n}\n",
		string(Append(nil, 3, 12, map[string]string{"é\"": "x-00002.safetensors", "a": "x-00001.safetensors"})))
	assert.Equal(t, "prefix{", string(Append([]byte("prefix"), 0, 0, nil)[:7]), "appends")
}

// TestRewrite keeps an index as transformers wrote it but for total_size,
// and the weight map where one is given.
func TestRewrite(t *testing.T) {
	data, params, size := fixture(t)
	ix, err := Parse(data, len(data))
	require.NoError(t, err)

	got, err := Rewrite(data, size, nil)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(got), "the same total: the same bytes")
	got, err = Rewrite(data, size, ix.WeightMap)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(got), "the same weight map: the same bytes")

	got, err = Rewrite(data, 3430, nil)
	require.NoError(t, err)
	assert.Equal(t, string(bytes.Replace(data, []byte(`"total_size": 6860`), []byte(`"total_size": 3430`), 1)), string(got))

	// A new weight map, as quant writes it: the other metadata kept.
	wm := map[string]string{"b.weight": "model-00002-of-00002.safetensors", "b.weight_scale": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors"}
	got, err = Rewrite(data, 99, wm)
	require.NoError(t, err)
	assert.Equal(t, string(Append(nil, params, 99, wm)), string(got))

	// Other keys and metadata are kept, in sorted order; numbers as written.
	got, err = Rewrite([]byte(`{"weight_map": {"x": "f"}, "extra": [1.5, 2], "metadata": {"z": "s", "total_size": 1}}`), 7, nil)
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"extra\": [\n    1.5,\n    2\n  ],\n  \"metadata\": {\n    \"total_size\": 7,\n    \"z\": \"s\"\n  },\n  \"weight_map\": {\n    \"x\": \"f\"\n  }\n}\n", string(got))
	got, err = Rewrite([]byte(`{"weight_map": {}}`), 0, nil)
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"metadata\": {\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n", string(got), "metadata added")

	for _, bad := range []string{"null", "[]", "{", ""} {
		_, err := Rewrite([]byte(bad), 0, nil)
		assert.Error(t, err, bad)
	}
}
