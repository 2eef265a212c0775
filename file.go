package safetensors

import (
	"github.com/safetensors-go/safetensors/internal/atomicfile"
)

// ErrFileInUse is wrapped by the error of WriteFile, FileWriter.Close and
// the other functions of this module that replace a file (the checkpoint
// package's writers and Convert, the dataset writer, quant's writers) when
// Windows refuses the replacement: a process has the file open without
// sharing it for deletion, or mapped, as a Reader maps it. Unix replaces
// such a file and the process keeps the old one; on Windows, close the
// file's readers first, or write to another name.
var ErrFileInUse = atomicfile.ErrInUse

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
//
// A file that a Reader, in this process or another, has open and mapped
// is replaced on Unix, the Reader keeping the old file's bytes. Windows
// refuses to replace a file that is mapped or open without sharing it
// for deletion (this module's readers share it): the error then wraps
// ErrFileInUse, and path is left as it was.
func WriteFile(path string, tensors []Tensor, metadata map[string]string, opts ...WriteOption) error {
	pl, err := planTensors(tensors, metadata, opts)
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	if err := writeTensors(f, pl, tensors); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// A FileWriter is a Writer to a file that appears at its path, complete,
// only when Close succeeds; see CreateFile.
type FileWriter struct {
	*Writer
	f *atomicfile.File
}

// CreateFile starts writing a safetensors file at path, for tensors too
// large to hold in memory: it validates the tensors as NewWriter does and
// returns a FileWriter, whose Writer methods take the tensors' bytes, into a
// temporary file in the same directory. WriteTensorAt works, since the
// temporary file is an *os.File: tensors may be written in any order by
// several goroutines, as the Writer's rules allow. Close then checks that every byte arrived, syncs the
// file and renames it to path; if anything failed, including a source passed
// to WriteTensor, Close removes the temporary file and leaves an existing
// file at path as it was. Abort gives up explicitly. Modes, symbolic links,
// files in use (ErrFileInUse) and errors are as for WriteFile.
func CreateFile(path string, specs []TensorSpec, metadata map[string]string, opts ...WriteOption) (*FileWriter, error) {
	pl, err := planSpecs(specs, metadata, opts)
	if err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(f, pl)
	if err != nil {
		f.Abort()
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
		fw.f.Abort()
		return err
	}
	return fw.f.Commit()
}

// Abort stops writing and removes the temporary file; nothing appears at
// the path. After Abort, Close returns ErrClosed.
func (fw *FileWriter) Abort() {
	fw.Writer.mu.Lock()
	fw.Writer.closed = true
	fw.Writer.fail(ErrClosed)
	fw.Writer.mu.Unlock()
	fw.f.Abort()
}

// TempPattern describes the names of the temporary files that WriteFile,
// CreateFile and the checkpoint package's writers write before renaming
// them into place, in the destination's directory: a dot, the
// destination's file name, ".tmp" and a random base-36 suffix, as in
// .model.safetensors.tmp3k0v9x2hq1s7. A writer removes its temporary files
// when it fails, is aborted or completes; only a process killed outright
// (SIGKILL, a power cut) leaves them behind, and those that no running
// writer owns can be deleted.
const TempPattern = ".*.tmp*"
