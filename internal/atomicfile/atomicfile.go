// Package atomicfile replaces files on disk without a moment when the
// destination is missing or half written: the new file is written under a
// temporary name in the destination's directory, synced, and renamed over
// the destination, and the directory is synced so that the rename survives
// a power cut. The core package, the dataset package and quant use it.
package atomicfile

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
)

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
// gives 0600). It tries another suffix when a name is taken.
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

// SyncDir makes the changes of names in dir (a file created, renamed or
// removed) durable where the platform allows it, by syncing the directory.
// It does nothing on Windows, where a directory opened for reading cannot
// be flushed (FlushFileBuffers is refused) and NTFS journals the rename
// itself, nor on Plan 9. It is best effort: the names are in place
// whatever happens, and only their durability is at stake.
func SyncDir(dir string) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// WriteFile writes the file at path with write, through a temporary file
// named as TempName names it, which is synced, closed and renamed over
// path; then it syncs the directory. If a regular file is at path, the new
// one takes its permission bits, so that a private file stays private. On
// any error the temporary file is removed and path is left as it was; the
// error names path, not the temporary file.
func WriteFile(path string, write func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	f, err := CreateTemp(dir, "."+base)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
		}
		return err
	}
	tmp := f.Name()
	if info, serr := os.Stat(path); serr == nil && info.Mode().IsRegular() {
		err = f.Chmod(info.Mode().Perm())
	}
	if err == nil {
		err = write(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return PathError(err, tmp, path)
	}
	SyncDir(dir)
	return nil
}

// PathError returns err with the temporary file's name tmp, where it
// gives it, replaced by path, the name the caller knows: an *os.PathError
// or *os.LinkError that names tmp becomes an *os.PathError for path with
// the same Op and Err. Other errors are returned as they are.
func PathError(err error, tmp, path string) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe) && pe.Path == tmp:
		return &os.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	case errors.As(err, &le) && (le.Old == tmp || le.New == tmp):
		return &os.PathError{Op: le.Op, Path: path, Err: le.Err}
	}
	return err
}
