//go:build !unix

package main

import (
	"fmt"
	"os"

	"github.com/safetensors-go/safetensors"
)

// openInput opens the named input file, refusing anything but a regular
// file (an error wrapping safetensors.ErrNotRegular).
func openInput(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %v)", safetensors.ErrNotRegular, info.Mode())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
