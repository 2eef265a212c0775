package checkpoint

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVariantNames(t *testing.T) {
	for _, tc := range []struct {
		base, variant       string
		file, index, shard2 string
	}{
		{"model", "", "model.safetensors", "model.safetensors.index.json", "model-00002-of-00003.safetensors"},
		{"model", "fp16", "model.fp16.safetensors", "model.safetensors.index.fp16.json", "model.fp16-00002-of-00003.safetensors"},
		{"diffusion_pytorch_model", "bf16", "diffusion_pytorch_model.bf16.safetensors", "diffusion_pytorch_model.safetensors.index.bf16.json", "diffusion_pytorch_model.bf16-00002-of-00003.safetensors"},
	} {
		assert.Equal(t, tc.file, fileName(tc.base, tc.variant))
		assert.Equal(t, tc.index, indexName(tc.base, tc.variant))
		assert.Equal(t, tc.shard2, shardName(tc.base, tc.variant, 2, 3))
		assert.Equal(t, tc.variant, variantOf(tc.file), tc.file)
		assert.Equal(t, tc.variant, variantOf(tc.shard2), tc.shard2)
		assert.Equal(t, tc.variant, indexVariant(tc.index), tc.index)
	}
	assert.Equal(t, "model-00001-of-100000.safetensors", shardName("model", "", 1, 100000), "more than five digits as Python's :05d")

	for name, want := range map[string]string{
		"adapter_model.ema.safetensors":             "ema",
		"open_clip_model.my-v_2.safetensors":        "my-v_2",
		"model.fp16-00001-of-00002.safetensors":     "fp16",
		"custom.fp16.safetensors":                   "", // no library's base name
		"model.safetensors":                         "",
		"model.fp16.safetensors.index.json":         "",
		"model.a.b.safetensors":                     "", // not a variant's name
		"model-00001-of-00002.safetensors":          "",
		"model.fp16":                                "",
		"diffusion_pytorch_model..safetensors":      "",
		"diffusion_pytorch_model.fp 16.safetensors": "",
	} {
		assert.Equal(t, want, variantOf(name), name)
	}
	for name, want := range map[string]string{
		"anything.safetensors.index.fp16.json": "fp16",
		"model.safetensors.index.json":         "",
		"model.safetensors.index..json":        "",
		"model.safetensors.index.a.b.json":     "",
		"model.safetensors.index.fp16.txt":     "",
		"model.fp16.json":                      "",
	} {
		assert.Equal(t, want, indexVariant(name), name)
	}
	for v, ok := range map[string]bool{"fp16": true, "BF16": true, "a-b_c9": true, "": false, "a.b": false, "../x": false, "a/b": false, "é": false} {
		assert.Equal(t, ok, validVariant(v), v)
	}
}

// variantFolder writes a diffusers model's folder with its weights of no
// variant and of the variants fp16 and bf16, each with a tensor of its
// own bytes, and returns it.
func variantFolder(t *testing.T) string {
	dir := t.TempDir()
	for i, v := range []string{"", "fp16", "bf16"} {
		require.NoError(t, safetensors.WriteFile(filepath.Join(dir, fileName("diffusion_pytorch_model", v)), tensorsOf("w", byte(i), 1, 4), map[string]string{"variant": v}))
	}
	writeJSON(t, filepath.Join(dir, "config.json"), `{"_class_name": "AutoencoderKL"}`)
	return dir
}

// TestOpenVariant: without Variant, Open opens the files of no variant
// beside the variants'; with it, the variant's.
func TestOpenVariant(t *testing.T) {
	dir := variantFolder(t)
	openBoth(t, dir, "", func(t *testing.T, target string) {
		ctx := context.Background()
		c, err := Open(ctx, target)
		require.NoError(t, err)
		assert.Equal(t, []string{"diffusion_pytorch_model.safetensors"}, c.Files())
		assert.Equal(t, "", c.Variant())
		assert.Equal(t, map[string]string{"variant": ""}, c.Metadata())
		assert.Equal(t, byName("", tensorsOf("w", 0, 1, 4)), readAll(t, c))
		require.NoError(t, c.Close())

		for i, v := range []string{"", "fp16", "bf16"} {
			if v == "" {
				continue
			}
			c, err := Open(ctx, target, Variant(v))
			require.NoError(t, err, v)
			assert.Equal(t, []string{fileName("diffusion_pytorch_model", v)}, c.Files())
			assert.Equal(t, v, c.Variant())
			assert.Equal(t, byName("", tensorsOf("w", byte(i), 1, 4)), readAll(t, c))
			require.NoError(t, c.Close())
		}

		_, err = Open(ctx, target, Variant("int8"))
		assert.ErrorIs(t, err, ErrNoModel)
		assert.ErrorContains(t, err, "diffusion_pytorch_model.int8.safetensors", "what was looked for")
	})
}

// TestOpenOnlyVariants: a folder with only files of variants gives
// ErrNoModel, listing them where the folder can be listed.
func TestOpenOnlyVariants(t *testing.T) {
	dir := variantFolder(t)
	require.NoError(t, os.Remove(filepath.Join(dir, "diffusion_pytorch_model.safetensors")))
	require.NoError(t, Write(dir, tensorsOf("w", 9, 4, 4), Variant("ema"), MaxShardSize(8)))
	c, err := Open(context.Background(), dir)
	assert.Nil(t, c)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "there are files of the variants bf16 (diffusion_pytorch_model.bf16.safetensors); "+
		"ema (model.ema-00001-of-00002.safetensors, model.ema-00002-of-00002.safetensors, model.safetensors.index.ema.json); "+
		"fp16 (diffusion_pytorch_model.fp16.safetensors): choose one with Variant")

	c, err = Open(context.Background(), dir, Variant("ema"))
	require.NoError(t, err)
	assert.Equal(t, "model.safetensors.index.ema.json", c.Index())
	require.NoError(t, c.Close())

	// A listing finds a variant of any name beside the file of no variant.
	dir = t.TempDir()
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "custom.safetensors"), tensorsOf("a", 0, 1, 4), nil))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "custom.fp16.safetensors"), tensorsOf("b", 0, 1, 4), nil))
	c, err = Open(context.Background(), dir)
	require.NoError(t, err, "custom.fp16.safetensors is a variant, not a second candidate")
	assert.Equal(t, []string{"custom.safetensors"}, c.Files())
	require.NoError(t, c.Close())
	c, err = Open(context.Background(), dir, Variant("fp16"))
	require.NoError(t, err)
	assert.Equal(t, []string{"custom.fp16.safetensors"}, c.Files())
	assert.Equal(t, "fp16", c.Variant())
	require.NoError(t, c.Close())

	// Over HTTP, which cannot list a folder, what was looked for.
	srv := serveDir(t, dir)
	_, err = Open(context.Background(), srv.base, Variant("fp16"))
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "none of model.fp16.safetensors, model.safetensors.index.fp16.json")
}

// TestVariantOfFile: Variant selects a folder's files; given with a file,
// it is an invalid option.
func TestVariantOfFile(t *testing.T) {
	dir := variantFolder(t)
	openBoth(t, dir, "diffusion_pytorch_model.fp16.safetensors", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target, Variant("fp16"))
		assert.Nil(t, c)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
		c, err = Open(context.Background(), target)
		require.NoError(t, err)
		assert.Equal(t, "fp16", c.Variant(), "the file's name gives its variant")
		require.NoError(t, c.Close())
	})
	_, err := Open(context.Background(), dir, Variant("../fp16"))
	assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
	_, err = Open(context.Background(), dir, Variant(""))
	assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
}

// TestOptionsOfAnotherCall: an option given to a call that does not take
// it is an error wrapping ErrInvalidOption, and nothing is written or
// read.
func TestOptionsOfAnotherCall(t *testing.T) {
	dir := t.TempDir()
	ts := tensorsOf("t", 0, 2, 4)
	require.NoError(t, Write(dir, ts))
	ctx := context.Background()
	for _, opt := range []Option{MaxShardSize(10), BaseName("x"), FileMetadata(map[string]string{"a": "b"}), WriteOptions(safetensors.Alignment(64))} {
		c, err := Open(ctx, dir, opt)
		assert.Nil(t, c)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
		assert.ErrorContains(t, err, "applies to Create and Write only")
		_, _, err = Load(ctx, dir, opt)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, opt := range []Option{Strict(), ReadOptions(safetensors.ReadAll()), HTTPClient(http.DefaultClient), RemoteOptions(remote.Retries(1))} {
		err := Write(out, ts, opt)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
		assert.ErrorContains(t, err, "applies to Open, Load and Convert only")
		_, err = Create(out, nil, opt)
		assert.ErrorIs(t, err, safetensors.ErrInvalidOption)
	}
	assert.NoDirExists(t, out, "nothing written")
	// Variant is for both.
	require.NoError(t, Write(out, ts, Variant("fp16")))
	c, err := Open(ctx, out, Variant("fp16"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	// WriteOptions reach the files.
	require.NoError(t, Write(out, ts, WriteOptions(safetensors.Alignment(64))))
	h, err := safetensors.Open(filepath.Join(out, "model.safetensors"))
	require.NoError(t, err)
	assert.Zero(t, h.Header().DataOffset()%64)
	require.NoError(t, h.Close())
}

// TestWriteVariant writes a checkpoint of a variant, single and sharded,
// as the libraries name its files, beside one of no variant that it
// leaves alone, and reads it back.
func TestWriteVariant(t *testing.T) {
	dir := t.TempDir()
	plain, half := tensorsOf("t", 1, 3, 8), tensorsOf("t", 2, 3, 8)
	require.NoError(t, Write(dir, plain))
	require.NoError(t, Write(dir, half, Variant("fp16")))
	assert.Equal(t, []string{"model.fp16.safetensors", "model.safetensors"}, dirNames(t, dir))

	check := func(t *testing.T, index string) {
		t.Helper()
		openBoth(t, dir, "", func(t *testing.T, target string) {
			c, err := Open(context.Background(), target, Variant("fp16"))
			require.NoError(t, err)
			defer c.Close()
			assert.Equal(t, "fp16", c.Variant())
			assert.Equal(t, index, c.Index())
			assert.Equal(t, byName("", half), readAll(t, c))
			c2, err := Open(context.Background(), target)
			require.NoError(t, err)
			defer c2.Close()
			assert.Equal(t, []string{"model.safetensors"}, c2.Files())
			assert.Equal(t, byName("", plain), readAll(t, c2))
		})
	}
	check(t, "")

	// Sharded: the variant's shards and index, and its single file gone.
	require.NoError(t, Write(dir, half, Variant("fp16"), MaxShardSize(16)))
	assert.Equal(t, []string{"model.fp16-00001-of-00002.safetensors", "model.fp16-00002-of-00002.safetensors", "model.safetensors", "model.safetensors.index.fp16.json"}, dirNames(t, dir))
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.fp16.json"))
	require.NoError(t, err)
	assert.Contains(t, string(index), `"t2": "model.fp16-00002-of-00002.safetensors"`)
	check(t, "model.safetensors.index.fp16.json")

	// Back to one file: the variant's shards and index go.
	require.NoError(t, Write(dir, half, Variant("fp16")))
	assert.Equal(t, []string{"model.fp16.safetensors", "model.safetensors"}, dirNames(t, dir))
	check(t, "")

	// diffusers' base name, through Create.
	dir = t.TempDir()
	specs := []safetensors.TensorSpec{{Name: "a", DType: safetensors.U8, Shape: []uint64{8}}, {Name: "b", DType: safetensors.U8, Shape: []uint64{8}}}
	w, err := Create(dir, specs, BaseName("diffusion_pytorch_model"), Variant("bf16"), MaxShardSize(8))
	require.NoError(t, err)
	assert.Equal(t, []string{"diffusion_pytorch_model.bf16-00001-of-00002.safetensors", "diffusion_pytorch_model.bf16-00002-of-00002.safetensors"}, w.Files())
	w.Abort()
	assert.Empty(t, dirNames(t, dir))
}
