//go:build unix

package checkpoint_test

// Tests of sharded checkpoints that lived in the root package's
// files_test.go before checkpoints moved here.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// movedUmask sets the process's umask for the rest of the test.
func movedUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// movedMode returns the permission bits of the file at path.
func movedMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	return info.Mode().Perm()
}

// movedDirNames returns the names in dir, sorted.
func movedDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// movedSave writes n tensors of size, size+1, ... bytes, their bytes
// depending on seed, as a checkpoint in dir with shards of at most
// maxShard bytes, as the root package's makeCheckpoint(...).save did.
func movedSave(dir string, seed byte, n, size int, maxShard int64) error {
	var tensors []safetensors.Tensor
	for i := range n {
		data := make([]byte, size+i)
		for j := range data {
			data[j] = seed + byte(i*7+j)
		}
		tensors = append(tensors, safetensors.Tensor{Name: "t" + strconv.Itoa(i), DType: safetensors.U8, Shape: []uint64{uint64(len(data))}, Data: data})
	}
	return checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(maxShard), checkpoint.FileMetadata(map[string]string{"format": "pt"}))
}

// TestShardedModes checks that an overwritten checkpoint's shards and index
// keep their modes, including when the shards' names are reused.
func TestShardedModes(t *testing.T) {
	movedUmask(t, 0o022)
	dir := t.TempDir()
	require.NoError(t, movedSave(dir, 1, 6, 100, 250))
	names := movedDirNames(t, dir)
	require.Len(t, names, 4)
	for _, name := range names {
		assert.Equal(t, os.FileMode(0o644), movedMode(t, filepath.Join(dir, name)))
		require.NoError(t, os.Chmod(filepath.Join(dir, name), 0o600))
	}
	require.NoError(t, movedSave(dir, 2, 6, 100, 250))
	assert.Equal(t, names, movedDirNames(t, dir))
	for _, name := range names {
		assert.Equal(t, os.FileMode(0o600), movedMode(t, filepath.Join(dir, name)), name)
	}
}

// movedWithin fails the test if f blocks: if it does not return within
// 30 s, far more than it takes on a loaded machine, so that only a hang
// fails.
func movedWithin(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s blocked", what)
		return nil
	}
}

// TestOpenFIFO checks that a FIFO is refused at once where a checkpoint
// opens a file by name, with an error wrapping ErrNotRegular that names
// it: the cases of the root package's TestFIFO for sharded checkpoints.
func TestOpenFIFO(t *testing.T) {
	ctx := context.Background()
	open := func(target string) func() error {
		return func() error {
			c, err := checkpoint.Open(ctx, target)
			if c != nil {
				c.Close()
			}
			return err
		}
	}

	// A FIFO as the index, given by name or found in the directory.
	idxDir := t.TempDir()
	index := filepath.Join(idxDir, "model.safetensors.index.json")
	require.NoError(t, syscall.Mkfifo(index, 0o644))
	err := movedWithin(t, "Open of the index", open(index))
	require.ErrorIs(t, err, safetensors.ErrNotRegular)
	assert.Contains(t, err.Error(), index)
	err = movedWithin(t, "Open of the directory", open(idxDir))
	require.ErrorIs(t, err, safetensors.ErrNotRegular)
	// A save over it does not block reading the old index either.
	err = movedWithin(t, "Write", func() error { return movedSave(idxDir, 1, 6, 100, 250) })
	require.NoError(t, err)

	// A FIFO as a shard.
	shardDir := t.TempDir()
	require.NoError(t, movedSave(shardDir, 1, 6, 100, 250))
	shard := filepath.Join(shardDir, "model-00002-of-00003.safetensors")
	require.NoError(t, os.Remove(shard))
	require.NoError(t, syscall.Mkfifo(shard, 0o644))
	err = movedWithin(t, "Open with a FIFO shard", open(shardDir))
	require.ErrorIs(t, err, safetensors.ErrNotRegular)
	require.ErrorIs(t, err, checkpoint.ErrInvalidIndex)
	assert.Contains(t, err.Error(), "model-00002-of-00003.safetensors")
}
