package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/verify"
)

// TestInspectDigests: inspect --digests prints the same manifest for a
// file and for a sharded checkpoint of the same tensors, whose digests are
// Tensor.Digest's; its JSON names each tensor's file in the model's
// folder and reads back as the same manifest.
func TestInspectDigests(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "model.safetensors")
	tensors := tinyLlama()
	require.NoError(t, safetensors.WriteFile(file, tensors, map[string]string{"format": "pt"}))
	sharded := filepath.Join(dir, "sharded")
	require.NoError(t, checkpoint.Write(sharded, tensors, checkpoint.MaxShardSize(300_000), checkpoint.FileMetadata(map[string]string{"other": "metadata"})))

	status, fromFile, stderr := runCmd("inspect", "--digests", file)
	require.Equal(t, exitOK, status, stderr)
	status, fromShards, stderr := runCmd("inspect", "--digests", sharded)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, fromFile, fromShards, "the same tensors, the same manifest")
	m, err := verify.ReadManifest(strings.NewReader(fromFile))
	require.NoError(t, err)
	require.Len(t, m.Tensors, len(tensors))
	want := map[string]safetensors.TensorDigest{}
	for _, tn := range tensors {
		want[tn.Name] = tn.Digest()
	}
	for _, mt := range m.Tensors {
		assert.Equal(t, want[mt.Name], mt.Digest, mt.Name)
	}

	status, js, stderr := runCmd("inspect", "--digests", "--json", sharded)
	require.Equal(t, exitOK, status, stderr)
	var out digestsOutput
	require.NoError(t, json.Unmarshal([]byte(js), &out))
	assert.Equal(t, sharded, out.Model)
	assert.Equal(t, len(tensors), out.TensorCount)
	assert.Equal(t, uint64(1001728), out.Bytes)
	files := map[string]bool{}
	for _, tn := range out.Tensors {
		files[tn.File] = true
	}
	assert.Equal(t, map[string]bool{"model-00001-of-00004.safetensors": true, "model-00002-of-00004.safetensors": true, "model-00003-of-00004.safetensors": true, "model-00004-of-00004.safetensors": true}, files)
	mj, err := verify.ReadManifest(strings.NewReader(js))
	require.NoError(t, err)
	assert.True(t, mj.Compare(m.Tensors).OK())

	// A model of several parts: names and files behind the part's folder.
	status, js, stderr = runCmd("inspect", "--digests", "--json", pipelineDir(t))
	require.Equal(t, exitOK, status, stderr)
	out = digestsOutput{}
	require.NoError(t, json.Unmarshal([]byte(js), &out))
	require.NotEmpty(t, out.Tensors)
	parts := map[string]bool{}
	for _, tn := range out.Tensors {
		part, _, ok := strings.Cut(tn.Name, "/")
		require.True(t, ok, tn.Name)
		assert.True(t, strings.HasPrefix(tn.File, part+"/"), "%s in %s", tn.Name, tn.File)
		parts[part] = true
	}
	assert.Equal(t, map[string]bool{"unet": true, "vae": true, "text_encoder": true}, parts)

	status, _, stderr = runCmd("inspect", "--digests", filepath.Join(corpus, "..", "spark", "kv_index"))
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "--digests lists a model's tensors")
	status, _, stderr = runCmd("inspect", "--digests", filepath.Join(dir, "missing.safetensors"))
	assert.Equal(t, exitTrouble, status, stderr)
}

// TestDiffShardedAgainstFile: diff names the one tensor that changed
// between a sharded checkpoint and the same tensors in one file, as
// inspect --digests does: the layouts differ, the other tensors do not.
func TestDiffShardedAgainstFile(t *testing.T) {
	dir := t.TempDir()
	tensors := tinyLlama()
	file := filepath.Join(dir, "model.safetensors")
	require.NoError(t, safetensors.WriteFile(file, tensors, map[string]string{"format": "pt"}))
	changed := make([]safetensors.Tensor, len(tensors))
	copy(changed, tensors)
	const name = "model.layers.2.mlp.up_proj.weight"
	for i, tn := range changed {
		if tn.Name == name {
			tn.Data = append([]byte(nil), tn.Data...)
			tn.Data[1000] ^= 0x40
			changed[i] = tn
		}
	}
	sharded := filepath.Join(dir, "sharded")
	require.NoError(t, checkpoint.Write(sharded, changed, checkpoint.MaxShardSize(300_000), checkpoint.FileMetadata(map[string]string{"format": "pt"})))

	status, stdout, stderr := runCmd("diff", file, sharded)
	assert.Equal(t, exitFail, status, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 2, stdout)
	assert.True(t, strings.HasPrefix(lines[0], name+": different: 1 of "), lines[0])
	assert.Contains(t, lines[1], "38 tensors identical, 1 different, 0 only in A, 0 only in B, 0 metadata keys differ")

	status, a, _ := runCmd("inspect", "--digests", file)
	require.Equal(t, exitOK, status)
	status, b, _ := runCmd("inspect", "--digests", sharded)
	require.Equal(t, exitOK, status)
	ma, err := verify.ReadManifest(strings.NewReader(a))
	require.NoError(t, err)
	mb, err := verify.ReadManifest(strings.NewReader(b))
	require.NoError(t, err)
	r := ma.Compare(mb.Tensors)
	require.Len(t, r.Changed, 1)
	assert.Equal(t, name, r.Changed[0].Name)
	assert.Equal(t, len(tensors)-1, r.Matched)
}
