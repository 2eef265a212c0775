package safetensors

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/safetensors-go/safetensors/internal/atomicfile"
)

// WriteFile writes tensors and metadata to the named file as Write does,
// streaming through a Writer with no copy of the whole file in memory. It
// never leaves a partial file at path: it writes a temporary file in the
// same directory, syncs it to disk, renames it to path, and then syncs the
// directory where the platform allows. On any error the temporary file is
// removed and an existing file at path is left as it was. Nothing is created
// if the tensors are invalid. Errors name path, not the temporary file.
//
// A file that replaces another keeps its permission bits (a file of mode
// 0600 stays private), though not its owner or other attributes; a new file
// gets mode 0666 minus the umask. A symbolic link at path is replaced by
// the new file, which takes the mode of the file the link pointed to; that
// file is left as it was. This is what the Hugging Face cache needs, whose
// snapshots are links into a directory of content-addressed blobs shared
// by several revisions: writing through the link would change a blob under
// the name of another content. To write through a link, resolve it first
// with filepath.EvalSymlinks.
func WriteFile(path string, tensors []Tensor, metadata map[string]string, opts ...WriteOption) error {
	pl, err := planTensors(tensors, metadata, opts)
	if err != nil {
		return err
	}
	f, err := createAtomic(path)
	if err != nil {
		return err
	}
	if err := writeTensors(f.f, pl, tensors); err != nil {
		f.abort()
		return err
	}
	return f.commit()
}

// A FileWriter is a Writer to a file that appears at its path, complete,
// only when Close succeeds; see CreateFile.
type FileWriter struct {
	*Writer
	f *atomicFile
}

// CreateFile starts writing a safetensors file at path, for tensors too
// large to hold in memory: it validates the tensors as NewWriter does and
// returns a FileWriter, whose Writer methods take the tensors' bytes, into a
// temporary file in the same directory. WriteTensorAt works, since the
// temporary file is an *os.File: tensors may be written in any order by
// several goroutines, as the Writer's rules allow. Close then checks that every byte arrived, syncs the
// file and renames it to path; if anything failed, including a source passed
// to WriteTensor, Close removes the temporary file and leaves an existing
// file at path as it was. Abort gives up explicitly. Modes, symbolic links
// and errors are as for WriteFile.
func CreateFile(path string, specs []TensorSpec, metadata map[string]string, opts ...WriteOption) (*FileWriter, error) {
	pl, err := planSpecs(specs, metadata, opts)
	if err != nil {
		return nil, err
	}
	f, err := createAtomic(path)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(f.f, pl)
	if err != nil {
		f.abort()
		return nil, err
	}
	return &FileWriter{Writer: w, f: f}, nil
}

// Close completes the file: it returns the error of Writer.Close or of an
// earlier write, having removed the temporary file, or it syncs the file and
// renames it into place. Close may be called again, and returns the same
// result.
func (fw *FileWriter) Close() error {
	if err := fw.Writer.Close(); err != nil {
		fw.f.abort()
		return err
	}
	return fw.f.commit()
}

// Abort stops writing and removes the temporary file; nothing appears at
// the path. After Abort, Close returns ErrClosed.
func (fw *FileWriter) Abort() {
	fw.Writer.mu.Lock()
	fw.Writer.closed = true
	fw.Writer.fail(ErrClosed)
	fw.Writer.mu.Unlock()
	fw.f.abort()
}

// fileWriter is what an atomicFile needs of its temporary file.
type fileWriter interface {
	io.Writer
	io.WriterAt
	Sync() error
	Close() error
	Chmod(mode os.FileMode) error
	Name() string
}

// createTemp creates a temporary file; tests replace it to simulate failing
// disks.
var createTemp = func(name string) (fileWriter, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// The file-system operations by which the writers put files in place and
// clean up; tests replace them to fail or crash at each step.
var (
	renameFile = os.Rename
	linkFile   = os.Link
	removeFile = os.Remove
)

// TempPattern describes the names of the temporary files that WriteFile,
// CreateFile and the sharded writers write before renaming them into place,
// in the destination's directory: a dot, the destination's file name,
// ".tmp" and a random base-36 suffix, as in
// .model.safetensors.tmp3k0v9x2hq1s7. A writer removes its temporary files
// when it fails, is aborted or completes; only a process killed outright
// (SIGKILL, a power cut) leaves them behind, and those that no running
// writer owns can be deleted.
const TempPattern = ".*.tmp*"

// atomicFile is a temporary file that replaces the file at path when it is
// committed, and disappears when it is aborted.
type atomicFile struct {
	f       fileWriter
	path    string
	done    bool  // committed or aborted
	flushed bool  // synced and closed, not yet renamed
	err     error // the result of commit
}

// tempName returns a new temporary name for the file at path, in its
// directory.
func tempName(path string) string { return atomicfile.TempName(path) }

// createAtomic creates the temporary file for path, in the same directory
// so that the rename is atomic. When a file is already at path, the
// temporary file takes its permission bits, which the rename keeps: a
// private file stays private.
func createAtomic(path string) (*atomicFile, error) {
	var f fileWriter
	var tmp string
	var err error
	for range 100 {
		tmp = tempName(path)
		f, err = createTemp(tmp)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, targetError(err, tmp, path)
	}
	if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
		if err := f.Chmod(info.Mode().Perm()); err != nil {
			f.Close()
			removeFile(tmp)
			return nil, targetError(err, tmp, path)
		}
	}
	return &atomicFile{f: &targetFile{fileWriter: f, path: path}, path: path}, nil
}

// targetError returns err with the temporary file's name tmp, if it gives
// it, replaced by path, the name the caller gave: the temporary file is an
// internal detail, and gone once the error is returned.
func targetError(err error, tmp, path string) error { return atomicfile.PathError(err, tmp, path) }

// targetFile is a temporary file whose errors name the destination.
type targetFile struct {
	fileWriter
	path string
}

func (t *targetFile) Write(p []byte) (int, error) {
	n, err := t.fileWriter.Write(p)
	return n, t.fix(err)
}

func (t *targetFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := t.fileWriter.WriteAt(p, off)
	return n, t.fix(err)
}

// ReadFrom keeps the file's own ReadFrom, which may copy without a buffer
// (copy_file_range), for sequential writes from an *os.File.
func (t *targetFile) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := t.fileWriter.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(r)
		return n, t.fix(err)
	}
	return io.Copy(struct{ io.Writer }{t}, r)
}

func (t *targetFile) Sync() error  { return t.fix(t.fileWriter.Sync()) }
func (t *targetFile) Close() error { return t.fix(t.fileWriter.Close()) }

func (t *targetFile) fix(err error) error {
	if err == nil {
		return nil
	}
	return targetError(err, t.fileWriter.Name(), t.path)
}

// abort closes and removes the temporary file, unless it was committed.
func (a *atomicFile) abort() {
	if a.done {
		return
	}
	a.done = true
	a.err = ErrClosed
	if !a.flushed {
		a.f.Close()
	}
	removeFile(a.f.Name())
}

// commit syncs and closes the temporary file and renames it to the path;
// on failure it removes it.
func (a *atomicFile) commit() error {
	if err := a.flush(); err != nil {
		return err
	}
	if err := a.rename(); err != nil {
		return err
	}
	syncDir(filepath.Dir(a.path))
	return nil
}

// flush syncs and closes the temporary file, the first half of commit; on
// failure it removes it.
func (a *atomicFile) flush() error {
	if a.done || a.flushed {
		return a.err
	}
	err := a.f.Sync()
	if err == nil {
		err = a.f.Close()
	}
	if err != nil {
		a.abort()
		a.err = err
		return err
	}
	a.flushed = true
	return nil
}

// rename renames the flushed temporary file to the path, the second half
// of commit; on failure it removes it.
func (a *atomicFile) rename() error {
	if a.done {
		return a.err
	}
	if err := renameFile(a.f.Name(), a.path); err != nil {
		a.abort()
		a.err = targetError(err, a.f.Name(), a.path)
		return a.err
	}
	a.done = true
	return nil
}

// syncDir makes a rename in dir durable where the platform allows, as
// atomicfile.SyncDir does. Tests that simulate full disks replace it, to
// run faster.
var syncDir = atomicfile.SyncDir
