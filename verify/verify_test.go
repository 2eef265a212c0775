package verify

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/linktest"
	"github.com/safetensors-go/safetensors/signing"
)

// tinyModel returns the bytes of a small safetensors file.
func tinyModel(t *testing.T) []byte { return modelOf(t, 16) }

// modelOf returns the bytes of a safetensors file of one tensor of n
// bytes.
func modelOf(t *testing.T, n int) []byte {
	p := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, safetensors.WriteFile(p, []safetensors.Tensor{{Name: "w", DType: safetensors.U8, Shape: []uint64{uint64(n)}, Data: make([]byte, n)}}, nil))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}

func sha256Hex(b []byte) string { d := sha256.Sum256(b); return hex.EncodeToString(d[:]) }

// gitSHA1 is git's blob id, computed as git hash-object does.
func gitSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// snapshot lays out a Hugging Face cache folder as huggingface_hub does:
// blobs named by SHA-256 (large files) or git SHA-1 (small ones), and a
// snapshot of links to them.
func snapshot(t *testing.T, files map[string][]byte, small map[string]bool) string {
	cache := filepath.Join(t.TempDir(), "models--org--m")
	snap := filepath.Join(cache, "snapshots", "0123abc")
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "blobs"), 0o755))
	require.NoError(t, os.MkdirAll(snap, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "refs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cache, "refs", "main"), []byte("0123abc"), 0o644))
	for name, b := range files {
		blob := sha256Hex(b)
		if small[name] {
			blob = gitSHA1(b)
		}
		require.NoError(t, os.WriteFile(filepath.Join(cache, "blobs", blob), b, 0o644))
		linktest.Need(t, filepath.Join("..", "..", "blobs", blob), filepath.Join(snap, name))
	}
	return cache
}

func TestCacheBlobs(t *testing.T) {
	model, config := tinyModel(t), []byte(`{"model_type": "x"}`)
	cache := snapshot(t, map[string][]byte{"model.safetensors": model, "config.json": config}, map[string]bool{"config.json": true})
	r, err := Model(context.Background(), cache)
	require.NoError(t, err)
	require.NoError(t, r.Err())
	require.Len(t, r.Files, 2)
	for _, f := range r.Files {
		require.Len(t, f.Checks, 1, f.Name)
		assert.Equal(t, RefCacheBlob, f.Checks[0].Reference)
	}
	assert.Equal(t, GitSHA1, r.Files[0].Checks[0].Algorithm, "config.json, a small file kept in git")
	assert.Equal(t, SHA256, r.Files[1].Checks[0].Algorithm)

	// A corrupted blob of each kind: named, with both digests.
	blobs := filepath.Join(cache, "blobs")
	for _, name := range []string{sha256Hex(model), gitSHA1(config)} {
		b, err := os.ReadFile(filepath.Join(blobs, name))
		require.NoError(t, err)
		b[len(b)-2] ^= 1
		require.NoError(t, os.WriteFile(filepath.Join(blobs, name), b, 0o644))
		r, err := Model(context.Background(), cache)
		require.NoError(t, err)
		err = r.Err()
		require.ErrorIs(t, err, ErrMismatch)
		assert.Contains(t, err.Error(), name)
		b[len(b)-2] ^= 1
		require.NoError(t, os.WriteFile(filepath.Join(blobs, name), b, 0o644))
	}

	// A blob whose header is broken: the structure fails, and the file
	// is still named as differing from its blob.
	name := sha256Hex(model)
	b, err := os.ReadFile(filepath.Join(blobs, name))
	require.NoError(t, err)
	b[0] ^= 0xff
	require.NoError(t, os.WriteFile(filepath.Join(blobs, name), b, 0o644))
	r, err = Model(context.Background(), cache)
	require.NoError(t, err)
	require.Error(t, r.Structure)
	require.ErrorIs(t, r.Err(), ErrMismatch)
	assert.Len(t, r.Files, 2, "the snapshot's files, found without checkpoint.Open")
	assert.Contains(t, r.Err().Error(), "model.safetensors: sha256 "+sha256Hex(b))

	// A folder with no reference: said plainly.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), model, 0o644))
	r, err = Model(context.Background(), dir)
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrNoReference)
	assert.Equal(t, []string{"model.safetensors"}, r.Unchecked())
}

// TestRemote serves a model as the Hub does: X-Linked-Etag and
// X-Linked-Size for the weights, a git SHA-1 ETag for the index, and a
// server that says neither.
func TestRemote(t *testing.T) {
	model := modelOf(t, 20<<20) // more than one range request
	var served atomic.Int64
	serve := func(linked string, body []byte) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w = countingWriter{w, &served}
			if linked != "" {
				w.Header().Set("X-Linked-Etag", `"`+linked+`"`)
				w.Header().Set("X-Linked-Size", fmt.Sprint(len(model)))
			}
			w.Header().Set("ETag", `"v1"`)
			http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(body))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := serve(sha256Hex(model), model)
	r, err := Model(context.Background(), srv.URL+"/model.safetensors")
	require.NoError(t, err)
	require.NoError(t, r.Err())
	require.Len(t, r.Files[0].Checks, 2)
	assert.Equal(t, RefLinkedETag, r.Files[0].Checks[0].Reference)
	// Read once: the file, and the first bytes that opening it (for the
	// structure, then for the hash) fetch, at most 64 KiB each.
	assert.LessOrEqual(t, served.Load(), int64(len(model))+2*64<<10)

	// The bytes served are not those the server names: a mismatch.
	bad := append([]byte(nil), model...)
	bad[len(bad)-1] ^= 1
	srv = serve(sha256Hex(model), bad)
	r, err = Model(context.Background(), srv.URL+"/model.safetensors")
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrMismatch)

	// No X-Linked-Etag, an ETag that is no digest: no reference.
	srv = serve("", model)
	r, err = Model(context.Background(), srv.URL+"/model.safetensors")
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrNoReference)
}

// TestGitClone verifies a git clone as git lfs leaves it: the weights
// committed as an LFS pointer and present in full, config.json committed
// as a blob. The repository is made with the git command (skipped without
// one), the pointer's oid computed here with crypto/sha256.
func TestGitClone(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(stdin string, args ...string) string {
		cmd := exec.Command(gitPath, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-C", dir}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %q: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	model, config := tinyModel(t), []byte("{\"model_type\": \"x\"}\n")
	git("", "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644))
	git("", "add", "config.json")
	pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha256Hex(model), len(model))
	oid := git(pointer, "hash-object", "-w", "--stdin")
	git("", "update-index", "--add", "--cacheinfo", "100644,"+oid+",model.safetensors")
	git("", "commit", "-q", "-m", "model")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), model, 0o644))

	r, err := Model(context.Background(), dir)
	require.NoError(t, err)
	require.NoError(t, r.Err())
	require.Len(t, r.Files, 2)
	assert.Equal(t, RefGitHEAD, r.Files[0].Checks[0].Reference)
	assert.Equal(t, gitSHA1(config), r.Files[0].Checks[0].Expected)
	assert.Equal(t, RefLFSPointer, r.Files[1].Checks[0].Reference)

	model[len(model)-1] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), model, 0o644))
	r, err = Model(context.Background(), dir)
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrMismatch)
	assert.Contains(t, r.Err().Error(), "model.safetensors: sha256 "+sha256Hex(model))

	// The pointer itself in place of the file: the content is missing.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte(pointer), 0o644))
	r, err = Model(context.Background(), dir)
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrMismatch)
	assert.Contains(t, r.Err().Error(), "git lfs pull")
}

// TestRemoteGitETag serves a small file as the Hub serves one it keeps in
// git: its git blob SHA-1 as the ETag, no X-Linked-Etag.
func TestRemoteGitETag(t *testing.T) {
	model := tinyModel(t)
	for _, body := range [][]byte{model, append(append([]byte(nil), model[:len(model)-1]...), model[len(model)-1]^1)} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"`+gitSHA1(model)+`"`)
			http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(body))
		}))
		r, err := Model(context.Background(), srv.URL+"/model.safetensors")
		srv.Close()
		require.NoError(t, err)
		require.Len(t, r.Files[0].Checks, 1)
		assert.Equal(t, RefETag, r.Files[0].Checks[0].Reference)
		if bytes.Equal(body, model) {
			assert.NoError(t, r.Err())
		} else {
			assert.ErrorIs(t, r.Err(), ErrMismatch)
		}
	}
}

// TestRemoteRedirect serves a file as the Hub serves one in LFS or Xet:
// the resolve URL answers 302 with X-Linked-Etag and X-Linked-Size, and
// the storage it redirects to serves the bytes with an ETag of its own.
func TestRemoteRedirect(t *testing.T) {
	model := tinyModel(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/org/m/resolve/main/model.safetensors", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Linked-Etag", `"`+sha256Hex(model)+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(model)))
		w.Header().Set("ETag", `"`+sha256Hex(model)+`"`)
		http.Redirect(w, r, "/storage/blob", http.StatusFound)
	})
	mux.HandleFunc("/storage/blob", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"cdn-1"`)
		http.ServeContent(w, r, "blob", time.Time{}, bytes.NewReader(model))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r, err := Model(context.Background(), srv.URL+"/org/m/resolve/main/model.safetensors")
	require.NoError(t, err)
	require.NoError(t, r.Err())
	require.Len(t, r.Files[0].Checks, 2)
	assert.Equal(t, Check{Reference: RefLinkedETag, Algorithm: SHA256, Source: srv.URL + "/org/m/resolve/main/model.safetensors", Expected: sha256Hex(model), Actual: sha256Hex(model), Holds: true}, r.Files[0].Checks[0])
	assert.Equal(t, fmt.Sprint(len(model)), r.Files[0].Checks[1].Actual)
}

// countingWriter counts the bytes of the bodies a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

// TestSignatureGitFiles checks a signature that signs git's files (as
// model_signing --no-ignore-git-paths writes one): they are reported with
// their check, and a change to one is a mismatch.
func TestSignatureGitFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors"), tinyModel(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.safetensors filter=lfs\n"), 0o644))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	sig, _, err := signing.Sign(context.Background(), dir, key, signing.KeepGit())
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	v, err := signing.KeyVerifier(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	require.NoError(t, err)

	r, err := Model(context.Background(), dir, Signature("model.sig", sig, v))
	require.NoError(t, err)
	require.NoError(t, r.Err())
	require.Len(t, r.Files, 2)
	assert.Equal(t, ".gitattributes", r.Files[0].Name)
	assert.Equal(t, sha256Hex([]byte("*.safetensors filter=lfs\n")), r.Files[0].SHA256)

	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("changed\n"), 0o644))
	r, err = Model(context.Background(), dir, Signature("model.sig", sig, v))
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrMismatch)
	assert.Contains(t, r.Err().Error(), ".gitattributes: sha256 "+sha256Hex([]byte("changed\n")))
}

// TestTensorDigestsReadOnce verifies models against a manifest of tensor
// digests: the one read of the tensors also gives each safetensors file's
// SHA-256, so that a remote model is fetched once, and a local one's files
// are checked against their references as without a manifest.
func TestTensorDigestsReadOnce(t *testing.T) {
	ctx := context.Background()
	model := modelOf(t, 20<<20)
	manifestOfBytes := func(b []byte) *Manifest {
		p := filepath.Join(t.TempDir(), "m.safetensors")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		r, err := safetensors.Open(p)
		require.NoError(t, err)
		defer r.Close()
		m, err := ManifestOf(ctx, r)
		require.NoError(t, err)
		return m
	}
	m := manifestOfBytes(model)

	// Over HTTP: the file, and the first bytes that opening it fetches
	// (for the structure, then for the hash), at most 64 KiB each: not
	// the tensors a second time.
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = countingWriter{w, &served}
		w.Header().Set("X-Linked-Etag", `"`+sha256Hex(model)+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(model)))
		http.ServeContent(w, r, "model.safetensors", time.Time{}, bytes.NewReader(model))
	}))
	defer srv.Close()
	var done, total uint64
	r, err := Model(ctx, srv.URL+"/model.safetensors", TensorDigests("m.digests", m), Progress(func(d, tot uint64) { done, total = d, tot }))
	require.NoError(t, err)
	require.NoError(t, r.Err())
	assert.Equal(t, sha256Hex(model), r.Files[0].SHA256)
	assert.Equal(t, []string{RefLinkedETag, RefLinkedETag, RefTensorDigests}, references(r.Files[0]))
	assert.Equal(t, 1, r.Tensors.Matched)
	assert.LessOrEqual(t, served.Load(), int64(len(model))+2*64<<10)
	assert.Equal(t, uint64(len(model)), total)
	assert.Equal(t, total, done)

	// On disk, in a cache snapshot: the weights hashed in the read of the
	// tensors, config.json (a small file, named by its git SHA-1) on its
	// own; each checked against its blob name.
	config := []byte(`{"model_type": "x"}`)
	cache := snapshot(t, map[string][]byte{"model.safetensors": model, "config.json": config}, map[string]bool{"config.json": true})
	done, total = 0, 0
	r, err = Model(ctx, cache, TensorDigests("m.digests", m), Progress(func(d, tot uint64) { done, total = d, tot }))
	require.NoError(t, err)
	require.NoError(t, r.Err())
	assert.Equal(t, sha256Hex(model), r.Files[1].SHA256)
	assert.Equal(t, []string{RefCacheBlob, RefTensorDigests}, references(r.Files[1]))
	assert.Equal(t, uint64(len(model)+len(config)), total)
	assert.Equal(t, total, done)

	// A blob changed in a tensor's bytes: both its blob name and the
	// manifest say so.
	blob := filepath.Join(cache, "blobs", sha256Hex(model))
	bad := append([]byte(nil), model...)
	bad[len(bad)-1] ^= 1
	require.NoError(t, os.WriteFile(blob, bad, 0o644))
	r, err = Model(ctx, cache, TensorDigests("m.digests", m))
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrMismatch)
	assert.Equal(t, sha256Hex(bad), r.Files[1].SHA256)
	assert.False(t, r.Files[1].Checks[0].Holds)
	assert.Len(t, r.Tensors.Changed, 1)
}

// references lists the references of f's checks.
func references(f File) []string {
	var out []string
	for _, c := range f.Checks {
		out = append(out, c.Reference)
	}
	return out
}
