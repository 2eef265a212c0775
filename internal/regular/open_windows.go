//go:build windows

package regular

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// OpenFile opens a file as os.OpenFile does, except that a file opened for
// reading only is shared for deletion as well as for reading and writing
// (FILE_SHARE_DELETE, which os.OpenFile leaves out): while it is open, and
// mapped, another process (or this one) can rename it, delete it, or
// rename another file over it, as on Unix; Windows still refuses to
// replace a file while a view of it is mapped, which is why the module's
// replacements say when a process has the file open (ErrInUse in
// internal/atomicfile). Directories open too, so that Open refuses them
// as not regular. Other flags go to os.OpenFile.
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC|os.O_EXCL) != 0 {
		return os.OpenFile(name, flag, perm)
	}
	if name == "" {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ERROR_FILE_NOT_FOUND}
	}
	p, err := syscall.UTF16PtrFromString(longPath(name))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	h, err := syscall.CreateFile(p, syscall.GENERIC_READ,
		syscall.FILE_SHARE_READ|syscall.FILE_SHARE_WRITE|syscall.FILE_SHARE_DELETE,
		nil, syscall.OPEN_EXISTING,
		syscall.FILE_ATTRIBUTE_NORMAL|syscall.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(h), name), nil
}

// longPath returns name in the \\?\ form that lifts the MAX_PATH limit of
// 260 characters when it is longer than the limit allows for a file in a
// folder (248), as os.OpenFile does.
func longPath(name string) string {
	if len(name) < 248 || strings.HasPrefix(name, `\\?\`) || strings.HasPrefix(name, `\\.\`) {
		return name
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return name
	}
	if rest, ok := strings.CutPrefix(abs, `\\`); ok {
		return `\\?\UNC\` + rest
	}
	return `\\?\` + abs
}
