package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTensorDigestVectors checks Tensor.Digest against digests computed
// from the definition by testdata/digests/vectors.py, with Python's hashlib.
func TestTensorDigestVectors(t *testing.T) {
	for _, c := range []struct {
		t    Tensor
		want string
	}{
		{Tensor{"w", F32, []uint64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 8}}, "bedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa"},
		{Tensor{"emb.weight", BF16, []uint64{2, 3}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}, "844a5303c433c8d44c00bf1c27c4ec56fcff358ddeeb8decf2b73f4b7728b162"},
		{Tensor{"s", I8, nil, []byte{0x7f}}, "29e49b1c32337e0952e70c23bed07072527f4d19cfd510f9ae4c5984c6a8f7de"},
		{Tensor{"", F64, []uint64{0, 4}, nil}, "fd8eb7fd1060d480ec89db754cba1ed2951332e02717b6f3c450fd36ca66c4a8"},
		{Tensor{"é\"/x", U8, []uint64{3}, []byte("abc")}, "90eed7b33b6191136d04cd49a31fa4078948ac24b6ba3a8337b9fa327a8e2ccb"},
	} {
		d := c.t.Digest()
		assert.Equal(t, c.want, d.String(), "%s", c.t.Name)
		p, err := ParseTensorDigest(c.want)
		require.NoError(t, err)
		assert.Equal(t, d, p)
	}
}

// TestTensorDigestFields checks that every field counts, and that fields
// cannot be traded for one another: a name ending where a dtype starts, a
// shape [2, 3] against [6] or [3, 2], the same bytes in another dtype.
func TestTensorDigestFields(t *testing.T) {
	data := make([]byte, 24)
	for i := range data {
		data[i] = byte(i)
	}
	base := Tensor{"a", F32, []uint64{2, 3}, data}
	variants := []Tensor{
		base,
		{"b", F32, []uint64{2, 3}, data},
		{"aF", F32, []uint64{2, 3}, data},
		{"a", I32, []uint64{2, 3}, data},
		{"a", U32, []uint64{2, 3}, data},
		{"a", F32, []uint64{3, 2}, data},
		{"a", F32, []uint64{6}, data},
		{"a", F32, []uint64{1, 6}, data},
		{"a", F16, []uint64{2, 6}, data},
		{"a", F32, []uint64{2, 3}, append(bytes.Clone(data[:23]), 99)},
		{"a", F32, []uint64{}, data[:4]},
		{"a", F32, []uint64{1}, data[:4]},
	}
	seen := map[TensorDigest]int{}
	for i, v := range variants {
		d := v.Digest()
		if j, ok := seen[d]; ok {
			t.Errorf("variants %d and %d have the same digest %s", j, i, d)
		}
		seen[d] = i
	}
	// A nil shape is a scalar, as an empty one is.
	assert.Equal(t, Tensor{"a", F32, nil, data[:4]}.Digest(), variants[10].Digest())
}

// TestTensorHashStreaming checks that a TensorHash fed in pieces, and
// again after Reset, gives the digest of the whole tensor.
func TestTensorHashStreaming(t *testing.T) {
	data := make([]byte, 100_003)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ten := Tensor{"x.weight", U8, []uint64{100_003}, data}
	want := ten.Digest()
	h := NewTensorHash(ten.Name, ten.DType, ten.Shape)
	h.Write([]byte("not the tensor"))
	h.Reset()
	for p := data; len(p) > 0; {
		n := min(len(p), 1+len(p)/3)
		h.Write(p[:n])
		p = p[n:]
	}
	assert.Equal(t, want, h.Digest())
	assert.Equal(t, want[:], h.Sum(nil))
	assert.Equal(t, 32, h.Size())
	assert.Equal(t, 64, h.BlockSize())
}

func TestParseTensorDigest(t *testing.T) {
	d, err := ParseTensorDigest("BEDD33715B7F8C156017601F0EAE5F89489120AC80B90F6F28C425D8E6ABAFAA")
	require.NoError(t, err)
	assert.Equal(t, "bedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa", d.String())
	for _, bad := range []string{"", "bedd", "sha256:bedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa", "zedd33715b7f8c156017601f0eae5f89489120ac80b90f6f28c425d8e6abafaa"} {
		_, err := ParseTensorDigest(bad)
		assert.Error(t, err, "%q", bad)
	}
	var u TensorDigest
	require.NoError(t, u.UnmarshalText([]byte(d.String())))
	assert.Equal(t, d, u)
	assert.Error(t, u.UnmarshalText([]byte("x")))
	txt, err := d.MarshalText()
	require.NoError(t, err)
	assert.Equal(t, d.String(), string(txt))
}

// TestDataSectionHeaderBytes checks that a DataSection's HeaderBytes and
// Data, up to Size, are the file's bytes, for every kind of Reader.
func TestDataSectionHeaderBytes(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, []Tensor{
		{"a", F32, []uint64{3}, make([]byte, 12)},
		{"b", U8, []uint64{5}, []byte("hello")},
	}, map[string]string{"k": "v"}, Alignment(8)))
	file := buf.Bytes()
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, os.WriteFile(path, file, 0o644))
	open := map[string]func() (*Reader, error){
		"NewReader":   func() (*Reader, error) { return NewReader(file) },
		"NewReaderAt": func() (*Reader, error) { return NewReaderAt(bytes.NewReader(file), int64(len(file))) },
		"Open":        func() (*Reader, error) { return Open(path) },
		"ReadAll":     func() (*Reader, error) { return Open(path, ReadAll()) },
	}
	for name, f := range open {
		r, err := f()
		require.NoError(t, err, name)
		ds, err := r.DataSections()
		require.NoError(t, err, name)
		require.Len(t, ds, 1)
		s := ds[0]
		require.Equal(t, int64(len(file)), s.Size, name)
		got := bytes.Clone(s.HeaderBytes)
		rest := make([]byte, s.Size-int64(len(s.HeaderBytes)))
		_, err = s.Data.ReadAt(rest, 0)
		require.NoError(t, err, name)
		assert.Equal(t, file, append(got, rest...), name)
		require.NoError(t, r.Close())
	}
}
