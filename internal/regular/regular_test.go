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
	f, err := Open(os.OpenFile, path)
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
}
