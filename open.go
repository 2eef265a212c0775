package safetensors

import (
	"errors"
	"fmt"
	"os"

	"github.com/safetensors-go/safetensors/internal/regular"
)

// ErrNotRegular is returned by Open, Load, the checkpoint package and the
// other functions that open files by name for a path that is not a regular
// file: a directory, a FIFO, a device or a socket. They refuse it before
// reading a byte, and without waiting for a FIFO's writer. For a
// directory, the error names the calls that open a model's folder.
var ErrNotRegular = regular.ErrNotRegular

// openRegular opens the named file for reading as regular.Open does,
// refusing anything but a regular file without blocking on a FIFO; the
// refusal of a directory says which calls open a model's folder.
func openRegular(path string) (*os.File, error) {
	f, err := regular.Open(regular.OpenFile, path)
	var nr *regular.NotRegularError
	if errors.As(err, &nr) && nr.Mode.IsDir() {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: a directory; a model's folder opens with the checkpoint package's Open, and loads whole with its Load", ErrNotRegular)}
	}
	return f, err
}
