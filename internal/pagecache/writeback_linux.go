//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pagecache

import (
	"os"
	"syscall"
)

// syncFileRangeWrite is sync_file_range(2)'s SYNC_FILE_RANGE_WRITE.
const syncFileRangeWrite = 2

// StartWriteback asks the kernel to start writing f's dirty pages to disk
// now (sync_file_range SYNC_FILE_RANGE_WRITE over the whole file), without
// waiting for them, so that a writer that syncs f at the end (as
// atomicfile does) finds most of its bytes on disk already: the device
// writes while the writer computes the bytes that follow, instead of after
// it. It gives no durability of its own (it neither waits for the pages
// nor flushes the device's cache, nor touches the metadata): the final
// sync does. It may wait while the device's queue is full. It is a hint,
// and its failure is ignored.
func StartWriteback(f *os.File) {
	syscall.Syscall6(syscall.SYS_SYNC_FILE_RANGE, f.Fd(), 0, 0, syncFileRangeWrite, 0, 0)
}
