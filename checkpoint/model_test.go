package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenInputs opens a model from each form of path Open takes, and
// checks the tensors, the folder of config.json and the file opened.
func TestOpenInputs(t *testing.T) {
	fx := loadShardedFixture(t)
	sharded := writeFixture(t, fx)
	const modelFile, modelIndex = "model.safetensors", "model.safetensors.index.json"
	index := filepath.Join(sharded, modelIndex)

	single := t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(single, modelFile), fx.tensors, nil))
	adapter := t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(adapter, "adapter_model.safetensors"), fx.tensors, nil))

	for _, tt := range []struct {
		name, path, dir, file, index string
	}{
		{"file", filepath.Join(single, modelFile), single, filepath.Join(single, modelFile), ""},
		{"directory with model.safetensors", single, single, filepath.Join(single, modelFile), ""},
		{"sharded directory", sharded, sharded, index, modelIndex},
		{"index", index, sharded, index, modelIndex},
		{"directory with adapter_model.safetensors", adapter, adapter, filepath.Join(adapter, "adapter_model.safetensors"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Open(context.Background(), tt.path)
			require.NoError(t, err)
			defer c.Close()
			assert.Equal(t, tt.dir, c.Dir())
			assert.Equal(t, tt.file, c.String())
			assert.Equal(t, tt.index, c.Index(), "sharded or not")
			assert.Nil(t, c.Unlisted())
			assert.Nil(t, c.Parts())
			assert.Equal(t, "", c.Part())
			assert.Equal(t, "", c.Variant())
			assert.Len(t, c.Names(), len(fx.tensors))
			for _, want := range fx.tensors {
				got, err := c.Tensor(want.Name)
				require.NoError(t, err)
				assert.Equal(t, want.Data, got.Data, want.Name)
			}
		})
	}

	t.Run("two candidates", func(t *testing.T) {
		dir := t.TempDir()
		for _, name := range []string{"a.safetensors", "b.safetensors"} {
			require.NoError(t, safetensors.WriteFile(filepath.Join(dir, name), fx.tensors[:1], nil))
		}
		c, err := Open(context.Background(), dir)
		assert.ErrorIs(t, err, ErrNoModel)
		assert.Nil(t, c)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := Open(context.Background(), filepath.Join(t.TempDir(), "nope"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

// TestOpenHubCacheSnapshot opens a snapshot of the Hugging Face cache,
// whose files are links into its blobs, and the model's cache folder,
// whose refs/main names the snapshot.
func TestOpenHubCacheSnapshot(t *testing.T) {
	linktest.SkipWithout(t)
	fx := loadShardedFixture(t)
	repo, snapshot := hubSnapshot(t, writeFixture(t, fx), t.TempDir())
	for _, target := range []string{snapshot, repo, repo + string(filepath.Separator)} {
		c, err := Open(context.Background(), target)
		require.NoError(t, err, target)
		assert.Equal(t, snapshot, c.Dir(), target)
		assert.Equal(t, "model.safetensors.index.json", c.Index())
		assert.Len(t, c.Names(), len(fx.tensors))
		assert.Equal(t, byName("", fx.tensors), readAll(t, c))
		require.NoError(t, c.Close())
	}

	// refs/main naming no snapshot, or leading out of snapshots/: the
	// model's cache folder holds no model of its own.
	for _, ref := range []string{"fedcba98", "../../x", "", "."} {
		require.NoError(t, os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(ref+"\n"), 0o644))
		_, err := Open(context.Background(), repo)
		assert.ErrorIs(t, err, ErrNoModel, "refs/main %q", ref)
		assert.NotContains(t, err.Error(), "snapshots", "the model's cache folder itself, not a folder that refs/main leads to")
	}
}

// TestOpenModelUnlisted: a tensor the index does not list is no error, and
// Unlisted names it; under Strict, it is ErrUnlistedTensor.
func TestOpenModelUnlisted(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	editIndex(t, dir, func(ix map[string]any) {
		delete(weightMap(ix), "model.norm.weight")
		ix["metadata"].(map[string]any)["total_size"] = 6860 - 64 + 0.0
	})
	c, err := Open(context.Background(), dir, Strict())
	assert.True(t, errors.Is(err, ErrUnlistedTensor), "%v", err)
	assert.Nil(t, c)
	c, err = Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, []string{"model.norm.weight"}, c.Unlisted())
	assert.NotContains(t, c.Names(), "model.norm.weight")
	_, err = c.Tensor("model.norm.weight")
	assert.True(t, errors.Is(err, safetensors.ErrTensorNotFound))
}

// TestOpenTooLargeToMap: a file larger than the address space (here, than
// a lowered limit) is read through the file, with the same tensors, where
// safetensors.Open refuses it on a 32-bit host; Close closes the file.
func TestOpenTooLargeToMap(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	require.NoError(t, safetensors.WriteFile(path, fx.tensors, nil))
	old := maxMapped
	maxMapped = 100
	defer func() { maxMapped = old }()

	c, err := Open(context.Background(), path)
	require.NoError(t, err)
	f, ok := c.files[0].closer.(*os.File)
	require.True(t, ok, "read through the file")
	sections, err := c.DataSections()
	require.NoError(t, err)
	assert.Empty(t, sections[0].Path, "not mapped")
	assert.Equal(t, path, sections[0].Name)
	for _, want := range fx.tensors {
		got, err := c.Tensor(want.Name)
		require.NoError(t, err)
		assert.Equal(t, want.Data, got.Data, want.Name)
	}
	require.NoError(t, c.Close())
	_, err = f.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, os.ErrClosed, "Close closed the file")

	sh, err := Open(context.Background(), writeFixture(t, fx))
	require.NoError(t, err)
	for _, file := range sh.files {
		info, err := os.Stat(filepath.Join(sh.Dir(), file.name))
		require.NoError(t, err)
		if info.Size() > 100 {
			assert.NotNil(t, file.closer, "a shard over the limit is read through its file: %s", file.name)
		} else {
			assert.Nil(t, file.closer, "mapped: %s", file.name)
		}
	}
	require.NoError(t, sh.Close())

	maxMapped = old
	c, err = Open(context.Background(), path)
	require.NoError(t, err)
	sections, err = c.DataSections()
	require.NoError(t, err)
	if runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1" {
		assert.Equal(t, path, sections[0].Path, "mapped, and the loader may read the file again")
	}
	assert.Nil(t, c.files[0].closer)
	require.NoError(t, c.Close())
}
