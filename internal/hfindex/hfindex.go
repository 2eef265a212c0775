// Package hfindex reads and writes the index of a sharded checkpoint as the
// Hugging Face libraries write it (model.safetensors.index.json: a
// "weight_map" of tensor names to file names and "metadata" with
// total_size): the one place that knows the file's format, for the
// checkpoint package, which opens, writes and converts checkpoints, and
// quant, which rewrites the index of the model it quantizes. The files it
// writes are those of transformers' save_pretrained, byte for byte.
package hfindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/safetensors-go/safetensors/internal/pyjson"
)

// An Index is the content of an index file: which file holds each tensor,
// and metadata.
type Index struct {
	// Metadata is the index's metadata, each value a string as it is or
	// any other JSON value as its compact text (see Text); nil if none.
	Metadata map[string]string
	// TotalSize is the metadata's total_size as written, or nil.
	TotalSize json.RawMessage
	// WeightMap gives each tensor's file.
	WeightMap map[string]string
	// Files are the files WeightMap names, sorted, each once.
	Files []string
}

// Bookkeeping lists the keys of an index's metadata that describe the
// checkpoint rather than the model: the Hugging Face libraries write
// total_size (the tensors' bytes) and transformers total_parameters.
var Bookkeeping = []string{"total_parameters", "total_size"}

// Parse checks an index file's bytes, as the Hugging Face libraries write
// them: a JSON object of at most limit bytes, with a "weight_map" of tensor
// names to file names (no name twice) and optional "metadata". Its errors
// say what is wrong, for the caller to wrap with the file's name. Where the
// files may be is the caller's to check.
func Parse(data []byte, limit int) (*Index, error) {
	if len(data) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	var top struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap json.RawMessage            `json:"weight_map"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&top); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	if top.WeightMap == nil {
		return nil, errors.New(`no "weight_map"`)
	}
	weightMap, err := decodeWeightMap(top.WeightMap)
	if err != nil {
		return nil, fmt.Errorf("weight_map: %v", err)
	}
	ix := &Index{WeightMap: weightMap}
	if top.Metadata != nil {
		ix.Metadata = make(map[string]string, len(top.Metadata))
		for k, raw := range top.Metadata {
			ix.Metadata[k] = Text(raw)
		}
		ix.TotalSize = top.Metadata["total_size"]
	}
	files := make(map[string]bool)
	for _, file := range weightMap {
		files[file] = true
	}
	ix.Files = slices.Sorted(maps.Keys(files))
	return ix, nil
}

// decodeWeightMap decodes a JSON object of strings, refusing a name given
// twice, which would leave a tensor's file ambiguous.
func decodeWeightMap(raw json.RawMessage) (map[string]string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	m := make(map[string]string)
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		name := t.(string) // object keys are strings
		var file string
		if err := d.Decode(&file); err != nil {
			return nil, fmt.Errorf("tensor %q: the file is not a string", name)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("tensor %q is listed twice", name)
		}
		m[name] = file
	}
	return m, nil
}

// CheckTotalSize checks the metadata's total_size, if any, against the sum
// of the tensors' sizes.
func (ix *Index) CheckTotalSize(total uint64) error {
	if ix.TotalSize == nil {
		return nil
	}
	size, ok := Count(ix.TotalSize)
	if !ok {
		return fmt.Errorf("total_size is %s, not a number", ix.TotalSize)
	}
	if size != total {
		return fmt.Errorf("total_size is %d, but the tensors' sizes add up to %d", size, total)
	}
	return nil
}

// Count returns the value of raw, a JSON value, if it is a number whose
// value is an integer from 0 to 2^64-1. Writers in Python may write a
// float, such as 1.6e10, for an integer.
func Count(raw json.RawMessage) (uint64, bool) {
	var n json.Number
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	if v, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		return v, true
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f >= math.Exp2(64) || f != math.Trunc(f) {
		return 0, false
	}
	return uint64(f), true
}

// Text returns a JSON value as Index.Metadata gives it: a string as it is,
// anything else as its compact JSON text.
func Text(raw json.RawMessage) string {
	var str string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &str) == nil {
		return str
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw) // cannot happen: the decoder checked it
	}
	return b.String()
}

// Append appends a new index file as transformers 5 writes it:
// json.dumps(index, indent=2, sort_keys=True) followed by a newline, with
// metadata (total_parameters and total_size, integers written as JSON
// numbers) and the weight map.
func Append(dst []byte, params, size uint64, weightMap map[string]string) []byte {
	dst = append(dst, "{\n  \"metadata\": {\n    \"total_parameters\": "...)
	dst = strconv.AppendUint(dst, params, 10)
	dst = append(dst, ",\n    \"total_size\": "...)
	dst = strconv.AppendUint(dst, size, 10)
	dst = append(dst, "\n  },\n  \"weight_map\": {"...)
	for i, name := range slices.Sorted(maps.Keys(weightMap)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "\n    "...)
		dst = pyjson.AppendString(dst, name)
		dst = append(dst, ": "...)
		dst = pyjson.AppendString(dst, weightMap[name])
	}
	if len(weightMap) > 0 {
		dst = append(dst, "\n  "...)
	}
	return append(dst, "}\n}\n"...)
}

// Rewrite returns the index file data for a copy of its checkpoint whose
// tensors take total bytes: its metadata's total_size set to total and,
// where weightMap is not nil, its weight map replaced by weightMap (a
// quantized model's, which lists new tensors); everything else is kept,
// and the file is written as transformers writes an index (keys sorted,
// two-space indents, a trailing newline).
func Rewrite(data []byte, total uint64, weightMap map[string]string) ([]byte, error) {
	ix, err := pyjson.DecodeObject(data)
	if err != nil {
		return nil, err
	}
	meta, _ := ix["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["total_size"] = json.Number(strconv.FormatUint(total, 10))
	ix["metadata"] = meta
	if weightMap != nil {
		m := make(map[string]any, len(weightMap))
		for name, file := range weightMap {
			m[name] = file
		}
		ix["weight_map"] = m
	}
	text, err := pyjson.Append(nil, ix, 0)
	if err != nil {
		return nil, err
	}
	return append(text, '\n'), nil
}
