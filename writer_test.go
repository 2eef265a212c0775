package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func f32bytes(vs ...byte) []byte { return vs }

// TestWriteReference checks Write against the exact bytes in the reference's
// own tests (test_serialization, test_empty, test_serialization_forced_alignement).
func TestWriteReference(t *testing.T) {
	data := f32bytes(0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64)
	tests := []struct {
		name     string
		tensors  []Tensor
		metadata map[string]string
		want     []byte
	}{
		{"serialization", []Tensor{{Name: "attn.0", DType: F32, Shape: []uint64{1, 2, 3}, Data: data}}, nil,
			append([]byte{64, 0, 0, 0, 0, 0, 0, 0}, append([]byte(`{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`), data...)...)},
		{"empty", nil, nil, []byte{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}},
		{"empty_with_metadata", nil, map[string]string{"framework": "pt"},
			append([]byte{40, 0, 0, 0, 0, 0, 0, 0}, `{"__metadata__":{"framework":"pt"}}     `...)},
		{"forced_alignment", []Tensor{{Name: "attn0", DType: F32, Shape: []uint64{1, 1, 2, 3}, Data: data}}, nil,
			append([]byte{72, 0, 0, 0, 0, 0, 0, 0}, append([]byte(`{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `), data...)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := writeBytes(tt.tensors, tt.metadata)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestWriteOrder(t *testing.T) {
	var tensors []Tensor
	for i := len(refDTypes) - 1; i >= 0; i-- {
		d, err := ParseDType(refDTypes[i].name)
		require.NoError(t, err)
		for _, name := range []string{"y", "x"} {
			tensors = append(tensors, Tensor{Name: name + refDTypes[i].name, DType: d, Shape: []uint64{4}, Data: make([]byte, 4*d.Bits()/8)})
		}
	}
	// Reverse it, so that the input is in no useful order.
	for i, j := 0, len(tensors)-1; i < j; i, j = i+1, j-1 {
		tensors[i], tensors[j] = tensors[j], tensors[i]
	}
	out, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	r, err := NewReader(out)
	require.NoError(t, err)
	var got []string
	for _, ti := range r.Header().Tensors {
		got = append(got, ti.Name)
	}
	// Descending dtype, then name: U64 first, BOOL last, x before y.
	var want []string
	for i := len(refDTypes) - 1; i >= 0; i-- {
		want = append(want, "x"+refDTypes[i].name, "y"+refDTypes[i].name)
	}
	assert.Equal(t, want, got)
	assert.Zero(t, r.Header().DataOffset()%8)
}

// TestWriteEscapes checks the string escapes of the reference writer
// (serde_json) and reads every name back through this package and through
// encoding/json.
func TestWriteEscapes(t *testing.T) {
	cases := map[string]string{
		"\"": `\"`, "\\": `\\`, "\n": `\n`, "\r": `\r`, "\t": `\t`, "\b": `\b`, "\f": `\f`,
		"\x00": `\u0000`, "\x01": `\u0001`, "\x1f": `\u001f`, "\x0b": `\u000b`, "\x1b": `\u001b`,
		"\x7f": "\x7f", "/": "/", "\u2028": "\u2028", "é": "é", "🚀": "🚀", "a": "a",
	}
	for in, want := range cases {
		assert.Equal(t, `"`+want+`"`, string(appendString(nil, in)), "%q", in)
	}

	var tensors []Tensor
	for c := range 128 {
		tensors = append(tensors, Tensor{Name: "n" + string(rune(c)), DType: U8, Shape: []uint64{0}, Data: nil})
	}
	out, err := writeBytes(tensors, map[string]string{"k\x00\"": "v\n\\"})
	require.NoError(t, err)
	r, err := NewReader(out)
	require.NoError(t, err)
	assert.Len(t, r.Names(), 128)
	assert.Equal(t, map[string]string{"k\x00\"": "v\n\\"}, r.Metadata())

	var generic map[string]any
	require.NoError(t, json.Unmarshal(out[prefixLen:r.Header().DataOffset()], &generic))
	for _, tensor := range tensors {
		assert.Contains(t, generic, tensor.Name)
	}
}

func TestWriteErrors(t *testing.T) {
	ok := Tensor{Name: "ok", DType: U8, Shape: []uint64{1}, Data: []byte{1}}
	// Nine tensors of 2^61-1 bytes each, the most a shape allows, need a
	// data section larger than 2^64 bytes.
	var huge []Tensor
	for i := range 9 {
		huge = append(huge, Tensor{Name: "big" + string(rune('0'+i)), DType: U8, Shape: []uint64{1<<61 - 1}})
	}
	tests := []struct {
		name     string
		tensors  []Tensor
		metadata map[string]string
		want     error
		tensor   string
		detail   string
	}{
		{"duplicate_name", []Tensor{ok, ok}, nil, ErrInvalidHeader, "ok", "duplicate tensor name"},
		{"duplicate_name_other_dtype", []Tensor{ok, {Name: "ok", DType: I8, Shape: []uint64{1}, Data: []byte{1}}}, nil, ErrInvalidHeader, "ok", "duplicate"},
		{"reserved_name", []Tensor{ok, {Name: "__metadata__", DType: U8, Shape: []uint64{0}}}, nil, ErrInvalidHeader, "__metadata__", "reserved"},
		{"name_not_utf8", []Tensor{{Name: "a\xffb", DType: U8, Shape: []uint64{0}}}, nil, ErrHeaderNotUTF8, "a\xffb", "not valid UTF-8"},
		{"metadata_key_not_utf8", []Tensor{ok}, map[string]string{"\xff": "v"}, ErrHeaderNotUTF8, "", "metadata key"},
		{"metadata_value_not_utf8", []Tensor{ok}, map[string]string{"k": "\xfe"}, ErrHeaderNotUTF8, "", "metadata value"},
		{"no_dtype", []Tensor{{Name: "z", Shape: []uint64{1}, Data: []byte{1}}}, nil, ErrUnknownDType, "z", "DType(0)"},
		{"size_mismatch", []Tensor{{Name: "s", DType: F32, Shape: []uint64{2, 2}, Data: make([]byte, 15)}}, nil, ErrSizeMismatch, "s", "len(Data) is 15, shape [2 2] of F32 needs 16"},
		{"shape_overflow", []Tensor{{Name: "o", DType: U8, Shape: []uint64{1 << 32, 1 << 32}}}, nil, ErrShapeOverflow, "o", "2^64-1 elements"},
		{"misaligned", []Tensor{{Name: "m", DType: F6_E2M3, Shape: []uint64{3}, Data: make([]byte, 2)}}, nil, ErrMisalignedSlice, "m", "18 bits"},
		{"data_overflow", huge, nil, ErrShapeOverflow, "big8", "data section"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tt.tensors, tt.metadata)
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.detail)
			assert.Zero(t, buf.Len(), "nothing is written")
			var te *TensorError
			if tt.tensor != "" {
				require.ErrorAs(t, err, &te)
				assert.Equal(t, tt.tensor, te.Name)
			} else {
				assert.False(t, errors.As(err, &te))
			}

			dir := t.TempDir()
			path := filepath.Join(dir, "out.safetensors")
			require.ErrorIs(t, WriteFile(path, tt.tensors, tt.metadata), tt.want)
			assertDir(t, dir)
		})
	}
}

// TestWriteEmptyMetadata checks the case where the reference writes invalid
// JSON: no tensors and empty metadata.
func TestWriteEmptyMetadata(t *testing.T) {
	out, err := writeBytes(nil, map[string]string{})
	require.NoError(t, err)
	assert.Equal(t, append([]byte{24, 0, 0, 0, 0, 0, 0, 0}, `{"__metadata__":{}}     `...), out)
	r, err := NewReader(out)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{}, r.Metadata())
}

func TestWriteHeaderTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100 MB header")
	}
	name := strings.Repeat("n", 1<<20)
	tensors := make([]Tensor, 96)
	for i := range tensors {
		tensors[i] = Tensor{Name: name + string(rune('A'+i%26)) + string(rune('A'+i/26)), DType: U8, Shape: []uint64{0}}
	}
	var buf bytes.Buffer
	err := Write(&buf, tensors, nil)
	require.ErrorIs(t, err, ErrHeaderTooLarge)
	assert.Zero(t, buf.Len())
}

// failingWriter fails once n bytes have been written.
type failingWriter struct {
	n   int
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, w.err
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteWriterError(t *testing.T) {
	boom := errors.New("disk full")
	tensors := []Tensor{{Name: "w", DType: U8, Shape: []uint64{1 << 20}, Data: make([]byte, 1<<20)}}
	for _, n := range []int{0, 7, 100, 70_000, 1 << 19} {
		err := Write(&failingWriter{n: n, err: boom}, tensors, nil)
		assert.ErrorIs(t, err, boom, "after %d bytes", n)
	}
}

// assertDir checks that dir holds exactly the given files, so that no
// temporary file was left behind.
func assertDir(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	assert.ElementsMatch(t, names, got)
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	tensors := []Tensor{{Name: "w", DType: BF16, Shape: []uint64{2, 2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}
	require.NoError(t, WriteFile(path, tensors, map[string]string{"format": "pt"}))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := writeBytes(tensors, map[string]string{"format": "pt"})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assertDir(t, dir, "model.safetensors")

	// Overwriting replaces the file.
	tensors[0].Data = []byte{8, 7, 6, 5, 4, 3, 2, 1}
	require.NoError(t, WriteFile(path, tensors, nil))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	r, err := NewReader(got)
	require.NoError(t, err)
	w, err := r.Tensor("w")
	require.NoError(t, err)
	assert.Equal(t, []byte{8, 7, 6, 5, 4, 3, 2, 1}, w.Data)
	assertDir(t, dir, "model.safetensors")

	// A directory that does not exist.
	err = WriteFile(filepath.Join(dir, "missing", "x.safetensors"), tensors, nil)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// fakeFile is a temporary file whose operations can fail.
type fakeFile struct {
	*os.File
	w                 io.Writer
	syncErr, closeErr error
}

func (f *fakeFile) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f *fakeFile) Sync() error {
	if f.syncErr != nil {
		return f.syncErr
	}
	return f.File.Sync()
}
func (f *fakeFile) Close() error {
	err := f.File.Close()
	if f.closeErr != nil {
		return f.closeErr
	}
	return err
}

// wrapTemp makes the temporary files of WriteFile and CreateFile go through
// wrap, for the rest of the test.
func wrapTemp(t *testing.T, wrap func(*os.File) (atomicfile.Temp, error)) {
	restore := atomicfile.SetHooks(atomicfile.Hooks{CreateTemp: func(name string) (atomicfile.Temp, error) {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err != nil {
			return nil, err
		}
		return wrap(f)
	}})
	t.Cleanup(restore)
}

// TestWriteFileFailures simulates a disk that fails at each step and checks
// that the existing file is untouched and no temporary file is left.
func TestWriteFileFailures(t *testing.T) {
	boom := errors.New("injected failure")
	tensors := []Tensor{{Name: "w", DType: U8, Shape: []uint64{200_000}, Data: bytes.Repeat([]byte{7}, 200_000)}}
	for _, tt := range []struct {
		name string
		make func(f *os.File) (atomicfile.Temp, error)
	}{
		{"create", func(f *os.File) (atomicfile.Temp, error) {
			f.Close()
			os.Remove(f.Name())
			return nil, &fs.PathError{Op: "open", Path: f.Name(), Err: fs.ErrPermission}
		}},
		{"write_header", func(f *os.File) (atomicfile.Temp, error) {
			return &fakeFile{File: f, w: &failingWriter{n: 3, err: boom}}, nil
		}},
		{"write_data", func(f *os.File) (atomicfile.Temp, error) {
			return &fakeFile{File: f, w: io.MultiWriter(f, &failingWriter{n: 100_000, err: boom})}, nil
		}},
		{"sync", func(f *os.File) (atomicfile.Temp, error) { return &fakeFile{File: f, w: f, syncErr: boom}, nil }},
		{"close", func(f *os.File) (atomicfile.Temp, error) { return &fakeFile{File: f, w: f, closeErr: boom}, nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "model.safetensors")
			require.NoError(t, os.WriteFile(path, []byte("old contents"), 0o644))

			wrapTemp(t, tt.make)
			err := WriteFile(path, tensors, nil)
			require.Error(t, err)
			if tt.name == "create" {
				assert.ErrorIs(t, err, fs.ErrPermission)
			} else {
				assert.ErrorIs(t, err, boom)
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "old contents", string(got))
			assertDir(t, dir, "model.safetensors")
		})
	}
}

func TestSpecOrder(t *testing.T) {
	specs := []TensorSpec{
		{Name: "b", DType: U8, Shape: []uint64{1}},
		{Name: "a", DType: U8, Shape: []uint64{1}},
		{Name: "c", DType: F64, Shape: []uint64{1}}, // 8-byte dtypes come first
	}
	w, err := NewWriter(io.Discard, specs, nil)
	require.NoError(t, err)
	order := w.SpecOrder()
	require.Len(t, order, 3)
	for k, info := range w.Header().Tensors {
		assert.Equal(t, specs[order[k]].Name, info.Name)
	}
	assert.Equal(t, []int{2, 1, 0}, order)
}
