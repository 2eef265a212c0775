// Package atomicfile replaces files on disk without a moment when the
// destination is missing or half written: the new file is written under a
// temporary name in the destination's directory, synced, and renamed over
// the destination, and the directory is synced so that the rename survives
// a power cut. It is the module's one way to put a file in place: the core
// package's writers, the checkpoint writer (which commits several files in
// two steps, Flush and then Rename), the dataset writer and quant use it.
// A folder is put in place the same way, whole (WriteDir: checkpoint's
// Convert, quant's WriteModel, the dataset's Parquet index), its files
// written new and synced (WriteNew, CopyFile).
//
// On Windows, a rename does not replace a file that a process has open
// without sharing it for deletion, or mapped: the error wraps ErrInUse.
// The module's readers open files shared for deletion
// (regular.OpenFile), so that only their mappings stand in the way.
//
// A File starts the writeback of its bytes as they are written, every
// WritebackBytes (pagecache.StartWriteback), so that its final sync waits
// only for the last of them: the device writes while the writer computes
// what follows.
//
// The file-system operations go through hooks that tests replace with
// SetHooks, to fail or crash at each step.
package atomicfile

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/safetensors-go/safetensors/internal/pagecache"
	"github.com/safetensors-go/safetensors/internal/regular"
)

// Temp is what a File needs of its temporary file: an *os.File, or what a
// test puts in its place.
type Temp interface {
	io.Writer
	io.WriterAt
	io.ReaderAt
	Truncate(size int64) error
	Sync() error
	Close() error
	Chmod(mode os.FileMode) error
	Name() string
}

// Hooks are the file-system operations of the package. Tests replace them
// with SetHooks; a nil field keeps the operation as it is.
type Hooks struct {
	// CreateTemp creates the temporary file name, which must not exist.
	CreateTemp func(name string) (Temp, error)
	Rename     func(from, to string) error
	Link       func(from, to string) error
	Remove     func(name string) error
	SyncDir    func(dir string)
	// Writeback starts writing the dirty pages of a File's temporary
	// file to disk, without waiting for them.
	Writeback func(f Temp)
}

// hooks are the operations in use.
var hooks = defaultHooks()

func defaultHooks() Hooks {
	return Hooks{
		CreateTemp: func(name string) (Temp, error) {
			f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
			if err != nil {
				return nil, err
			}
			return f, nil
		},
		Rename:    rename,
		Link:      os.Link,
		Remove:    os.Remove,
		SyncDir:   syncDir,
		Writeback: writeback,
	}
}

// writeback starts the writeback of f, a temporary file of the system.
func writeback(f Temp) {
	if f, ok := f.(*os.File); ok {
		pagecache.StartWriteback(f)
	}
}

// SetHooks replaces the operations h gives, for a test, and returns the
// function that restores them. Tests that use it must not run in parallel.
func SetHooks(h Hooks) (restore func()) {
	saved := hooks
	if h.CreateTemp != nil {
		hooks.CreateTemp = h.CreateTemp
	}
	if h.Rename != nil {
		hooks.Rename = h.Rename
	}
	if h.Link != nil {
		hooks.Link = h.Link
	}
	if h.Remove != nil {
		hooks.Remove = h.Remove
	}
	if h.SyncDir != nil {
		hooks.SyncDir = h.SyncDir
	}
	if h.Writeback != nil {
		hooks.Writeback = h.Writeback
	}
	return func() { hooks = saved }
}

// ErrInUse is what a replacement that Windows refuses wraps: the file to
// replace is open in a process that does not share it for deletion, or
// mapped (by a Reader of this module, say, in this process or another),
// which Windows does not let a rename replace. Unix replaces such a file,
// the process keeping the old one. Close the readers of the file, or
// write to another name. The core package exports it as
// safetensors.ErrFileInUse.
var ErrInUse = errors.New("safetensors: the file is in use")

// inUseError is a refused replacement: ErrInUse, and the system's error.
type inUseError struct{ err error }

func (e *inUseError) Error() string {
	return ErrInUse.Error() + ": a process has it open or mapped, and Windows replaces no such file (" + e.err.Error() + ")"
}

func (e *inUseError) Unwrap() []error { return []error{ErrInUse, e.err} }

// rename is os.Rename, whose refusal to replace a file in use (on
// Windows) wraps ErrInUse.
func rename(from, to string) error {
	err := os.Rename(from, to)
	var le *os.LinkError
	if err != nil && errors.As(err, &le) && inUse(le.Err) {
		if _, serr := os.Stat(to); serr == nil {
			le.Err = &inUseError{err: le.Err}
		}
	}
	return err
}

// Rename renames from to to, through the hooks.
func Rename(from, to string) error { return hooks.Rename(from, to) }

// Link makes to a hard link to from, through the hooks.
func Link(from, to string) error { return hooks.Link(from, to) }

// Remove removes name, through the hooks.
func Remove(name string) error { return hooks.Remove(name) }

// SyncDir makes the changes of names in dir (a file created, renamed or
// removed) durable where the platform allows it, by syncing the directory.
// It does nothing on Windows, where a directory opened for reading cannot
// be flushed (FlushFileBuffers is refused) and NTFS journals the rename
// itself, nor on Plan 9. It is best effort: the names are in place
// whatever happens, and only their durability is at stake.
func SyncDir(dir string) { hooks.SyncDir(dir) }

func syncDir(dir string) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// TempName returns a new name for a temporary file that is to replace the
// file at path: in path's directory, a dot, path's base name, ".tmp" and a
// random base-36 suffix, as in .model.safetensors.tmp3k0v9x2hq1s7.
func TempName(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
}

// CreateTemp creates a new file in dir, for reading and writing, named
// prefix, ".tmp" and a random base-36 suffix, with mode 0666 less the
// umask, as the file it becomes once renamed should have (os.CreateTemp
// gives 0600). It tries another suffix when a name is taken. It is for
// scratch files that are not renamed into place; Create is for those that
// are.
func CreateTemp(dir, prefix string) (*os.File, error) {
	var err error
	for range 100 {
		name := filepath.Join(dir, prefix+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		var f *os.File
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, err
}

// A File is a temporary file, named as TempName names it, that replaces
// the file at its path when it is committed and disappears when it is
// aborted. Its errors name the path, not the temporary file, which is an
// internal detail and gone once they are returned. It is for one
// goroutine at a time, except for WriteAt.
//
// Each time the bytes written through it pass a multiple of
// WritebackBytes, the File starts the writeback of the temporary file's
// dirty pages (pagecache.StartWriteback, which waits only while the
// device's queue is full): a large file is then written to disk while it
// is being written, and the sync of Flush and Commit, which durability
// needs all the same, waits for little more than the last bytes rather
// than for all of them, after the writer is done.
type File struct {
	f       Temp
	path    string
	done    bool         // committed, kept or aborted
	flushed bool         // synced and closed, not yet renamed
	err     error        // the result of Flush or Rename once done
	written atomic.Int64 // the bytes written, for the writeback
}

// WritebackBytes is how many bytes a File takes between the starts of the
// writeback of its temporary file: enough for the device to write a large
// request, few enough that the dirty pages left for the final sync are few.
const WritebackBytes = 8 << 20

// wrote counts n bytes written, and starts the writeback each time the
// count passes a multiple of WritebackBytes; of several goroutines
// writing at once, the one whose bytes pass it starts it.
func (a *File) wrote(n int64) {
	if n <= 0 {
		return
	}
	if k := a.written.Add(n); k/WritebackBytes != (k-n)/WritebackBytes {
		hooks.Writeback(a.f)
	}
}

// Create creates the temporary file for path, in the same directory so
// that the rename is atomic. When a regular file is at path, the
// temporary file takes its permission bits, which the rename keeps: a
// private file stays private. A new file gets mode 0666 less the umask.
func Create(path string) (*File, error) {
	var f Temp
	var tmp string
	var err error
	for range 100 {
		tmp = TempName(path)
		f, err = hooks.CreateTemp(tmp)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, PathError(err, tmp, path)
	}
	if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
		if err := f.Chmod(info.Mode().Perm()); err != nil {
			f.Close()
			hooks.Remove(tmp)
			return nil, PathError(err, tmp, path)
		}
	}
	return &File{f: f, path: path}, nil
}

// Path returns the path the file is to replace.
func (a *File) Path() string { return a.path }

// Name returns the temporary file's name.
func (a *File) Name() string { return a.f.Name() }

// Write writes p to the temporary file.
func (a *File) Write(p []byte) (int, error) {
	n, err := a.f.Write(p)
	a.wrote(int64(n))
	return n, a.fix(err)
}

// WriteAt writes p to the temporary file at off.
func (a *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := a.f.WriteAt(p, off)
	a.wrote(int64(n))
	return n, a.fix(err)
}

// ReadAt reads what was written, for a file that is filled in place.
func (a *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := a.f.ReadAt(p, off)
	return n, a.fix(err)
}

// Truncate sets the size of the file, with zeros past what was written.
func (a *File) Truncate(size int64) error {
	return a.fix(a.f.Truncate(size))
}

// ReadFrom keeps the temporary file's own ReadFrom, which may copy without
// a buffer (copy_file_range), for sequential writes from an *os.File.
func (a *File) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := a.f.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(r)
		a.wrote(n)
		return n, a.fix(err)
	}
	return io.Copy(struct{ io.Writer }{a}, r)
}

// fix returns err naming the path rather than the temporary file.
func (a *File) fix(err error) error {
	if err == nil {
		return nil
	}
	return PathError(err, a.f.Name(), a.path)
}

// Abort closes and removes the temporary file, unless it was committed or
// kept; later calls of Flush, Rename and Commit return an error wrapping
// os.ErrClosed.
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.err = &os.PathError{Op: "write", Path: a.path, Err: os.ErrClosed}
	if !a.flushed {
		a.f.Close()
	}
	hooks.Remove(a.f.Name())
}

// Commit syncs and closes the temporary file, renames it to the path and
// syncs the directory; on failure it removes it. A second call returns the
// result of the first.
func (a *File) Commit() error {
	if err := a.Flush(); err != nil {
		return err
	}
	if err := a.Rename(); err != nil {
		return err
	}
	SyncDir(filepath.Dir(a.path))
	return nil
}

// Flush syncs and closes the temporary file, the first half of Commit; on
// failure it removes it.
func (a *File) Flush() error {
	if a.done || a.flushed {
		return a.err
	}
	err := a.f.Sync()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.flushed = true // closed
	if err != nil {
		a.Abort()
		a.err = a.fix(err)
		return a.err
	}
	return nil
}

// Rename renames the flushed temporary file to the path, the second half
// of Commit, without syncing the directory; on failure it removes it.
func (a *File) Rename() error {
	if a.done {
		return a.err
	}
	if err := hooks.Rename(a.f.Name(), a.path); err != nil {
		a.Abort()
		a.err = PathError(err, a.f.Name(), a.path)
		return a.err
	}
	a.done = true
	return nil
}

// Keep leaves the flushed temporary file where it is, under its temporary
// name, which something else (an index that names it) now refers to:
// Abort no longer removes it.
func (a *File) Keep() { a.done = true }

// WriteFile writes the file at path with write, through a File, which it
// commits; on any error the temporary file is removed and path is left as
// it was.
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// PathError returns err with the temporary file's name tmp, where it
// gives it, replaced by path, the name the caller knows: an *os.PathError
// or *os.LinkError that names tmp becomes an *os.PathError for path with
// the same Op and Err; for a temporary folder (WriteDir), one that names a
// file inside tmp names the same file inside path. Other errors are
// returned as they are.
func PathError(err error, tmp, path string) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		if p, ok := rebase(pe.Path, tmp, path); ok {
			return &os.PathError{Op: pe.Op, Path: p, Err: pe.Err}
		}
	case errors.As(err, &le) && (le.Old == tmp || le.New == tmp):
		return &os.PathError{Op: le.Op, Path: path, Err: le.Err}
	}
	return err
}

// rebase returns name, tmp or a path inside it, with tmp replaced by path.
func rebase(name, tmp, path string) (string, bool) {
	if name == tmp {
		return path, true
	}
	if rest, ok := strings.CutPrefix(name, tmp+string(filepath.Separator)); ok {
		return filepath.Join(path, rest), true
	}
	return "", false
}

// MkdirTemp creates a new directory in dir whose name is prefix, ".tmp"
// and a random base-36 suffix, with mode 0777 less the umask, as the
// directory it becomes once renamed should have (os.MkdirTemp gives
// 0700), for a folder of files written whole and then renamed into place
// (WriteDir). It tries another suffix when a name is taken, up to 100
// times.
func MkdirTemp(dir, prefix string) (string, error) {
	var err error
	for range 100 {
		name := filepath.Join(dir, prefix+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		if err = os.Mkdir(name, 0o777); !errors.Is(err, os.ErrExist) {
			return name, err
		}
	}
	return "", err
}

// WriteDir puts the folder path in place whole, as a File does a file:
// write fills a new temporary folder beside it (MkdirTemp's, named like a
// File's temporary file), which is then synced, renamed to path, and its
// parent synced. On any error, the temporary folder and everything in it
// are removed, and path is left as it was; errors that name the temporary
// folder, or a file in it, name path, or the file in path, instead. The
// files that write puts in the folder should be synced (WriteNew,
// CopyFile, WriteFile) for the folder to survive a power cut whole. path
// should not exist: a rename replaces an empty folder.
func WriteDir(path string, write func(dir string) error) error {
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	tmp, err := MkdirTemp(parent, "."+filepath.Base(path))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
		}
		return err
	}
	if err := write(tmp); err != nil {
		os.RemoveAll(tmp)
		return PathError(err, tmp, path)
	}
	SyncDir(tmp)
	if err := hooks.Rename(tmp, path); err != nil {
		os.RemoveAll(tmp)
		return PathError(err, tmp, path)
	}
	SyncDir(parent)
	return nil
}

// WriteNew writes data into a new file at path, which must not exist, and
// syncs it: a file of a folder that WriteDir puts in place.
func WriteNew(path string, data []byte) error {
	return writeNew(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// CopyFile copies the regular file src into a new file dst, which must not
// exist, and syncs it: a file of a folder that WriteDir puts in place. src
// is opened as regular.Open opens it: anything but a regular file is
// refused (an error wrapping regular.ErrNotRegular), without waiting for a
// FIFO's writer. The copy gets mode 0666 less the umask.
func CopyFile(src, dst string) error {
	in, err := regular.Open(regular.OpenFile, src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeNew(dst, func(f *os.File) error {
		_, err := io.Copy(f, in)
		return err
	})
}

// writeNew creates the new file path, fills it with write, syncs it and
// closes it; on failure it removes it.
func writeNew(path string, write func(*os.File) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
