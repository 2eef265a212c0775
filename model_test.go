package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenModelInputs opens a model from each form of path OpenModel
// takes, and checks the tensors, the directory of config.json and the file
// opened.
func TestOpenModelInputs(t *testing.T) {
	fx := loadShardedFixture(t)
	sharded := writeFixture(t, fx)
	index := filepath.Join(sharded, modelIndex)

	single := t.TempDir()
	require.NoError(t, WriteFile(filepath.Join(single, modelFile), fx.tensors, nil))
	adapter := t.TempDir()
	require.NoError(t, WriteFile(filepath.Join(adapter, "adapter_model.safetensors"), fx.tensors, nil))

	for _, tt := range []struct {
		name, path, dir, file string
		sharded               bool
	}{
		{"file", filepath.Join(single, modelFile), single, filepath.Join(single, modelFile), false},
		{"directory with model.safetensors", single, single, filepath.Join(single, modelFile), false},
		{"sharded directory", sharded, sharded, index, true},
		{"index", index, sharded, index, true},
		{"directory with adapter_model.safetensors", adapter, adapter, filepath.Join(adapter, "adapter_model.safetensors"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := OpenModel(tt.path)
			require.NoError(t, err)
			defer m.Close()
			assert.Equal(t, tt.dir, m.Dir())
			assert.Equal(t, tt.file, m.File())
			assert.Equal(t, tt.sharded, m.IsSharded())
			assert.Nil(t, m.Unlisted())
			assert.Len(t, m.Names(), len(fx.tensors))
			for _, want := range fx.tensors {
				got, err := m.Tensor(want.Name)
				require.NoError(t, err)
				assert.Equal(t, want.Data, got.Data, want.Name)
			}
		})
	}

	t.Run("two candidates", func(t *testing.T) {
		dir := t.TempDir()
		for _, name := range []string{"a.safetensors", "b.safetensors"} {
			require.NoError(t, WriteFile(filepath.Join(dir, name), fx.tensors[:1], nil))
		}
		m, err := OpenModel(dir)
		assert.ErrorIs(t, err, ErrInvalidIndex)
		assert.Nil(t, m)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := OpenModel(filepath.Join(t.TempDir(), "nope"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

// TestOpenModelHubCache opens a snapshot of the Hugging Face cache, whose
// files are links into its blobs.
func TestOpenModelHubCache(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	fx := loadShardedFixture(t)
	snapshot := hubSnapshot(t, writeFixture(t, fx), t.TempDir())
	m, err := OpenModel(snapshot)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, snapshot, m.Dir())
	assert.True(t, m.IsSharded())
	assert.Len(t, m.Names(), len(fx.tensors))
}

// TestOpenModelUnlisted: a tensor the index does not list is no error, as
// it is for OpenIndex, and Unlisted names it; under Strict, it is
// ErrUnlistedTensor.
func TestOpenModelUnlisted(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	editIndex(t, dir, func(ix map[string]any) {
		delete(weightMap(ix), "model.norm.weight")
		ix["metadata"].(map[string]any)["total_size"] = 6860 - 64 + 0.0
	})
	m, err := OpenModel(dir, Strict())
	assert.True(t, errors.Is(err, ErrUnlistedTensor), "%v", err)
	assert.Nil(t, m)
	m, err = OpenModel(dir)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, []string{"model.norm.weight"}, m.Unlisted())
	assert.NotContains(t, m.Names(), "model.norm.weight")
	_, err = m.Tensor("model.norm.weight")
	assert.True(t, errors.Is(err, ErrTensorNotFound))
}

// TestOpenModelTooLargeToMap: a file larger than the address space (here,
// than a lowered limit) is read through the file, with the same tensors,
// where Open refuses it on a 32-bit host; Close closes the file.
func TestOpenModelTooLargeToMap(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := t.TempDir()
	path := filepath.Join(dir, modelFile)
	require.NoError(t, WriteFile(path, fx.tensors, nil))
	old := maxMapped
	maxMapped = 100
	defer func() { maxMapped = old }()

	m, err := OpenModel(path)
	require.NoError(t, err)
	r := m.shards[0]
	assert.Nil(t, r.mapping, "not mapped")
	f, ok := r.ra.(*os.File)
	require.True(t, ok, "read through the file")
	for _, want := range fx.tensors {
		got, err := m.Tensor(want.Name)
		require.NoError(t, err)
		assert.Equal(t, want.Data, got.Data, want.Name)
	}
	require.NoError(t, m.Close())
	_, err = f.Stat()
	assert.ErrorIs(t, err, os.ErrClosed, "Close closed the file")

	sh, err := OpenModel(writeFixture(t, fx))
	require.NoError(t, err)
	for _, r := range sh.shards {
		if r.h.DataOffset()+r.h.DataLen() > 100 {
			assert.NotNil(t, r.ra, "a shard over the limit is read through its file")
		}
	}
	require.NoError(t, sh.Close())

	rm, err := OpenModel(path, ReadAll())
	require.NoError(t, err, "ReadAll asks for the file in memory")
	assert.Nil(t, rm.shards[0].ra)
	require.NoError(t, rm.Close())
}
