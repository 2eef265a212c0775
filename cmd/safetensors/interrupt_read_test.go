//go:build unix

package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadInterrupted interrupts check and diff with SIGINT while they read
// the values of a large model, and checks that they stop with 130, as
// convert does, saying they were interrupted, instead of reading on.
func TestReadInterrupted(t *testing.T) {
	if strconv.IntSize == 32 {
		t.Skip("the file does not fit in the address space: its one tensor is too large to read, and the commands end at once")
	}
	in := filepath.Join(t.TempDir(), "in.safetensors")
	sparseModel(t, in, 8<<30) // zeros read from holes: fast, but not instant
	for _, args := range [][]string{{"check", in}, {"diff", in, in}} {
		t.Run(args[0], func(t *testing.T) {
			for try := 0; ; try++ {
				cmd, output := startCommand(t, args...)
				exited := make(chan struct{})
				var waitErr error
				go func() { waitErr = cmd.Wait(); close(exited) }()
				// Longer on each try: under an emulator, starting takes
				// longer than on the host, and a signal that comes before
				// the command catches it kills it.
				time.Sleep(200 * time.Millisecond << try)
				require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
				select {
				case <-exited:
				case <-time.After(60 * time.Second):
					cmd.Process.Kill()
					t.Fatal("the command did not stop")
				}
				var exit *exec.ExitError
				require.True(t, errors.As(waitErr, &exit), "%v: %s", waitErr, output)
				if exit.ExitCode() != 128+int(syscall.SIGINT) && try < 4 {
					continue // killed before it caught the signal
				}
				assert.Equal(t, 128+int(syscall.SIGINT), exit.ExitCode(), output.String())
				assert.True(t, strings.Contains(output.String(), "interrupted"), output.String())
				return
			}
		})
	}
}
