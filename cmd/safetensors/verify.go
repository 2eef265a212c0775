package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/safetensors-go/safetensors/signing"
	"github.com/safetensors-go/safetensors/verify"
)

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("verify", stderr, `Verify checks that a model's bytes are the ones its publisher made: it hashes
every file of the model once (SHA-256; files in parallel) and checks each
against every reference it finds, and says per file which reference it used
and whether it holds:
  - cache-blob: in a Hugging Face cache snapshot, the blob a file links to,
    named by the SHA-256 of the content (files in LFS or Xet) or by its git
    blob SHA-1 (small files kept in git);
  - x-linked-etag, etag: over HTTP, the X-Linked-Etag (SHA-256) and
    X-Linked-Size the Hub sends for LFS and Xet files, and the ETag that is
    the git blob SHA-1 of a small file kept in git;
  - lfs-pointer, git-head: in a git clone (the folder holds .git), what HEAD
    commits for the file, read with git when it is installed: the LFS
    pointer's SHA-256 and size, or the blob's git SHA-1; a Git LFS pointer
    found in place of the file is an error (the content was never fetched);
  - signature: an OpenSSF Model Signing signature (--signature with --key or
    --cert), as 'model_signing sign' writes it; its list of files must be the
    folder's, and missing or unsigned files are named;
  - tensor-digests: a manifest of tensor digests (--digests, as 'safetensors
    inspect --digests' writes it), which names each tensor changed, missing
    or not listed, in one file or in shards alike.
It also checks the model's structure (every safetensors file valid, the index
complete). On disk, every file of the folder is checked (but git's and the
signature); over HTTP, the safetensors files and indexes. Progress goes to
stderr when it is a terminal.`, modelInputs,
		`0 every file holds against at least one reference (or, with
--structure-only, the structure is sound); 1 a file differs from a reference,
a signed file is missing or a file is not signed, the signature does not
verify, the structure is invalid, or a file has no reference; 2 the model or
the key could not be read.`)
	asJSON := addJSONFlag(fs)
	sigPath := fs.String("signature", "", "check the model against the OMS signature `FILE` (model_signing's model.sig)")
	keyPath := fs.String("key", "", "the public key (`PEM`, ECDSA P-256, P-384 or P-521) that signed the signature")
	certPath := fs.String("cert", "", "verify the signature's certificate chain against the trusted certificates in `PEM` (certificate mode)")
	digestsPath := fs.String("digests", "", "check the tensors against the manifest of tensor digests `FILE` ('safetensors inspect --digests' writes one)")
	structureOnly := fs.Bool("structure-only", false, "exit 0 when the structure is sound even if a file has no reference to check it against")
	addModelFlags(fs)
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 1 {
		return usageError(fs, "want one MODEL, got %d", len(operands))
	}
	name := operands[0]
	if (*keyPath != "" || *certPath != "") != (*sigPath != "") {
		return usageError(fs, "--signature goes with --key or --cert")
	}
	if *keyPath != "" && *certPath != "" {
		return usageError(fs, "--key or --cert, not both")
	}
	opts := []verify.Option{verify.CheckpointOptions(checkpointOptions(name)...)}
	if remote.IsURL(name) {
		opts = append(opts, verify.RemoteOptions(remoteOptions(name)...))
	}
	if *sigPath != "" {
		sig, err := readRegular(*sigPath)
		if err != nil {
			return fail(stderr, "verify", *sigPath, err)
		}
		keyFile := *keyPath + *certPath
		keyData, err := readRegular(keyFile)
		if err != nil {
			return fail(stderr, "verify", keyFile, err)
		}
		var v *signing.Verifier
		if *keyPath != "" {
			v, err = signing.KeyVerifier(keyData)
		} else {
			v, err = signing.CertificateVerifier(keyData)
		}
		if err != nil {
			return fail(stderr, "verify", keyFile, err)
		}
		opts = append(opts, verify.Signature(*sigPath, sig, v))
	}
	if *digestsPath != "" {
		data, err := readRegular(*digestsPath)
		if err != nil {
			return fail(stderr, "verify", *digestsPath, err)
		}
		man, err := verify.ReadManifest(bytes.NewReader(data))
		if err != nil {
			return fail(stderr, "verify", *digestsPath, err)
		}
		opts = append(opts, verify.TensorDigests(*digestsPath, man))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	meter := newMeter(stderr, name, *asJSON)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, verify.Progress(meter.Update))
	}
	report, err := verify.Model(ctx, name, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "verify", name, err)
	}
	if err := context.Cause(ctx); interruptStatus(err) != 0 {
		return fail(stderr, "verify", name, err)
	}
	out := newVerifyOutput(name, *digestsPath, report, *structureOnly)
	if *asJSON {
		err = writeJSON(stdout, out)
	} else {
		err = out.print(stdout)
	}
	if err != nil {
		return fail(stderr, "verify", "", err)
	}
	if !*asJSON && out.Error != "" {
		// The verdict's reason, as every command gives it.
		fmt.Fprintf(stderr, "safetensors verify: %s: %s\n", name, out.Error)
		if errors.Is(report.Err(), verify.ErrNoReference) && !*structureOnly {
			fmt.Fprintf(stderr, "safetensors verify: --structure-only accepts a model checked for its structure alone\n")
		}
	}
	return out.Status
}

// verifyOutput is what verify --json prints.
type verifyOutput struct {
	Model string `json:"model"`
	// Dir is the folder whose files were checked (for a URL, the base
	// URL).
	Dir    string `json:"dir"`
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
	// Structure is "ok" or why the model's structure is invalid.
	Structure      string             `json:"structure"`
	FileCount      int                `json:"file_count"`
	CheckedCount   int                `json:"checked_count"`
	MismatchCount  int                `json:"mismatch_count"`
	UncheckedCount int                `json:"unchecked_count"`
	Signature      *verifySignature   `json:"signature_check"`
	Tensors        *verifyTensors     `json:"tensor_manifest"`
	Files          []verifyFileOutput `json:"files"`
}

// verifyTensors is what the manifest of tensor digests said.
type verifyTensors struct {
	Manifest     string               `json:"manifest"`
	MatchedCount int                  `json:"matched_count"`
	Changed      []verifyTensorChange `json:"changed"`
	Missing      []string             `json:"missing"`
	Extra        []string             `json:"extra"`
	Error        string               `json:"error,omitempty"`
}

// verifyTensorChange is a tensor whose digest is not the manifest's.
type verifyTensorChange struct {
	Name           string `json:"name"`
	Digest         string `json:"digest"`
	ManifestDigest string `json:"manifest_digest"`
}

// verifySignature is what the OMS signature said.
type verifySignature struct {
	Signature string   `json:"signature"`
	Subject   string   `json:"subject"`
	Method    string   `json:"method"`
	Missing   []string `json:"missing"`
	Extra     []string `json:"extra"`
	Error     string   `json:"error,omitempty"`
}

// verifyFileOutput is the verdict on one file.
type verifyFileOutput struct {
	File   string        `json:"file"`
	Bytes  int64         `json:"bytes"`
	SHA256 string        `json:"sha256"`
	Status string        `json:"status"`
	Error  string        `json:"error,omitempty"`
	Checks []verifyCheck `json:"checks"`
}

// verifyCheck is one reference a file was checked against.
type verifyCheck struct {
	Reference string `json:"reference"`
	Algorithm string `json:"algorithm"`
	Expected  string `json:"expected"`
	Actual    string `json:"actual"`
	Source    string `json:"source"`
	Holds     bool   `json:"holds"`
}

func newVerifyOutput(name, manifest string, r *verify.Report, structureOnly bool) *verifyOutput {
	out := &verifyOutput{Model: name, Dir: r.Dir, Structure: "ok", Files: []verifyFileOutput{}}
	switch {
	case r.Structure != nil:
		out.Structure = reason(name, r.Structure)
	case r.NoModel != "":
		out.Structure = "none: " + reason(name, errors.New(r.NoModel))
	}
	for i := range r.Files {
		f := &r.Files[i]
		fo := verifyFileOutput{File: f.Name, Bytes: f.Size, SHA256: f.SHA256, Status: f.Status(), Checks: []verifyCheck{}}
		if f.Err != nil {
			fo.Error = reason(f.Name, f.Err)
		}
		for _, c := range f.Checks {
			fo.Checks = append(fo.Checks, verifyCheck(c))
		}
		switch fo.Status {
		case verify.StatusOK:
			out.CheckedCount++
		case verify.StatusMismatch:
			out.CheckedCount++
			out.MismatchCount++
		case verify.StatusUnchecked:
			out.UncheckedCount++
		}
		out.Files = append(out.Files, fo)
	}
	out.FileCount = len(out.Files)
	if s := r.Signature; s != nil {
		out.Signature = &verifySignature{Signature: s.File, Subject: s.Model, Method: s.Method, Missing: list(s.Missing), Extra: list(s.Extra)}
		if s.Err != nil {
			out.Signature.Error = reason(s.File, s.Err)
		}
	}
	if r.Tensors != nil || r.TensorsErr != nil {
		out.Tensors = &verifyTensors{Manifest: manifest, Changed: []verifyTensorChange{}, Missing: []string{}, Extra: []string{}}
		if t := r.Tensors; t != nil {
			out.Tensors.MatchedCount, out.Tensors.Missing, out.Tensors.Extra = t.Matched, list(t.Missing), list(t.Extra)
			for _, c := range t.Changed {
				out.Tensors.Changed = append(out.Tensors.Changed, verifyTensorChange{Name: c.Name, Digest: c.Got.Digest.String(), ManifestDigest: c.Want.Digest.String()})
			}
		} else {
			out.Tensors.Error = reason(name, r.TensorsErr)
		}
	}
	err := r.Err()
	if structureOnly && errors.Is(err, verify.ErrNoReference) {
		err = nil
	}
	if err != nil {
		out.Error = reason(name, err)
		out.Status = exitFail
		switch {
		case errors.Is(err, verify.ErrMismatch), errors.Is(err, verify.ErrNoReference):
		case r.Signature != nil && err == r.Signature.Err:
			// A signature that does not verify is a finding; one that
			// cannot be read at all is trouble.
			if !errors.Is(err, signing.ErrBadSignature) && !errors.Is(err, signing.ErrInvalidSignature) && !errors.Is(err, signing.ErrCertificate) {
				out.Status = statusOf(err)
			}
		default: // the structure, a file that cannot be read
			out.Status = statusOf(err)
		}
	}
	return out
}

// print writes the text form: a line per file, the signature's verdict,
// and a summary.
func (out *verifyOutput) print(w io.Writer) error {
	var b strings.Builder
	for _, f := range out.Files {
		switch f.Status {
		case verify.StatusError:
			fmt.Fprintf(&b, "%s: error: %s\n", f.File, f.Error)
		case verify.StatusUnchecked:
			fmt.Fprintf(&b, "%s: unchecked: no reference (sha256 %s)\n", f.File, f.SHA256)
		default:
			var held, failed []string
			for _, c := range f.Checks {
				if c.Holds {
					held = append(held, c.Reference+" "+c.Algorithm)
				} else {
					failed = append(failed, fmt.Sprintf("%s %s, the %s (%s) says %s", c.Algorithm, c.Actual, c.Reference, c.Source, c.Expected))
				}
			}
			if failed != nil {
				fmt.Fprintf(&b, "%s: MISMATCH: %s\n", f.File, strings.Join(failed, "; "))
			} else {
				fmt.Fprintf(&b, "%s: ok: %s\n", f.File, strings.Join(held, ", "))
			}
		}
	}
	if s := out.Signature; s != nil {
		switch {
		case s.Error != "":
			fmt.Fprintf(&b, "signature %s: %s\n", s.Signature, s.Error)
		default:
			fmt.Fprintf(&b, "signature %s: verified (%s, subject %q)\n", s.Signature, s.Method, s.Subject)
			if len(s.Missing) > 0 {
				fmt.Fprintf(&b, "signature %s: signed and missing: %s\n", s.Signature, strings.Join(s.Missing, ", "))
			}
			if len(s.Extra) > 0 {
				fmt.Fprintf(&b, "signature %s: not signed: %s\n", s.Signature, strings.Join(s.Extra, ", "))
			}
		}
	}
	if t := out.Tensors; t != nil {
		switch {
		case t.Error != "":
			fmt.Fprintf(&b, "tensors %s: %s\n", t.Manifest, t.Error)
		default:
			fmt.Fprintf(&b, "tensors %s: %d as listed, %d changed, %d missing, %d not listed\n", t.Manifest, t.MatchedCount, len(t.Changed), len(t.Missing), len(t.Extra))
		}
	}
	structure := "ok"
	switch {
	case strings.HasPrefix(out.Structure, "none: "):
		structure = "not checked (no safetensors model)"
		fmt.Fprintf(&b, "structure: not checked: %s\n", strings.TrimPrefix(out.Structure, "none: "))
	case out.Structure != "ok":
		structure = "invalid"
		fmt.Fprintf(&b, "structure: %s\n", out.Structure)
	}
	fmt.Fprintf(&b, "%s: %s checked against a reference, %d mismatched, %d unchecked; structure %s\n",
		out.Model, plural(out.CheckedCount, "file"), out.MismatchCount, out.UncheckedCount, structure)
	_, err := io.WriteString(w, b.String())
	return err
}

func runSign(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sign", stderr, `Sign writes an OpenSSF Model Signing (OMS v1.0) signature of the model's folder,
as 'model_signing sign key' (1.1.1) does and 'model_signing verify key'
accepts: a Sigstore bundle of a DSSE envelope over an in-toto statement that
lists the SHA-256 of every file of the folder and its subfolders (but git's
files, the signature and those --ignore names), signed by the ECDSA key
(P-256, P-384 or P-521). With --cert, the signing certificate and its chain
go in the signature, as 'model_signing sign certificate' writes it. Files are
hashed in parallel; the signature is written whole or not at all. Progress
goes to stderr when it is a terminal.`, `MODEL is a model's folder on disk (a cache snapshot too: its links count as the
files they lead to).`,
		`0 signed; 2 the folder or the key could not be read, or the signature
could not be written.`)
	asJSON := addJSONFlag(fs)
	keyPath := fs.String("key", "", "the private key (`PEM`, ECDSA P-256, P-384 or P-521, unencrypted)")
	sigPath := fs.String("signature", signing.DefaultSignature, "write the signature to `FILE`, as model_signing does by default")
	certPath := fs.String("cert", "", "the signing certificate and its chain (`PEM`): certificate mode")
	shardSize := fs.Int64("shard-size", 0, "sign each `N` bytes of each file (the shards serialization) rather than each file")
	var ignore stringList
	fs.Var(&ignore, "ignore", "leave `PATH` of the folder out of the signature (repeatable)")
	operands, status, ok := parse(fs, args, stdout)
	if !ok {
		return status
	}
	if len(operands) != 1 {
		return usageError(fs, "want one MODEL, got %d", len(operands))
	}
	if *keyPath == "" {
		return usageError(fs, "--key is required")
	}
	name := operands[0]
	if remote.IsURL(name) {
		return usageError(fs, "%s: a folder on disk is signed, not a URL", name)
	}
	if info, err := os.Stat(name); err != nil {
		return fail(stderr, "sign", name, err)
	} else if !info.IsDir() {
		return usageError(fs, "%s: a model's folder is signed, not a file", name)
	}
	keyData, err := readRegular(*keyPath)
	if err != nil {
		return fail(stderr, "sign", *keyPath, err)
	}
	key, err := signing.ParsePrivateKey(keyData)
	if err != nil {
		return fail(stderr, "sign", *keyPath, err)
	}
	opts := []signing.Option{}
	for _, p := range ignore {
		opts = append(opts, signing.Ignore(p))
	}
	if rel, err := filepath.Rel(absPath(name), absPath(*sigPath)); err == nil && filepath.IsLocal(rel) {
		opts = append(opts, signing.Ignore(rel))
	}
	if *shardSize != 0 {
		opts = append(opts, signing.Shards(*shardSize))
	}
	if *certPath != "" {
		certs, err := readRegular(*certPath)
		if err != nil {
			return fail(stderr, "sign", *certPath, err)
		}
		opts = append(opts, signing.Certificates(certs))
	}
	ctx, stop := catchInterrupts()
	defer stop()
	meter := newMeter(stderr, name, *asJSON)
	defer meter.Done()
	if meter != nil {
		opts = append(opts, signing.Progress(meter.Update))
	}
	bundle, m, err := signing.Sign(ctx, name, key, opts...)
	meter.Done()
	if err != nil {
		return fail(stderr, "sign", name, err)
	}
	if err := atomicfile.WriteNew(*sigPath, bundle); errors.Is(err, os.ErrExist) {
		err = atomicfile.WriteFile(*sigPath, func(w io.Writer) error { _, err := w.Write(bundle); return err })
		if err != nil {
			return fail(stderr, "sign", *sigPath, err)
		}
	} else if err != nil {
		return fail(stderr, "sign", *sigPath, err)
	}
	out := signOutput{Model: name, Signature: *sigPath, Subject: m.Model, Method: m.Method, Digest: m.Digest, Files: m.Paths(), IgnorePaths: list(m.IgnorePaths)}
	out.FileCount = len(out.Files)
	out.Files = list(out.Files)
	if *asJSON {
		err = writeJSON(stdout, out)
	} else {
		_, err = fmt.Fprintf(stdout, "%s: signed %s (%s) into %s\n", name, plural(out.FileCount, "file"), out.Method, out.Signature)
	}
	if err != nil {
		return fail(stderr, "sign", "", err)
	}
	return exitOK
}

// signOutput is what sign --json prints.
type signOutput struct {
	Model       string   `json:"model"`
	Signature   string   `json:"signature"`
	Subject     string   `json:"subject"`
	Method      string   `json:"method"`
	Digest      string   `json:"digest"`
	FileCount   int      `json:"file_count"`
	Files       []string `json:"files"`
	IgnorePaths []string `json:"ignore_paths"`
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
