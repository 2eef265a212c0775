package regular

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("abc"), 0o644))
	f, err := Open(OpenFile, path)
	require.NoError(t, err)
	b := make([]byte, 4)
	n, _ := f.Read(b)
	assert.Equal(t, "abc", string(b[:n]))
	require.NoError(t, f.Close())

	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	f, err = Open(root.OpenFile, "f")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, err = Open(os.OpenFile, filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	f, err = Open(os.OpenFile, dir)
	assert.Nil(t, f)
	var nr *NotRegularError
	require.True(t, errors.As(err, &nr), "%v", err)
	assert.True(t, nr.Mode.IsDir())
	assert.Contains(t, err.Error(), "not a regular file (mode d")
	assertRefusal(t, err, dir)

	// Inside a root, the error names the file by its name in the root.
	_, err = Open(root.OpenFile, ".")
	assertRefusal(t, err, ".")
}

// assertRefusal asserts that err is the refusal of the file at path: an
// *os.PathError naming it, wrapping ErrNotRegular.
func assertRefusal(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, ErrNotRegular)
	var pe *os.PathError
	require.True(t, errors.As(err, &pe), "%T %v", err, err)
	assert.Equal(t, "open", pe.Op)
	assert.Equal(t, path, pe.Path)
	assert.Equal(t, "open "+path+": safetensors: not a regular file (mode "+pe.Err.(*NotRegularError).Mode.String()+")", err.Error())
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.NoError(t, Check(path, info))
	info, err = os.Stat(dir)
	require.NoError(t, err)
	err = Check(dir, info)
	assertRefusal(t, err, dir)
	var nr *NotRegularError
	require.True(t, errors.As(err, &nr))
	assert.Equal(t, info.Mode(), nr.Mode)
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	want := make([]byte, 3000) // more than one read of io.ReadAll's first buffer
	for i := range want {
		want[i] = byte(i)
	}
	require.NoError(t, os.WriteFile(path, want, 0o644))
	got, err := ReadFile(os.OpenFile, path)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = ReadFile(os.OpenFile, filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	got, err = ReadFile(os.OpenFile, dir)
	assert.Nil(t, got)
	var nr *NotRegularError
	require.True(t, errors.As(err, &nr), "%v", err)
	assert.True(t, nr.Mode.IsDir())
	assertRefusal(t, err, dir)
}

// TestOpenFileShared: a file that OpenFile opened for reading can be
// renamed and removed while it is open, on every platform (on Windows, as
// it is shared for deletion), and what was opened reads on; a directory
// opens, for Open to refuse it as not regular.
func TestOpenFileShared(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("abc"), 0o644))
	f, err := Open(OpenFile, path)
	require.NoError(t, err)
	defer f.Close()
	moved := filepath.Join(dir, "g")
	require.NoError(t, os.Rename(path, moved), "renaming a file open for reading")
	require.NoError(t, os.Remove(moved), "removing a file open for reading")
	b := make([]byte, 4)
	n, err := f.ReadAt(b, 0)
	assert.Equal(t, "abc", string(b[:n]), "%v", err)

	_, err = Open(OpenFile, dir)
	assert.ErrorIs(t, err, ErrNotRegular)
	_, err = Open(OpenFile, filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = OpenFile("", os.O_RDONLY, 0)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
