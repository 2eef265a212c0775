//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/safetensors-go/safetensors"
)

// openInput opens the named input file, refusing anything but a regular
// file (an error wrapping safetensors.ErrNotRegular) without blocking on
// a FIFO, which would wait for a writer.
func openInput(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %v)", safetensors.ErrNotRegular, info.Mode())}
	}
	if err == nil {
		var rc syscall.RawConn
		if rc, err = f.SyscallConn(); err == nil {
			err = rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), false) })
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
