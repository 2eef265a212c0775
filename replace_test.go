package safetensors

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replaceChildEnv names the model that TestReplaceChild holds open.
const replaceChildEnv = "SAFETENSORS_TEST_REPLACE_CHILD"

// TestReplaceChild, run by TestReplaceOpenInAnotherProcess, opens (maps)
// the model named by replaceChildEnv, says "open", waits for a line on
// its input, and then checks that it still reads the model it opened.
func TestReplaceChild(t *testing.T) {
	path := os.Getenv(replaceChildEnv)
	if path == "" {
		t.Skip("run by TestReplaceOpenInAnotherProcess")
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	fmt.Println("open")
	bufio.NewReader(os.Stdin).ReadString('\n')
	ref, err := NewReader(want)
	require.NoError(t, err)
	for _, name := range ref.Names() {
		got, err := r.Tensor(name)
		require.NoError(t, err)
		exp, _ := ref.Tensor(name)
		require.Equal(t, exp.Data, got.Data, name)
	}
	fmt.Println("read the model it opened")
}

// TestReplaceOpenInAnotherProcess: a model that a Reader in another
// process has open and mapped is replaced by WriteFile on Unix, the
// Reader reading on from the old file; Windows refuses the replacement
// with ErrFileInUse and leaves the file as it was. Once the other process
// has closed it, WriteFile replaces it everywhere.
func TestReplaceOpenInAnotherProcess(t *testing.T) {
	if os.Getenv(replaceChildEnv) != "" {
		t.Skip("in the child")
	}
	old := generateModel(t, 20)
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, os.WriteFile(path, old, 0o644))
	newer := []Tensor{{Name: "other", DType: U8, Shape: []uint64{3}, Data: []byte{1, 2, 3}}}

	cmd := exec.Command(os.Args[0], "-test.run=^TestReplaceChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), replaceChildEnv+"="+path)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	outPipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skip("the test binary cannot run itself again: the kernel does not know its architecture (under qemu-user, register qemu with binfmt_misc, as .ci/run does)")
	}
	require.NoError(t, err)
	out := bufio.NewReader(outPipe)
	var lines []string
	for {
		line, err := out.ReadString('\n')
		lines = append(lines, line)
		if strings.TrimSpace(line) == "open" {
			break
		}
		if err != nil {
			in.Close()
			cmd.Wait()
			t.Fatalf("the child did not open the model: %q\n%s", lines, stderr.String())
		}
	}

	err = WriteFile(path, newer, nil)
	if runtime.GOOS == "windows" && err != nil {
		assert.ErrorIs(t, err, ErrFileInUse)
		assert.ErrorContains(t, err, path)
		got, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		assert.Equal(t, old, got, "the file refused is left as it was")
		t.Logf("Windows refused to replace the mapped file: %v", err)
	} else {
		require.NoError(t, err, "replacing a model another process has open")
	}

	io.WriteString(in, "\n")
	in.Close()
	rest, _ := io.ReadAll(out)
	require.NoError(t, cmd.Wait(), "child:\n%s%s\n%s", strings.Join(lines, ""), rest, stderr.String())
	assert.Contains(t, string(rest), "read the model it opened")

	require.NoError(t, WriteFile(path, newer, nil), "replacing the model once the other process closed it")
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, []string{"other"}, r.Names())
}
