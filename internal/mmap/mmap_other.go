//go:build !unix && !windows

package mmap

import (
	"errors"
	"os"
)

// Supported reports whether Map maps files on this platform: not here
// (js, wasip1, plan9).
const Supported = false

func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: errors.ErrUnsupported}
}
