package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors/internal/pyjson"
)

// An index is the content of a sharded checkpoint's index file, such as
// model.safetensors.index.json: which file holds each tensor, and
// metadata.
type index struct {
	metadata  map[string]string // nil if none
	totalSize json.RawMessage   // the metadata's total_size, or nil
	weightMap map[string]string // tensor → file
	files     []string          // the files the weight map names, sorted
}

// indexBookkeeping lists the keys of an index's metadata that describe the
// checkpoint rather than the model: the Hugging Face libraries write
// total_size (the tensors' bytes) and transformers total_parameters.
var indexBookkeeping = []string{"total_parameters", "total_size"}

// parseIndex checks an index file's bytes, as the Hugging Face libraries
// write them: a JSON object of at most MaxFileSize bytes, with a
// "weight_map" of tensor names to file names (no name twice, no file name
// that leaves the index's folder) and optional "metadata". Its errors
// say what is wrong, for indexError to wrap.
func parseIndex(data []byte) (*index, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileSize)
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
	ix := &index{weightMap: weightMap}
	if top.Metadata != nil {
		ix.metadata = make(map[string]string, len(top.Metadata))
		for k, raw := range top.Metadata {
			ix.metadata[k] = jsonText(raw)
		}
		ix.totalSize = top.Metadata["total_size"]
	}
	files := make(map[string]bool)
	for name, file := range weightMap {
		if !files[file] && !localName(file) {
			return nil, fmt.Errorf("tensor %q: file %q is not inside the index's folder", name, file)
		}
		files[file] = true
	}
	ix.files = slices.Sorted(maps.Keys(files))
	return ix, nil
}

// localName reports whether name, slash-separated, names a file inside a
// folder: not empty, not absolute, no ".." (filepath.IsLocal on every
// platform's terms).
func localName(name string) bool {
	return name != "" && filepath.IsLocal(filepath.FromSlash(name)) && !strings.Contains(name, `\`) && !strings.HasPrefix(name, "/")
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

// checkTotalSize checks the metadata's total_size, if any, against the sum
// of the tensors' sizes.
func (ix *index) checkTotalSize(total uint64) error {
	if ix.totalSize == nil {
		return nil
	}
	size, ok := jsonCount(ix.totalSize)
	if !ok {
		return fmt.Errorf("total_size is %s, not a number", ix.totalSize)
	}
	if size != total {
		return fmt.Errorf("total_size is %d, but the tensors' sizes add up to %d", size, total)
	}
	return nil
}

// jsonCount returns the value of raw, a JSON value, if it is a number whose
// value is an integer from 0 to 2^64-1. Writers in Python may write a
// float, such as 1.6e10, for an integer.
func jsonCount(raw json.RawMessage) (uint64, bool) {
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

// jsonText returns a JSON value as IndexMetadata gives it: a string as it
// is, anything else as its compact JSON text.
func jsonText(raw json.RawMessage) string {
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

// appendIndex appends the index file as transformers 5 writes it:
// json.dumps(index, indent=2, sort_keys=True) followed by a newline, with
// metadata (numbers written as JSON numbers when they are integers, as
// total_parameters and total_size are) and the weight map.
func appendIndex(dst []byte, params, size uint64, weightMap map[string]string) []byte {
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

// quoteNames quotes the first max names, and says how many more there are.
func quoteNames(names []string, max int) string {
	quoted := make([]string, min(len(names), max))
	for i := range quoted {
		quoted[i] = strconv.Quote(names[i])
	}
	if len(names) > max {
		quoted = append(quoted, fmt.Sprintf("and %d more", len(names)-max))
	}
	return strings.Join(quoted, ", ")
}
