package interop

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// The differential tests: every entry point of the package against the
// reference's verdict, on the conformance corpus and on files generated
// afresh on each run.

// corpusDir is the conformance corpus, relative to the interop module.
const corpusDir = "../testdata/conformance"

// corpus returns the corpus files' paths and contents, sorted by path.
func corpus(t testing.TB) (paths []string, files [][]byte) {
	t.Helper()
	for _, sub := range []string{"valid", "invalid"} {
		names, err := filepath.Glob(filepath.Join(corpusDir, sub, "*.safetensors"))
		require.NoError(t, err)
		for _, name := range names {
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			paths = append(paths, name)
			files = append(files, data)
		}
	}
	require.Len(t, paths, 234, "the conformance corpus")
	return paths, files
}

// layoutStage reports whether the reference rejects a file after parsing
// its header: the header is valid JSON of the right shape.
func layoutStage(v *refVerdict) bool {
	switch v.Error {
	case "InvalidOffset", "ValidationOverflow", "MisalignedSlice", "TensorInvalidInfo", "MetadataIncompleteBuffer":
		return true
	}
	return false
}

// headerBytes returns the N header bytes of a file whose prefix the
// reference accepted.
func headerBytes(data []byte) []byte {
	n := binary.LittleEndian.Uint64(data)
	return data[8 : 8+n]
}

// lenientForms lists the forms that the reference accepts and the format
// description does not, which Strict rejects (see its documentation), in a
// header that the reference parsed: whitespace before '{', padding after
// '}' with other whitespace than spaces, a tensor name or a metadata key
// given twice, "__metadata__": null, a tensor entry written as an array, a
// dtype written as an object, unknown fields in a tensor entry. It reads
// the header with encoding/json, which shares no code with either parser.
func lenientForms(hdr []byte) ([]string, error) {
	var forms []string
	add := func(f string) {
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	if len(hdr) > 0 && hdr[0] != '{' {
		add("whitespace before '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	delim := func(want json.Delim) (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		d, ok := tok.(json.Delim)
		return ok && d == want, nil
	}
	// skip consumes the rest of a value whose first token was tok.
	skip := func(tok json.Token) error {
		depth := 0
		for {
			if d, ok := tok.(json.Delim); ok {
				if d == '{' || d == '[' {
					depth++
				} else {
					depth--
				}
			}
			if depth == 0 {
				return nil
			}
			var err error
			if tok, err = dec.Token(); err != nil {
				return err
			}
		}
	}
	if ok, err := delim('{'); err != nil || !ok {
		return nil, fmt.Errorf("not an object: %v", err)
	}
	names := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		tok, err = dec.Token()
		if err != nil {
			return nil, err
		}
		if key == "__metadata__" {
			if tok == nil {
				add(`"__metadata__" is null`)
				continue
			}
			keys := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				if keys[k.(string)] {
					add("duplicate metadata key")
				}
				keys[k.(string)] = true
				if _, err := dec.Token(); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			continue
		}
		if names[key] {
			add("duplicate tensor name")
		}
		names[key] = true
		if tok == json.Delim('[') {
			add("tensor entry is an array")
			if err := skip(tok); err != nil {
				return nil, err
			}
			continue
		}
		for dec.More() {
			f, err := dec.Token()
			if err != nil {
				return nil, err
			}
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			switch f {
			case "dtype":
				if tok == json.Delim('{') {
					add("dtype is an object")
				}
			case "shape", "data_offsets":
			default:
				add("unknown field")
			}
			if err := skip(tok); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
	}
	if ok, err := delim('}'); err != nil || !ok {
		return nil, fmt.Errorf("unterminated object: %v", err)
	}
	if rest := hdr[dec.InputOffset():]; len(bytes.Trim(rest, " ")) > 0 {
		add("padded with other whitespace than spaces")
	}
	return forms, nil
}

// entryPoint reads one file one way.
type entryPoint struct {
	name string
	read func(path string, data []byte) (*safetensors.Reader, error)
}

var readers = []entryPoint{
	{"NewReader", func(_ string, data []byte) (*safetensors.Reader, error) { return safetensors.NewReader(data) }},
	{"Open", func(path string, _ []byte) (*safetensors.Reader, error) { return safetensors.Open(path) }},
	{"Open(ReadAll)", func(path string, _ []byte) (*safetensors.Reader, error) {
		return safetensors.Open(path, safetensors.ReadAll())
	}},
	{"NewReaderAt", func(_ string, data []byte) (*safetensors.Reader, error) {
		return safetensors.NewReaderAt(bytes.NewReader(data), int64(len(data)))
	}},
}

// sameHeader describes how h differs from the reference's reading, or
// returns "".
func sameHeader(h *safetensors.Header, v *refVerdict) string {
	if h.Len != v.HeaderLen {
		return fmt.Sprintf("header length %d, reference %d", h.Len, v.HeaderLen)
	}
	switch {
	case v.Metadata == nil && h.Metadata != nil:
		return fmt.Sprintf("metadata %q, reference null", h.Metadata)
	case v.Metadata != nil && h.Metadata == nil:
		return fmt.Sprintf("metadata null, reference %q", *v.Metadata)
	case v.Metadata != nil && !equalMaps(*v.Metadata, h.Metadata):
		return fmt.Sprintf("metadata %q, reference %q", h.Metadata, *v.Metadata)
	}
	got := make([]refTensor, len(h.Tensors))
	for i, ti := range h.Tensors {
		got[i] = refTensor{Name: ti.Name, DType: ti.DType.String(), Shape: ti.Shape, DataOffsets: ti.DataOffsets}
	}
	want := v.Tensors
	if len(got) != len(want) {
		return fmt.Sprintf("%d tensors %v, reference %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || g.DataOffsets != w.DataOffsets {
			return fmt.Sprintf("tensor %d is %+v, reference %+v", i, g, w)
		}
	}
	return ""
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sameTensors describes how the tensors r gives differ from the bytes of
// the file at the reference's offsets, or returns "".
func sameTensors(r *safetensors.Reader, data []byte, v *refVerdict) string {
	base := 8 + v.HeaderLen
	for _, ti := range v.Tensors {
		t, err := r.Tensor(ti.Name)
		if err != nil {
			return fmt.Sprintf("Tensor(%q): %v", ti.Name, err)
		}
		if want := data[base+ti.DataOffsets[0] : base+ti.DataOffsets[1]]; !bytes.Equal(t.Data, want) {
			return fmt.Sprintf("Tensor(%q) has other bytes than the file at %v", ti.Name, ti.DataOffsets)
		}
	}
	return ""
}

// verdictDiff describes how err differs from the reference's verdict, or
// returns "".
func verdictDiff(err error, v *refVerdict) string {
	switch {
	case v.OK && err != nil:
		return fmt.Sprintf("rejects (%v), reference accepts", err)
	case !v.OK && err == nil:
		return fmt.Sprintf("accepts, reference rejects: %s (%s)", v.Error, v.Message)
	case !v.OK:
		if got := variantOf(err); !slices.Contains(v.errors(), got) {
			return fmt.Sprintf("%s (%v), reference %s (%s)", got, err, strings.Join(v.errors(), " or "), v.Message)
		}
	}
	return ""
}

// compare reads the file at path, whose contents are data, through every
// entry point and returns how each differs from the reference's verdict v,
// and whether the header uses one of the forms Strict rejects.
func compare(path string, data []byte, v *refVerdict) (diffs []string, lenient bool) {
	add := func(entry, diff string) {
		if diff != "" {
			diffs = append(diffs, entry+": "+diff)
		}
	}
	for _, e := range readers {
		r, err := e.read(path, data)
		if d := verdictDiff(err, v); d != "" || !v.OK {
			add(e.name, d)
			continue
		}
		add(e.name, sameHeader(r.Header(), v))
		add(e.name, sameTensors(r, data, v))
		if err := r.Close(); err != nil {
			add(e.name, "Close: "+err.Error())
		}
	}

	// ReadHeader cannot see the file's length, so it accepts what the
	// reference rejects for that alone, but sees that the file is not as
	// long as the header says.
	h, err := safetensors.ReadHeader(bytes.NewReader(data))
	if !v.OK && v.Error == "MetadataIncompleteBuffer" && len(v.ErrorAnyOf) == 0 {
		if err != nil {
			add("ReadHeader", fmt.Sprintf("rejects (%v), reference rejects only for the data length", err))
		} else if end, carry := bits.Add64(h.DataOffset(), h.DataLen(), 0); carry == 0 && end == uint64(len(data)) {
			add("ReadHeader", fmt.Sprintf("the header covers the %d bytes of the file", len(data)))
		}
	} else if d := verdictDiff(err, v); d != "" {
		add("ReadHeader", d)
	} else if v.OK {
		add("ReadHeader", sameHeader(h, v))
	}

	// Strict: the reference's verdict, except that a header using one of
	// the lenient forms is rejected as ErrInvalidHeader, "(strict)".
	r, err := safetensors.NewReader(data, safetensors.Strict())
	var forms []string
	if v.OK || layoutStage(v) {
		var ferr error
		if forms, ferr = lenientForms(headerBytes(data)); ferr != nil {
			add("encoding/json", fmt.Sprintf("cannot read a header the reference parsed: %v", ferr))
		}
	}
	switch {
	case len(forms) > 0 && (err == nil || !strings.Contains(err.Error(), "(strict)") || variantOf(err) != "InvalidHeaderDeserialization"):
		add("Strict", fmt.Sprintf("%v, want a strict rejection of %s", err, strings.Join(forms, ", ")))
	case len(forms) > 0:
	case v.OK && err != nil:
		add("Strict", fmt.Sprintf("rejects (%v) a header with none of the lenient forms", err))
	case v.OK:
		add("Strict", sameHeader(r.Header(), v))
	default:
		add("Strict", verdictDiff(err, v))
	}
	return diffs, len(forms) > 0
}

// mismatch is a file on which the package and the reference differ.
type mismatch struct {
	name  string // where the file came from
	data  []byte
	v     refVerdict
	diffs []string
}

// report fails t with the mismatches, each file saved in a directory that
// outlives the test, and quoted when it is small.
func report(t *testing.T, mismatches []mismatch, total int) {
	t.Helper()
	if len(mismatches) == 0 {
		return
	}
	dir, err := os.MkdirTemp("", "safetensors-interop-mismatch-")
	require.NoError(t, err)
	for i, m := range mismatches {
		file := filepath.Join(dir, fmt.Sprintf("%05d.safetensors", i))
		require.NoError(t, os.WriteFile(file, m.data, 0o644))
		if i >= 30 {
			continue
		}
		quoted := fmt.Sprintf("%q", m.data)
		if len(m.data) > 600 {
			quoted = fmt.Sprintf("%q... (%d bytes)", m.data[:600], len(m.data))
		}
		ref := "OK"
		if !m.v.OK {
			ref = strings.Join(m.v.errors(), " or ") + ": " + m.v.Message
		}
		t.Errorf("%s (%s): reference %s\n  %s\n  %s", file, m.name, ref, strings.Join(m.diffs, "\n  "), quoted)
	}
	t.Errorf("%d of %d files differ from the reference; all are in %s", len(mismatches), total, dir)
}

// compareWithOracle writes the files, asks the oracle for their verdicts,
// and compares every entry point with them.
func compareWithOracle(t *testing.T, names []string, files [][]byte) {
	t.Helper()
	paths := writeFiles(t, t.TempDir(), files)
	verdicts := checkFiles(t, paths)
	var mismatches []mismatch
	tally := map[string]int{}
	for i, v := range verdicts {
		if v.OK {
			tally["OK"]++
		} else {
			tally[v.Error]++
		}
		diffs, lenient := compare(paths[i], files[i], &v)
		if len(diffs) > 0 {
			mismatches = append(mismatches, mismatch{names[i], files[i], v, diffs})
		}
		if lenient {
			tally["Strict rejects"]++
		}
	}
	t.Logf("%d files, %d differ; the reference's verdicts: %v", len(files), len(mismatches), tally)
	report(t, mismatches, len(files))
}

// TestReferenceCorpus compares every entry point with the reference on the
// whole conformance corpus, and the oracle with the corpus's own verdicts.
func TestReferenceCorpus(t *testing.T) {
	oracle(t)
	paths, files := corpus(t)
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimPrefix(filepath.ToSlash(p), corpusDir+"/")
	}
	compareWithOracle(t, names, files)

	// The oracle gives the verdicts the corpus was frozen with.
	raw, err := os.ReadFile(filepath.Join(corpusDir, "expected.json"))
	require.NoError(t, err)
	var expected map[string]struct {
		OK         bool     `json:"ok"`
		Error      *string  `json:"error"`
		ErrorAnyOf []string `json:"error_any_of"`
		ByteExact  bool     `json:"byte_exact"`
	}
	require.NoError(t, json.Unmarshal(raw, &expected))
	for i, v := range checkFiles(t, paths) {
		want := expected[names[i]]
		if want.OK || v.OK {
			require.Equal(t, want.OK, v.OK, names[i])
			continue
		}
		allowed := want.ErrorAnyOf
		if want.Error != nil {
			allowed = append(allowed, *want.Error)
		}
		require.Subset(t, allowed, v.errors(), names[i])
	}

	// The oracle's writer gives the bytes of the files the reference wrote.
	dir := t.TempDir()
	var pairs, exact []string
	for i, name := range names {
		if expected[name].ByteExact {
			pairs = append(pairs, paths[i]+"\t"+filepath.Join(dir, fmt.Sprintf("%03d.safetensors", i)))
			exact = append(exact, paths[i])
		}
	}
	require.NotEmpty(t, pairs)
	for i, w := range runOracle(t, "serialize", pairs) {
		require.True(t, w.OK, "%s: %s", exact[i], w.Message)
		want, err := os.ReadFile(exact[i])
		require.NoError(t, err)
		got, err := os.ReadFile(strings.Split(pairs[i], "\t")[1])
		require.NoError(t, err)
		require.Equal(t, want, got, exact[i])
	}
}
