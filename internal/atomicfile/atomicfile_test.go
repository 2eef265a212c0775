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

	"github.com/safetensors-go/safetensors/internal/regular"
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
	// A temporary folder's files are named in the destination.
	in := filepath.Join("dir", ".out.tmp1", "sub", "f")
	err = PathError(&os.PathError{Op: "open", Path: in, Err: inner}, filepath.Join("dir", ".out.tmp1"), filepath.Join("dir", "out"))
	assert.Equal(t, &os.PathError{Op: "open", Path: filepath.Join("dir", "out", "sub", "f"), Err: inner}, err)
	sibling := &os.PathError{Op: "open", Path: filepath.Join("dir", ".out.tmp12"), Err: inner}
	assert.Same(t, sibling, PathError(sibling, filepath.Join("dir", ".out.tmp1"), filepath.Join("dir", "out")), "a name that only starts like tmp")
}

func TestSyncDir(t *testing.T) {
	SyncDir(t.TempDir())
	SyncDir(filepath.Join(t.TempDir(), "missing")) // best effort: no error, no panic
}

// failingTemp is a temporary file whose writes, sync or close fail as a
// full or broken disk's do, with errors that name the temporary file.
type failingTemp struct {
	*os.File
	writeErr, syncErr, closeErr error
}

func (f *failingTemp) pathErr(op string, err error) error {
	return &os.PathError{Op: op, Path: f.File.Name(), Err: err}
}

func (f *failingTemp) Write(p []byte) (int, error) {
	if f.writeErr != nil {
		return 0, f.pathErr("write", f.writeErr)
	}
	return f.File.Write(p)
}

func (f *failingTemp) WriteAt(p []byte, off int64) (int, error) {
	if f.writeErr != nil {
		return 0, f.pathErr("write", f.writeErr)
	}
	return f.File.WriteAt(p, off)
}

func (f *failingTemp) ReadFrom(r io.Reader) (int64, error) {
	if f.writeErr != nil {
		return 0, f.pathErr("write", f.writeErr)
	}
	return f.File.ReadFrom(r)
}

func (f *failingTemp) Sync() error {
	if f.syncErr != nil {
		return f.pathErr("sync", f.syncErr)
	}
	return f.File.Sync()
}

func (f *failingTemp) Close() error {
	err := f.File.Close()
	if f.closeErr != nil {
		return f.pathErr("close", f.closeErr)
	}
	return err
}

// noReadFrom is a Temp without a ReadFrom method of its own.
type noReadFrom struct{ f *failingTemp }

func (n noReadFrom) Write(p []byte) (int, error)              { return n.f.Write(p) }
func (n noReadFrom) WriteAt(p []byte, off int64) (int, error) { return n.f.WriteAt(p, off) }
func (n noReadFrom) ReadAt(p []byte, off int64) (int, error)  { return n.f.ReadAt(p, off) }
func (n noReadFrom) Truncate(size int64) error                { return n.f.Truncate(size) }
func (n noReadFrom) Sync() error                              { return n.f.Sync() }
func (n noReadFrom) Close() error                             { return n.f.Close() }
func (n noReadFrom) Chmod(mode os.FileMode) error             { return n.f.Chmod(mode) }
func (n noReadFrom) Name() string                             { return n.f.Name() }

// hookTemps makes Create's temporary files go through wrap for the rest of
// the test.
func hookTemps(t *testing.T, wrap func(*os.File) Temp) {
	t.Cleanup(SetHooks(Hooks{CreateTemp: func(name string) (Temp, error) {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err != nil {
			return nil, err
		}
		return wrap(f), nil
	}}))
}

// readString returns the contents of the file at path.
func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestFileCreateMode: the temporary file takes the mode of a regular file
// at the path, which the rename keeps; a new file gets 0666 less the
// umask, and a file replacing a symbolic link the mode of its target.
func TestFileCreateMode(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no Unix permission bits")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, mode := range []os.FileMode{0o600, 0o640, 0o604, 0o755} {
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
		require.NoError(t, os.Chmod(path, mode))
		f, err := Create(path)
		require.NoError(t, err)
		info, err := os.Stat(f.Name())
		require.NoError(t, err)
		assert.Equal(t, mode, info.Mode().Perm(), "the temporary file, replacing a file of mode %v", mode)
		_, err = f.Write([]byte("new"))
		require.NoError(t, err)
		require.NoError(t, f.Commit())
		info, err = os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, mode, info.Mode().Perm(), "replacing a file of mode %v", mode)
		assert.Equal(t, "new", readString(t, path))
	}

	// A new file: what the umask leaves of 0666, as os.Create gives.
	ref := filepath.Join(dir, "ref")
	g, err := os.Create(ref)
	require.NoError(t, err)
	g.Close()
	want, err := os.Stat(ref)
	require.NoError(t, err)
	fresh := filepath.Join(dir, "fresh")
	f, err := Create(fresh)
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	info, err := os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, want.Mode().Perm(), info.Mode().Perm())

	// A link: replaced by the file, which takes its target's mode; the
	// target is left as it was.
	target := filepath.Join(dir, "target")
	require.NoError(t, os.WriteFile(target, []byte("blob"), 0o600))
	require.NoError(t, os.Chmod(target, 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink("target", link))
	f, err = Create(link)
	require.NoError(t, err)
	_, err = f.Write([]byte("mine"))
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	linfo, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, linfo.Mode().IsRegular(), "the link is replaced")
	assert.Equal(t, os.FileMode(0o600), linfo.Mode().Perm())
	assert.Equal(t, "blob", readString(t, target))
	assert.Equal(t, "mine", readString(t, link))
}

// TestFileNames: Path is the destination, Name the temporary file, named
// as TempName names it, in the same directory.
func TestFileNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	f, err := Create(path)
	require.NoError(t, err)
	defer f.Abort()
	assert.Equal(t, path, f.Path())
	assert.Equal(t, dir, filepath.Dir(f.Name()))
	ok, err := filepath.Match(".model.safetensors.tmp*", filepath.Base(f.Name()))
	require.NoError(t, err)
	assert.True(t, ok, f.Name())
	_, err = os.Stat(f.Name())
	assert.NoError(t, err, "the temporary file exists")
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing at the path before Commit")
}

// TestFileWriteErrors: the errors of Write, WriteAt and ReadFrom name the
// path, not the temporary file.
func TestFileWriteErrors(t *testing.T) {
	full := errors.New("no space left on device")
	for name, wrap := range map[string]func(*os.File) Temp{
		"ReadFrom":    func(f *os.File) Temp { return &failingTemp{File: f, writeErr: full} },
		"no ReadFrom": func(f *os.File) Temp { return noReadFrom{&failingTemp{File: f, writeErr: full}} },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			hookTemps(t, wrap)
			f, err := Create(path)
			require.NoError(t, err)
			tmp := f.Name()
			check := func(err error, what string) {
				t.Helper()
				require.ErrorIs(t, err, full, what)
				var pe *os.PathError
				require.ErrorAs(t, err, &pe, what)
				assert.Equal(t, path, pe.Path, what)
				assert.NotContains(t, err.Error(), tmp, what)
				assert.NotContains(t, err.Error(), ".tmp", what)
			}
			_, err = f.Write([]byte("x"))
			check(err, "Write")
			_, err = f.WriteAt([]byte("x"), 5)
			check(err, "WriteAt")
			_, err = f.ReadFrom(strings.NewReader("abc"))
			check(err, "ReadFrom")
			f.Abort()
			assert.Empty(t, entries(t, dir), "the temporary file removed")
		})
	}
}

// TestFileReadFrom copies from a reader, through the temporary file's own
// ReadFrom where it has one.
func TestFileReadFrom(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.WriteFile(src, []byte(strings.Repeat("abc", 1000)), 0o644))
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	path := filepath.Join(dir, "dst")
	f, err := Create(path)
	require.NoError(t, err)
	n, err := f.ReadFrom(in)
	require.NoError(t, err)
	assert.Equal(t, int64(3000), n)
	require.NoError(t, f.Commit())
	assert.Equal(t, strings.Repeat("abc", 1000), readString(t, path))
}

// TestFileFlushRename commits in two steps: Flush leaves the complete
// temporary file beside the old file, and Rename puts it in place.
func TestFileFlushRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	var synced []string
	t.Cleanup(SetHooks(Hooks{SyncDir: func(dir string) { synced = append(synced, dir) }}))
	f, err := Create(path)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("world"), 6)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("hello "), 0)
	require.NoError(t, err)
	require.NoError(t, f.Flush())
	require.NoError(t, f.Flush(), "a second Flush")
	assert.Equal(t, "hello world", readString(t, f.Name()), "the temporary file, complete")
	assert.Equal(t, "old", readString(t, path), "the old file, until Rename")
	require.NoError(t, f.Rename())
	assert.Equal(t, "hello world", readString(t, path))
	assert.Equal(t, []string{"f"}, entries(t, dir), "the temporary file renamed")
	assert.Empty(t, synced, "Rename does not sync the directory")
	require.NoError(t, f.Rename(), "a second Rename returns the first's result")
	f.Abort()
	assert.Equal(t, "hello world", readString(t, path), "Abort after the rename does nothing")
}

// TestFileCommit writes, syncs, renames and syncs the directory; a second
// Commit returns the first's result without doing anything again.
func TestFileCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	var synced []string
	var renames int
	t.Cleanup(SetHooks(Hooks{
		SyncDir: func(dir string) { synced = append(synced, dir) },
		Rename: func(from, to string) error {
			renames++
			return os.Rename(from, to)
		},
	}))
	f, err := Create(path)
	require.NoError(t, err)
	_, err = f.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	assert.Equal(t, "data", readString(t, path))
	assert.Equal(t, []string{"f"}, entries(t, dir))
	assert.Equal(t, []string{dir}, synced, "the directory synced")
	assert.Equal(t, 1, renames)
	require.NoError(t, f.Commit())
	assert.Equal(t, 1, renames, "a second Commit renames nothing")
	f.Abort()
	assert.Equal(t, "data", readString(t, path), "Abort after Commit does nothing")

	// A failed Commit: the same error again, the temporary file gone, the
	// old file as it was.
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	boom := errors.New("rename refused")
	renames = 0
	t.Cleanup(SetHooks(Hooks{Rename: func(from, to string) error {
		renames++
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: boom}
	}}))
	f, err = Create(path)
	require.NoError(t, err)
	_, err = f.Write([]byte("new"))
	require.NoError(t, err)
	err = f.Commit()
	require.ErrorIs(t, err, boom)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, path, pe.Path)
	assert.NotContains(t, err.Error(), ".tmp")
	assert.Equal(t, []string{"f"}, entries(t, dir), "the temporary file removed")
	assert.Equal(t, "old", readString(t, path))
	again := f.Commit()
	assert.Equal(t, err, again, "a second Commit returns the first's error")
	assert.Equal(t, 1, renames, "and tries nothing again")
}

// TestFileFlushFails: a failing sync or close removes the temporary file,
// and Flush, Rename and Commit then return its error, naming the path.
func TestFileFlushFails(t *testing.T) {
	boom := errors.New("I/O error")
	for name, wrap := range map[string]func(*os.File) Temp{
		"sync":  func(f *os.File) Temp { return &failingTemp{File: f, syncErr: boom} },
		"close": func(f *os.File) Temp { return &failingTemp{File: f, closeErr: boom} },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
			hookTemps(t, wrap)
			f, err := Create(path)
			require.NoError(t, err)
			_, err = f.Write([]byte("new"))
			require.NoError(t, err)
			err = f.Flush()
			require.ErrorIs(t, err, boom)
			var pe *os.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, path, pe.Path)
			assert.Equal(t, []string{"f"}, entries(t, dir), "the temporary file removed")
			assert.Equal(t, "old", readString(t, path))
			assert.Equal(t, err, f.Flush())
			assert.Equal(t, err, f.Rename())
			assert.Equal(t, err, f.Commit())
		})
	}
}

// TestFileAbort removes the temporary file and leaves the path as it was;
// what follows fails with an error wrapping os.ErrClosed.
func TestFileAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	for _, flushed := range []bool{false, true} {
		f, err := Create(path)
		require.NoError(t, err)
		_, err = f.Write([]byte("new"))
		require.NoError(t, err)
		if flushed {
			require.NoError(t, f.Flush())
		}
		f.Abort()
		f.Abort() // twice is once
		assert.Equal(t, []string{"f"}, entries(t, dir), "the temporary file removed (flushed: %v)", flushed)
		assert.Equal(t, "old", readString(t, path))
		for what, err := range map[string]error{"Commit": f.Commit(), "Flush": f.Flush(), "Rename": f.Rename()} {
			require.ErrorIs(t, err, os.ErrClosed, what)
			var pe *os.PathError
			require.ErrorAs(t, err, &pe, what)
			assert.Equal(t, path, pe.Path, what)
		}
	}
}

// TestFileKeep leaves a flushed temporary file in place under its name,
// which Abort then does not remove.
func TestFileKeep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard")
	f, err := Create(path)
	require.NoError(t, err)
	_, err = f.Write([]byte("kept"))
	require.NoError(t, err)
	require.NoError(t, f.Flush())
	f.Keep()
	f.Abort()
	assert.Equal(t, "kept", readString(t, f.Name()), "the temporary file stays")
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing renamed")
}

// TestCreateFails: a temporary file that cannot be created gives an error
// naming the path; a name taken is tried again with another.
func TestCreateFails(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "missing", "f"))
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.NotContains(t, err.Error(), ".tmp")

	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	var tries int
	t.Cleanup(SetHooks(Hooks{CreateTemp: func(name string) (Temp, error) {
		if tries++; tries < 3 {
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
		}
		return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	}}))
	f, err := Create(path)
	require.NoError(t, err)
	assert.Equal(t, 3, tries)
	require.NoError(t, f.Commit())
	_, err = os.Stat(path)
	assert.NoError(t, err)
}

// TestSetHooks replaces the operations given, keeps the others, and
// restores them all; hooks set over hooks restore in turn.
func TestSetHooks(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("a"), 0o644))

	var calls []string
	restore := SetHooks(Hooks{
		Rename:  func(from, to string) error { calls = append(calls, "rename"); return errors.New("no rename") },
		Remove:  func(name string) error { calls = append(calls, "remove"); return nil },
		SyncDir: func(string) { calls = append(calls, "sync") },
	})
	assert.Error(t, Rename(a, b))
	require.NoError(t, Remove(a))
	SyncDir(dir)
	if runtime.GOOS != "js" && runtime.GOOS != "wasip1" {
		require.NoError(t, Link(a, b), "Link is not replaced: the real one")
		require.NoError(t, os.Remove(b))
	}
	assert.Equal(t, []string{"rename", "remove", "sync"}, calls)
	_, err := os.Stat(a)
	require.NoError(t, err, "the hooked Remove removed nothing")

	inner := SetHooks(Hooks{Rename: func(from, to string) error { calls = append(calls, "inner"); return nil }})
	require.NoError(t, Rename(a, b))
	require.NoError(t, Remove(a), "the outer hook still in place")
	inner()
	assert.Error(t, Rename(a, b), "the outer hook restored")
	assert.Equal(t, []string{"rename", "remove", "sync", "inner", "remove", "rename"}, calls)

	restore()
	calls = nil
	require.NoError(t, Rename(a, b), "the real rename restored")
	_, err = os.Stat(b)
	require.NoError(t, err)
	require.NoError(t, Remove(b), "the real remove restored")
	_, err = os.Stat(b)
	assert.ErrorIs(t, err, os.ErrNotExist)
	SyncDir(dir)
	assert.Empty(t, calls)

	// Create goes through the hooks too, and after restore no longer.
	var created []string
	restore = SetHooks(Hooks{CreateTemp: func(name string) (Temp, error) {
		created = append(created, name)
		return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	}})
	f, err := Create(a)
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	restore()
	f, err = Create(a)
	require.NoError(t, err)
	f.Abort()
	assert.Len(t, created, 1)
}

// TestFileReadAtTruncate fills a file in place, as the dataset's batch
// shards are: Truncate gives the size at once, with zeros, and ReadAt reads
// back what was written; their errors name the path.
func TestFileReadAtTruncate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	f, err := Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(8))
	_, err = f.WriteAt([]byte("ab"), 3)
	require.NoError(t, err)
	b := make([]byte, 8)
	n, err := f.ReadAt(b, 0)
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 'a', 'b', 0, 0, 0}, b[:n])
	_, err = f.ReadAt(b, 4)
	assert.Same(t, io.EOF, err, "past the end: io.EOF, as io.ReaderAt says")
	require.NoError(t, f.Commit())
	assert.Equal(t, "\x00\x00\x00ab\x00\x00\x00", readString(t, path))
	// Errors name the path, not the temporary file.
	for _, err := range []error{f.Truncate(0), func() error { _, err := f.ReadAt(b, 0); return err }()} {
		assert.ErrorIs(t, err, os.ErrClosed)
		var pe *os.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, path, pe.Path)
	}
}

// TestWriteDir puts a folder in place whole: its files are in the
// temporary folder, beside the destination, until the rename, after which
// the temporary folder and then the parent are synced.
func TestWriteDir(t *testing.T) {
	parent := t.TempDir()
	dst := filepath.Join(parent, "out")
	var synced []string
	t.Cleanup(SetHooks(Hooks{SyncDir: func(dir string) { synced = append(synced, dir) }}))
	var tmp string
	err := WriteDir(dst+string(filepath.Separator), func(dir string) error {
		tmp = dir
		assert.Equal(t, parent, filepath.Dir(dir))
		ok, err := filepath.Match(".out.tmp*", filepath.Base(dir))
		require.NoError(t, err)
		assert.True(t, ok, dir)
		if runtime.GOOS != "windows" {
			info, err := os.Stat(dir)
			require.NoError(t, err)
			assert.NotZero(t, info.Mode().Perm()&0o055, "not 0700 as os.MkdirTemp makes it: %v", info.Mode())
		}
		assert.NoFileExists(t, dst)
		return WriteNew(filepath.Join(dir, "a"), []byte("abc"))
	})
	require.NoError(t, err)
	assert.Equal(t, "abc", readString(t, filepath.Join(dst, "a")))
	assert.Equal(t, []string{"out"}, entries(t, parent))
	assert.Equal(t, []string{tmp, parent}, synced)
}

// TestWriteDirFails: a failing write, a failing rename and a parent that
// does not exist leave nothing behind, and the errors name the
// destination, never the temporary folder.
func TestWriteDirFails(t *testing.T) {
	parent := t.TempDir()
	dst := filepath.Join(parent, "out")
	boom := errors.New("boom")

	err := WriteDir(dst, func(dir string) error {
		require.NoError(t, WriteNew(filepath.Join(dir, "a"), []byte("abc")))
		return boom
	})
	assert.Same(t, boom, err)
	assert.Empty(t, entries(t, parent))

	// An error that names a file in the temporary folder names it in the
	// destination.
	err = WriteDir(dst, func(dir string) error {
		require.NoError(t, WriteNew(filepath.Join(dir, "a"), nil))
		return WriteNew(filepath.Join(dir, "a"), nil)
	})
	assert.ErrorIs(t, err, os.ErrExist)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, filepath.Join(dst, "a"), pe.Path)
	assert.NotContains(t, err.Error(), ".tmp")
	assert.Empty(t, entries(t, parent))

	t.Run("rename", func(t *testing.T) {
		t.Cleanup(SetHooks(Hooks{Rename: func(from, to string) error {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: boom}
		}}))
		err := WriteDir(dst, func(dir string) error { return WriteNew(filepath.Join(dir, "a"), nil) })
		assert.ErrorIs(t, err, boom)
		assert.Equal(t, &os.PathError{Op: "rename", Path: dst, Err: boom}, err)
		assert.Empty(t, entries(t, parent))
	})

	missing := filepath.Join(parent, "missing", "out")
	err = WriteDir(missing, func(string) error { t.Fatal("write called"); return nil })
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, missing, pe.Path)
	assert.NotContains(t, err.Error(), ".tmp")
}

// TestWriteNew writes a new file, refuses one that exists, and removes
// what it created when it fails.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, WriteNew(path, []byte("abc")))
	assert.Equal(t, "abc", readString(t, path))
	if runtime.GOOS != "windows" {
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.NotZero(t, info.Mode().Perm()&0o044, "mode 0666 less the umask: %v", info.Mode())
	}
	err := WriteNew(path, []byte("xyz"))
	assert.ErrorIs(t, err, os.ErrExist)
	assert.Equal(t, "abc", readString(t, path), "left as it was")

	boom := errors.New("boom")
	err = writeNew(filepath.Join(dir, "g"), func(f *os.File) error {
		f.WriteString("partial")
		return boom
	})
	assert.Same(t, boom, err)
	assert.Equal(t, []string{"f"}, entries(t, dir))
}

// TestCopyFile copies a file into a new one; it refuses a destination
// that exists and a source that is not a regular file.
func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := strings.Repeat("0123456789", 10000)
	require.NoError(t, os.WriteFile(src, []byte(data), 0o600))
	dst := filepath.Join(dir, "dst")
	require.NoError(t, CopyFile(src, dst))
	assert.Equal(t, data, readString(t, dst))

	err := CopyFile(src, dst)
	assert.ErrorIs(t, err, os.ErrExist)
	assert.Equal(t, data, readString(t, dst), "left as it was")

	err = CopyFile(dir, filepath.Join(dir, "copy"))
	assert.ErrorIs(t, err, regular.ErrNotRegular)
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, dir, pe.Path)
	err = CopyFile(filepath.Join(dir, "missing"), filepath.Join(dir, "copy"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ElementsMatch(t, []string{"src", "dst"}, entries(t, dir), "nothing created")
}
