package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/regular"
)

// openInput opens the named input file, refusing anything but a regular
// file (an error wrapping safetensors.ErrNotRegular) without blocking on
// a FIFO, which would wait for a writer.
func openInput(path string) (*os.File, error) {
	f, err := regular.Open(os.OpenFile, path)
	var nr *regular.NotRegularError
	if errors.As(err, &nr) {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (mode %v)", safetensors.ErrNotRegular, nr.Mode)}
	}
	return f, err
}
