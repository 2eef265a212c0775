package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/safetensors-go/safetensors/load"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pipeline's components' tensors.
var (
	unetTensors = tensorsOf("conv", 1, 4, 16)
	vaeTensors  = tensorsOf("decoder", 2, 2, 8)
	vaeHalf     = tensorsOf("decoder", 3, 2, 8)
	textTensors = tensorsOf("embed", 4, 3, 8)
)

// pipelineFolder writes a diffusers pipeline as save_pretrained saves
// one: model_index.json; unet (sharded), vae (with an fp16 variant) and
// text_encoder (transformers' names) with config.json beside their
// weights; a scheduler and a tokenizer without config.json, the
// scheduler with a stray safetensors file all the same; a component set
// to null.
func pipelineFolder(t *testing.T) string {
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "model_index.json"), `{
  "_class_name": "StableDiffusionPipeline",
  "_diffusers_version": "0.31.0",
  "feature_extractor": [null, null],
  "requires_safety_checker": false,
  "safety_checker": null,
  "scheduler": ["diffusers", "PNDMScheduler"],
  "text_encoder": ["transformers", "CLIPTextModel"],
  "tokenizer": ["transformers", "CLIPTokenizer"],
  "unet": ["diffusers", "UNet2DConditionModel"],
  "vae": ["diffusers", "AutoencoderKL"]
}`)
	for _, c := range []string{"unet", "vae", "text_encoder"} {
		writeJSON(t, filepath.Join(dir, c, "config.json"), map[string]string{"_class_name": c})
	}
	meta := FileMetadata(map[string]string{"format": "pt"})
	require.NoError(t, Write(filepath.Join(dir, "unet"), unetTensors, BaseName("diffusion_pytorch_model"), MaxShardSize(32), meta))
	require.NoError(t, Write(filepath.Join(dir, "vae"), vaeTensors, BaseName("diffusion_pytorch_model"), meta))
	require.NoError(t, Write(filepath.Join(dir, "vae"), vaeHalf, BaseName("diffusion_pytorch_model"), Variant("fp16"), meta))
	require.NoError(t, Write(filepath.Join(dir, "text_encoder"), textTensors, meta))
	writeJSON(t, filepath.Join(dir, "scheduler", "scheduler_config.json"), `{"_class_name": "PNDMScheduler"}`)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "scheduler", "stray.safetensors"), tensorsOf("x", 0, 1, 1), nil))
	writeJSON(t, filepath.Join(dir, "tokenizer", "tokenizer_config.json"), `{}`)
	writeJSON(t, filepath.Join(dir, "tokenizer", "vocab.json"), `{}`)
	return dir
}

// pipelineTensors returns the pipeline's tensors by qualified name, with
// the vae's of the variant when half.
func pipelineTensors(half bool) map[string][]byte {
	want := byName("unet/", unetTensors)
	maps.Copy(want, byName("text_encoder/", textTensors))
	if half {
		maps.Copy(want, byName("vae/", vaeHalf))
	} else {
		maps.Copy(want, byName("vae/", vaeTensors))
	}
	return want
}

// checkPipeline checks the checkpoint of pipelineFolder's pipeline, opened
// from dir (a path or a URL).
func checkPipeline(t *testing.T, c *Checkpoint, dir string) {
	t.Helper()
	assert.Equal(t, dir, c.Dir())
	assert.Equal(t, dir, c.String())
	assert.Equal(t, "", c.Part())
	assert.Equal(t, "", c.Index())
	assert.Equal(t, "", c.Variant())
	assert.Nil(t, c.IndexMetadata())
	assert.Equal(t, map[string]string{"format": "pt"}, c.Metadata())
	assert.Equal(t, []string{
		"text_encoder/model.safetensors",
		"unet/diffusion_pytorch_model-00001-of-00002.safetensors",
		"unet/diffusion_pytorch_model-00002-of-00002.safetensors",
		"vae/diffusion_pytorch_model.safetensors",
	}, c.Files())
	want := pipelineTensors(false)
	assert.Equal(t, slices.Sorted(maps.Keys(want)), c.Names())
	assert.Equal(t, want, readAll(t, c))

	file, err := c.File("unet/conv3")
	require.NoError(t, err)
	assert.Equal(t, "unet/diffusion_pytorch_model-00002-of-00002.safetensors", file)
	info, err := c.Info("vae/decoder1")
	require.NoError(t, err)
	assert.Equal(t, "vae/decoder1", info.Name)
	h, err := c.Header("unet/diffusion_pytorch_model-00001-of-00002.safetensors")
	require.NoError(t, err)
	assert.Equal(t, []string{"conv0", "conv1"}, []string{h.Tensors[0].Name, h.Tensors[1].Name}, "the names the file gives them")
	assert.Equal(t, map[string]string{"format": "pt"}, h.Metadata)
	_, err = c.Header("diffusion_pytorch_model-00001-of-00002.safetensors")
	assert.Error(t, err, "a part's file is named with its folder")
	_, err = c.Tensor("conv0")
	assert.ErrorIs(t, err, safetensors.ErrTensorNotFound, "a part's tensor is named with its part")
	sr, err := c.TensorReader("text_encoder/embed2")
	require.NoError(t, err)
	assert.Equal(t, int64(8), sr.Size())

	all, err := c.Tensors()
	require.NoError(t, err)
	got := map[string][]byte{}
	for _, tn := range all {
		got[tn.Name] = tn.Data
	}
	assert.Equal(t, want, got)

	sections, err := c.DataSections()
	require.NoError(t, err)
	var names, tensors []string
	for _, s := range sections {
		names = append(names, s.Name)
		for _, ti := range s.Tensors {
			tensors = append(tensors, ti.Name)
		}
	}
	var wantNames []string
	for _, f := range c.Files() {
		if strings.HasPrefix(dir, "http") {
			wantNames = append(wantNames, dir+"/"+f)
		} else {
			wantNames = append(wantNames, filepath.Join(dir, filepath.FromSlash(f)))
		}
	}
	assert.Equal(t, wantNames, names)
	assert.ElementsMatch(t, c.Names(), tensors)

	parts := c.Parts()
	require.Len(t, parts, 3)
	var partNames []string
	for _, p := range parts {
		partNames = append(partNames, p.Part())
		assert.Nil(t, p.Parts())
	}
	assert.Equal(t, []string{"text_encoder", "unet", "vae"}, partNames)
	unet := parts[1]
	assert.Equal(t, "diffusion_pytorch_model.safetensors.index.json", unet.Index())
	assert.Equal(t, []string{"diffusion_pytorch_model-00001-of-00002.safetensors", "diffusion_pytorch_model-00002-of-00002.safetensors"}, unet.Files())
	assert.Equal(t, byName("", unetTensors), readAll(t, unet))
	assert.Equal(t, map[string]string{"total_parameters": "64", "total_size": "64"}, unet.IndexMetadata())
	if strings.HasPrefix(dir, "http") {
		assert.Equal(t, dir+"/unet", unet.Dir())
	} else {
		assert.Equal(t, filepath.Join(dir, "unet"), unet.Dir())
	}
	config, err := unet.ReadFile(context.Background(), "config.json")
	require.NoError(t, err)
	assert.JSONEq(t, `{"_class_name": "unet"}`, string(config))
	config, err = c.ReadFile(context.Background(), "vae/config.json")
	require.NoError(t, err)
	assert.JSONEq(t, `{"_class_name": "vae"}`, string(config))

	// The parts share the whole's files.
	require.NoError(t, unet.Close(), "a part's Close does nothing")
	_, err = unet.Tensor("conv0")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	_, err = unet.Tensor("conv0")
	assert.ErrorIs(t, err, safetensors.ErrClosed)
	_, err = c.Tensor("unet/conv0")
	assert.ErrorIs(t, err, safetensors.ErrClosed)
}

func TestOpenPipeline(t *testing.T) {
	dir := pipelineFolder(t)
	openBoth(t, dir, "", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target)
		require.NoError(t, err)
		checkPipeline(t, c, target)
	})
	openBoth(t, dir, "model_index.json", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target)
		require.NoError(t, err)
		// The folder: a URL's, or a path's, whose separator is the platform's.
		dir := strings.TrimSuffix(target, "model_index.json")
		if strings.Contains(dir, "://") {
			dir = strings.TrimSuffix(dir, "/")
		} else {
			dir = strings.TrimSuffix(dir, string(filepath.Separator))
		}
		checkPipeline(t, c, dir)
	})

	// Over HTTP, each file is asked for once; the components without
	// config.json only for that.
	srv := serveDir(t, dir)
	c, err := Open(context.Background(), srv.base)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	asked := srv.requests()
	for _, file := range []string{"model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors.index.json", "vae/diffusion_pytorch_model.safetensors", "scheduler/config.json"} {
		assert.Equal(t, 1, asked[file], file)
	}
	assert.LessOrEqual(t, asked["modules.json"], 1, "asked for at once with model_index.json, and once only")
	assert.LessOrEqual(t, asked["config.json"], 1)
	assert.Zero(t, asked["scheduler/model.safetensors"], "no model without config.json")
}

// TestOpenPipelineVariant: a part without files of the variant gives its
// files of no variant, as diffusers loads them; a variant no part has is
// ErrNoModel.
func TestOpenPipelineVariant(t *testing.T) {
	dir := pipelineFolder(t)
	openBoth(t, dir, "", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target, Variant("fp16"))
		require.NoError(t, err)
		defer c.Close()
		assert.Equal(t, "fp16", c.Variant())
		assert.Equal(t, pipelineTensors(true), readAll(t, c))
		assert.Contains(t, c.Files(), "vae/diffusion_pytorch_model.fp16.safetensors")
		var variants []string
		for _, p := range c.Parts() {
			variants = append(variants, p.Part()+":"+p.Variant())
		}
		assert.Equal(t, []string{"text_encoder:", "unet:", "vae:fp16"}, variants)

		_, err = Open(context.Background(), target, Variant("bf16"))
		assert.ErrorIs(t, err, ErrNoModel)
		assert.ErrorContains(t, err, `no part has files of the variant "bf16"`)
	})
	// model_index.json stands for its folder: Variant applies to it.
	openBoth(t, dir, "model_index.json", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target, Variant("fp16"))
		require.NoError(t, err)
		assert.Equal(t, pipelineTensors(true), readAll(t, c))
		require.NoError(t, c.Close())
	})
}

// TestOpenPipelineErrors: a component that holds a model but whose
// weights are broken fails the whole, naming the component; a pipeline
// none of whose components holds weights is ErrNoModel; a
// model_index.json that is not an object of components is ErrNoModel.
func TestOpenPipelineErrors(t *testing.T) {
	ctx := context.Background()
	dir := pipelineFolder(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vae", "diffusion_pytorch_model.safetensors"), []byte("<html>"), 0o644))
	_, err := Open(ctx, dir)
	assert.ErrorIs(t, err, safetensors.ErrHeaderTooSmall)
	assert.ErrorContains(t, err, "component vae")
	assert.ErrorContains(t, err, filepath.Join("vae", "diffusion_pytorch_model.safetensors"))

	dir = pipelineFolder(t)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "vae")))
	c, err := Open(ctx, dir)
	require.NoError(t, err, "a component's folder missing, as save_pretrained leaves one that was not saved")
	assert.Len(t, c.Parts(), 2)
	require.NoError(t, c.Close())

	dir = t.TempDir()
	writeJSON(t, filepath.Join(dir, "model_index.json"), `{"_class_name": "P", "scheduler": ["diffusers", "DDIMScheduler"]}`)
	writeJSON(t, filepath.Join(dir, "scheduler", "scheduler_config.json"), `{}`)
	_, err = Open(ctx, dir)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "no part holds weights")

	for _, bad := range []string{`[]`, `null`, `not JSON`} {
		writeJSON(t, filepath.Join(dir, "model_index.json"), bad)
		_, err = Open(ctx, dir)
		assert.ErrorIs(t, err, ErrNoModel, bad)
		assert.ErrorContains(t, err, "model_index.json", bad)
	}

	// A component name that leaves the folder is no component.
	dir = pipelineFolder(t)
	writeJSON(t, filepath.Join(dir, "model_index.json"), `{"unet": ["diffusers", "U"], "../x": ["diffusers", "U"], "a/b": ["diffusers", "U"]}`)
	c, err = Open(ctx, dir)
	require.NoError(t, err)
	assert.Len(t, c.Parts(), 1, "only unet")
	assert.Equal(t, "unet", c.Parts()[0].Part())
	require.NoError(t, c.Close())
}

// sentenceTransformersFolder writes a sentence-transformers model as it
// saves one: modules.json, the transformer in the model's own folder, a
// Pooling module without weights, and a Dense module with its own
// model.safetensors.
func sentenceTransformersFolder(t *testing.T, dense bool) string {
	dir := t.TempDir()
	modules := `[
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}`
	if dense {
		modules += `,
  {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}`
	}
	writeJSON(t, filepath.Join(dir, "modules.json"), modules+"\n]")
	writeJSON(t, filepath.Join(dir, "config.json"), `{"architectures": ["BertModel"]}`)
	writeJSON(t, filepath.Join(dir, "sentence_bert_config.json"), `{"max_seq_length": 256}`)
	require.NoError(t, Write(dir, tensorsOf("embeddings.", 5, 2, 8)))
	writeJSON(t, filepath.Join(dir, "1_Pooling", "config.json"), `{"pooling_mode_mean_tokens": true}`)
	if dense {
		writeJSON(t, filepath.Join(dir, "2_Dense", "config.json"), `{"in_features": 8, "out_features": 4}`)
		require.NoError(t, Write(filepath.Join(dir, "2_Dense"), tensorsOf("linear.", 6, 2, 4)))
	}
	return dir
}

func TestOpenSentenceTransformers(t *testing.T) {
	dir := sentenceTransformersFolder(t, true)
	openBoth(t, dir, "", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target)
		require.NoError(t, err)
		defer c.Close()
		want := byName("", tensorsOf("embeddings.", 5, 2, 8))
		maps.Copy(want, byName("2_Dense/", tensorsOf("linear.", 6, 2, 4)))
		assert.Equal(t, want, readAll(t, c))
		assert.Equal(t, []string{"2_Dense/model.safetensors", "model.safetensors"}, c.Files())
		var parts []string
		for _, p := range c.Parts() {
			parts = append(parts, p.Part())
		}
		assert.Equal(t, []string{"", "2_Dense"}, parts)
		assert.Equal(t, target, c.Parts()[0].Dir(), "the transformer is in the model's own folder")
		file, err := c.File("2_Dense/linear.1")
		require.NoError(t, err)
		assert.Equal(t, "2_Dense/model.safetensors", file)
		config, err := c.ReadFile(context.Background(), "1_Pooling/config.json")
		require.NoError(t, err)
		assert.Contains(t, string(config), "pooling_mode_mean_tokens")
	})
	openBoth(t, dir, "modules.json", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target)
		require.NoError(t, err)
		assert.Len(t, c.Parts(), 2)
		require.NoError(t, c.Close())
	})
}

// TestOpenSentenceTransformersOnePart: a model whose only module with
// weights is the transformer in its own folder is a plain checkpoint.
func TestOpenSentenceTransformersOnePart(t *testing.T) {
	dir := sentenceTransformersFolder(t, false)
	openBoth(t, dir, "", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target)
		require.NoError(t, err)
		assert.Nil(t, c.Parts())
		assert.Equal(t, "", c.Part())
		assert.Equal(t, []string{"model.safetensors"}, c.Files())
		assert.Equal(t, []string{"embeddings.0", "embeddings.1"}, c.Names())
		assert.Equal(t, target, c.Dir())
		require.NoError(t, c.Close())
		_, err = c.Tensor("embeddings.0")
		assert.ErrorIs(t, err, safetensors.ErrClosed, "it owns its files")
	})

	// A module listed twice, with and without a trailing slash, is one.
	writeJSON(t, filepath.Join(dir, "modules.json"), `[{"path": ""}, {"path": "2_Dense"}, {"path": "2_Dense/"}, {"path": null}]`)
	writeJSON(t, filepath.Join(dir, "2_Dense", "config.json"), `{}`)
	require.NoError(t, Write(filepath.Join(dir, "2_Dense"), tensorsOf("linear.", 6, 2, 4)))
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	assert.Len(t, c.Parts(), 2)
	require.NoError(t, c.Close())

	// A module path that leaves the folder.
	writeJSON(t, filepath.Join(dir, "modules.json"), `[{"path": ""}, {"path": "../x"}]`)
	_, err = Open(context.Background(), dir)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "leaves the model's folder")
}

// TestOpenPipelineInCache: a pipeline in a snapshot of the Hugging Face
// cache, whose components' files are links to ../../../blobs, opens from
// the snapshot and from the model's cache folder; the sharded unet's
// shards may lead to the blobs, and no further.
func TestOpenPipelineInCache(t *testing.T) {
	linktest.SkipWithout(t)
	cache := t.TempDir()
	repo, snapshot := hubSnapshot(t, pipelineFolder(t), cache)
	link, err := os.Readlink(filepath.Join(snapshot, "unet", "diffusion_pytorch_model-00001-of-00002.safetensors"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(link, filepath.FromSlash("../../../blobs/")), link)
	for _, target := range []string{snapshot, repo} {
		c, err := Open(context.Background(), target)
		require.NoError(t, err, target)
		checkPipeline(t, c, snapshot)
	}

	// A shard of unet leading out of the model's cache folder.
	shard := filepath.Join(snapshot, "unet", "diffusion_pytorch_model-00002-of-00002.safetensors")
	blob, err := filepath.EvalSymlinks(shard)
	require.NoError(t, err)
	outside := filepath.Join(t.TempDir(), "elsewhere.safetensors")
	require.NoError(t, os.Rename(blob, outside))
	require.NoError(t, os.Remove(shard))
	require.NoError(t, os.Symlink(outside, shard))
	_, err = Open(context.Background(), repo)
	assert.ErrorIs(t, err, ErrInvalidIndex)
	assert.ErrorContains(t, err, "component unet")
}

// TestReadFile reads the model's other files, on disk and over HTTP, and
// refuses names that leave the folder.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Write(dir, tensorsOf("t", 0, 1, 4)))
	writeJSON(t, filepath.Join(dir, "config.json"), `{"model_type": "llama"}`)
	writeJSON(t, filepath.Join(dir, "sub", "x.json"), `{}`)
	openBoth(t, dir, "", func(t *testing.T, target string) {
		ctx := context.Background()
		c, err := Open(ctx, target)
		require.NoError(t, err)
		defer c.Close()
		data, err := c.ReadFile(ctx, "config.json")
		require.NoError(t, err)
		assert.Equal(t, `{"model_type": "llama"}`, string(data))
		data, err = c.ReadFile(ctx, "sub/x.json")
		require.NoError(t, err)
		assert.Equal(t, `{}`, string(data))
		_, err = c.ReadFile(ctx, "generation_config.json")
		assert.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
		for _, bad := range []string{"../x", "", "/etc/passwd", "sub/../../x", `sub\x.json`} {
			data, err := c.ReadFile(ctx, bad)
			assert.Nil(t, data)
			assert.ErrorContains(t, err, "not a file name inside the folder", bad)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if strings.HasPrefix(target, "http") {
			_, err = c.ReadFile(cancelled, "config.json")
			assert.ErrorIs(t, err, context.Canceled, "over HTTP, under ctx")
		}
	})
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ReadFile(context.Background(), "sub")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "a folder is no file: %v", err)
	if testing.Short() {
		return // reading MaxFileSize bytes takes seconds under -race
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.json"), nil, 0o644))
	require.NoError(t, os.Truncate(filepath.Join(dir, "big.json"), MaxFileSize+1))
	_, err = c.ReadFile(context.Background(), "big.json")
	assert.ErrorContains(t, err, "larger than")
}

// TestLoad loads whole models into memory: a folder, a pipeline, a URL.
func TestLoad(t *testing.T) {
	fx := loadShardedFixture(t)
	openBoth(t, writeFixture(t, fx), "", func(t *testing.T, target string) {
		tensors, meta, err := Load(context.Background(), target)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"format": "pt"}, meta)
		require.Len(t, tensors, len(fx.tensors))
		for _, want := range fx.tensors {
			got := tensors[want.Name]
			assert.Equal(t, want.Name, got.Name)
			assert.Equal(t, want.DType, got.DType)
			assert.Equal(t, want.Shape, got.Shape)
			assert.Equal(t, want.Data, got.Data, want.Name)
			if len(got.Data) > 0 {
				got.Data[0]++ // the caller's memory, after Close too
			}
		}
	})
	openBoth(t, pipelineFolder(t), "", func(t *testing.T, target string) {
		tensors, _, err := Load(context.Background(), target, Variant("fp16"))
		require.NoError(t, err)
		got := map[string][]byte{}
		for name, tn := range tensors {
			got[name] = tn.Data
		}
		assert.Equal(t, pipelineTensors(true), got)
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := Load(ctx, serveDir(t, writeFixture(t, fx)).base)
	assert.ErrorIs(t, err, context.Canceled)
	_, _, err = Load(context.Background(), filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestLoaderPipeline loads a pipeline with a load package Loader: the
// parts' tensors under their qualified names.
func TestLoaderPipeline(t *testing.T) {
	c, err := Open(context.Background(), pipelineFolder(t))
	require.NoError(t, err)
	defer c.Close()
	got := map[string][]byte{}
	for tn, err := range (&load.Loader{}).Load(context.Background(), c) {
		require.NoError(t, err)
		got[tn.Name] = slices.Clone(tn.Data)
	}
	assert.Equal(t, pipelineTensors(false), got)
}

// TestOpenDistributed: a folder of shards named as transformers 5's
// distributed checkpoints name them opens as every *.safetensors file of
// the folder, with no index, as transformers reads it; a tensor in two of
// them is an error.
func TestOpenDistributed(t *testing.T) {
	dir := t.TempDir()
	a, b := tensorsOf("a.", 1, 2, 8), tensorsOf("b.", 2, 3, 8)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "shard-00000-model-00001-of-00002.safetensors"), a, nil))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "shard-00001-model-00002-of-00002.safetensors"), b, nil))
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"shard-00000-model-00001-of-00002.safetensors", "shard-00001-model-00002-of-00002.safetensors"}, c.Files())
	assert.Empty(t, c.Index())
	want := byName("", a)
	maps.Copy(want, byName("", b))
	assert.Equal(t, want, readAll(t, c))
	require.NoError(t, c.Close())

	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "extra.safetensors"), tensorsOf("a.", 3, 1, 8), nil))
	_, err = Open(context.Background(), dir)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, `"a.0" is in two shards`)
	for name, ok := range map[string]bool{
		"shard-00000-model-00001-of-00002.safetensors": true,
		"shard-0000-model-00001-of-00002.safetensors":  false,
		"shard-00000-model-00001-of-2.safetensors":     false,
		"model-00001-of-00002.safetensors":             false,
	} {
		assert.Equal(t, ok, isDistributedShard(name), name)
	}
}

// TestOpenNamedInConfig: config.json's transformers_weights names the
// weights, a file or an index, whatever the variant asked for, as
// transformers reads it; a name leaving the folder is refused.
func TestOpenNamedInConfig(t *testing.T) {
	dir := t.TempDir()
	ts := tensorsOf("w", 1, 3, 8)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "custom.safetensors"), ts, nil))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensorsOf("other", 2, 1, 8), nil))
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"transformers_weights": "custom.safetensors"})
	openBoth(t, dir, "", func(t *testing.T, target string) {
		for _, opts := range [][]Option{nil, {Variant("fp16")}} {
			c, err := Open(context.Background(), target, opts...)
			require.NoError(t, err)
			assert.Equal(t, []string{"custom.safetensors"}, c.Files())
			assert.Equal(t, byName("", ts), readAll(t, c))
			require.NoError(t, c.Close())
		}
	})
	sharded := t.TempDir()
	require.NoError(t, Write(sharded, ts, MaxShardSize(8), BaseName("weights")))
	writeJSON(t, filepath.Join(sharded, "config.json"), map[string]any{"transformers_weights": "weights.safetensors.index.json"})
	c, err := Open(context.Background(), sharded)
	require.NoError(t, err)
	assert.Equal(t, "weights.safetensors.index.json", c.Index())
	require.NoError(t, c.Close())

	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"transformers_weights": "../custom.safetensors"})
	_, err = Open(context.Background(), dir)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "not a file inside the model's folder")
}

// TestOpenLegacyVariantIndex: diffusers' former names of a variant's
// shards and index, which it still reads, open with the Variant.
func TestOpenLegacyVariantIndex(t *testing.T) {
	dir := t.TempDir()
	ts := tensorsOf("w", 1, 4, 8)
	require.NoError(t, Write(dir, ts, MaxShardSize(16), BaseName("diffusion_pytorch_model")))
	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	files := c.Files()
	require.NoError(t, c.Close())
	// Rename as diffusers before 0.28 named them.
	data, err := os.ReadFile(filepath.Join(dir, "diffusion_pytorch_model.safetensors.index.json"))
	require.NoError(t, err)
	for _, f := range files {
		legacy := strings.TrimSuffix(f, ".safetensors") + ".fp16.safetensors"
		require.NoError(t, os.Rename(filepath.Join(dir, f), filepath.Join(dir, legacy)))
		data = bytes.ReplaceAll(data, []byte(`"`+f+`"`), []byte(`"`+legacy+`"`))
	}
	require.NoError(t, os.Remove(filepath.Join(dir, "diffusion_pytorch_model.safetensors.index.json")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "diffusion_pytorch_model.safetensors.fp16.index.json"), data, 0o644))
	openBoth(t, dir, "", func(t *testing.T, target string) {
		c, err := Open(context.Background(), target, Variant("fp16"))
		require.NoError(t, err)
		assert.Equal(t, "diffusion_pytorch_model.safetensors.fp16.index.json", c.Index())
		assert.Equal(t, "fp16", c.Variant())
		assert.Equal(t, byName("", ts), readAll(t, c))
		require.NoError(t, c.Close())
	})
	_, err = Open(context.Background(), dir)
	assert.ErrorIs(t, err, ErrNoModel)
	assert.ErrorContains(t, err, "fp16")
	assert.Equal(t, "fp16", variantOf("diffusion_pytorch_model-00001-of-00002.fp16.safetensors"))
	assert.Equal(t, "fp16", indexVariant("diffusion_pytorch_model.safetensors.fp16.index.json"))
}

// TestOpenSentenceTransformersRouter: the modules a sentence-transformers
// Router routes to, in folders its router_config.json names, are parts;
// a module whose weights are a pickle is left out, and Skipped says so.
func TestOpenSentenceTransformersRouter(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "modules.json"), []map[string]any{
		{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
		{"idx": 1, "name": "1", "path": "1_Pooling", "type": "Pooling"},
		{"idx": 2, "name": "2", "path": "2_Router", "type": "sentence_transformers.base.modules.router.Router"},
		{"idx": 3, "name": "3", "path": "3_Dense", "type": "Dense"},
	})
	root, query, doc := tensorsOf("emb", 1, 2, 8), tensorsOf("linear", 2, 1, 8), tensorsOf("linear", 3, 1, 8)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), root, nil))
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{})
	writeJSON(t, filepath.Join(dir, "1_Pooling", "config.json"), map[string]any{})
	writeJSON(t, filepath.Join(dir, "2_Router", "router_config.json"), map[string]any{
		"types":     map[string]any{"query_0_Dense": "Dense", "document_0_Dense": "Dense"},
		"structure": map[string]any{"query": []any{"query_0_Dense"}, "document": []any{"document_0_Dense"}},
	})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "2_Router", "query_0_Dense"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "2_Router", "document_0_Dense"), 0o755))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "2_Router", "query_0_Dense", "model.safetensors"), query, nil))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "2_Router", "document_0_Dense", "model.safetensors"), doc, nil))
	writeJSON(t, filepath.Join(dir, "3_Dense", "config.json"), map[string]any{})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "3_Dense", "pytorch_model.bin"), []byte("pickle"), 0o644))

	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	var parts []string
	for _, p := range c.Parts() {
		parts = append(parts, p.Part())
	}
	assert.Equal(t, []string{"", "2_Router/document_0_Dense", "2_Router/query_0_Dense"}, parts)
	want := byName("", root)
	maps.Copy(want, byName("2_Router/query_0_Dense/", query))
	maps.Copy(want, byName("2_Router/document_0_Dense/", doc))
	assert.Equal(t, want, readAll(t, c))
	assert.Equal(t, []string{"3_Dense: pytorch_model.bin (weights in another format than safetensors, not read)"}, c.Skipped())
}

// TestOpenForeignWeights: a folder whose weights are all in another
// format says so first, on disk and over HTTP.
func TestOpenForeignWeights(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("pickle"), 0o644))
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{})
	openBoth(t, dir, "", func(t *testing.T, target string) {
		_, err := Open(context.Background(), target)
		assert.ErrorIs(t, err, ErrNoModel)
		assert.ErrorContains(t, err, "no model found: "+target+": ")
		assert.ErrorContains(t, err, "its weights are in another format than safetensors (pytorch_model.bin)")
	})
}

// TestOpenPeftAdapters: the adapters peft saves beside its default one,
// each in a subfolder named after it, are parts of the model on disk.
func TestOpenPeftAdapters(t *testing.T) {
	dir := t.TempDir()
	def, second := tensorsOf("base_model.model.q.lora_A.", 1, 2, 8), tensorsOf("base_model.model.q.lora_A.", 2, 2, 8)
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), def, map[string]string{"format": "pt"}))
	writeJSON(t, filepath.Join(dir, "adapter_config.json"), map[string]any{"peft_type": "LORA"})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "second"), 0o755))
	require.NoError(t, safetensors.WriteFile(filepath.Join(dir, "second", "adapter_model.safetensors"), second, map[string]string{"format": "pt"}))
	writeJSON(t, filepath.Join(dir, "second", "adapter_config.json"), map[string]any{"peft_type": "LORA"})
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "notes"), 0o755))

	c, err := Open(context.Background(), dir)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, []string{"adapter_model.safetensors", "second/adapter_model.safetensors"}, c.Files())
	want := byName("", def)
	maps.Copy(want, byName("second/", second))
	assert.Equal(t, want, readAll(t, c))
}
