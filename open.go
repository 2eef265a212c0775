package safetensors

import (
	"errors"
	"fmt"
	"os"
)

// isRegular returns an error naming path if f is not a regular file: a
// directory, a device, a FIFO or a socket, whose reads could block forever
// or never end.
func isRegular(f *os.File, path string) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %v)", ErrNotRegular, info.Mode())}
	}
	return nil
}

// ErrNotRegular is returned by Open, OpenIndex and the other functions that
// open files by name for a path that is not a regular file: a directory, a
// FIFO, a device or a socket. They refuse it before reading a byte, and
// without waiting for a FIFO's writer.
var ErrNotRegular = errors.New("safetensors: not a regular file")
