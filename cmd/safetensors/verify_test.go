package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/linktest"
)

// signingKeys writes a new ECDSA P-384 key pair and returns the paths of
// its private and public PEM files.
func signingKeys(t *testing.T) (priv, pub string) {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "key.priv"), filepath.Join(dir, "key.pub")
	require.NoError(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644))
	return priv, pub
}

// TestSignVerify signs a folder with the command (the signature inside
// it, which it leaves out), verifies it, and checks the exit statuses of
// a change, a file with no reference, and usage errors.
func TestSignVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "model.safetensors")
	require.NoError(t, safetensors.WriteFile(file, tinyLlama(), nil))
	priv, pub := signingKeys(t)
	sig := filepath.Join(dir, "model.sig")
	status, stdout, stderr := runCmd("sign", "--key", priv, "--signature", sig, dir)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "signed 1 file (files) into")

	status, stdout, stderr = runCmd("verify", "--signature", sig, "--key", pub, dir)
	require.Equal(t, exitOK, status, stdout+stderr)
	assert.Contains(t, stdout, "model.safetensors: ok: signature sha256")

	status, stdout, stderr = runCmd("verify", dir)
	assert.Equal(t, exitFail, status, "no reference")
	assert.Contains(t, stdout, "unchecked: no reference")
	assert.Equal(t, "safetensors verify: "+dir+": no reference to check against: model.safetensors, model.sig: only the structure was checked (no cache blob, LFS pointer, server digest or signature)\n"+
		"safetensors verify: --structure-only accepts a model checked for its structure alone\n", stderr)
	status, _, stderr = runCmd("verify", "--structure-only", dir)
	assert.Equal(t, exitOK, status)
	assert.Empty(t, stderr)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("x"), 0o644))
	status, stdout, _ = runCmd("verify", "--signature", sig, "--key", pub, dir)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "not signed: extra.txt")

	for _, args := range [][]string{{"verify", "--key", pub, dir}, {"sign", dir}, {"verify"}} {
		status, _, stderr := runCmd(args...)
		assert.Equal(t, exitTrouble, status, "%q", args)
		assert.True(t, strings.HasSuffix(stderr, "run 'safetensors help "+args[0]+"' for usage\n"), "%q: %s", args, stderr)
	}
	status, _, stderr = runCmd("verify", "--signature", sig, "--key", sig, dir)
	assert.Equal(t, exitTrouble, status)
	assert.Contains(t, stderr, "safetensors verify: "+sig+": ")
}

// TestVerifyCache verifies a Hugging Face cache folder laid out as
// huggingface_hub lays it out, then with a blob corrupted: exit 1, the
// file named with both digests, in the text and in --json.
func TestVerifyCache(t *testing.T) {
	data, err := os.ReadFile(tinyModel)
	require.NoError(t, err)
	cache := filepath.Join(t.TempDir(), "models--org--tiny")
	snap := filepath.Join(cache, "snapshots", "abc123")
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "blobs"), 0o755))
	require.NoError(t, os.MkdirAll(snap, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "refs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cache, "refs", "main"), []byte("abc123"), 0o644))
	blob := fmt.Sprintf("%x", sha256.Sum256(data))
	require.NoError(t, os.WriteFile(filepath.Join(cache, "blobs", blob), data, 0o644))
	linktest.Need(t, filepath.Join("..", "..", "blobs", blob), filepath.Join(snap, "model.safetensors"))
	status, stdout, stderr := runCmd("verify", cache)
	require.Equal(t, exitOK, status, stdout+stderr)
	assert.Contains(t, stdout, "model.safetensors: ok: cache-blob sha256")

	data[len(data)-1] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(cache, "blobs", blob), data, 0o644))
	status, stdout, _ = runCmd("verify", cache)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, fmt.Sprintf("model.safetensors: MISMATCH: sha256 %x, the cache-blob (../../blobs/%s) says %s", sha256.Sum256(data), blob, blob))
	status, stdout, _ = runCmd("verify", "--json", cache)
	assert.Equal(t, exitFail, status)
	var out verifyOutput
	require.NoError(t, json.Unmarshal([]byte(stdout), &out))
	assert.Equal(t, 1, out.MismatchCount)
	assert.Equal(t, exitFail, out.Status)
	assert.Equal(t, "mismatch", out.Files[0].Status)
}

// TestVerifyDigests checks a sharded model against the manifest that
// inspect --digests writes of the same tensors in one file: every shard
// holds; a tensor changed is named, and exit 1.
func TestVerifyDigests(t *testing.T) {
	dir := t.TempDir()
	sharded := filepath.Join(dir, "sharded")
	require.NoError(t, checkpoint.Write(sharded, tinyLlama(), checkpoint.MaxShardSize(300_000)))
	status, manifest, stderr := runCmd("inspect", "--digests", tinyModel)
	require.Equal(t, exitOK, status, stderr)
	digests := filepath.Join(dir, "model.digests")
	require.NoError(t, os.WriteFile(digests, []byte(manifest), 0o644))

	status, stdout, stderr := runCmd("verify", "--digests", digests, sharded)
	require.Equal(t, exitOK, status, stdout+stderr)
	assert.Contains(t, stdout, "model-00001-of-00004.safetensors: ok: tensor-digests tensor-sha256")
	assert.Contains(t, stdout, "tensors "+digests+": 39 as listed, 0 changed, 0 missing, 0 not listed")

	plantNaN(t, filepath.Join(sharded, "model-00004-of-00004.safetensors"), "model.norm.weight")
	status, stdout, _ = runCmd("verify", "--digests", digests, sharded)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, `model-00004-of-00004.safetensors: MISMATCH: tensor-sha256 2 as listed: "model.norm.weight" (digest`)
	assert.Contains(t, stdout, "model.safetensors.index.json: ok: tensor-digests tensor-sha256")
	assert.Contains(t, stdout, "1 changed, 0 missing, 0 not listed")
}
