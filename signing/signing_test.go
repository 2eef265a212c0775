package signing

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors/internal/linktest"
)

// folder writes files (name: content) under a new folder.
func folder(t *testing.T, files map[string]string) string {
	dir := filepath.Join(t.TempDir(), "model")
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func newKey(t *testing.T) (*ecdsa.PrivateKey, *Verifier) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	v, err := KeyVerifier(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	require.NoError(t, err)
	return k, v
}

// TestSignVerify signs a folder and checks the statement against digests
// computed here with crypto/sha256, in model_signing's order (by path
// elements: "a/b" before "a.b", which byte order puts after).
func TestSignVerify(t *testing.T) {
	files := map[string]string{"a.b": "1", "a/b": "22", "z": "", ".gitattributes": "x", ".git/HEAD": "ref"}
	dir := folder(t, files)
	k, v := newKey(t)
	sig, m, err := Sign(context.Background(), dir, k)
	require.NoError(t, err)
	var names []string
	root := sha256.New()
	for _, r := range m.Resources {
		names = append(names, r.Name)
		d := sha256.Sum256([]byte(files[r.Name]))
		assert.Equal(t, hex.EncodeToString(d[:]), r.Digest, r.Name)
		root.Write(d[:])
	}
	assert.Equal(t, []string{"a/b", "a.b", "z"}, names)
	assert.Equal(t, hex.EncodeToString(root.Sum(nil)), m.Digest)
	r, err := Verify(context.Background(), dir, sig, v)
	require.NoError(t, err)
	require.NoError(t, r.Err())

	// Shards: 1 byte each, an empty file has none.
	sig, m, err = Sign(context.Background(), dir, k, Shards(1))
	require.NoError(t, err)
	names = nil
	for _, r := range m.Resources {
		names = append(names, r.Name)
	}
	assert.Equal(t, []string{"a/b:0:1", "a/b:1:2", "a.b:0:1"}, names)
	r, err = Verify(context.Background(), dir, sig, v)
	require.NoError(t, err)
	require.NoError(t, r.Err())

	// git's files signed (KeepGit): checked, not left out.
	sig, m, err = Sign(context.Background(), dir, k, KeepGit())
	require.NoError(t, err)
	assert.Contains(t, m.Paths(), ".gitattributes")
	r, err = Verify(context.Background(), dir, sig, v)
	require.NoError(t, err)
	require.NoError(t, r.Err())
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("y"), 0o644))
	r, err = Verify(context.Background(), dir, sig, v)
	require.NoError(t, err)
	require.ErrorIs(t, r.Err(), ErrMismatch)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("x"), 0o644))

	// A change, a file added, one removed: named.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.b"), []byte("2"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new"), nil, 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, "a", "b")))
	sig, _, err = Sign(context.Background(), folder(t, files), k)
	require.NoError(t, err)
	r, err = Verify(context.Background(), dir, sig, v)
	require.NoError(t, err)
	err = r.Err()
	require.ErrorIs(t, err, ErrMismatch)
	assert.Contains(t, err.Error(), "changed: a.b (signed sha256 6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b, found d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35)")
	assert.Contains(t, err.Error(), "missing: a/b")
	assert.Contains(t, err.Error(), "not signed: new")
}

// statementWith returns a signed bundle of the statement JSON st, and its
// verifier.
func statementWith(t *testing.T, st string) ([]byte, *Verifier) {
	k, v := newKey(t)
	b, err := sign(k, []byte(st), nil)
	require.NoError(t, err)
	return b, v
}

// resources returns the JSON of a statement listing names, with the right
// subject digest.
func statementOf(method string, names ...string) string {
	root := sha256.New()
	var rs []string
	alg := "sha256"
	if method == "shards" {
		alg = "sha256-sharded-2"
	}
	for _, n := range names {
		d := sha256.Sum256([]byte(n))
		root.Write(d[:])
		rs = append(rs, `{"name": "`+n+`", "algorithm": "`+alg+`", "digest": "`+hex.EncodeToString(d[:])+`"}`)
	}
	return `{"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "m", "digest": {"sha256": "` + hex.EncodeToString(root.Sum(nil)) +
		`"}}], "predicateType": "https://model_signing/signature/v1.0", "predicate": {"serialization": {"method": "` + method +
		`", "hash_type": "sha256", "shard_size": 2.0, "allow_symlinks": false}, "resources": [` + strings.Join(rs, ", ") + `]}}`
}

// TestHostile checks that every hostile signature is a clear error
// wrapping a sentinel, and nothing outside the folder is read.
func TestHostile(t *testing.T) {
	dir := folder(t, map[string]string{"a": "a"})
	outside := filepath.Join(filepath.Dir(dir), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("s"), 0o644))
	k, v := newKey(t)
	good, _, err := Sign(context.Background(), dir, k)
	require.NoError(t, err)

	for _, c := range []struct {
		what string
		sig  []byte
		want error
		msg  string
	}{
		{"not JSON", []byte("model.sig"), ErrInvalidSignature, "not a Sigstore bundle in JSON"},
		{"another media type", []byte(strings.Replace(string(good), "v0.3+json", "v0.2+json", 1)), ErrInvalidSignature, "mediaType"},
		{"wrong payload type", []byte(strings.Replace(string(good), "vnd.in-toto+json", "json", 1)), ErrInvalidSignature, "payloadType"},
		{"no envelope", []byte(`{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}`), ErrInvalidSignature, "dsseEnvelope"},
	} {
		_, err := Verify(context.Background(), dir, c.sig, v)
		assert.ErrorIs(t, err, c.want, c.what)
		assert.ErrorContains(t, err, c.msg, c.what)
	}
	for _, c := range []struct {
		what, st, msg string
	}{
		{"..", statementOf("files", "../secret"), "not a path inside the model's folder"},
		{"absolute", statementOf("files", strings.ReplaceAll(outside, `\`, `\\`)), "not a path inside"}, // as JSON writes Windows's \
		{"backslash", statementOf("files", `..\\secret`), "not a path inside"},
		{"twice", statementOf("files", "a", "a"), "listed twice"},
		{"shard range", statementOf("shards", "a:2:1"), "not a range"},
		{"shard name", statementOf("shards", "a"), "PATH:START:END"},
		{"other predicate", strings.Replace(statementOf("files", "a"), "signature/v1.0", "Digests/v0.1", 1), "predicateType"},
		{"subject edited", strings.Replace(statementOf("files", "a"), `"sha256": "`, `"sha256": "0`, 1), "the manifest was edited"},
		{"float shard size", strings.Replace(statementOf("shards", "a:0:1"), "2.0", "2.5", 1), "whole number"},
	} {
		sig, v := statementWith(t, c.st)
		_, err := Verify(context.Background(), dir, sig, v)
		assert.ErrorIs(t, err, ErrInvalidSignature, c.what)
		assert.ErrorContains(t, err, c.msg, c.what)
	}
	// A float shard size, as model_signing's Python API writes it.
	sig, v2 := statementWith(t, statementOf("shards", "a:0:1"))
	r, err := Verify(context.Background(), dir, sig, v2)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Manifest.ShardSize)

	// A symbolic link leading out of the folder: refused, not read.
	if linktest.Symlink(t, outside, filepath.Join(dir, "link")) {
		_, err = Verify(context.Background(), dir, good, v)
		assert.ErrorIs(t, err, ErrInvalidSignature)
		assert.ErrorContains(t, err, "leads out of the model's folder")
		require.NoError(t, os.Remove(filepath.Join(dir, "link")))
	}

	// Keys: truncated, of another kind, another key.
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	p := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	for _, bad := range [][]byte{p[:len(p)/2], p[:40], []byte("ssh-ed25519 AAAA"), {}} {
		_, err := KeyVerifier(bad)
		assert.ErrorIs(t, err, ErrInvalidKey)
	}
	privDER, _ := x509.MarshalPKCS8PrivateKey(k)
	priv := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})
	_, err = ParsePrivateKey(priv[:len(priv)-40])
	assert.ErrorIs(t, err, ErrInvalidKey)
	_, other := newKey(t)
	_, err = Verify(context.Background(), dir, good, other)
	assert.ErrorIs(t, err, ErrBadSignature)
}

// FuzzParseBundle checks that no signature file makes the parser panic,
// and that what it accepts has only local, distinct resource names.
func FuzzParseBundle(f *testing.F) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	for _, st := range []string{statementOf("files", "a", "b/c"), statementOf("shards", "a:0:2", "a:2:3"), "{}", "null"} {
		b, err := sign(k, []byte(st), nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add([]byte(st))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBundle(data)
		if err != nil {
			return
		}
		for _, payload := range [][]byte{b.Payload, data} {
			m, err := ParseStatement(payload)
			if err != nil {
				continue
			}
			seen := map[string]bool{}
			for _, r := range m.Resources {
				if !localPath(r.Path) || seen[r.Name] {
					t.Fatalf("accepted %q", r.Name)
				}
				seen[r.Name] = true
			}
		}
	})
}
