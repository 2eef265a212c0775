//go:build unix

package regular

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOpenFIFO: a FIFO with no writer is refused at once, and a regular
// file comes back blocking.
func TestOpenFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	for name, open := range map[string]func() error{
		"Open":     func() error { _, err := Open(os.OpenFile, fifo); return err },
		"ReadFile": func() error { _, err := ReadFile(os.OpenFile, fifo); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- open() }()
		select {
		case err := <-done:
			var nr *NotRegularError
			require.True(t, errors.As(err, &nr), "%s: %v", name, err)
			assert.Equal(t, os.ModeNamedPipe, nr.Mode.Type())
			assertRefusal(t, err, fifo)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s of a FIFO blocked", name)
		}
	}

	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	f, err := Open(os.OpenFile, path)
	require.NoError(t, err)
	defer f.Close()
	rc, err := f.SyscallConn() // not f.Fd(), which makes the file blocking
	require.NoError(t, err)
	var flags int
	require.NoError(t, rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }))
	require.NoError(t, err)
	assert.Zero(t, flags&unix.O_NONBLOCK, "blocking again")
}
