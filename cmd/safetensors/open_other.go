//go:build !unix

package main

import (
	"fmt"
	"os"
)

// openInput opens the named input file, refusing anything but a regular
// file.
func openInput(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("not a regular file (mode %v)", info.Mode())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
