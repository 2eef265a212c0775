// Package regular opens files that must be regular files, refusing a FIFO,
// a device, a directory or a socket before reading a byte, and without
// waiting for a FIFO's writer. It is the module's one way to refuse such a
// file: the core package, the checkpoint, dataset, load and quant packages
// and the command open their inputs with it, and its refusal is the one
// error, ErrNotRegular, that the core package exports.
package regular

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is what every refusal of a file that is not a regular file
// wraps. The core package exports it as safetensors.ErrNotRegular.
var ErrNotRegular = errors.New("safetensors: not a regular file")

// A NotRegularError is the refusal of a file that is not a regular file;
// Mode says what it is. It wraps ErrNotRegular.
type NotRegularError struct {
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%v (mode %v)", ErrNotRegular, e.Mode)
}

// Unwrap returns ErrNotRegular.
func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// Check returns nil if info is that of a regular file, and otherwise the
// refusal of the file at path: an *os.PathError whose Err is a
// *NotRegularError.
func Check(path string, info fs.FileInfo) error {
	if info.Mode().IsRegular() {
		return nil
	}
	return &os.PathError{Op: "open", Path: path, Err: &NotRegularError{Mode: info.Mode()}}
}

// OpenFunc opens a file as os.OpenFile and os.Root.OpenFile do.
type OpenFunc func(name string, flag int, perm fs.FileMode) (*os.File, error)

// Open opens name for reading with open. Where opening a FIFO would wait
// for a writer (on Unix), it opens without blocking, checks, and makes the
// file blocking again. A file that is not regular is closed and refused
// with Check's error, which names name and wraps ErrNotRegular; the other
// errors are open's or Stat's.
func Open(open OpenFunc, name string) (*os.File, error) {
	f, err := open(name, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil {
		err = Check(name, info)
	}
	if err == nil {
		if err = setBlocking(f); err != nil {
			err = &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the whole file name, opened with Open: a file that is
// not regular is refused as Open refuses it, before a byte is read,
// without waiting for a FIFO's writer.
func ReadFile(open OpenFunc, name string) ([]byte, error) {
	f, err := Open(open, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
