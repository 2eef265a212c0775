package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
)

// cliDoc is the command's reference, which documents the JSON output of
// every command by examples.
const cliDoc = "../../docs/cli.md"

// schemaExamples returns the JSON examples of docs/cli.md, by command: each
// ```json block that follows a "<!-- schema: COMMAND -->" line.
func schemaExamples(t *testing.T) map[string][]any {
	t.Helper()
	doc, err := os.ReadFile(cliDoc)
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- schema: ([a-z]+) -->\n```json\n(.*?)\n```")
	examples := map[string][]any{}
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		var v any
		require.NoError(t, json.Unmarshal([]byte(m[2]), &v), "the %s example of %s", m[1], cliDoc)
		examples[m[1]] = append(examples[m[1]], v)
	}
	return examples
}

// optionalKeys are the fields an example shows that an output may leave
// out: those that name what only some inputs have (a part, a dataset, an
// error, where a finding is).
var optionalKeys = map[string]bool{
	"model": true, "dataset": true, "part": true, "error": true, "mode": true, "sample_count": true,
	"tensor": true, "block": true, "key": true, "count": true, "first_index": true, "quantization": true,
}

// nullableKeys are the fields that may be null, as docs/cli.md says:
// the statistics of a tensor with no finite value or no real value, the
// differences diff could not compute, a metadata key absent from one model.
var nullableKeys = map[string]bool{
	"value_count": true, "min": true, "max": true, "mean": true, "std": true, "nan_count": true, "inf_count": true,
	"max_abs_diff": true, "max_rel_diff": true, "value_a": true, "value_b": true,
	"signature_check": true, "tensor_manifest": true, // verify without --signature, --digests
}

// mapKeys are the fields whose value is a map of any keys, every value of
// the form of the example's first.
var mapKeys = map[string]bool{"metadata": true, "index_metadata": true, "by_dtype": true}

// conform returns what makes got differ from the documented form ex, at
// path; an empty list in an example is a list of objects of the form of
// the object that holds it (a check report's parts).
func conform(path string, got, ex, parent any) []string {
	switch ex := ex.(type) {
	case map[string]any:
		obj, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, not an object", path, kindOf(got))}
		}
		var bad []string
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			exv, ok := ex[k]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s.%s: not documented", path, k))
			case obj[k] == nil && (exv == nil || nullableKeys[k]):
			case mapKeys[k]:
				m, ok := obj[k].(map[string]any)
				if !ok {
					bad = append(bad, fmt.Sprintf("%s.%s: %s, not a map", path, k, kindOf(obj[k])))
					continue
				}
				var first any
				for _, v := range exv.(map[string]any) {
					first = v
				}
				for mk, mv := range m {
					if first != nil {
						bad = append(bad, conform(path+"."+k+"."+mk, mv, first, ex)...)
					}
				}
			default:
				bad = append(bad, conform(path+"."+k, obj[k], exv, ex)...)
			}
		}
		for k := range ex {
			if _, ok := obj[k]; !ok && !optionalKeys[k] {
				bad = append(bad, fmt.Sprintf("%s.%s: missing", path, k))
			}
		}
		return bad
	case []any:
		l, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %s, not a list", path, kindOf(got))}
		}
		elem := parent
		if len(ex) > 0 {
			elem = ex[0]
		}
		var bad []string
		for i, v := range l {
			bad = append(bad, conform(fmt.Sprintf("%s[%d]", path, i), v, elem, parent)...)
		}
		return bad
	case nil:
		return nil
	}
	if kindOf(got) != kindOf(ex) {
		return []string{fmt.Sprintf("%s: %s, not a %s", path, kindOf(got), kindOf(ex))}
	}
	return nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// TestJSONSchema runs every command with --json on every form of input
// (a file, a sharded checkpoint, a model of several parts, a URL, a
// dataset, a model holding NaN, an input that does not exist) and checks
// that its output is one JSON document of the form docs/cli.md documents
// for the command: the same fields, of the same types, lists and maps
// never null, nothing undocumented.
func TestJSONSchema(t *testing.T) {
	examples := schemaExamples(t)
	for _, c := range commands {
		require.NotEmpty(t, examples[c.name], "%s documents no JSON output of %s", cliDoc, c.name)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "model.safetensors")
	require.NoError(t, safetensors.WriteFile(file, tinyLlama(), map[string]string{"format": "pt"}))
	sharded := filepath.Join(dir, "sharded")
	require.NoError(t, checkpoint.Write(sharded, tinyLlama(), checkpoint.MaxShardSize(300_000), checkpoint.FileMetadata(map[string]string{"format": "pt"})))
	nan := filepath.Join(dir, "nan.safetensors")
	require.NoError(t, safetensors.WriteFile(nan, tinyLlama(), map[string]string{"format": "pt"}))
	plantNaN(t, nan, "model.norm.weight")
	pipeline := pipelineDir(t)
	url, _ := serveDir(t, sharded)
	ds := filepath.Join(corpus, "..", "spark", "kv_index")
	missing := filepath.Join(dir, "missing.safetensors")

	models := []string{file, sharded, nan, pipeline, url}
	var runs [][]string
	for _, m := range models {
		runs = append(runs,
			[]string{"inspect", m}, []string{"inspect", "--digests", m}, []string{"validate", m}, []string{"validate", "--values", m}, []string{"check", m},
			[]string{"stats", m}, []string{"diff", file, m},
			[]string{"convert", "--dtype", "BF16", m, filepath.Join(t.TempDir(), "out")})
	}
	runs = append(runs,
		[]string{"inspect", ds}, []string{"validate", ds, file, missing}, []string{"quantize", file, filepath.Join(t.TempDir(), "q")},
		[]string{"quantize", sharded, filepath.Join(t.TempDir(), "q")}, []string{"version"},
		[]string{"inspect", quantized("fp8")}, []string{"check", quantized("mxfp4")},
		[]string{"convert", "--dequantize", "--dtype", "BF16", quantized("fp8"), filepath.Join(t.TempDir(), "out")})
	key, pub := signingKeys(t)
	sig := filepath.Join(t.TempDir(), "model.sig")
	runs = append(runs, []string{"sign", "--key", key, "--signature", sig, sharded}, []string{"verify", "--signature", sig, "--key", pub, sharded},
		[]string{"verify", file}, []string{"verify", url}, []string{"verify", pipeline})
	digests := filepath.Join(t.TempDir(), "model.digests")
	_, manifest, _ := runCmd("inspect", "--digests", sharded)
	require.NoError(t, os.WriteFile(digests, []byte(manifest), 0o644))
	runs = append(runs, []string{"verify", "--digests", digests, sharded}, []string{"verify", "--digests", digests, file})
	seen := map[string]bool{}
	for _, args := range runs {
		args = append([]string{args[0], "--json"}, args[1:]...)
		status, stdout, stderr := runCmd(args...)
		if args[0] != "validate" { // which gives a verdict on each operand, even one that cannot be read
			require.Contains(t, []int{exitOK, exitFail}, status, "%q: %s", args, stderr)
		}
		var got any
		dec := json.NewDecoder(strings.NewReader(stdout))
		require.NoError(t, dec.Decode(&got), "%q: stdout is not JSON:\n%s", args, stdout)
		assert.False(t, dec.More(), "%q: more than one JSON document", args)
		assert.True(t, strings.HasSuffix(stdout, "}\n"), "%q: one document ending with a newline", args)
		var best []string
		for i, ex := range examples[args[0]] {
			bad := conform(args[0], got, ex, nil)
			if i == 0 || len(bad) < len(best) {
				best = bad
			}
		}
		assert.Empty(t, best, "%q: the output is not of a form %s documents", args, cliDoc)
		seen[args[0]] = true
	}
	for _, c := range commands {
		assert.True(t, seen[c.name], "%s was not run", c.name)
	}

	// A command that cannot run writes nothing to stdout.
	for _, args := range [][]string{{"inspect", "--json", missing}, {"check", "--json", missing}, {"stats", "--json", file, "nosuch"}} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitTrouble, status, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.True(t, strings.HasPrefix(stderr, "safetensors "+args[0]+": "), "%q: %s", args, stderr)
	}
}

// TestJSONAgreesWithText checks that the sizes and counts the text form
// prints are the numbers the JSON form holds.
func TestJSONAgreesWithText(t *testing.T) {
	dir := t.TempDir()
	sharded := filepath.Join(dir, "sharded")
	require.NoError(t, checkpoint.Write(sharded, tinyLlama(), checkpoint.MaxShardSize(300_000), checkpoint.FileMetadata(map[string]string{"format": "pt"})))
	for _, m := range []string{tinyModel, sharded, pipelineDir(t)} {
		_, text, _ := runCmd("inspect", m)
		_, js, _ := runCmd("inspect", "--json", m)
		var s struct {
			HeaderBytes, DataBytes uint64 `json:",string"`
		}
		var raw map[string]any
		require.NoError(t, json.Unmarshal([]byte(js), &raw))
		s.HeaderBytes, s.DataBytes = uint64(raw["header_bytes"].(float64)), uint64(raw["data_bytes"].(float64))
		header := regexp.MustCompile(`headers? (\d+) bytes`).FindStringSubmatch(text)
		data := regexp.MustCompile(`data (\d+) bytes`).FindStringSubmatch(text)
		require.NotNil(t, header, text)
		require.NotNil(t, data, text)
		assert.Equal(t, strconv.FormatUint(s.HeaderBytes, 10), header[1], "%s: header bytes", m)
		assert.Equal(t, strconv.FormatUint(s.DataBytes, 10), data[1], "%s: data bytes", m)

		_, text, _ = runCmd("validate", m)
		_, js, _ = runCmd("validate", "--json", m)
		var v validateOutput
		require.NoError(t, json.Unmarshal([]byte(js), &v))
		require.Len(t, v.Results, 1)
		r := v.Results[0]
		assert.Contains(t, text, fmt.Sprintf(", %d bytes of data\n", r.DataBytes), m)
		assert.Contains(t, text, plural(r.TensorCount, "tensor"), m)
		assert.Equal(t, s.DataBytes, r.DataBytes, "%s: inspect and validate", m)

		_, text, _ = runCmd("check", m)
		_, js, _ = runCmd("check", "--json", m)
		var c checkOutput
		require.NoError(t, json.Unmarshal([]byte(js), &c))
		assert.Contains(t, strings.SplitN(text, "\n", 2)[0], fmt.Sprintf("%s, %s", plural(c.TensorCount, "tensor"), bytesString(c.Bytes)), m)
		assert.Equal(t, s.DataBytes, c.Bytes, "%s: inspect and check", m)
	}
}
