//go:build unix

package dataset

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within fails the test if f does not return within 10 seconds.
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked")
	}
}

// TestFIFO puts a FIFO where the manifest, a shard and the index's part
// file are: Open and lookups refuse it at once.
func TestFIFO(t *testing.T) {
	fifo := func(t *testing.T, path string) {
		require.NoError(t, os.RemoveAll(path))
		require.NoError(t, syscall.Mkfifo(path, 0o644))
	}
	t.Run("manifest", func(t *testing.T) {
		dir := writeSmall(t)
		fifo(t, filepath.Join(dir, ManifestName))
		within(t, func() {
			_, err := Open(dir)
			assert.ErrorIs(t, err, ErrInvalidDataset)
			assert.ErrorIs(t, err, safetensors.ErrNotRegular)
			assert.ErrorContains(t, err, "not a regular file")
		})
	})
	t.Run("shard", func(t *testing.T) {
		dir := writeSmall(t)
		fifo(t, filepath.Join(dir, readManifest(t, dir).Shards[1].Path))
		within(t, func() {
			_, err := Open(dir)
			assert.ErrorIs(t, err, ErrInvalidDataset)
			assert.ErrorIs(t, err, safetensors.ErrNotRegular)
			assert.ErrorContains(t, err, "not a regular file")
		})
	})
	t.Run("index", func(t *testing.T) {
		dir := writeSmall(t)
		parts, err := filepath.Glob(filepath.Join(dir, IndexName, "part-*"))
		require.NoError(t, err)
		require.Len(t, parts, 1)
		fifo(t, parts[0])
		d, err := Open(dir)
		require.NoError(t, err)
		defer d.Close()
		within(t, func() {
			_, err := d.Tensor("image")
			assert.ErrorIs(t, err, ErrInvalidDataset)
		})
	})
	t.Run("single-file index", func(t *testing.T) {
		dir := writeSmall(t)
		fifo(t, filepath.Join(dir, IndexName))
		d, err := Open(dir)
		require.NoError(t, err)
		defer d.Close()
		within(t, func() {
			_, err := d.Tensor("image")
			assert.ErrorIs(t, err, ErrInvalidDataset)
		})
	})
}

// TestTruncatedWhileMapped truncates a shard while its samples are read:
// an error that names the shard, not a crash.
func TestTruncatedWhileMapped(t *testing.T) {
	dir := t.TempDir()
	cols := []Column{{Name: "x", DType: safetensors.U8, Shape: []uint64{64 << 10}}}
	w, err := Create(dir, Batch, cols, BatchSize(8))
	require.NoError(t, err)
	x := make([]byte, 64<<10)
	for i := range 8 {
		x[0] = byte(i)
		require.NoError(t, w.WriteSample(x))
	}
	require.NoError(t, w.Close())
	shard := readManifest(t, dir).Shards[0].Path
	d, err := Open(dir)
	require.NoError(t, err)
	defer d.Close()
	n := 0
	var last error
	for smp, err := range d.Samples(context.Background()) {
		if err != nil {
			last = err
			break
		}
		assert.Equal(t, byte(n), smp.Tensors[0].Data[0])
		n++
		if n == 2 {
			require.NoError(t, os.Truncate(filepath.Join(dir, shard), 0))
		}
	}
	assert.Equal(t, 2, n)
	require.ErrorIs(t, last, ErrShardFault)
	require.ErrorIs(t, last, safetensors.ErrFileChanged, "the core's guard found the shard's mapping")
	assert.ErrorContains(t, last, filepath.Join(dir, shard))
	assert.ErrorContains(t, last, "sample 2: ")
	var te *safetensors.TensorError
	require.ErrorAs(t, last, &te)
	assert.Equal(t, "x", te.Name)
	t.Log(last)
}

// TestFileModes writes datasets under a umask of 027: every file gets
// 0640 and every directory 0750, as 0666 and 0777 less the umask.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	for _, mode := range []Mode{Batch, KeyValue} {
		dir := t.TempDir()
		opts := []Option{TensorIndex()}
		if mode == Batch {
			opts = append(opts, BatchSize(2))
		}
		w, err := Create(dir, mode, testColumns, opts...)
		require.NoError(t, err)
		for i := range 5 {
			label, image := sample(i)
			if mode == Batch {
				require.NoError(t, w.WriteSample(label, image))
			} else {
				require.NoError(t, w.WriteKV(string(rune('a'+i)), label, image))
			}
		}
		require.NoError(t, w.Close())
		n := 0
		require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			require.NoError(t, err)
			if path == dir {
				return nil
			}
			n++
			if info.IsDir() {
				assert.Equal(t, os.FileMode(0o750), info.Mode().Perm(), path)
			} else {
				assert.Equal(t, os.FileMode(0o640), info.Mode().Perm(), path)
			}
			return nil
		}))
		assert.GreaterOrEqual(t, n, 5, "shards, manifest, index and its files")
	}
}

// TestKilledWriter kills a writer with SIGKILL in the middle of a dataset:
// what it leaves is what the package documentation lists, Open finds no
// dataset there, and Create refuses the directory, naming the leftovers.
func TestKilledWriter(t *testing.T) {
	if dir := os.Getenv("DATASET_KILLED_WRITER"); dir != "" {
		w, err := Create(dir, Batch, testColumns, BatchSize(2), TensorIndex())
		if err != nil {
			os.Exit(3)
		}
		for i := 0; ; i++ {
			label, image := sample(i)
			if err := w.WriteSample(label, image); err != nil {
				os.Exit(4)
			}
			if i == 4 { // two shards written, a third begun
				os.Stdout.WriteString("ready\n")
			}
			if i > 4 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriter$")
	cmd.Env = append(os.Environ(), "DATASET_KILLED_WRITER="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	err = cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) {
		t.Skip("the test binary cannot run itself again: the kernel does not know its architecture (under qemu-user, register qemu with binfmt_misc, as .ci/run does)")
	}
	require.NoError(t, err)
	buf := make([]byte, 6)
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(buf))
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()

	left := files(t, dir)
	t.Log(left)
	require.NotEmpty(t, left)
	for _, name := range left {
		assert.True(t, leftBehind(name), "%s is not among what the documentation lists", name)
	}
	_, err = Open(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "no manifest: no dataset")
	_, err = Create(dir, Batch, testColumns, BatchSize(2))
	assert.ErrorIs(t, err, ErrExists)
	assert.ErrorContains(t, err, "part-")
}
