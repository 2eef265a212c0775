//go:build unix

package safetensors

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withUmask sets the process's umask for the rest of the test.
func withUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// mode returns the permission bits of the file at path.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	return info.Mode().Perm()
}

var modeTensors = []Tensor{{Name: "w", DType: U8, Shape: []uint64{3}, Data: []byte{1, 2, 3}}}

// TestWriteModes checks that every writer keeps the mode of a file it
// replaces, and gives a new file 0666 minus the umask.
func TestWriteModes(t *testing.T) {
	withUmask(t, 0o027)
	writers := map[string]func(path string) error{
		"WriteFile": func(path string) error { return WriteFile(path, modeTensors, nil) },
		"CreateFile": func(path string) error {
			fw, err := CreateFile(path, []TensorSpec{{Name: "w", DType: U8, Shape: []uint64{3}}}, nil)
			if err != nil {
				return err
			}
			if _, err := fw.Write([]byte{1, 2, 3}); err != nil {
				return err
			}
			return fw.Close()
		},
	}
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "new.safetensors")
			require.NoError(t, write(path))
			assert.Equal(t, os.FileMode(0o640), mode(t, path), "a new file: 0666 minus the umask 027")

			for _, m := range []os.FileMode{0o600, 0o644, 0o604, 0o700} {
				path := filepath.Join(dir, "old.safetensors")
				require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
				require.NoError(t, os.Chmod(path, m))
				require.NoError(t, write(path))
				assert.Equal(t, m, mode(t, path), "replacing a file of mode %v", m)
				r, err := Open(path)
				require.NoError(t, err)
				r.Close()
			}
		})
	}
}

// TestWriteErrorsNameTarget checks that errors name the caller's path, not
// the temporary file.
func TestWriteErrorsNameTarget(t *testing.T) {
	dir := t.TempDir()
	// A directory at the path: the rename fails.
	path := filepath.Join(dir, "model.safetensors")
	require.NoError(t, os.Mkdir(path, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(path, "x"), nil, 0o644))
	err := WriteFile(path, modeTensors, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.NotContains(t, err.Error(), ".tmp")
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, path, pe.Path)
	assertDir(t, dir, "model.safetensors")

	// A directory that cannot be written: the create fails.
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		path := filepath.Join(ro, "model.safetensors")
		err := WriteFile(path, modeTensors, nil)
		require.ErrorIs(t, err, os.ErrPermission)
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, path, pe.Path)
	}
}

// TestWriteOverSymlink checks the decision for a symbolic link at the
// path: the writers replace the link with the new file, and leave the
// file it pointed to, such as a blob of the Hugging Face cache shared by
// several snapshots, as it was. The new file takes the mode of the file
// the link pointed to.
func TestWriteOverSymlink(t *testing.T) {
	withUmask(t, 0o022)
	dir := t.TempDir()
	blob := filepath.Join(dir, "blobs", "a1b2c3")
	require.NoError(t, os.MkdirAll(filepath.Dir(blob), 0o755))
	require.NoError(t, WriteFile(blob, []Tensor{{Name: "old", DType: U8, Shape: []uint64{1}, Data: []byte{9}}}, nil))
	require.NoError(t, os.Chmod(blob, 0o600))
	blobBytes, err := os.ReadFile(blob)
	require.NoError(t, err)

	snap := filepath.Join(dir, "snapshots", "main")
	require.NoError(t, os.MkdirAll(snap, 0o755))
	link := filepath.Join(snap, "model.safetensors")
	require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", "a1b2c3"), link))

	require.NoError(t, WriteFile(link, modeTensors, nil))
	info, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, info.Mode().IsRegular(), "the link is replaced by a file")
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	got, err := os.ReadFile(blob)
	require.NoError(t, err)
	assert.Equal(t, blobBytes, got, "the blob is untouched")
	r, err := Open(link)
	require.NoError(t, err)
	assert.Equal(t, []string{"w"}, r.Names())
	r.Close()

	// A dangling link is replaced too; the new file gets the default mode.
	dangling := filepath.Join(snap, "gone.safetensors")
	require.NoError(t, os.Symlink("nowhere", dangling))
	require.NoError(t, WriteFile(dangling, modeTensors, nil))
	assert.Equal(t, os.FileMode(0o644), mode(t, dangling))
}

// within fails the test if f blocks: if it does not return within 30 s, far
// more than it takes on a loaded machine, so that only a hang fails.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s blocked", what)
		return nil
	}
}

// TestFIFO checks that a FIFO is refused at once, wherever a file is
// opened by name, with an error wrapping ErrNotRegular that names it.
func TestFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	err := within(t, "Open", func() error { _, err := Open(fifo); return err })
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), fifo)
	err = within(t, "Open ReadAll", func() error { _, err := Open(fifo, ReadAll()); return err })
	require.ErrorIs(t, err, ErrNotRegular)

	// Directories are refused the same way.
	// The sharded checkpoint's cases moved to the checkpoint package
	// (checkpoint/root_moved_unix_test.go). Directories are refused the
	// same way, with an error that names the package that opens them.
	_, err = Open(dir)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, "checkpoint package")
	assert.NotContains(t, err.Error(), "index", "not an invalid index")
}
