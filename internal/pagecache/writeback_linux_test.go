//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pagecache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dirtyPages returns how many of f's pages are dirty, as cachestat(2)
// tells, and false where the kernel does not tell (before Linux 6.5).
func dirtyPages(f *os.File) (uint64, bool) {
	r := cachestatRange{off: 0, len: 0} // len 0: to the end of the file
	var c cachestat
	_, _, errno := syscall.Syscall6(sysCachestat, f.Fd(), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&c)), 0, 0, 0)
	return c.dirty, errno == 0
}

// TestStartWriteback writes 4 MiB to a new file, which leaves its pages
// dirty (the kernel writes dirty pages out on its own only after 30 s or
// once many are dirty), and StartWriteback has them written out: none is
// dirty soon after it returns, though nothing synced the file.
func TestStartWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 4<<20))
	require.NoError(t, err)
	dirty, ok := dirtyPages(f)
	if !ok || dirty == 0 {
		t.Skipf("the kernel does not tell (%v) or the file system keeps no dirty pages (%d): nothing to observe", ok, dirty)
	}
	StartWriteback(f)
	deadline := time.Now().Add(2 * time.Second)
	for dirty, _ = dirtyPages(f); dirty != 0 && time.Now().Before(deadline); dirty, _ = dirtyPages(f) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Zero(t, dirty, "dirty pages left after StartWriteback")
}
