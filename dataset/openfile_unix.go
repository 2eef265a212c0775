//go:build unix

package dataset

import "syscall"

// nonBlock is the flag that makes opening a FIFO return at once instead of
// waiting for a writer; regular files ignore it.
const nonBlock = syscall.O_NONBLOCK
