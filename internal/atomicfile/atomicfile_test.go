package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTempName(t *testing.T) {
	path := filepath.Join("dir", "model.safetensors")
	a, b := TempName(path), TempName(path)
	assert.NotEqual(t, a, b)
	for _, name := range []string{a, b} {
		assert.Equal(t, "dir", filepath.Dir(name))
		ok, err := filepath.Match(".model.safetensors.tmp*", filepath.Base(name))
		require.NoError(t, err)
		assert.True(t, ok, name)
	}
}

func TestCreateTemp(t *testing.T) {
	dir := t.TempDir()
	f, err := CreateTemp(dir, ".x")
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, dir, filepath.Dir(f.Name()))
	assert.True(t, strings.HasPrefix(filepath.Base(f.Name()), ".x.tmp"), f.Name())
	_, err = f.WriteString("abc")
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		info, err := f.Stat()
		require.NoError(t, err)
		assert.NotZero(t, info.Mode().Perm()&0o044, "not 0600 as os.CreateTemp makes it: %v", info.Mode())
	}
	_, err = CreateTemp(filepath.Join(dir, "missing"), ".x")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	require.NoError(t, WriteFile(path, write("one")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "one", string(got))

	// A private file stays private.
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, WriteFile(path, write("two")))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(got))
	info, err := os.Stat(path)
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	}

	// A failing write leaves the file as it was, and no temporary file.
	boom := errors.New("boom")
	err = WriteFile(path, func(w io.Writer) error { io.WriteString(w, "partial"); return boom })
	assert.ErrorIs(t, err, boom)
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(got))
	assert.Equal(t, []string{"f.json"}, entries(t, dir))

	// A rename that fails (over a non-empty directory) names the path,
	// not the temporary file, which is removed.
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.MkdirAll(filepath.Join(sub, "x"), 0o755))
	err = WriteFile(sub, write("three"))
	require.Error(t, err)
	var pe *os.PathError
	require.True(t, errors.As(err, &pe), "%T %v", err, err)
	assert.Equal(t, sub, pe.Path)
	assert.NotContains(t, err.Error(), ".tmp")
	assert.ElementsMatch(t, []string{"f.json", "sub"}, entries(t, dir))

	err = WriteFile(filepath.Join(dir, "missing", "f"), write(""))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NotContains(t, err.Error(), ".tmp")
}

func TestPathError(t *testing.T) {
	inner := errors.New("inner")
	err := PathError(&os.PathError{Op: "write", Path: "tmp", Err: inner}, "tmp", "dst")
	assert.Equal(t, &os.PathError{Op: "write", Path: "dst", Err: inner}, err)
	err = PathError(&os.LinkError{Op: "rename", Old: "tmp", New: "dst", Err: inner}, "tmp", "dst")
	assert.Equal(t, &os.PathError{Op: "rename", Path: "dst", Err: inner}, err)
	other := &os.PathError{Op: "open", Path: "spill", Err: inner}
	assert.Same(t, other, PathError(other, "tmp", "dst"))
}

func TestSyncDir(t *testing.T) {
	SyncDir(t.TempDir())
	SyncDir(filepath.Join(t.TempDir(), "missing")) // best effort: no error, no panic
}
