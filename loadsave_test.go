package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadSave(t *testing.T) {
	const model = "testdata/tiny-llama.safetensors"
	tensors, meta, err := Load(model)
	require.NoError(t, err)
	r, err := Open(model)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, r.Metadata(), meta)
	require.Len(t, tensors, len(r.Names()))
	for _, name := range r.Names() {
		want, err := r.Tensor(name)
		require.NoError(t, err)
		assert.Equal(t, want, tensors[name], name)
	}

	// Save writes the file the reference writes: the same bytes as the
	// original, which the reference's layout made.
	out := filepath.Join(t.TempDir(), "out.safetensors")
	require.NoError(t, Save(out, tensors, meta))
	orig, err := os.ReadFile(model)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(orig, got), "Save(Load(f)) is f")

	// The loaded tensors are the caller's: changing them changes no file,
	// and they outlive everything Load opened.
	for _, tn := range tensors {
		clear(tn.Data)
	}
	again, _, err := Load(model)
	require.NoError(t, err)
	for name, tn := range again {
		want, _ := r.Tensor(name)
		assert.Equal(t, want.Data, tn.Data)
	}

	// Names from the keys; a Name that disagrees is an error.
	require.NoError(t, Save(out, map[string]Tensor{"a": {DType: U8, Shape: []uint64{2}, Data: []byte{1, 2}}}, nil))
	loaded, meta, err := Load(out)
	require.NoError(t, err)
	assert.Nil(t, meta)
	assert.Equal(t, Tensor{Name: "a", DType: U8, Shape: []uint64{2}, Data: []byte{1, 2}}, loaded["a"])
	err = Save(out, map[string]Tensor{"a": {Name: "b", DType: U8, Shape: []uint64{1}, Data: []byte{1}}}, nil)
	require.ErrorIs(t, err, ErrInvalidHeader)
	assert.Contains(t, err.Error(), `"b"`)

	_, _, err = Load(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(out, []byte("short"), 0o644))
	_, _, err = Load(out)
	require.ErrorIs(t, err, ErrHeaderTooSmall)
}
