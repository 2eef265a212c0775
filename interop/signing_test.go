package interop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/signing"
)

// OpenSSF Model Signing against its reference, model_signing 1.1.1
// (INTEROP_MODEL_SIGNING names its command, in the second virtual
// environment interop/run sets up): what one signs, the other verifies,
// on every curve the tool supports, and what is tampered with, both
// refuse.

// signingModel writes a model's folder: a sharded checkpoint, a config, a
// file in a subfolder, and git's files, which neither tool signs.
func signingModel(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "model")
	writeTestModel(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama"}`), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer", "vocab.txt"), []byte("a\nb\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.safetensors filter=lfs\n"), 0o644))
	return dir
}

// writeTestModel writes two shards' worth of tensors into dir.
func writeTestModel(t *testing.T, dir string) {
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data)
	var tensors []safetensors.Tensor
	for i, name := range []string{"a.weight", "b.weight", "c.weight"} {
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: safetensors.U8, Shape: []uint64{1 << 20}, Data: data[i<<20 : (i+1)<<20]})
	}
	require.NoError(t, checkpoint.Write(dir, tensors, checkpoint.MaxShardSize(1<<20)))
}

// keyPair writes a new ECDSA key on curve to dir and returns the paths of
// its private and public PEM files.
func keyPair(t *testing.T, dir string, curve elliptic.Curve) (*ecdsa.PrivateKey, string, string) {
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	require.NoError(t, err)
	name := curve.Params().Name
	priv, pubPath := filepath.Join(dir, name+".priv"), filepath.Join(dir, name+".pub")
	require.NoError(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644))
	return k, priv, pubPath
}

// theirs runs model_signing with args and reports whether it succeeded.
func theirs(t *testing.T, tool string, args ...string) (bool, string) {
	out, err := exec.Command(tool, args...).CombinedOutput()
	return err == nil, string(out)
}

// ours verifies dir against sig with the public key in pub.
func ours(t *testing.T, dir, sig string, pub []byte) error {
	data, err := os.ReadFile(sig)
	require.NoError(t, err)
	v, err := signing.KeyVerifier(pub)
	require.NoError(t, err)
	r, err := signing.Verify(context.Background(), dir, data, v, signing.Ignore(filepath.Base(sig)))
	if err != nil {
		return err
	}
	return r.Err()
}

// copyFolder copies the folder dir (files and subfolders) to a new
// folder of the same base name, and returns it.
func copyFolder(t *testing.T, dir string) string {
	dst := filepath.Join(t.TempDir(), filepath.Base(dir))
	require.NoError(t, os.CopyFS(dst, os.DirFS(dir)))
	return dst
}

// theirsBatch verifies each of dirs against sig with the public key pub
// in one run of model_signing (its API, configured as 'model_signing
// verify key' configures it: the files serialization, git's paths
// ignored) and returns its verdict on each: "ok", or "refused" and the
// exception's type (ValueError for a model that does not match).
func theirsBatch(t *testing.T, tool, pub, sig string, dirs []string) []string {
	python := filepath.Join(filepath.Dir(tool), "python")
	script := `import sys, model_signing
from model_signing import hashing
pub, sig = sys.argv[1:3]
for d in sys.argv[3:]:
    try:
        model_signing.verifying.Config().use_elliptic_key_verifier(public_key=pub).set_hashing_config(
            hashing.Config().use_file_serialization().set_ignored_paths(paths=[], ignore_git_paths=True)).verify(d, sig)
        print("ok")
    except Exception as e:
        print("refused", type(e).__name__)
`
	out, err := exec.Command(python, append([]string{"-c", script, pub, sig}, dirs...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, len(dirs), "%s", out)
	return lines
}

// tamperings are the changes to a signed folder that both tools must
// refuse: each does it and returns how to undo it.
func tamperings(t *testing.T, dir string) map[string]func() func() {
	flip := func(name string) func() func() {
		return func() func() {
			p := filepath.Join(dir, name)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			orig := append([]byte(nil), b...)
			b[len(b)/2] ^= 1
			require.NoError(t, os.WriteFile(p, b, 0o644))
			return func() { require.NoError(t, os.WriteFile(p, orig, 0o644)) }
		}
	}
	m := map[string]func() func(){
		"rename": func() func() {
			a, b := filepath.Join(dir, "config.json"), filepath.Join(dir, "config2.json")
			require.NoError(t, os.Rename(a, b))
			return func() { require.NoError(t, os.Rename(b, a)) }
		},
		"add": func() func() {
			p := filepath.Join(dir, "extra.txt")
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
			return func() { require.NoError(t, os.Remove(p)) }
		},
		"remove": func() func() {
			p := filepath.Join(dir, "tokenizer", "vocab.txt")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.Remove(p))
			return func() { require.NoError(t, os.WriteFile(p, b, 0o644)) }
		},
	}
	entries, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	require.NoError(t, err)
	for _, e := range append(entries, filepath.Join(dir, "config.json"), filepath.Join(dir, "tokenizer", "vocab.txt")) {
		rel, _ := filepath.Rel(dir, e)
		m["flip a byte of "+rel] = flip(rel)
	}
	return m
}

// editedManifest returns sig with its statement changed (a digest of the
// first resource replaced, the subject's digest left) and not signed again.
func editedManifest(t *testing.T, sig []byte) []byte {
	var b map[string]any
	require.NoError(t, json.Unmarshal(sig, &b))
	env := b["dsseEnvelope"].(map[string]any)
	payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(payload, &st))
	res := st["predicate"].(map[string]any)["resources"].([]any)
	r := res[0].(map[string]any)
	r["digest"] = strings.Repeat("0", 64)
	payload, err = json.Marshal(st)
	require.NoError(t, err)
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	out, err := json.Marshal(b)
	require.NoError(t, err)
	return out
}

func TestModelSigningInterop(t *testing.T) {
	tool := need(t, "INTEROP_MODEL_SIGNING", "model_signing 1.1.1 (python/requirements-signing.txt)")
	for _, curve := range []elliptic.Curve{elliptic.P256(), elliptic.P384(), elliptic.P521()} {
		t.Run(curve.Params().Name, func(t *testing.T) {
			t.Parallel() // each curve on a folder of its own
			keys := t.TempDir()
			key, priv, pub := keyPair(t, keys, curve)
			_, _, otherPub := keyPair(t, t.TempDir(), curve)
			pubData, err := os.ReadFile(pub)
			require.NoError(t, err)
			otherData, err := os.ReadFile(otherPub)
			require.NoError(t, err)
			dir := signingModel(t)

			// Ours signs, theirs verifies; theirs signs, ours verifies.
			oursSig := filepath.Join(keys, "ours.sig")
			bundle, m, err := signing.Sign(context.Background(), dir, key)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(oursSig, bundle, 0o644))
			assert.Equal(t, []string{"config.json", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors", "model.safetensors.index.json", "tokenizer/vocab.txt"}, m.Paths())
			ok, out := theirs(t, tool, "verify", "key", "--public_key", pub, "--signature", oursSig, dir)
			require.True(t, ok, "model_signing refuses our signature: %s", out)
			theirSig := filepath.Join(keys, "theirs.sig")
			ok, out = theirs(t, tool, "sign", "key", "--private_key", priv, "--signature", theirSig, dir)
			require.True(t, ok, out)
			require.NoError(t, ours(t, dir, theirSig, pubData))

			// A signature inside the folder, model_signing's default
			// place when run there, is left out by both.
			inside := filepath.Join(dir, "model.sig")
			ok, out = theirs(t, tool, "sign", "key", "--private_key", priv, "--signature", inside, dir)
			require.True(t, ok, out)
			require.NoError(t, ours(t, dir, inside, pubData))
			require.NoError(t, os.Remove(inside))

			// Another key: refused by both.
			ok, _ = theirs(t, tool, "verify", "key", "--public_key", otherPub, "--signature", oursSig, dir)
			assert.False(t, ok, "model_signing accepts another key")
			assert.ErrorIs(t, ours(t, dir, theirSig, otherData), signing.ErrBadSignature)

			// Each tampering: refused by ours, for both signatures, and by
			// theirs for our signature, on a tampered copy of the folder
			// each, all checked by one run of model_signing's verifier
			// (through its API, as its CLI's verify key calls it: one
			// Python start rather than one a tampering keeps the suite
			// fast).
			var copies []string
			var whats []string
			for what, do := range tamperings(t, dir) {
				undo := do()
				for _, sig := range []string{oursSig, theirSig} {
					assert.ErrorIs(t, ours(t, dir, sig, pubData), signing.ErrMismatch, "%s: %s", what, filepath.Base(sig))
				}
				copies = append(copies, copyFolder(t, dir))
				whats = append(whats, what)
				undo()
			}
			for i, verdict := range theirsBatch(t, tool, pub, oursSig, copies) {
				assert.Equal(t, "refused ValueError", verdict, "%s: model_signing's verdict on our signature", whats[i])
			}
			require.NoError(t, ours(t, dir, theirSig, pubData), "undone")

			// The manifest edited, not signed again: refused by both.
			for _, sig := range []string{oursSig, theirSig} {
				data, err := os.ReadFile(sig)
				require.NoError(t, err)
				edited := filepath.Join(keys, "edited.sig")
				require.NoError(t, os.WriteFile(edited, editedManifest(t, data), 0o644))
				ok, _ := theirs(t, tool, "verify", "key", "--public_key", pub, "--signature", edited, dir)
				assert.False(t, ok, "model_signing accepts an edited manifest")
				assert.ErrorIs(t, ours(t, dir, edited, pubData), signing.ErrBadSignature)
			}
		})
	}
}

// TestModelSigningShards checks the "shards" serialization that
// model_signing's Python API writes (shard_size as a JSON float, which
// its own verifier cannot read back), and ours read by its API.
func TestModelSigningShards(t *testing.T) {
	tool := need(t, "INTEROP_MODEL_SIGNING", "model_signing 1.1.1 (python/requirements-signing.txt)")
	python := filepath.Join(filepath.Dir(tool), "python")
	keys := t.TempDir()
	_, priv, pub := keyPair(t, keys, elliptic.P256())
	pubData, err := os.ReadFile(pub)
	require.NoError(t, err)
	dir := signingModel(t)
	sig := filepath.Join(keys, "shards.sig")
	script := `import sys, model_signing
from model_signing import hashing
key, model, sig = sys.argv[1:4]
model_signing.signing.Config().use_elliptic_key_signer(private_key=key).set_hashing_config(
    hashing.Config().use_shard_serialization(shard_size=300000)).sign(model, sig)
`
	out, err := exec.Command(python, "-c", script, priv, dir, sig).CombinedOutput()
	require.NoError(t, err, "%s", out)
	data, err := os.ReadFile(sig)
	require.NoError(t, err)
	b, err := signing.ParseBundle(data)
	require.NoError(t, err)
	assert.Contains(t, string(b.Payload), `"shard_size": 300000.0`, "the float that model_signing writes")
	require.NoError(t, ours(t, dir, sig, pubData))
	for what, do := range tamperings(t, dir) {
		undo := do()
		assert.ErrorIs(t, ours(t, dir, sig, pubData), signing.ErrMismatch, what)
		undo()
	}

	// Ours, shard_size an integer, which its API reads back (its CLI's
	// verify hashes by files whatever the signature says).
	key, err := signing.ParsePrivateKey(must(os.ReadFile(priv)))
	require.NoError(t, err)
	bundle, _, err := signing.Sign(context.Background(), dir, key, signing.Shards(300000))
	require.NoError(t, err)
	oursSig := filepath.Join(keys, "ours-shards.sig")
	require.NoError(t, os.WriteFile(oursSig, bundle, 0o644))
	verifyScript := `import sys, model_signing
model_signing.verifying.Config().use_elliptic_key_verifier(public_key=sys.argv[1]).verify(sys.argv[2], sys.argv[3])
`
	out, err = exec.Command(python, "-c", verifyScript, pub, dir, oursSig).CombinedOutput()
	require.NoError(t, err, "model_signing's API refuses our shards: %s", out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644))
	_, err = exec.Command(python, "-c", verifyScript, pub, dir, oursSig).CombinedOutput()
	assert.Error(t, err, "model_signing's API accepts a changed file")
}

// TestModelSigningSnapshot signs a Hugging Face cache snapshot, whose
// files are links to ../../blobs, with the signature in the folder:
// model_signing verifies it with --allow_symlinks, which the signature
// records.
func TestModelSigningSnapshot(t *testing.T) {
	tool := need(t, "INTEROP_MODEL_SIGNING", "model_signing 1.1.1 (python/requirements-signing.txt)")
	keys := t.TempDir()
	key, _, pub := keyPair(t, keys, elliptic.P256())
	src := signingModel(t)
	cache := filepath.Join(t.TempDir(), "models--org--m")
	snap := filepath.Join(cache, "snapshots", "0123")
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "blobs"), 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data := must(os.ReadFile(filepath.Join(src, e.Name())))
		blob := fmt.Sprintf("%x", sha256.Sum256(data))
		require.NoError(t, os.WriteFile(filepath.Join(cache, "blobs", blob), data, 0o644))
		require.NoError(t, os.MkdirAll(snap, 0o755))
		require.NoError(t, os.Symlink(filepath.Join("..", "..", "blobs", blob), filepath.Join(snap, e.Name())))
	}
	sig := filepath.Join(snap, "model.sig")
	bundle, m, err := signing.Sign(context.Background(), snap, key, signing.Ignore("model.sig"))
	require.NoError(t, err)
	assert.True(t, m.AllowSymlinks)
	require.NoError(t, os.WriteFile(sig, bundle, 0o644))
	ok, out := theirs(t, tool, "verify", "key", "--allow_symlinks", "--public_key", pub, "--signature", sig, snap)
	require.True(t, ok, "model_signing refuses our signature of a snapshot: %s", out)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestModelSigningCertificate checks certificate mode both ways: a CA, a
// signing certificate it issued, the chain in the signature.
func TestModelSigningCertificate(t *testing.T) {
	tool := need(t, "INTEROP_MODEL_SIGNING", "model_signing 1.1.1 (python/requirements-signing.txt)")
	keys := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	now := time.Now().Add(-time.Hour)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now, NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err = x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leafKey, priv, _ := keyPair(t, keys, elliptic.P256())
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "signer"}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &leafKey.PublicKey, caKey)
	require.NoError(t, err)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	caPath, leafPath := filepath.Join(keys, "ca.pem"), filepath.Join(keys, "leaf.pem")
	require.NoError(t, os.WriteFile(caPath, caPEM, 0o644))
	require.NoError(t, os.WriteFile(leafPath, leafPEM, 0o644))
	dir := signingModel(t)

	theirSig := filepath.Join(keys, "theirs.sig")
	ok, out := theirs(t, tool, "sign", "certificate", "--private_key", priv, "--signing_certificate", leafPath, "--certificate_chain", caPath, "--signature", theirSig, dir)
	require.True(t, ok, out)
	v, err := signing.CertificateVerifier(caPEM)
	require.NoError(t, err)
	data, err := os.ReadFile(theirSig)
	require.NoError(t, err)
	r, err := signing.Verify(context.Background(), dir, data, v)
	require.NoError(t, err)
	require.NoError(t, r.Err())

	bundle, _, err := signing.Sign(context.Background(), dir, leafKey, signing.Certificates(append(leafPEM, caPEM...)))
	require.NoError(t, err)
	oursSig := filepath.Join(keys, "ours.sig")
	require.NoError(t, os.WriteFile(oursSig, bundle, 0o644))
	ok, out = theirs(t, tool, "verify", "certificate", "--certificate_chain", caPath, "--signature", oursSig, dir)
	require.True(t, ok, "model_signing refuses our certificate signature: %s", out)

	// Another CA trusts neither.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	otherCA := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now, NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	otherDER, err := x509.CreateCertificate(rand.Reader, otherCA, otherCA, &other.PublicKey, other)
	require.NoError(t, err)
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherDER})
	otherPath := filepath.Join(keys, "other.pem")
	require.NoError(t, os.WriteFile(otherPath, otherPEM, 0o644))
	ok, _ = theirs(t, tool, "verify", "certificate", "--certificate_chain", otherPath, "--signature", oursSig, dir)
	assert.False(t, ok, "model_signing trusts another CA")
	v, err = signing.CertificateVerifier(otherPEM)
	require.NoError(t, err)
	_, err = signing.Verify(context.Background(), dir, data, v)
	assert.ErrorIs(t, err, signing.ErrCertificate)
}
