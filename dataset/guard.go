package dataset

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/safetensors-go/safetensors/internal/regular"
)

// openRegular opens name inside root for reading without blocking, and
// refuses anything but a regular file (a FIFO, a device, a directory) with
// an error wrapping ErrInvalidDataset that names it.
func openRegular(root *os.Root, dir, name string) (*os.File, error) {
	f, err := regular.Open(root.OpenFile, name)
	var nr *regular.NotRegularError
	if errors.As(err, &nr) {
		return nil, fmt.Errorf("%w: %s: %s is not a regular file (mode %v)", ErrInvalidDataset, dir, name, nr.Mode)
	}
	return f, err
}

// faultError reports whether p, a recovered panic, is a memory fault that
// debug.SetPanicOnFault turned into a panic.
func faultError(p any) bool {
	_, ok := p.(interface{ Addr() uintptr })
	return ok
}

// guarded runs f, which reads the mapped memory of the shard named shard,
// with faults turned into an error wrapping ErrShardFault: a shard that
// another process truncates while it is mapped makes the missing pages
// fault, which would otherwise kill the process.
func guarded(dir, shard string, f func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if !faultError(p) {
				panic(p)
			}
			err = fmt.Errorf("%w: %s: shard %s: %v", ErrShardFault, dir, shard, p)
		}
	}()
	f()
	return nil
}
