package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The folders below are laid out as each library saves a model: the
// weight and index files of its names, the JSON files beside them, and
// tensors named as its modules name them, small and normally distributed
// (standard deviation 0.02) from a fixed seed.

// layer is a tensor to write: its name, dtype and shape.
type layer struct {
	name  string
	dtype safetensors.DType
	shape []uint64
}

// tensors returns the tensors of layers, their values from a generator
// seeded with seed, cast to each layer's dtype.
func tensors(seed uint64, layers ...layer) []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(seed, 28))
	var out []safetensors.Tensor
	for _, l := range layers {
		n := uint64(1)
		for _, d := range l.shape {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * 0.02)
		}
		t, err := safetensors.TensorFromFloat32s(l.name, l.dtype, l.shape, vals, safetensors.RoundNearestEven)
		if err != nil {
			panic(err)
		}
		out = append(out, t)
	}
	return out
}

// writeJSONFile writes v as the JSON file path, creating its folder.
func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o777))
	require.NoError(t, os.WriteFile(path, append(data, '\n'), 0o666))
}

// writeFile writes the safetensors file path, creating its folder.
func writeFile(t *testing.T, path string, ts []safetensors.Tensor) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o777))
	require.NoError(t, safetensors.WriteFile(path, ts, map[string]string{"format": "pt"}))
}

// unetLayers, vaeLayers and clipTextLayers are a tiny UNet2DConditionModel,
// AutoencoderKL and CLIPTextModel, as diffusers and transformers name
// their tensors.
var (
	unetLayers = []layer{
		{"conv_in.weight", safetensors.F32, []uint64{8, 4, 3, 3}},
		{"conv_in.bias", safetensors.F32, []uint64{8}},
		{"time_embedding.linear_1.weight", safetensors.F32, []uint64{16, 8}},
		{"time_embedding.linear_1.bias", safetensors.F32, []uint64{16}},
		{"conv_norm_out.weight", safetensors.F32, []uint64{8}},
		{"conv_norm_out.bias", safetensors.F32, []uint64{8}},
		{"conv_out.weight", safetensors.F32, []uint64{4, 8, 3, 3}},
		{"conv_out.bias", safetensors.F32, []uint64{4}},
	}
	vaeLayers = []layer{
		{"encoder.conv_in.weight", safetensors.F32, []uint64{8, 3, 3, 3}},
		{"encoder.conv_in.bias", safetensors.F32, []uint64{8}},
		{"decoder.conv_out.weight", safetensors.F32, []uint64{3, 8, 3, 3}},
		{"decoder.conv_out.bias", safetensors.F32, []uint64{3}},
	}
	clipTextLayers = []layer{
		{"text_model.embeddings.token_embedding.weight", safetensors.F32, []uint64{64, 16}},
		{"text_model.embeddings.position_embedding.weight", safetensors.F32, []uint64{8, 16}},
		{"text_model.final_layer_norm.weight", safetensors.F32, []uint64{16}},
		{"text_model.final_layer_norm.bias", safetensors.F32, []uint64{16}},
	}
)

// pipelineDir lays out a diffusers pipeline as
// StableDiffusionPipeline.save_pretrained does: model_index.json, and a
// folder per component, the unet's weights sharded; the scheduler and the
// tokenizer hold no weights (and no config.json); the safety checker and
// feature extractor are left out (null).
func pipelineDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "sd-tiny")
	writeJSONFile(t, filepath.Join(dir, "model_index.json"), map[string]any{
		"_class_name":             "StableDiffusionPipeline",
		"_diffusers_version":      "0.42.0",
		"feature_extractor":       []any{nil, nil},
		"requires_safety_checker": false,
		"safety_checker":          []any{nil, nil},
		"scheduler":               []any{"diffusers", "PNDMScheduler"},
		"text_encoder":            []any{"transformers", "CLIPTextModel"},
		"tokenizer":               []any{"transformers", "CLIPTokenizer"},
		"unet":                    []any{"diffusers", "UNet2DConditionModel"},
		"vae":                     []any{"diffusers", "AutoencoderKL"},
	})
	writeJSONFile(t, filepath.Join(dir, "unet", "config.json"), map[string]any{"_class_name": "UNet2DConditionModel", "in_channels": 4, "out_channels": 4})
	require.NoError(t, checkpoint.Write(filepath.Join(dir, "unet"), tensors(1, unetLayers...),
		checkpoint.BaseName("diffusion_pytorch_model"), checkpoint.MaxShardSize(1500), checkpoint.FileMetadata(map[string]string{"format": "pt"})))
	writeJSONFile(t, filepath.Join(dir, "vae", "config.json"), map[string]any{"_class_name": "AutoencoderKL", "in_channels": 3})
	writeFile(t, filepath.Join(dir, "vae", "diffusion_pytorch_model.safetensors"), tensors(2, vaeLayers...))
	writeJSONFile(t, filepath.Join(dir, "text_encoder", "config.json"), map[string]any{"architectures": []string{"CLIPTextModel"}, "model_type": "clip_text_model"})
	writeFile(t, filepath.Join(dir, "text_encoder", "model.safetensors"), tensors(3, clipTextLayers...))
	writeJSONFile(t, filepath.Join(dir, "scheduler", "scheduler_config.json"), map[string]any{"_class_name": "PNDMScheduler", "num_train_timesteps": 1000})
	writeJSONFile(t, filepath.Join(dir, "tokenizer", "tokenizer_config.json"), map[string]any{"model_max_length": 8})
	writeJSONFile(t, filepath.Join(dir, "tokenizer", "vocab.json"), map[string]int{"a": 0, "b": 1})
	return dir
}

// variantsDir lays out a diffusers model's folder as ModelMixin.save_pretrained
// leaves it after saving the default weights (F32) and the variants fp16
// (F16) and bf16 (BF16) beside them; with defaults false, the variants only.
func variantsDir(t *testing.T, defaults bool) string {
	dir := filepath.Join(t.TempDir(), "unet")
	writeJSONFile(t, filepath.Join(dir, "config.json"), map[string]any{"_class_name": "UNet2DConditionModel", "in_channels": 4})
	for _, v := range []struct {
		variant string
		dtype   safetensors.DType
	}{{"", safetensors.F32}, {"fp16", safetensors.F16}, {"bf16", safetensors.BF16}} {
		if v.variant == "" && !defaults {
			continue
		}
		ls := make([]layer, len(unetLayers))
		for i, l := range unetLayers {
			ls[i] = layer{l.name, v.dtype, l.shape}
		}
		name := "diffusion_pytorch_model.safetensors"
		if v.variant != "" {
			name = "diffusion_pytorch_model." + v.variant + ".safetensors"
		}
		writeFile(t, filepath.Join(dir, name), tensors(1, ls...))
	}
	return dir
}

// The models of testdata, as transformers saved them.
const bertDir = "../../testdata/models/bert"

// copyFiles copies the named files of the folder from into the folder to.
func copyFiles(t *testing.T, from, to string, names ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(to, 0o777))
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(from, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, name), data, 0o666))
	}
}

// readTensors reads every tensor of the file path into memory.
func readTensors(t *testing.T, path string) []safetensors.Tensor {
	t.Helper()
	r, err := safetensors.Open(path, safetensors.ReadAll())
	require.NoError(t, err)
	defer r.Close()
	ts, err := r.Tensors()
	require.NoError(t, err)
	return ts
}

// sentenceTransformersDir lays out a sentence-transformers model as
// SentenceTransformer.save does: the transformer in the model's folder,
// modules.json listing it, a pooling layer (no weights), a Dense layer in
// 2_Dense with weights, and a normalization (no folder of its own).
func sentenceTransformersDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "st-tiny")
	writeJSONFile(t, filepath.Join(dir, "modules.json"), []map[string]any{
		{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
		{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
		{"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
		{"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"},
	})
	copyFiles(t, bertDir, dir, "config.json", "model.safetensors")
	writeJSONFile(t, filepath.Join(dir, "sentence_bert_config.json"), map[string]any{"max_seq_length": 8})
	writeJSONFile(t, filepath.Join(dir, "1_Pooling", "config.json"), map[string]any{"word_embedding_dimension": 16, "pooling_mode_mean_tokens": true})
	writeJSONFile(t, filepath.Join(dir, "2_Dense", "config.json"), map[string]any{"in_features": 16, "out_features": 8, "bias": true, "activation_function": "torch.nn.modules.activation.Tanh"})
	writeFile(t, filepath.Join(dir, "2_Dense", "model.safetensors"), tensors(5,
		layer{"linear.weight", safetensors.F32, []uint64{8, 16}},
		layer{"linear.bias", safetensors.F32, []uint64{8}},
	))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "3_Normalize"), 0o777))
	return dir
}

// plantNaN writes a NaN into the first value of the named F32 tensor of
// the file path.
func plantNaN(t *testing.T, path, name string) {
	t.Helper()
	r, err := safetensors.Open(path, safetensors.ReadAll())
	require.NoError(t, err)
	ts, err := r.Tensors()
	require.NoError(t, err)
	meta := r.Metadata()
	require.NoError(t, r.Close())
	found := false
	for i := range ts {
		if ts[i].Name == name {
			ts[i].Data = append([]byte(nil), ts[i].Data...)
			nan := math.Float32bits(float32(math.NaN()))
			ts[i].Data[0], ts[i].Data[1], ts[i].Data[2], ts[i].Data[3] = byte(nan), byte(nan>>8), byte(nan>>16), byte(nan>>24)
			found = true
		}
	}
	require.True(t, found, name)
	require.NoError(t, safetensors.WriteFile(path, ts, meta))
}

// libraryDirs lays out a model of one part as each library saves it, and
// returns each folder by the library's name.
func libraryDirs(t *testing.T) map[string]string {
	dirs := map[string]string{}

	// transformers: model.safetensors, and shards with their index, beside
	// config.json.
	dirs["transformers"] = filepath.Join(t.TempDir(), "llama")
	copyFiles(t, llamaDir, dirs["transformers"], "config.json", "model.safetensors")
	dirs["transformers-sharded"] = filepath.Join(t.TempDir(), "llama-sharded")
	require.NoError(t, checkpoint.Write(dirs["transformers-sharded"], readTensors(t, filepath.Join(llamaDir, "model.safetensors")),
		checkpoint.MaxShardSize(4000), checkpoint.FileMetadata(map[string]string{"format": "pt"})))
	copyFiles(t, llamaDir, dirs["transformers-sharded"], "config.json")

	// diffusers: one model's folder, with variants beside the default.
	dirs["diffusers"] = variantsDir(t, true)

	// timm: model.safetensors and config.json, timm's names.
	dirs["timm"] = filepath.Join(t.TempDir(), "resnet")
	writeJSONFile(t, filepath.Join(dirs["timm"], "config.json"), map[string]any{"architecture": "resnet18", "num_classes": 10, "num_features": 16})
	writeFile(t, filepath.Join(dirs["timm"], "model.safetensors"), tensors(6,
		layer{"conv1.weight", safetensors.F32, []uint64{16, 3, 3, 3}},
		layer{"bn1.weight", safetensors.F32, []uint64{16}},
		layer{"bn1.bias", safetensors.F32, []uint64{16}},
		layer{"fc.weight", safetensors.F32, []uint64{10, 16}},
		layer{"fc.bias", safetensors.F32, []uint64{10}},
	))

	// peft: a LoRA adapter, adapter_model.safetensors beside
	// adapter_config.json.
	dirs["peft"] = filepath.Join(t.TempDir(), "lora")
	writeJSONFile(t, filepath.Join(dirs["peft"], "adapter_config.json"), map[string]any{"peft_type": "LORA", "r": 4, "target_modules": []string{"q_proj", "v_proj"}})
	writeFile(t, filepath.Join(dirs["peft"], "adapter_model.safetensors"), tensors(7,
		layer{"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", safetensors.F32, []uint64{4, 64}},
		layer{"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", safetensors.F32, []uint64{64, 4}},
		layer{"base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", safetensors.F32, []uint64{4, 64}},
		layer{"base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight", safetensors.F32, []uint64{32, 4}},
	))

	// open_clip: open_clip_model.safetensors beside open_clip_config.json.
	dirs["open_clip"] = filepath.Join(t.TempDir(), "clip")
	writeJSONFile(t, filepath.Join(dirs["open_clip"], "open_clip_config.json"), map[string]any{"model_cfg": map[string]any{"embed_dim": 16}})
	writeFile(t, filepath.Join(dirs["open_clip"], "open_clip_model.safetensors"), tensors(8,
		layer{"visual.proj", safetensors.F32, []uint64{16, 16}},
		layer{"text_projection", safetensors.F32, []uint64{16, 16}},
		layer{"token_embedding.weight", safetensors.F32, []uint64{64, 16}},
		layer{"logit_scale", safetensors.F32, []uint64{}},
	))

	// A Hugging Face cache: the model's cache folder, whose refs/main
	// names the snapshot, whose files are links into blobs/; none where
	// the platform makes no symbolic links.
	cache := filepath.Join(t.TempDir(), "hub", "models--org--llama")
	snapshot := filepath.Join(cache, "snapshots", "0123456789abcdef")
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "blobs"), 0o777))
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "refs"), 0o777))
	require.NoError(t, os.MkdirAll(snapshot, 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(cache, "refs", "main"), []byte("0123456789abcdef"), 0o666))
	for i, name := range []string{"model.safetensors", "config.json"} {
		blob := filepath.Join(cache, "blobs", fmt.Sprintf("blob%d", i))
		data, err := os.ReadFile(filepath.Join(dirs["transformers"], name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(blob, data, 0o666))
		if !linktest.Symlink(t, filepath.Join("..", "..", "blobs", filepath.Base(blob)), filepath.Join(snapshot, name)) {
			return dirs
		}
	}
	dirs["hf-cache-snapshot"] = snapshot
	dirs["hf-cache-model"] = cache
	return dirs
}

// redact replaces each of the paths in s with its name in names.
func redact(s string, names map[string]string) string {
	for path, name := range names {
		s = strings.ReplaceAll(s, path, name)
		// As a JSON string writes it, with Windows's \ as \\.
		q, _ := json.Marshal(path)
		s = strings.ReplaceAll(s, string(q[1:len(q)-1]), name)
	}
	return s
}

// inside returns the name of part inside the model name: a URL's path
// below it, or a path in the folder, with the platform's separator.
func inside(name, part string) string {
	if strings.Contains(name, "://") {
		return name + "/" + part
	}
	return filepath.Join(name, part)
}

// inputs returns the names by which the tests give the model in dir to
// the command: its path, and the base URL of a server on loopback that
// serves the folder as the Hub serves a repository.
func inputs(t *testing.T, dir string) map[string]string {
	base, _ := serveDir(t, dir)
	return map[string]string{"local": dir, "remote": base}
}

// TestPipeline runs every command on a diffusers pipeline, on disk and
// over HTTP: each part is read, each output line names its part.
func TestPipeline(t *testing.T) {
	dir := pipelineDir(t)
	for where, name := range inputs(t, dir) {
		t.Run(where, func(t *testing.T) {
			names := map[string]string{name: "MODEL"}

			status, stdout, stderr := runCmd("inspect", name)
			require.Equal(t, exitOK, status, stderr)
			golden(t, "inspect-pipeline.golden", redact(stdout, names))

			status, stdout, stderr = runCmd("inspect", "--json", name)
			require.Equal(t, exitOK, status, stderr)
			var ps partsSummary
			require.NoError(t, json.Unmarshal([]byte(stdout), &ps))
			require.Len(t, ps.Parts, 3)
			var sum uint64
			for i, part := range []string{"text_encoder", "unet", "vae"} {
				p := ps.Parts[i]
				require.NotNil(t, p.Part)
				assert.Equal(t, part, *p.Part)
				assert.Equal(t, inside(name, part), p.Model)
				for _, f := range p.Files {
					assert.True(t, strings.HasPrefix(f.File, part+"/"), f.File)
				}
				for _, ts := range p.Tensors {
					assert.True(t, strings.HasPrefix(ts.Name, part+"/"), ts.Name)
					assert.True(t, strings.HasPrefix(ts.File, part+"/"), ts.File)
				}
				sum += p.Totals.Parameters
			}
			assert.Len(t, ps.Parts[1].Files, 3, "the unet's shards")
			assert.Equal(t, map[string]any{"total_parameters": "748", "total_size": "2992"}, ps.Parts[1].IndexMetadata)
			assert.Equal(t, 16, ps.Totals.TensorCount)
			assert.Equal(t, sum, ps.Totals.Parameters)
			assert.Equal(t, map[string]any{"format": "pt"}, ps.Metadata)

			status, stdout, _ = runCmd("validate", "--values", name)
			assert.Equal(t, exitOK, status, stdout)
			golden(t, "validate-pipeline.golden", redact(stdout, names))

			status, stdout, stderr = runCmd("stats", name)
			require.Equal(t, exitOK, status, stderr)
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			require.Len(t, lines, 17)
			for _, l := range lines[1:] {
				assert.Regexp(t, `^(text_encoder|unet|vae)/\S+ +F32 `, l)
			}
			status, stdout, stderr = runCmd("stats", name, "unet/conv_in.weight", "vae/encoder.conv_in.bias")
			require.Equal(t, exitOK, status, stderr)
			assert.Regexp(t, `\nunet/conv_in.weight +F32 +288 .*\nvae/encoder.conv_in.bias +F32 +8 `, stdout)
			status, _, stderr = runCmd("stats", name, "conv_in.weight")
			assert.Equal(t, exitTrouble, status, "a tensor is named behind its part")
			assert.Contains(t, stderr, `"conv_in.weight"`)

			status, stdout, stderr = runCmd("check", name)
			require.Equal(t, exitOK, status, stderr)
			golden(t, "check-pipeline.golden", redact(stdout, names))
			status, stdout, stderr = runCmd("check", "--json", name)
			require.Equal(t, exitOK, status, stderr)
			var rep struct{ Parts []struct{ Part string } }
			require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
			assert.Equal(t, []struct{ Part string }{{"text_encoder"}, {"unet"}, {"vae"}}, rep.Parts)
			status, _, stderr = runCmd("check", "--config", filepath.Join(llamaDir, "config.json"), name)
			assert.Equal(t, exitTrouble, status)
			assert.Contains(t, stderr, "3 parts (text_encoder, unet, vae), each checked against its own")

			status, stdout, _ = runCmd("diff", name, dir)
			assert.Equal(t, exitOK, status, stdout)
			assert.Contains(t, stdout, "are identical: 16 tensors identical")

			status, stderr = quantizeRefused(t, name)
			assert.Equal(t, exitTrouble, status)
			assert.Contains(t, stderr, ": a model of 3 parts (text_encoder, unet, vae): quantize one part's folder, such as "+inside(name, "text_encoder")+"\n")

			out := filepath.Join(t.TempDir(), "sd-bf16")
			status, stdout, stderr = runCmd("convert", "--dtype", "bf16", name, out)
			require.Equal(t, exitOK, status, stderr)
			assert.Contains(t, stdout, out+": 16 of 16 tensors converted to BF16")
			for _, f := range []string{"unet/diffusion_pytorch_model.safetensors.index.json", "unet/diffusion_pytorch_model-00003-of-00003.safetensors", "vae/diffusion_pytorch_model.safetensors", "text_encoder/model.safetensors"} {
				assert.FileExists(t, filepath.Join(out, f))
			}
			if where == "local" {
				// A folder on disk gives its other files too; one over
				// HTTP cannot be listed.
				assert.FileExists(t, filepath.Join(out, "model_index.json"))
				assert.FileExists(t, filepath.Join(out, "scheduler", "scheduler_config.json"))
				status, stdout, stderr = runCmd("inspect", out)
				require.Equal(t, exitOK, status, stderr)
				assert.Contains(t, stdout, "3 parts (text_encoder, unet, vae), 16 tensors, 2375 parameters")
				assert.Regexp(t, `\nall parts:\n.*\n +BF16 +16 +2375 +4750\n`, stdout)
				// The converted model differs from its source in every
				// tensor, each named with its part.
				status, stdout, _ = runCmd("diff", dir, out)
				assert.Equal(t, exitFail, status)
				assert.Contains(t, stdout, "unet/conv_in.weight: different (dtype F32, BF16): 288 of 288 values differ, ")
				assert.Contains(t, stdout, "0 tensors identical, 16 different, 0 only in A")
				// Within BF16's rounding, they match.
				status, stdout, _ = runCmd("diff", "--rtol", "0.00390625", dir, out)
				assert.Equal(t, exitOK, status, stdout)
				assert.Contains(t, stdout, "unet/conv_in.weight: within tolerance (dtype F32, BF16): 288 of 288 values differ, ")
				assert.Contains(t, stdout, "match within tolerance: 0 tensors identical, 16 within tolerance, 0 only in A")
			}
		})
	}
}

// quantizeRefused runs quantize on a model of several parts, and checks
// that it wrote nothing.
func quantizeRefused(t *testing.T, name string) (int, string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "q")
	status, _, stderr := runCmd("quantize", name, dst)
	assert.NoFileExists(t, dst)
	return status, stderr
}

// TestPipelineDiffers: diff names the tensors of a part that differ.
func TestPipelineDiffers(t *testing.T) {
	a, b := pipelineDir(t), pipelineDir(t)
	plantNaN(t, filepath.Join(b, "vae", "diffusion_pytorch_model.safetensors"), "encoder.conv_in.bias")
	status, stdout, _ := runCmd("diff", a, b)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "vae/encoder.conv_in.bias: different: 1 of 8 values differs, max abs diff +Inf")
	assert.Contains(t, stdout, "15 tensors identical, 1 different, 0 only in A")

	// check and validate --values find the NaN, in its part.
	status, stdout, _ = runCmd("check", b)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "vae: error: tensor \"encoder.conv_in.bias\": 1 NaN value, the first at index 0\n")
	status, stdout, _ = runCmd("validate", "--values", b)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, b+": tensor vae/encoder.conv_in.bias: 1 NaN, 0 Inf of 8 values\n")
}

// TestVariants: every command reads the files of no variant by default,
// and those of --variant; a folder of variants only is an error that lists
// them, as a file given with --variant is.
func TestVariants(t *testing.T) {
	dir := variantsDir(t, true)
	for where, name := range inputs(t, dir) {
		t.Run(where, func(t *testing.T) {
			for _, tc := range []struct {
				variant, file string
				dtype         safetensors.DType
			}{
				{"", "diffusion_pytorch_model.safetensors", safetensors.F32},
				{"fp16", "diffusion_pytorch_model.fp16.safetensors", safetensors.F16},
				{"bf16", "diffusion_pytorch_model.bf16.safetensors", safetensors.BF16},
			} {
				flags := []string{}
				if tc.variant != "" {
					flags = []string{"--variant", tc.variant}
				}
				cmd := func(args ...string) (int, string, string) {
					return runCmd(append(append(args[:1:1], flags...), args[1:]...)...)
				}
				status, stdout, stderr := cmd("inspect", name)
				require.Equal(t, exitOK, status, stderr)
				assert.Contains(t, stdout, fmt.Sprintf("\nFILE  %s", strings.Repeat(" ", len(tc.file)-4)), "the table names the file")
				assert.Regexp(t, fmt.Sprintf(`\n%s +conv_in.bias +%v `, regexpQuote(tc.file), tc.dtype), stdout)

				status, stdout, _ = cmd("validate", "--values", name)
				assert.Equal(t, exitOK, status, stdout)
				assert.Equal(t, fmt.Sprintf("%s: ok, 8 tensors in %s, %d bytes of data\n", name, tc.file, 748*tc.dtype.Bits()/8), stdout)

				status, stdout, stderr = cmd("stats", name, "conv_in.weight")
				assert.Equal(t, exitOK, status, stderr)
				assert.Regexp(t, fmt.Sprintf(`\nconv_in.weight +%v +288 `, tc.dtype), stdout)

				status, stdout, stderr = cmd("check", name)
				assert.Equal(t, exitOK, status, stderr)
				assert.Contains(t, stdout, fmt.Sprintf("%s: 8 tensors, %d bytes", name, 748*tc.dtype.Bits()/8))

				status, stdout, _ = cmd("diff", name, dir)
				assert.Equal(t, exitOK, status, "--variant applies to both: %s", stdout)

				out := filepath.Join(t.TempDir(), "f32")
				status, _, stderr = cmd("convert", "--dtype", "F32", name, out)
				require.Equal(t, exitOK, status, stderr)
				assert.FileExists(t, filepath.Join(out, tc.file))

				dst := filepath.Join(t.TempDir(), "q")
				status, stdout, stderr = cmd("quantize", name, dst)
				require.Equal(t, exitOK, status, stderr)
				assert.Contains(t, stdout, "1 weight quantized to int8") // time_embedding.linear_1
				assert.FileExists(t, filepath.Join(dst, tc.file))
				assert.FileExists(t, filepath.Join(dst, "config.json"))
			}
			status, _, stderr := runCmd("inspect", "--variant", "int8", name)
			assert.Equal(t, exitTrouble, status)
			assert.Contains(t, stderr, "no model found")
		})
	}

	// A variant named with a file: a usage error.
	status, _, stderr := runCmd("inspect", "--variant", "fp16", filepath.Join(dir, "diffusion_pytorch_model.fp16.safetensors"))
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "is a file: give its folder")

	// Variants only: every command fails, listing them, and reads one with
	// --variant.
	only := variantsDir(t, false)
	for _, args := range modelCommands(t, only) {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitTrouble, status, "%v: %s%s", args, stdout, stderr)
		assert.Contains(t, stdout+stderr, "there are files of the variants bf16 (diffusion_pytorch_model.bf16.safetensors); fp16 (diffusion_pytorch_model.fp16.safetensors)", args)
		status, stdout, stderr = runCmd(append([]string{args[0], "--variant", "fp16"}, args[1:]...)...)
		assert.Equal(t, exitOK, status, "%v: %s%s", args, stdout, stderr)
	}
	base, _ := serveDir(t, only)
	status, _, stderr = runCmd("inspect", base)
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "no model found")
	status, _, stderr = runCmd("inspect", "--variant", "bf16", base)
	assert.Equal(t, exitOK, status, stderr)
}

// regexpQuote quotes the dots of a file name for a regular expression.
func regexpQuote(s string) string { return strings.ReplaceAll(s, ".", `\.`) }

// modelCommands returns every command that reads a model, run on name
// with no flag (convert and quantize into new folders).
func modelCommands(t *testing.T, name string) [][]string {
	out := filepath.Join(t.TempDir(), "out")
	return [][]string{
		{"inspect", name}, {"inspect", "--json", name}, {"validate", name}, {"validate", "--values", name},
		{"stats", name}, {"check", name}, {"diff", name, name},
		{"convert", "--dtype", "BF16", name, out + "-convert"}, {"quantize", name, out + "-quantize"},
	}
}

// TestSentenceTransformers runs every command on a sentence-transformers
// model, whose Dense module's weights are in 2_Dense: they are read, and
// a NaN planted there is found.
func TestSentenceTransformers(t *testing.T) {
	dir := sentenceTransformersDir(t)
	for where, name := range inputs(t, dir) {
		t.Run(where, func(t *testing.T) {
			status, stdout, stderr := runCmd("inspect", name)
			require.Equal(t, exitOK, status, stderr)
			assert.Contains(t, stdout, name+": 2 parts (., 2_Dense), 60 tensors, ")
			assert.Contains(t, stdout, "\npart .: 58 tensors, ")
			assert.Contains(t, stdout, "\npart 2_Dense: 2 tensors, 136 parameters\n")
			assert.Regexp(t, `\n2_Dense/model\.safetensors +2_Dense/linear\.weight +F32 +\[8, 16\] `, stdout)

			status, stdout, _ = runCmd("validate", name)
			assert.Equal(t, exitOK, status, stdout)
			assert.Contains(t, stdout, name+": part .: ok, 58 tensors in model.safetensors, ")
			assert.Contains(t, stdout, name+": part 2_Dense: ok, 2 tensors in 2_Dense/model.safetensors, 544 bytes of data\n")

			status, stdout, stderr = runCmd("stats", name, "2_Dense/linear.weight")
			assert.Equal(t, exitOK, status, stderr)
			assert.Regexp(t, `\n2_Dense/linear.weight +F32 +128 `, stdout)

			status, stdout, stderr = runCmd("check", name)
			assert.Equal(t, exitOK, status, stdout+stderr)
			assert.Contains(t, stdout, ".: 58 tensors, 14224 bytes (13.9 KiB), bert configuration checked: 0 errors, 0 warnings\n")
			assert.Contains(t, stdout, "2_Dense: 2 tensors, 544 bytes, configuration checked (2 keys): 0 errors, 0 warnings\n2_Dense: config keys checked: in_features, out_features\n")

			status, stderr = quantizeRefused(t, name)
			assert.Equal(t, exitTrouble, status)
			assert.Contains(t, stderr, ": a model of 2 parts (., 2_Dense): quantize one part's folder, such as "+name+"\n")
		})
	}

	// A NaN in 2_Dense: check, validate --values and stats find it.
	plantNaN(t, filepath.Join(dir, "2_Dense", "model.safetensors"), "linear.weight")
	for where, name := range inputs(t, dir) {
		t.Run(where+"/nan", func(t *testing.T) {
			status, stdout, _ := runCmd("check", name)
			assert.Equal(t, exitFail, status, stdout)
			assert.Contains(t, stdout, name+": 2 parts, 60 tensors, ")
			assert.Contains(t, stdout, "2_Dense: error: tensor \"linear.weight\": 1 NaN value, the first at index 0\n")
			status, stdout, _ = runCmd("validate", "--values", name)
			assert.Equal(t, exitFail, status, stdout)
			assert.Contains(t, stdout, name+": tensor 2_Dense/linear.weight: 1 NaN, 0 Inf of 128 values\n")
			status, stdout, _ = runCmd("stats", name)
			assert.Equal(t, exitFail, status, stdout)
			assert.Regexp(t, `\n2_Dense/linear.weight +F32 +128 .* 1 +0\n`, stdout)
		})
	}
}

// TestLibraryLayouts runs every command on a model's folder as each
// library saves it, on disk and over HTTP: each finds the library's
// weight file.
func TestLibraryLayouts(t *testing.T) {
	want := map[string]struct {
		file    string // the first weight file
		tensors int
	}{
		"transformers":         {"model.safetensors", 30},
		"transformers-sharded": {"model-00001-of-00004.safetensors", 30},
		"diffusers":            {"diffusion_pytorch_model.safetensors", 8},
		"timm":                 {"model.safetensors", 5},
		"peft":                 {"adapter_model.safetensors", 4},
		"open_clip":            {"open_clip_model.safetensors", 4},
		"hf-cache-snapshot":    {"model.safetensors", 30},
		"hf-cache-model":       {"model.safetensors", 30},
	}
	dirs := libraryDirs(t)
	for lib := range want {
		if _, ok := dirs[lib]; !ok {
			require.True(t, strings.HasPrefix(lib, "hf-cache-"), "no folder for %s", lib)
			t.Logf("%s not tested: the Hugging Face cache's snapshots are symbolic links, which this platform did not make", lib)
		}
	}
	for lib, dir := range dirs {
		ins := inputs(t, dir)
		if lib == "hf-cache-model" {
			delete(ins, "remote") // a cache's folder is on disk only; its snapshot is served as a repository
		}
		for where, name := range ins {
			t.Run(lib+"/"+where, func(t *testing.T) {
				w := want[lib]
				for _, args := range modelCommands(t, name) {
					status, stdout, stderr := runCmd(args...)
					require.Equal(t, exitOK, status, "%v: %s%s", args, stdout, stderr)
					switch {
					case args[0] == "inspect" && args[1] != "--json":
						assert.True(t, strings.HasPrefix(stdout, fmt.Sprintf("%s: %d tensors, ", name, w.tensors)), stdout)
						assert.Contains(t, stdout, "\n"+w.file+" ")
					case args[0] == "validate":
						assert.True(t, strings.HasPrefix(stdout, fmt.Sprintf("%s: ok, %d tensors in ", name, w.tensors)), stdout)
					case args[0] == "stats":
						assert.Len(t, strings.Split(strings.TrimSpace(stdout), "\n"), 1+w.tensors)
					case args[0] == "diff":
						assert.Contains(t, stdout, fmt.Sprintf("are identical: %d tensors identical", w.tensors))
					case args[0] == "convert", args[0] == "quantize":
						assert.FileExists(t, filepath.Join(args[len(args)-1], w.file))
					}
				}
			})
		}
	}
}

// TestStatsPieceByPiece: stats and validate --values of a model over HTTP
// read a tensor larger than a piece in pieces, each a range request of at
// most a piece, and give the statistics of the whole.
func TestStatsPieceByPiece(t *testing.T) {
	dir := t.TempDir()
	big := tensors(9, layer{"big", safetensors.F32, []uint64{3 * valuesChunk / 4, 2}}, layer{"small", safetensors.F16, []uint64{5}})
	writeFile(t, filepath.Join(dir, "model.safetensors"), big)
	var largest atomic.Int64
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lo, hi int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &lo, &hi); err == nil {
			for n := hi - lo + 1; ; {
				if cur := largest.Load(); n <= cur || largest.CompareAndSwap(cur, n) {
					break
				}
			}
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()

	status, local, stderr := runCmd("stats", dir)
	require.Equal(t, exitOK, status, stderr)
	status, remote, stderr := runCmd("stats", srv.URL)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, local, remote)
	assert.LessOrEqual(t, largest.Load(), int64(valuesChunk), "the largest range request")
	assert.Greater(t, largest.Load(), int64(valuesChunk/2), "the tensor is read in pieces of 4 MiB")
	status, stdout, _ := runCmd("validate", "--values", srv.URL)
	assert.Equal(t, exitOK, status, stdout)

	// The pieces' statistics merged are those of the whole tensor.
	whole, err := big[0].Stats()
	require.NoError(t, err)
	fields := strings.Fields(strings.Split(local, "\n")[1])
	require.Equal(t, "big", fields[0])
	assert.Equal(t, []string{"F32", fmt.Sprint(whole.Count), number(whole.Min), number(whole.Max)}, fields[1:5])
	for i, v := range []float64{whole.Mean, whole.StdDev} {
		got, err := strconv.ParseFloat(fields[5+i], 64)
		require.NoError(t, err)
		assert.InEpsilon(t, v, got, 1e-5)
	}
}

// TestNoModel: an empty folder, a path that does not exist, a URL that
// answers 404 for every file tried, and one of a file that is not there
// make every command exit with 2, naming the input.
func TestNoModel(t *testing.T) {
	empty := t.TempDir()
	base, _ := serveDir(t, empty)
	// The system's words for a missing file: "no such file or directory"
	// on Unix, "The system cannot find the file specified." on Windows.
	_, err := os.Stat(filepath.Join(empty, "missing"))
	notExist := errors.Unwrap(err).Error()
	for _, tc := range []struct{ name, want string }{
		{empty, "no model found: no weights: none of model.safetensors"},
		{filepath.Join(empty, "missing"), notExist},
		{filepath.Join(empty, "missing.safetensors"), notExist},
		{base, "no model found: none of model.safetensors"},
		{base + "/model.safetensors", "404 Not Found"},
		{base + "/model.safetensors.index.json", "404 Not Found"},
	} {
		for _, args := range modelCommands(t, tc.name) {
			status, stdout, stderr := runCmd(args...)
			assert.Equal(t, exitTrouble, status, "%v: %s%s", args, stdout, stderr)
			assert.Contains(t, stdout+stderr, tc.want, args)
			assert.Contains(t, stdout+stderr, tc.name, "%v: the input named", args)
			if args[0] == "validate" {
				assert.True(t, strings.HasPrefix(stdout, tc.name+": error: "), stdout)
			} else {
				assert.True(t, strings.HasPrefix(stderr, "safetensors "+args[0]+": "), stderr)
			}
		}
	}
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written")
}

// TestValidateWorst: validate returns the worst status of its operands.
func TestValidateWorst(t *testing.T) {
	invalid := filepath.Join(corpus, "invalid", "layout_hole_4.safetensors")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{tinyModel}, exitOK},
		{[]string{tinyModel, invalid}, exitFail},
		{[]string{invalid, tinyModel}, exitFail},
		{[]string{tinyModel, missing}, exitTrouble},
		{[]string{missing, invalid}, exitTrouble},
		{[]string{invalid, missing, tinyModel}, exitTrouble},
	} {
		status, stdout, _ := runCmd(append([]string{"validate"}, tc.args...)...)
		assert.Equal(t, tc.want, status, "%v: %s", tc.args, stdout)
		assert.Len(t, strings.Split(strings.TrimSpace(stdout), "\n"), len(tc.args), "a verdict for each")
	}
}
