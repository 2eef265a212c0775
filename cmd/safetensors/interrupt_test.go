//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandEnv, set in a child process, makes TestCommandChild run the
// command with the arguments it holds, separated by newlines.
const commandEnv = "SAFETENSORS_TEST_COMMAND"

// TestCommandChild runs the command, with its own signal handling, in a
// child process of the tests that interrupt it.
func TestCommandChild(t *testing.T) {
	args := os.Getenv(commandEnv)
	if args == "" {
		t.Skip("run by the interrupt tests")
	}
	os.Exit(run(strings.Split(args, "\n"), os.Stdout, os.Stderr))
}

// startCommand starts the command with args in a child process.
func startCommand(t *testing.T, args ...string) (*exec.Cmd, *strings.Builder) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommandChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), commandEnv+"="+strings.Join(args, "\n"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skip("the test binary cannot run itself again: the kernel does not know its architecture (under qemu-user, register qemu with binfmt_misc, as .ci/run does)")
	}
	require.NoError(t, err)
	return cmd, &out
}

// sparseModel writes a safetensors file of one F32 tensor of the given
// size in bytes, all zeros, as a sparse file that costs no disk.
func sparseModel(t *testing.T, path string, size uint64) {
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	w, err := safetensors.NewWriter(f, []safetensors.TensorSpec{{Name: "w", DType: safetensors.F32, Shape: []uint64{size / 4}}}, nil)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(w.Header().DataOffset()+size)))
}

// waitTemp waits until a temporary file appears in dir and returns true, or
// returns false when the command has exited.
func waitTemp(dir string, exited <-chan struct{}) bool {
	for {
		matches, _ := filepath.Glob(filepath.Join(dir, safetensors.TempPattern))
		if len(matches) > 0 {
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(time.Millisecond):
		}
	}
}

// TestConvertInterrupted interrupts convert with SIGINT and SIGTERM while
// it writes, and checks that it exits with 128 plus the signal's number and
// leaves neither the output nor a temporary file.
func TestConvertInterrupted(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.safetensors")
	sparseModel(t, in, 4<<30) // more than convert can write before the signal
	tries := 3
	if testing.Short() {
		tries = 1
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for range tries {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.safetensors")
			cmd, output := startCommand(t, "convert", "--dtype", "BF16", in, out)
			exited := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(exited) }()
			require.True(t, waitTemp(dir, exited), "convert ended before it was interrupted: %s", output)
			require.NoError(t, cmd.Process.Signal(sig))
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("convert did not stop")
			}
			var exit *exec.ExitError
			require.True(t, errors.As(waitErr, &exit), "%v: %s", waitErr, output)
			assert.Equal(t, 128+int(sig), exit.ExitCode(), output.String())
			assert.Contains(t, output.String(), "interrupted")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Empty(t, entries, "after %v", sig)
		}
	}
}

// TestConvertFIFO checks that convert refuses a FIFO at once, as every
// command does, with status 2: it could not be read.
func TestConvertFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "in.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	done := make(chan int, 1)
	var stderr string
	go func() {
		var status int
		status, _, stderr = runCmd("convert", "--dtype", "F16", fifo, filepath.Join(dir, "out.safetensors"))
		done <- status
	}()
	select {
	case status := <-done:
		assert.Equal(t, exitTrouble, status)
		assert.Contains(t, stderr, ": not a regular file (mode p")
	case <-time.After(30 * time.Second): // a hang, not slowness
		t.Fatal("convert blocked on a FIFO")
	}
	for _, cmd := range [][]string{{"inspect"}, {"validate"}, {"validate", "--values"}, {"stats"}} {
		done := make(chan int, 1)
		go func() {
			status, _, _ := runCmd(append(cmd, fifo)...)
			done <- status
		}()
		select {
		case status := <-done:
			assert.Equal(t, exitTrouble, status, "%v", cmd)
		case <-time.After(30 * time.Second): // a hang, not slowness
			t.Fatalf("%v blocked on a FIFO", cmd)
		}
	}
}

// TestTruncatedWhileRead truncates the file that stats, validate --values
// and convert are reading through a mapping: they exit with 2 (the file
// could not be read) and say why, rather than being killed by SIGBUS, and
// convert leaves no file. On a 32-bit host the file, of 8 GiB, does not fit
// in the address space: they read it through ReadAt, a chunk at a time.
func TestTruncatedWhileRead(t *testing.T) {
	mapped := "truncated while mapped"
	if strconv.IntSize == 32 {
		mapped = "truncated while it was read"
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"stats"}, mapped},
		{[]string{"validate", "--values"}, mapped},
		{[]string{"convert", "--dtype", "BF16"}, mapped},
	} {
		t.Run(tt.args[0], func(t *testing.T) {
			for try := 0; ; try++ {
				dir := t.TempDir()
				in := filepath.Join(dir, "in.safetensors")
				sparseModel(t, in, 8<<30) // zeros read from holes: fast, but not instant
				args := append(tt.args, in)
				if tt.args[0] == "convert" {
					args = append(args, filepath.Join(dir, "out.safetensors"))
				}
				cmd, output := startCommand(t, args...)
				exited := make(chan struct{})
				var waitErr error
				go func() { waitErr = cmd.Wait(); close(exited) }()
				// Longer on each try: under an emulator, opening takes
				// longer than on the host.
				time.Sleep(300 * time.Millisecond << try)
				require.NoError(t, os.Truncate(in, 4096))
				select {
				case <-exited:
				case <-time.After(60 * time.Second):
					cmd.Process.Kill()
					t.Fatal("the command did not stop")
				}
				if !strings.Contains(output.String(), tt.want) && try < 4 {
					continue // it had not opened the file, or had finished
				}
				var exit *exec.ExitError
				require.True(t, errors.As(waitErr, &exit), "%v: %s", waitErr, output)
				assert.Equal(t, exitTrouble, exit.ExitCode(), output.String())
				assert.Contains(t, output.String(), tt.want)
				assert.Contains(t, output.String(), in)
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Len(t, entries, 1, "only the input is left")
				return
			}
		})
	}
}
