// Package regular opens files that must be regular files, refusing a FIFO,
// a device, a directory or a socket before reading a byte, and without
// waiting for a FIFO's writer. The core package, the dataset and quant
// packages and the command open their inputs with it.
package regular

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// A NotRegularError is the error of Open for a file that is not a regular
// file; Mode says what it is.
type NotRegularError struct {
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("not a regular file (mode %v)", e.Mode)
}

// OpenFunc opens a file as os.OpenFile and os.Root.OpenFile do.
type OpenFunc func(name string, flag int, perm fs.FileMode) (*os.File, error)

// Open opens name for reading with open. Where opening a FIFO would wait
// for a writer (on Unix), it opens without blocking, checks, and makes the
// file blocking again. A file that is not regular is closed, and the error
// is a *NotRegularError; others are open's or Stat's.
func Open(open OpenFunc, name string) (*os.File, error) {
	f, err := open(name, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &NotRegularError{Mode: info.Mode()}
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
// not regular is refused with a *NotRegularError before a byte is read,
// without waiting for a FIFO's writer.
func ReadFile(open OpenFunc, name string) ([]byte, error) {
	f, err := Open(open, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
