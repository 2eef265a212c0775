//go:build unix

package regular

import (
	"os"
	"syscall"
)

// nonBlock makes opening a FIFO return at once instead of waiting for a
// writer.
const nonBlock = syscall.O_NONBLOCK

// setBlocking clears O_NONBLOCK on f, a regular file.
func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), false) }); cerr != nil {
		return cerr
	}
	return err
}
