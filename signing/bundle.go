package signing

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The names of the format, as model_signing 1.1.1 writes and checks them.
const (
	// BundleMediaType is the mediaType of the Sigstore bundle that holds a
	// signature.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// PayloadType is the payloadType of the DSSE envelope: an in-toto
	// statement in JSON.
	PayloadType = "application/vnd.in-toto+json"
	// StatementType is the statement's _type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateType is the statement's predicateType, OMS v1.0.
	PredicateType = "https://model_signing/signature/v1.0"
	// DefaultSignature is the file that model_signing writes when given no
	// --signature, in the current directory: model.sig.
	DefaultSignature = "model.sig"
)

// The errors of the package. Every error it returns wraps one of them (or
// an error of the file system, such as fs.ErrNotExist) and names the
// signature, file or key involved.
var (
	// ErrInvalidSignature is returned for a signature file that is not
	// what OMS v1.0 describes: not JSON, another media type or payload
	// type, a statement of another kind, a resource whose name leaves the
	// model's folder (absolute, "..") or is listed twice, a subject digest
	// that is not the digest of the resources.
	ErrInvalidSignature = errors.New("signing: invalid signature file")
	// ErrBadSignature is returned when the signature does not verify with
	// the key or certificate given: the model was signed by another key,
	// or the signed statement was changed.
	ErrBadSignature = errors.New("signing: signature does not verify")
	// ErrInvalidKey is returned for a key or certificate that cannot be
	// read (not PEM, truncated, encrypted) or that model_signing does not
	// support (anything but ECDSA P-256, P-384 or P-521).
	ErrInvalidKey = errors.New("signing: invalid key")
	// ErrCertificate is returned when the certificate in a signature does
	// not chain to the certificates trusted, or may not sign.
	ErrCertificate = errors.New("signing: certificate not trusted")
	// ErrMismatch is returned when the model's files are not those signed:
	// a file whose digest differs, a file missing, a file that the
	// signature does not list.
	ErrMismatch = errors.New("signing: model does not match its signature")
	// ErrUnsupported is returned for a signature valid in OMS that this
	// package cannot check: a hash other than SHA-256 (BLAKE2, BLAKE3).
	ErrUnsupported = errors.New("signing: unsupported signature")
)

// maxSignatureSize bounds the signature files read: a manifest of a
// million resources is under 200 MiB; 256 MiB leaves room.
const maxSignatureSize = 256 << 20

// A Bundle is a signature file parsed, not yet verified: the Sigstore
// bundle, the DSSE envelope and its payload.
type Bundle struct {
	// Payload is the envelope's payload, decoded: the statement's JSON
	// as it was signed.
	Payload []byte
	// Signature is the envelope's (first) signature, decoded: an ASN.1
	// ECDSA signature.
	Signature []byte
	// KeyHint is the bundle's publicKey.hint: the SHA-256, in hex, of the
	// PEM of the public key that signed (model_signing's key mode); "" if
	// none.
	KeyHint string
	// Certificates are the DER certificates of the bundle's
	// x509CertificateChain (certificate mode): the signing certificate
	// first; nil if none.
	Certificates [][]byte
}

// bundleJSON is a Sigstore bundle, as far as OMS uses one.
type bundleJSON struct {
	MediaType            string `json:"mediaType"`
	VerificationMaterial struct {
		PublicKey *struct {
			Hint string `json:"hint,omitempty"`
		} `json:"publicKey,omitempty"`
		X509CertificateChain *struct {
			Certificates []struct {
				RawBytes string `json:"rawBytes"`
			} `json:"certificates"`
		} `json:"x509CertificateChain,omitempty"`
		TlogEntries []json.RawMessage `json:"tlogEntries"`
	} `json:"verificationMaterial"`
	DSSEEnvelope *struct {
		Payload     string `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			Sig   string `json:"sig"`
			KeyID string `json:"keyid"`
		} `json:"signatures"`
	} `json:"dsseEnvelope"`
}

// ParseBundle parses a signature file: a Sigstore bundle whose mediaType
// is BundleMediaType holding a DSSE envelope whose payloadType is
// PayloadType. It checks the form only; Verify checks the signature.
// Errors wrap ErrInvalidSignature.
func ParseBundle(data []byte) (*Bundle, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSignature, fmt.Sprintf(format, args...))
	}
	if len(data) > maxSignatureSize {
		return nil, bad("%d bytes, more than the %d a signature may have", len(data), maxSignatureSize)
	}
	var b bundleJSON
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, bad("not a Sigstore bundle in JSON: %v", err)
	}
	if b.MediaType != BundleMediaType {
		return nil, bad("mediaType %q, want %q", b.MediaType, BundleMediaType)
	}
	env := b.DSSEEnvelope
	if env == nil {
		return nil, bad("no dsseEnvelope: a bundle of another kind of signature")
	}
	if env.PayloadType != PayloadType {
		return nil, bad("DSSE payloadType %q, want %q", env.PayloadType, PayloadType)
	}
	if len(env.Signatures) == 0 {
		return nil, bad("the DSSE envelope holds no signature")
	}
	out := &Bundle{}
	var err error
	if out.Payload, err = base64.StdEncoding.DecodeString(env.Payload); err != nil {
		return nil, bad("the DSSE payload is not base64: %v", err)
	}
	if out.Signature, err = base64.StdEncoding.DecodeString(env.Signatures[0].Sig); err != nil || len(out.Signature) == 0 {
		return nil, bad("the DSSE signature is not base64: %v", err)
	}
	vm := b.VerificationMaterial
	if vm.PublicKey != nil {
		out.KeyHint = vm.PublicKey.Hint
	}
	if vm.X509CertificateChain != nil {
		for i, c := range vm.X509CertificateChain.Certificates {
			der, err := base64.StdEncoding.DecodeString(c.RawBytes)
			if err != nil || len(der) == 0 {
				return nil, bad("certificate %d of the chain is not base64: %v", i, err)
			}
			out.Certificates = append(out.Certificates, der)
		}
		if len(out.Certificates) == 0 {
			return nil, bad("an empty x509CertificateChain")
		}
	}
	return out, nil
}

// pae is the DSSE pre-authentication encoding of payload, what is signed.
func pae(payload []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "DSSEv1 %d %s %d ", len(PayloadType), PayloadType, len(payload))
	b.Write(payload)
	return b.Bytes()
}

// A Manifest is what a signature says of a model: the files, or the
// shards of files, that make it and their digests.
type Manifest struct {
	// Model is the subject's name: the base name of the folder signed,
	// informative only.
	Model string
	// Method is "files" (a digest of each file) or "shards" (a digest of
	// each ShardSize bytes of each file).
	Method    string
	HashType  string // "sha256"
	ShardSize int64  // for "shards"
	// AllowSymlinks is whether the model's folder may hold symbolic
	// links; IgnorePaths are the paths in it, files or folders, that are
	// not signed (".git", ".gitattributes", the signature, ...).
	AllowSymlinks bool
	IgnorePaths   []string
	// Resources are the items signed, as listed.
	Resources []Resource
	// Digest is the subject's digest: the SHA-256 of the resources'
	// digests, in their order.
	Digest string
}

// A Resource is one item of a Manifest: a file, or a shard of one.
type Resource struct {
	// Name is as the manifest lists it: "dir/file", or for a shard
	// "dir/file:START:END".
	Name string
	// Path is the file's slash-separated path in the model's folder, and
	// [Start, End) the bytes of a shard (for a file, End is -1).
	Path       string
	Start, End int64
	Algorithm  string // "sha256", or "sha256-sharded-N" for shards
	Digest     string // hex
}

// Paths returns the files that m lists, sorted, each once.
func (m *Manifest) Paths() []string {
	var paths []string
	for _, r := range m.Resources {
		paths = append(paths, r.Path)
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}

// statementJSON is an in-toto statement as OMS v1.0 fills it.
type statementJSON struct {
	Type    string `json:"_type"`
	Subject []struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string `json:"predicateType"`
	Predicate     struct {
		Serialization map[string]json.RawMessage `json:"serialization"`
		Resources     []struct {
			Name      string `json:"name"`
			Algorithm string `json:"algorithm"`
			Digest    string `json:"digest"`
		} `json:"resources"`
	} `json:"predicate"`
}

// maxShardSize bounds shard_size, which must fit an int64 offset.
const maxShardSize = 1 << 62

// ParseStatement parses the in-toto statement of a signature (a Bundle's
// Payload) into its Manifest, checking what a verifier must: the types,
// one subject whose SHA-256 digest is that of the resources, a
// serialization this package can recompute, and resources whose names are
// paths inside the folder (no "..", not absolute, no backslash), each
// listed once. model_signing's Python API writes shard_size as a JSON
// float (300000.0): an integral value is accepted. Errors wrap
// ErrInvalidSignature or ErrUnsupported.
func ParseStatement(payload []byte) (*Manifest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSignature, fmt.Sprintf(format, args...))
	}
	var s statementJSON
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, bad("the signed payload is not an in-toto statement in JSON: %v", err)
	}
	if s.Type != StatementType {
		return nil, bad("statement _type %q, want %q", s.Type, StatementType)
	}
	if s.PredicateType != PredicateType {
		return nil, bad("predicateType %q, want %q (OMS v1.0)", s.PredicateType, PredicateType)
	}
	if len(s.Subject) != 1 {
		return nil, bad("%d subjects, want 1", len(s.Subject))
	}
	m := &Manifest{Model: s.Subject[0].Name, Digest: s.Subject[0].Digest["sha256"]}
	ser := s.Predicate.Serialization
	str := func(key string) (string, error) {
		var v string
		if err := json.Unmarshal(ser[key], &v); err != nil {
			return "", bad("serialization.%s is not a string", key)
		}
		return v, nil
	}
	var err error
	if m.Method, err = str("method"); err != nil {
		return nil, err
	}
	if m.HashType, err = str("hash_type"); err != nil {
		return nil, err
	}
	if raw, ok := ser["allow_symlinks"]; ok {
		if err := json.Unmarshal(raw, &m.AllowSymlinks); err != nil {
			return nil, bad("serialization.allow_symlinks is not true or false")
		}
	}
	if raw, ok := ser["ignore_paths"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m.IgnorePaths); err != nil {
			return nil, bad("serialization.ignore_paths is not a list of strings")
		}
	}
	switch m.Method {
	case "files":
	case "shards":
		var f float64
		if err := json.Unmarshal(ser["shard_size"], &f); err != nil || f != math.Trunc(f) || f < 1 || f > maxShardSize {
			return nil, bad("serialization.shard_size %s is not a whole number of bytes from 1 to 2^62", ser["shard_size"])
		}
		m.ShardSize = int64(f)
	default:
		return nil, bad("serialization.method %q, want \"files\" or \"shards\"", m.Method)
	}
	if m.HashType != "sha256" {
		return nil, fmt.Errorf("%w: hash_type %q: only sha256 is checked", ErrUnsupported, m.HashType)
	}
	wantAlg := "sha256"
	if m.Method == "shards" {
		wantAlg = "sha256-sharded-" + strconv.FormatInt(m.ShardSize, 10)
	}
	root := sha256.New()
	seen := make(map[string]bool, len(s.Predicate.Resources))
	for i, r := range s.Predicate.Resources {
		res := Resource{Name: r.Name, Path: r.Name, End: -1, Algorithm: r.Algorithm, Digest: r.Digest}
		if m.Method == "shards" {
			parts := strings.Split(r.Name, ":")
			if len(parts) != 3 {
				return nil, bad("resource %d %q: a shard is named PATH:START:END", i, r.Name)
			}
			res.Path = parts[0]
			start, err1 := strconv.ParseInt(parts[1], 10, 64)
			end, err2 := strconv.ParseInt(parts[2], 10, 64)
			if err1 != nil || err2 != nil || start < 0 || end <= start || parts[1][0] == '+' || parts[2][0] == '+' {
				return nil, bad("resource %d %q: the bytes %s to %s are not a range", i, r.Name, parts[1], parts[2])
			}
			res.Start, res.End = start, end
		}
		if !localPath(res.Path) {
			return nil, bad("resource %d %q: not a path inside the model's folder", i, res.Path)
		}
		if r.Algorithm != wantAlg {
			return nil, bad("resource %q: algorithm %q, want %q", r.Name, r.Algorithm, wantAlg)
		}
		d, err := hex.DecodeString(r.Digest)
		if err != nil || len(d) != sha256.Size {
			return nil, bad("resource %q: digest %q is not a SHA-256 in hex", r.Name, r.Digest)
		}
		if seen[r.Name] {
			return nil, bad("resource %q is listed twice", r.Name)
		}
		seen[r.Name] = true
		root.Write(d)
		m.Resources = append(m.Resources, res)
	}
	if got := hex.EncodeToString(root.Sum(nil)); got != m.Digest {
		return nil, bad("the subject's digest %q is not that of the resources, %s: the manifest was edited", m.Digest, got)
	}
	return m, nil
}

// localPath reports whether p is a slash-separated path inside a folder:
// not empty, not absolute, no "." or ".." or empty element, and none of
// the characters that another system reads as a separator or a drive.
func localPath(p string) bool {
	return fs.ValidPath(p) && p != "." && !strings.ContainsAny(p, "\\\x00") && !hasDrive(p)
}

// hasDrive reports whether p starts with a Windows drive letter ("C:").
func hasDrive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// statement returns the JSON of the statement of m, as model_signing
// writes it (indented by two spaces), with m.Digest computed.
func (m *Manifest) statement() ([]byte, error) {
	root := sha256.New()
	type resource struct {
		Name      string `json:"name"`
		Digest    string `json:"digest"`
		Algorithm string `json:"algorithm"`
	}
	resources := make([]resource, len(m.Resources))
	for i, r := range m.Resources {
		d, err := hex.DecodeString(r.Digest)
		if err != nil {
			return nil, err
		}
		root.Write(d)
		resources[i] = resource{r.Name, r.Digest, r.Algorithm}
	}
	m.Digest = hex.EncodeToString(root.Sum(nil))
	ser := map[string]any{"method": m.Method, "hash_type": m.HashType, "allow_symlinks": m.AllowSymlinks}
	if m.Method == "shards" {
		ser["shard_size"] = m.ShardSize
	}
	if len(m.IgnorePaths) > 0 {
		ser["ignore_paths"] = m.IgnorePaths
	}
	type subject struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	}
	st := struct {
		Type          string    `json:"_type"`
		Subject       []subject `json:"subject"`
		PredicateType string    `json:"predicateType"`
		Predicate     struct {
			Resources     []resource     `json:"resources"`
			Serialization map[string]any `json:"serialization"`
		} `json:"predicate"`
	}{Type: StatementType, Subject: []subject{{m.Model, map[string]string{"sha256": m.Digest}}}, PredicateType: PredicateType}
	st.Predicate.Resources, st.Predicate.Serialization = resources, ser
	return json.MarshalIndent(st, "", "  ")
}
