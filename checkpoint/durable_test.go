//go:build unix

package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A save is the tensors of one save, by name, and how it is split.
type save struct {
	tensors  []safetensors.Tensor
	maxShard int64 // 0: a single file, through safetensors.WriteFile
}

// makeSave returns n tensors of U8 whose bytes depend on seed, split into
// shards of at most maxShard bytes.
func makeSave(seed byte, n int, size int, maxShard int64) save {
	var c save
	for i := range n {
		data := make([]byte, size+i)
		for j := range data {
			data[j] = seed + byte(i*7+j)
		}
		c.tensors = append(c.tensors, safetensors.Tensor{Name: "t" + strconv.Itoa(i), DType: safetensors.U8, Shape: []uint64{uint64(len(data))}, Data: data})
	}
	c.maxShard = maxShard
	return c
}

// save writes the checkpoint into dir, as base "model".
func (c save) save(dir string) error {
	if c.maxShard == 0 {
		return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), c.tensors, map[string]string{"format": "pt"})
	}
	return Write(dir, c.tensors, MaxShardSize(c.maxShard), FileMetadata(map[string]string{"format": "pt"}))
}

// equal reports whether got holds exactly the checkpoint's tensors.
func (c save) equal(got map[string][]byte) bool {
	if len(got) != len(c.tensors) {
		return false
	}
	for _, t := range c.tensors {
		if !bytes.Equal(got[t.Name], t.Data) {
			return false
		}
	}
	return true
}

// loadAll reads every tensor of a Checkpoint or Reader into a map.
func loadAll(tensors func() ([]safetensors.Tensor, error)) (map[string][]byte, error) {
	ts, err := tensors()
	if err != nil {
		return nil, err
	}
	m := make(map[string][]byte, len(ts))
	for _, t := range ts {
		m[t.Name] = bytes.Clone(t.Data)
	}
	return m, nil
}

// loadCheckpoint reads the checkpoint in dir both ways a loader may: as
// transformers does (model.safetensors if it exists, else the index), and
// through Open of the index if there is one. It returns what each gives.
func loadCheckpoint(dir string) (hf, index map[string][]byte, err error) {
	single := filepath.Join(dir, "model.safetensors")
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	if _, err := os.Lstat(indexPath); err == nil {
		s, err := Open(context.Background(), indexPath)
		if err != nil {
			return nil, nil, fmt.Errorf("index: %w", err)
		}
		index, err = loadAll(s.Tensors)
		s.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	if _, err := os.Lstat(single); err == nil {
		r, err := safetensors.Open(single)
		if err != nil {
			return nil, nil, fmt.Errorf("single file: %w", err)
		}
		hf, err = loadAll(r.Tensors)
		r.Close()
		if err != nil {
			return nil, nil, err
		}
	} else if index != nil {
		hf = index
	} else {
		return nil, nil, errors.New("no checkpoint")
	}
	return hf, index, nil
}

// checkOldOrNew fails the test unless dir holds a complete checkpoint, old
// or new, both for transformers and for Open.
func checkOldOrNew(t *testing.T, dir string, old, new save, what string) {
	t.Helper()
	hf, index, err := loadCheckpoint(dir)
	require.NoError(t, err, "%s: %v", what, dirNames(t, dir))
	assert.True(t, old.equal(hf) || new.equal(hf), "%s: transformers would load neither the old nor the new checkpoint: %v", what, dirNames(t, dir))
	if index != nil {
		assert.True(t, old.equal(index) || new.equal(index), "%s: Open gives neither the old nor the new checkpoint: %v", what, dirNames(t, dir))
	}
	c, err := Open(context.Background(), dir)
	require.NoError(t, err, "%s: %v", what, dirNames(t, dir))
	folder, err := loadAll(c.Tensors)
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, hf, folder, "%s: Open of the folder finds what transformers finds", what)
}

// visible returns the names in dir that do not start with a dot.
func visible(t *testing.T, dir string) []string {
	var names []string
	for _, name := range dirNames(t, dir) {
		if !strings.HasPrefix(name, ".") {
			names = append(names, name)
		}
	}
	return names
}

// The overwrites the sweeps try: old checkpoint, new checkpoint, and the
// files the directory holds after the new one is saved.
var overwrites = []struct {
	name     string
	old, new save
	files    []string
}{
	{"same_shard_names", makeSave(1, 6, 100, 250), makeSave(2, 6, 100, 250),
		[]string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "model.safetensors.index.json"}},
	{"fewer_shards", makeSave(1, 6, 100, 250), makeSave(2, 6, 100, 450),
		[]string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"}},
	{"single_to_sharded", makeSave(1, 6, 100, 0), makeSave(2, 6, 100, 250),
		[]string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "model.safetensors.index.json"}},
	{"sharded_to_single", makeSave(1, 6, 100, 250), makeSave(2, 6, 100, 1<<20),
		[]string{"model.safetensors"}},
}

// fsOps counts the file-system operations of the writers and runs hook
// before each, for the rest of the test.
type fsOps struct {
	mu   sync.Mutex
	n    int
	hook func(n int, op string) error
}

func (o *fsOps) step(op string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	return o.hook(o.n, op)
}

// install makes the atomicfile package's CreateTemp, Rename, Link and
// Remove go through o, for the rest of the test.
func (o *fsOps) install(t *testing.T) {
	t.Cleanup(atomicfile.SetHooks(atomicfile.Hooks{
		CreateTemp: func(name string) (atomicfile.Temp, error) {
			if err := o.step("create"); err != nil {
				return nil, &fs.PathError{Op: "open", Path: name, Err: err}
			}
			f, err := createTemp(name)
			if err != nil {
				return nil, err
			}
			return &hookedFile{File: f, ops: o}, nil
		},
		Rename: func(from, to string) error {
			if err := o.step("rename"); err != nil {
				return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
			}
			return os.Rename(from, to)
		},
		Link: func(from, to string) error {
			if err := o.step("link"); err != nil {
				return &os.LinkError{Op: "link", Old: from, New: to, Err: err}
			}
			return os.Link(from, to)
		},
		Remove: func(name string) error {
			if err := o.step("remove"); err != nil {
				return &fs.PathError{Op: "remove", Path: name, Err: err}
			}
			return os.Remove(name)
		},
	}))
}

// createTemp creates a temporary file as the atomicfile package does.
func createTemp(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
}

// hookedFile is a temporary file whose operations go through an fsOps.
type hookedFile struct {
	*os.File
	ops *fsOps
}

func (f *hookedFile) Write(p []byte) (int, error) {
	if err := f.ops.step("write"); err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f *hookedFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.ops.step("write"); err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *hookedFile) Sync() error {
	if err := f.ops.step("sync"); err != nil {
		return err
	}
	return f.File.Sync()
}

// crashEnv, set in a child process, makes TestCrashChild write a checkpoint
// and kill itself at the given file-system operation.
const crashEnv = "SAFETENSORS_TEST_CHECKPOINT_CRASH"

// TestCrashChild is the child of TestWriteCrashSweep: with crashEnv set
// to "scenario:k:dir", it saves the scenario's new checkpoint into dir and
// SIGKILLs itself before the k-th file-system operation. If the save ends
// first, it exits normally.
func TestCrashChild(t *testing.T) {
	arg := os.Getenv(crashEnv)
	if arg == "" {
		t.Skip("run by TestWriteCrashSweep")
	}
	parts := strings.SplitN(arg, ":", 3)
	k, err := strconv.Atoi(parts[1])
	require.NoError(t, err)
	i := slices.IndexFunc(overwrites, func(o struct {
		name     string
		old, new save
		files    []string
	}) bool {
		return o.name == parts[0]
	})
	ops := &fsOps{hook: func(n int, op string) error {
		if n == k {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}}
	ops.install(t)
	require.NoError(t, overwrites[i].new.save(parts[2]))
}

// TestWriteCrashSweep kills a process that overwrites a checkpoint before
// each of its file-system operations in turn (creating, writing, syncing,
// renaming, linking and removing files), and checks that the directory then
// holds the old or the new checkpoint, complete, for transformers and for
// Open; and that a later save leaves only the new checkpoint's files,
// apart from the killed writer's temporary files. Under -short it kills at
// every third operation.
func TestWriteCrashSweep(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	stride := 1
	if testing.Short() && !slowTests {
		stride = 3
	}
	for _, o := range overwrites {
		t.Run(o.name, func(t *testing.T) {
			kills := 0
			for k := 1; ; k += stride {
				dir := t.TempDir()
				require.NoError(t, o.old.save(dir))
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s", crashEnv, o.name, k, dir))
				out, err := cmd.CombinedOutput()
				if errors.Is(err, syscall.ENOEXEC) {
					t.Skip("the test binary cannot run itself again: the kernel does not know its architecture (under qemu-user, register qemu with binfmt_misc, as .ci/run does)")
				}
				var exit *exec.ExitError
				if errors.As(err, &exit) {
					status := exit.Sys().(syscall.WaitStatus)
					require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL, "child: %v\n%s", err, out)
					kills++
				} else {
					require.NoError(t, err, "child:\n%s", out)
				}
				checkOldOrNew(t, dir, o.old, o.new, fmt.Sprintf("killed at operation %d", k))
				if err == nil {
					// The save completed: only the new checkpoint's files.
					hf, _, _ := loadCheckpoint(dir)
					assert.True(t, o.new.equal(hf))
					assert.Equal(t, o.files, dirNames(t, dir))
					t.Logf("%d kill points, every %d of %d operations", kills, stride, k-1)
					assert.Greater(t, kills, 4)
					return
				}
				// A later save cleans up all but the killed writer's
				// temporary files.
				require.NoError(t, o.new.save(dir))
				hf, _, err := loadCheckpoint(dir)
				require.NoError(t, err)
				assert.True(t, o.new.equal(hf))
				assert.Equal(t, o.files, visible(t, dir), "after a save that followed a kill at operation %d", k)
			}
		})
	}
}

// errNoSpace is the error of the simulated full disk.
var errNoSpace = syscall.ENOSPC

// budgetFile is a temporary file on a disk with room for budget more bytes,
// shared by all files.
type budgetFile struct {
	*os.File
	budget *int64
	mu     *sync.Mutex
}

func (f *budgetFile) take(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := int(min(int64(n), *f.budget))
	*f.budget -= int64(k)
	return k
}

func (f *budgetFile) Write(p []byte) (int, error) {
	k := f.take(len(p))
	n, err := f.File.Write(p[:k])
	if err == nil && k < len(p) {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: errNoSpace}
	}
	return n, err
}

func (f *budgetFile) WriteAt(p []byte, off int64) (int, error) {
	k := f.take(len(p))
	n, err := f.File.WriteAt(p[:k], off)
	if err == nil && k < len(p) {
		err = &fs.PathError{Op: "write", Path: f.Name(), Err: errNoSpace}
	}
	return n, err
}

// Sync does not reach the disk: the sweep's files are never needed after a
// power cut, and syncs would make it slow.
func (f *budgetFile) Sync() error { return nil }

// TestWriteDiskFull overwrites checkpoints on a simulated disk that has
// room for n more bytes, for n from 0 to more than the save needs, and
// checks that a save that fails leaves the old checkpoint exactly as it was
// with no temporary file, and one that succeeds leaves the new one.
func TestWriteDiskFull(t *testing.T) {
	step := int64(1) // every level with the slow tag
	switch {
	case testing.Short() && !slowTests:
		step = 61
	case !slowTests:
		step = 17
	}
	for _, o := range overwrites {
		t.Run(o.name, func(t *testing.T) {
			var budget int64
			var mu sync.Mutex
			t.Cleanup(atomicfile.SetHooks(atomicfile.Hooks{
				SyncDir: func(string) {}, // the files are not needed after a power cut
				CreateTemp: func(name string) (atomicfile.Temp, error) {
					f, err := createTemp(name)
					if err != nil {
						return nil, err
					}
					return &budgetFile{File: f, budget: &budget, mu: &mu}, nil
				},
			}))
			levels, failed := 0, 0
			for n := int64(0); ; n += step {
				dir := t.TempDir()
				budget = 1 << 40
				require.NoError(t, o.old.save(dir))
				before := dirNames(t, dir)
				budget = n
				err := o.new.save(dir)
				levels++
				if err != nil {
					failed++
					require.ErrorIs(t, err, errNoSpace)
					assert.NotContains(t, err.Error(), ".tmp", "the error names the target, not the temporary file")
					hf, index, lerr := loadCheckpoint(dir)
					require.NoError(t, lerr)
					assert.True(t, o.old.equal(hf), "%d bytes free", n)
					if index != nil {
						assert.True(t, o.old.equal(index), "%d bytes free", n)
					}
					assert.Equal(t, before, dirNames(t, dir), "%d bytes free", n)
					continue
				}
				hf, _, lerr := loadCheckpoint(dir)
				require.NoError(t, lerr)
				assert.True(t, o.new.equal(hf), "%d bytes free", n)
				if budget > 0 {
					// Room to spare: the save had all it needed.
					assert.Equal(t, o.files, dirNames(t, dir))
					t.Logf("%d free-space levels, %d of them too small, every %d bytes", levels, failed, step)
					assert.Greater(t, failed, 3)
					return
				}
			}
		})
	}
}

// TestWriteNoHardLinks saves a checkpoint over one with the same shard
// names where hard links fail, as on FAT: the new checkpoint is complete
// under the temporary names its index lists, and the old one is gone.
func TestWriteNoHardLinks(t *testing.T) {
	restore := atomicfile.SetHooks(atomicfile.Hooks{
		Link: func(from, to string) error {
			return &os.LinkError{Op: "link", Old: from, New: to, Err: syscall.EPERM}
		},
	})
	t.Cleanup(restore)
	dir := t.TempDir()
	old, new := makeSave(1, 6, 100, 250), makeSave(2, 6, 100, 250)
	require.NoError(t, old.save(dir))
	require.NoError(t, new.save(dir))
	hf, index, err := loadCheckpoint(dir)
	require.NoError(t, err)
	assert.True(t, new.equal(hf))
	assert.True(t, new.equal(index))
	assert.Equal(t, []string{"model.safetensors.index.json"}, visible(t, dir), "the old shards are removed")
	s, err := Open(context.Background(), dir)
	require.NoError(t, err)
	shards := s.Files()
	s.Close()
	require.Len(t, shards, 3)
	for _, shard := range shards {
		assert.True(t, strings.HasPrefix(shard, ".model-0000"), shard)
	}
	// With links back, the next save gives the usual names and removes the
	// temporary ones.
	restore()
	require.NoError(t, old.save(dir))
	hf, _, err = loadCheckpoint(dir)
	require.NoError(t, err)
	assert.True(t, old.equal(hf))
	assert.Equal(t, overwrites[0].files, dirNames(t, dir))
}

// TestSaveOverIndexNamingOtherFiles: the files a saved-over index names are
// removed only if they can be shards (safetensors files, or a writer's
// temporary files): an index that names the model's config.json, by
// mistake or malice, does not make a save delete it.
func TestSaveOverIndexNamingOtherFiles(t *testing.T) {
	dir := t.TempDir()
	ts := []safetensors.Tensor{
		{Name: "a", DType: safetensors.U8, Shape: []uint64{4}, Data: []byte{1, 2, 3, 4}},
		{Name: "b", DType: safetensors.U8, Shape: []uint64{4}, Data: []byte{5, 6, 7, 8}},
	}
	require.NoError(t, Write(dir, ts, MaxShardSize(4)))
	config := filepath.Join(dir, "config.json")
	require.NoError(t, os.WriteFile(config, []byte("{}"), 0o644))
	stray := filepath.Join(dir, "other.safetensors")
	require.NoError(t, os.WriteFile(stray, nil, 0o644))
	editIndex(t, dir, func(index map[string]any) {
		index["weight_map"].(map[string]any)["x"] = "config.json"
		index["weight_map"].(map[string]any)["y"] = "other.safetensors"
	})
	require.NoError(t, Write(dir, ts, MaxShardSize(4)))
	assert.FileExists(t, config)
	assert.NoFileExists(t, stray, "a shard the old index named")
	ckpt, err := Open(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}, ckpt.Files())
	require.NoError(t, ckpt.Close())
}
