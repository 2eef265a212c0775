package safetensors

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The conformance corpus in testdata/conformance holds files with the verdict
// of the reference implementation for each; see its README.

const corpusDir = "testdata/conformance"

// verdict is one entry of expected.json.
type verdict struct {
	OK         bool               `json:"ok"`
	Error      *string            `json:"error"`
	ErrorAnyOf []string           `json:"error_any_of"`
	Size       int                `json:"size"`
	SHA256     string             `json:"sha256"`
	HeaderLen  uint64             `json:"header_len"`
	Metadata   *map[string]string `json:"metadata"`
	Tensors    []struct {
		Name        string    `json:"name"`
		DType       string    `json:"dtype"`
		Shape       []uint64  `json:"shape"`
		DataOffsets [2]uint64 `json:"data_offsets"`
		SHA256      string    `json:"sha256"`
	} `json:"tensors"`
	ByteExact   *bool  `json:"byte_exact"`
	Description string `json:"description"`
}

// variants maps the reference's error variants to the sentinels.
var variants = map[string]error{
	"HeaderTooSmall":               ErrHeaderTooSmall,
	"HeaderTooLarge":               ErrHeaderTooLarge,
	"InvalidHeaderLength":          ErrInvalidHeaderLength,
	"InvalidHeader":                ErrHeaderNotUTF8,
	"InvalidHeaderDeserialization": ErrInvalidHeader,
	"InvalidOffset":                ErrInvalidOffset,
	"ValidationOverflow":           ErrShapeOverflow,
	"MisalignedSlice":              ErrMisalignedSlice,
	"TensorInvalidInfo":            ErrSizeMismatch,
	"MetadataIncompleteBuffer":     ErrIncompleteBuffer,
	"TensorNotFound":               ErrTensorNotFound,
}

type corpusFile struct {
	path string // relative to corpusDir
	data []byte
	want verdict
}

// loadCorpus reads every file of the corpus with its verdict, checking that
// the corpus is whole: every file has a verdict and every verdict a file.
func loadCorpus(t testing.TB) []corpusFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(corpusDir, "expected.json"))
	require.NoError(t, err)
	var expected map[string]verdict
	require.NoError(t, json.Unmarshal(raw, &expected))

	var files []corpusFile
	for _, sub := range []string{"valid", "invalid"} {
		names, err := filepath.Glob(filepath.Join(corpusDir, sub, "*.safetensors"))
		require.NoError(t, err)
		for _, name := range names {
			rel := sub + "/" + filepath.Base(name)
			want, ok := expected[rel]
			require.True(t, ok, "%s has no verdict", rel)
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			sum := sha256.Sum256(data)
			require.Equal(t, want.Size, len(data), "%s: size", rel)
			require.Equal(t, want.SHA256, hex.EncodeToString(sum[:]), "%s: sha256", rel)
			files = append(files, corpusFile{rel, data, want})
		}
	}
	require.Len(t, files, len(expected), "files in expected.json missing from the corpus")
	require.Len(t, files, 234)
	return files
}

// wantErrors returns the sentinels the verdict allows.
func (v verdict) wantErrors(t testing.TB) []error {
	var names []string
	if v.Error != nil {
		names = append(names, *v.Error)
	}
	names = append(names, v.ErrorAnyOf...)
	require.NotEmpty(t, names, "a rejected file without an error")
	var errs []error
	for _, n := range names {
		e, ok := variants[n]
		require.True(t, ok, "unknown variant %s", n)
		errs = append(errs, e)
	}
	return errs
}

// matching returns the variant sentinels err matches.
func matching(err error) []error {
	var m []error
	for _, s := range variants {
		if errors.Is(err, s) {
			m = append(m, s)
		}
	}
	return m
}

// checkVerdict checks that err is the verdict's error and no other.
func checkVerdict(t *testing.T, want verdict, err error) {
	t.Helper()
	if want.OK {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	m := matching(err)
	require.Len(t, m, 1, "error %q matches %d sentinels", err, len(m))
	assert.Contains(t, want.wantErrors(t), m[0], "got %q", err)
}

// checkAccepted checks a Reader against an accepted file's verdict.
func checkAccepted(t *testing.T, want verdict, r *Reader) {
	t.Helper()
	h := r.Header()
	assert.Equal(t, want.HeaderLen, h.Len)
	if want.Metadata == nil {
		assert.Nil(t, r.Metadata())
	} else {
		md := r.Metadata()
		require.NotNil(t, md)
		assert.Equal(t, *want.Metadata, md)
	}
	require.Len(t, h.Tensors, len(want.Tensors))
	var names []string
	for i, wt := range want.Tensors {
		got := h.Tensors[i]
		assert.Equal(t, wt.Name, got.Name)
		assert.Equal(t, wt.DType, got.DType.String())
		assert.Equal(t, wt.Shape, got.Shape)
		assert.NotNil(t, got.Shape)
		assert.Equal(t, wt.DataOffsets, got.DataOffsets)
		tensor, err := r.Tensor(wt.Name)
		require.NoError(t, err)
		sum := sha256.Sum256(tensor.Data)
		assert.Equal(t, wt.SHA256, hex.EncodeToString(sum[:]), "tensor %q bytes", wt.Name)
		assert.Equal(t, wt.Shape, tensor.Shape)
		assert.Equal(t, got.DType, tensor.DType)
		names = append(names, wt.Name)
	}
	sort.Strings(names)
	if names == nil {
		names = []string{}
	}
	assert.Equal(t, names, r.Names())
	assert.Equal(t, want.HeaderLen+prefixLen+h.DataLen(), uint64(want.Size))
}

// openers are the ways to get a Reader for a corpus file.
var openers = []struct {
	name string
	open func(path string, data []byte) (*Reader, error)
}{
	{"NewReader", func(_ string, data []byte) (*Reader, error) { return NewReader(data) }},
	{"Open", func(path string, _ []byte) (*Reader, error) { return Open(path) }},
	{"Open_ReadAll", func(path string, _ []byte) (*Reader, error) { return Open(path, ReadAll()) }},
	{"NewReaderAt", func(_ string, data []byte) (*Reader, error) {
		return NewReaderAt(bytes.NewReader(data), int64(len(data)))
	}},
}

// TestConformance checks every corpus file through every way of reading it:
// the same verdict, tensors and metadata.
func TestConformance(t *testing.T) {
	files := loadCorpus(t)
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			for _, f := range files {
				t.Run(f.path, func(t *testing.T) {
					r, err := o.open(filepath.Join(corpusDir, f.path), f.data)
					checkVerdict(t, f.want, err)
					if f.want.OK {
						checkAccepted(t, f.want, r)
						require.NoError(t, r.Close())
						require.NoError(t, r.Close())
						if len(f.want.Tensors) > 0 {
							_, err := r.Tensor(f.want.Tensors[0].Name)
							assert.ErrorIs(t, err, ErrClosed)
						}
					}
				})
			}
		})
	}
}

// TestConformanceReadHeader checks that ReadHeader gives the verdict of every
// file except the length of the data section, which it cannot see.
func TestConformanceReadHeader(t *testing.T) {
	for _, f := range loadCorpus(t) {
		t.Run(f.path, func(t *testing.T) {
			h, err := ReadHeader(bytes.NewReader(f.data))
			want := f.want
			if !want.OK && slices.Contains(want.wantErrors(t), ErrIncompleteBuffer) && len(want.wantErrors(t)) == 1 {
				require.NoError(t, err)
				assert.NotEqual(t, uint64(len(f.data)), h.DataOffset()+h.DataLen())
				return
			}
			checkVerdict(t, want, err)
			if want.OK {
				r, err := NewReader(f.data)
				require.NoError(t, err)
				assert.Equal(t, r.Header(), h)
			}
		})
	}
}

// strictRejects lists the corpus files that the reference accepts and Strict
// rejects, with the rule each breaks.
var strictRejects = map[string]string{
	"invalid/start_space.safetensors":             "whitespace before '{'",
	"invalid/start_space_empty.safetensors":       "whitespace before '{'",
	"invalid/pad_newline.safetensors":             "padded with other whitespace than spaces",
	"invalid/pad_tab.safetensors":                 "padded with other whitespace than spaces",
	"invalid/pad_mixed_ws.safetensors":            "padded with other whitespace than spaces",
	"invalid/dup_tensor_identical.safetensors":    "duplicate tensor name",
	"invalid/dup_metadata_inner_key.safetensors":  "duplicate metadata key",
	"invalid/meta_null.safetensors":               `"__metadata__" is null`,
	"invalid/tensor_value_array_form.safetensors": "tensor entry is an array",
	"invalid/dtype_map_form.safetensors":          "dtype is an object",
	"invalid/field_extra_scalar.safetensors":      "unknown field",
	"invalid/field_extra_complex.safetensors":     "unknown field",
	"invalid/depth_arrays_total_126.safetensors":  "unknown field",
	"invalid/depth_arrays_total_127.safetensors":  "unknown field",
}

func TestConformanceStrict(t *testing.T) {
	for _, f := range loadCorpus(t) {
		t.Run(f.path, func(t *testing.T) {
			r, err := NewReader(f.data, Strict())
			rule, rejects := strictRejects[f.path]
			switch {
			case !f.want.OK:
				// Strict may fail earlier, in the header, but never accepts.
				require.Error(t, err)
				if !errors.Is(err, ErrInvalidHeader) {
					checkVerdict(t, f.want, err)
				}
			case rejects && rule != "":
				require.ErrorIs(t, err, ErrInvalidHeader)
				assert.Contains(t, err.Error(), rule)
				assert.Contains(t, err.Error(), "(strict)")
			default:
				require.NoError(t, err)
				checkAccepted(t, f.want, r)
			}
		})
	}
}

// TestConformanceWrite checks that Write of what was read gives the file back:
// byte for byte where the reference writer is deterministic, and otherwise
// with only the order of the metadata keys differing.
func TestConformanceWrite(t *testing.T) {
	for _, f := range loadCorpus(t) {
		if !f.want.OK {
			continue
		}
		t.Run(f.path, func(t *testing.T) {
			r, err := NewReader(f.data)
			require.NoError(t, err)
			tensors, err := r.Tensors()
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, tensors, r.Metadata()))
			out := buf.Bytes()

			// Whatever was read, the written file reads back the same.
			back, err := NewReader(out)
			require.NoError(t, err)
			assert.Equal(t, r.Metadata(), back.Metadata())
			assert.Equal(t, r.Names(), back.Names())
			for _, name := range r.Names() {
				a, err := r.Tensor(name)
				require.NoError(t, err)
				b, err := back.Tensor(name)
				require.NoError(t, err)
				assert.Equal(t, a, b)
			}

			if f.want.ByteExact == nil {
				return // not written by the reference writer
			}
			if *f.want.ByteExact {
				require.Equal(t, f.data, out)
				return
			}
			// Only the metadata's key order may differ: the files have the
			// same size and data, and the same header once the metadata
			// object is cut out.
			require.Equal(t, len(f.data), len(out))
			n := int(r.Header().DataOffset())
			assert.Equal(t, f.data[n:], out[n:])
			assert.Equal(t, cutMetadata(t, f.data[:n]), cutMetadata(t, out[:n]))
		})
	}
}

// cutMetadata returns the prefix and header with the "__metadata__" object
// (which the reference writes first) removed.
func cutMetadata(t *testing.T, hdr []byte) []byte {
	const key = `{"__metadata__":{`
	require.True(t, bytes.HasPrefix(hdr[prefixLen:], []byte(key)), "no metadata first in %q", hdr)
	end := bytes.IndexByte(hdr[prefixLen+len(key):], '}')
	// Metadata strings in the corpus do not contain '}'.
	require.GreaterOrEqual(t, end, 0)
	return slices.Concat(hdr[:prefixLen+1], hdr[prefixLen+len(key)+end+1:])
}
