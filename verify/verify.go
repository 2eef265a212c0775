package verify

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/digest"
	"github.com/safetensors-go/safetensors/internal/filekind"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/regular"
	"github.com/safetensors-go/safetensors/load"
	"github.com/safetensors-go/safetensors/remote"
	"github.com/safetensors-go/safetensors/signing"
)

// The references a file is checked against; see the package's doc.
const (
	RefCacheBlob  = "cache-blob"
	RefLFSPointer = "lfs-pointer"
	RefLinkedETag = "x-linked-etag"
	RefETag       = "etag"
	RefSignature  = "signature"
	// RefTensorDigests is a manifest of tensor digests (see Manifest): a
	// safetensors file holds against it when every tensor it holds has
	// the manifest's digest.
	RefTensorDigests = "tensor-digests"
)

// The algorithms of a Check.
const (
	SHA256  = "sha256"
	GitSHA1 = "git-sha1" // SHA-1 of "blob SIZE\x00" and the content
	Size    = "size"
	// TensorSHA256 is the algorithm of a RefTensorDigests check: each
	// tensor's safetensors.TensorDigest.
	TensorSHA256 = "tensor-sha256"
)

var (
	// ErrMismatch is returned (by Report.Err) when a file is not what a
	// reference says: its digest or size differs, a file signed is
	// missing, a file is not signed.
	ErrMismatch = errors.New("verify: model differs from its reference")
	// ErrNoReference is returned (by Report.Err) when a file could be
	// checked against no reference: only its structure was checked.
	ErrNoReference = errors.New("verify: no reference to check against")
)

// An Option changes how Model verifies a model.
type Option func(*options) error

type options struct {
	ck       []checkpoint.Option
	remote   []remote.Option
	client   *http.Client
	sig      []byte
	sigName  string
	verifier *signing.Verifier
	progress func(done, total uint64)
	manifest *Manifest
	manName  string
}

// CheckpointOptions passes opts to checkpoint.Open, which opens the model
// and checks its structure (Variant, RemoteOptions, Client, ...).
func CheckpointOptions(opts ...checkpoint.Option) Option {
	return func(o *options) error { o.ck = append(o.ck, opts...); return nil }
}

// RemoteOptions passes opts to remote.OpenFile, which reads each file of
// a model over HTTP (RequestHeader for a token, ...), and Client sets its
// HTTP client; give the same to CheckpointOptions.
func RemoteOptions(opts ...remote.Option) Option {
	return func(o *options) error { o.remote = append(o.remote, opts...); return nil }
}

// Client sets the HTTP client that reads the files of a model over HTTP;
// nil means remote.DefaultClient.
func Client(c *http.Client) Option {
	return func(o *options) error { o.client = c; return nil }
}

// Signature checks the model's folder against an OMS signature: data, the
// signature file's bytes, which name (its path) designates in messages and
// which is left out of the folder's files when it is inside; v verifies
// it (signing.KeyVerifier, signing.CertificateVerifier).
func Signature(name string, data []byte, v *signing.Verifier) Option {
	return func(o *options) error {
		if v == nil {
			return fmt.Errorf("verify: Signature(%q) needs a Verifier", name)
		}
		o.sig, o.sigName, o.verifier = data, name, v
		return nil
	}
}

// TensorDigests checks the model's tensors against m, a manifest of
// tensor digests (ReadManifest; 'safetensors inspect --digests' writes
// one), which name designates in messages: each safetensors file gets a
// RefTensorDigests check, and Report.Tensors says which tensors changed,
// are missing or extra. Each byte is read once: the read of the tensors
// (a load.Loader's, which computes their digests in parallel) also
// computes the SHA-256 of each safetensors file of the model
// (load.HashFiles), which the files' own hashing then leaves out; but a
// file whose git SHA-1 is asked (a small file kept in git) is hashed on
// its own, and so are the model's files if the read of its tensors fails
// (Report.TensorsErr says why).
func TensorDigests(name string, m *Manifest) Option {
	return func(o *options) error {
		if m == nil {
			return fmt.Errorf("verify: TensorDigests(%q) needs a Manifest", name)
		}
		o.manifest, o.manName = m, name
		return nil
	}
}

// Progress makes Model call report, from any goroutine, with the bytes
// hashed so far and the total to hash.
func Progress(report func(done, total uint64)) Option {
	return func(o *options) error { o.progress = report; return nil }
}

// A Report is what Model found.
type Report struct {
	// Model is the model as Model was given it; Dir its folder, or for a
	// model over HTTP its base URL.
	Model, Dir string
	// Files are the files checked, sorted by name.
	Files []File
	// Signature is what the signature said, if one was given.
	Signature *SignatureResult
	// Structure is the error of the structural checks (checkpoint.Open),
	// or nil.
	Structure error
	// Tensors is what the manifest of TensorDigests said of the tensors,
	// if one was given; TensorsErr why they could not be read.
	Tensors    *ManifestReport
	TensorsErr error
	// NoModel says why the structure could not be checked: the folder
	// holds no safetensors model (checkpoint.ErrNoModel), only other
	// files, which the references check all the same; "" otherwise.
	NoModel string
}

// A File is a file of the model and the checks made of it.
type File struct {
	Name   string // slash-separated, in Dir
	Size   int64
	SHA256 string // hex; "" if it could not be read
	Checks []Check
	// Err is why the file could not be read, or nil.
	Err error
}

// A Check is one reference a file was checked against.
type Check struct {
	Reference string // RefCacheBlob, ...
	Algorithm string // SHA256, GitSHA1 or Size
	// Expected is what the reference says, Actual what the file is.
	Expected, Actual string
	// Source is where the reference was found: the blob's path, the URL,
	// the signature's file.
	Source string
	Holds  bool
}

// The statuses of a File.
const (
	StatusOK        = "ok"        // every check holds, and there is one
	StatusMismatch  = "mismatch"  // a check does not hold
	StatusUnchecked = "unchecked" // no reference
	StatusError     = "error"     // the file could not be read
)

// Status returns the verdict on f.
func (f *File) Status() string {
	switch {
	case f.Err != nil:
		return StatusError
	case len(f.Checks) == 0:
		return StatusUnchecked
	}
	for _, c := range f.Checks {
		if !c.Holds {
			return StatusMismatch
		}
	}
	return StatusOK
}

// SignatureResult is what an OMS signature said of the model.
type SignatureResult struct {
	File   string // the signature's path
	Model  string // the subject's name
	Method string // "files" or "shards"
	// Missing are the files signed that the folder does not hold; Extra
	// those it holds that are not signed.
	Missing, Extra []string
	// Err is why the signature itself could not be trusted, or nil.
	Err error
}

// Unchecked returns the names of the files that no reference covered.
func (r *Report) Unchecked() []string {
	var names []string
	for _, f := range r.Files {
		if f.Status() == StatusUnchecked {
			names = append(names, f.Name)
		}
	}
	return names
}

// Err returns nil when every file holds against a reference and the
// structure is sound; otherwise the first of: an error wrapping
// ErrMismatch that names every file that differs from a reference (both
// digests and the reference), is signed and missing, or is not signed;
// the signature's own error (it does not verify, or cannot be read); the
// structure's error; a file's read error; and an error wrapping
// ErrNoReference that names the files no reference covered.
func (r *Report) Err() error {
	var bad []string
	for _, f := range r.Files {
		for _, c := range f.Checks {
			if !c.Holds {
				bad = append(bad, fmt.Sprintf("%s: %s %s, the %s (%s) says %s", f.Name, c.Algorithm, c.Actual, c.Reference, c.Source, c.Expected))
			}
		}
	}
	if t := r.Tensors; t != nil && len(t.Missing) > 0 {
		bad = append(bad, fmt.Sprintf("tensors of the manifest missing: %s", strings.Join(quoteAll(t.Missing), ", ")))
	}
	if s := r.Signature; s != nil {
		if len(s.Missing) > 0 {
			bad = append(bad, fmt.Sprintf("signed and missing (%s): %s", s.File, strings.Join(s.Missing, ", ")))
		}
		if len(s.Extra) > 0 {
			bad = append(bad, fmt.Sprintf("not signed (%s): %s", s.File, strings.Join(s.Extra, ", ")))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrMismatch, strings.Join(bad, "; "))
	}
	if s := r.Signature; s != nil && s.Err != nil {
		return s.Err
	}
	if r.Structure != nil {
		return r.Structure
	}
	if r.TensorsErr != nil {
		return r.TensorsErr
	}
	for _, f := range r.Files {
		if f.Err != nil {
			return f.Err
		}
	}
	if u := r.Unchecked(); len(u) > 0 {
		return fmt.Errorf("%w: %s: only the structure was checked (no cache blob, LFS pointer, server digest or signature)", ErrNoReference, strings.Join(u, ", "))
	}
	return nil
}

// Model verifies the model target, any input checkpoint.Open takes: a
// safetensors file, an index, a folder of any library's layout, a Hugging
// Face cache snapshot (or the model's cache folder), or an http(s) URL of
// any of these. It checks the structure with checkpoint.Open (a folder
// holding no safetensors model, only other files, is verified all the
// same, and Report.NoModel says so), then hashes
// every file of the model once (on disk: every file of the folder but
// git's and the signature; over HTTP: the safetensors files and indexes)
// and checks it against every reference found. The error is for a model
// that could not be verified at all (no such file, a bad option); what
// was found, good or bad, is in the Report, whose Err says.
func Model(ctx context.Context, target string, opts ...Option) (*Report, error) {
	o := &options{}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	r := &Report{Model: target}
	var noModel error
	ck, err := checkpoint.Open(ctx, target, o.ck...)
	switch {
	case err == nil:
		defer ck.Close()
	case remote.IsURL(target) || errors.Is(err, os.ErrNotExist) && !exists(target):
		return nil, err
	case errors.Is(err, checkpoint.ErrNoModel):
		r.NoModel = err.Error()
		noModel = err
	default:
		r.Structure = err
	}
	if remote.IsURL(target) {
		tr, err := verifyRemote(ctx, ck, r, o)
		if err != nil {
			return nil, err
		}
		tensorChecks(ctx, ck, r, o, tr)
		return r, nil
	}
	tr, err := verifyLocal(ctx, target, ck, r, o)
	if err != nil {
		return nil, err
	}
	tensorChecks(ctx, ck, r, o, tr)
	if noModel != nil && len(r.Files) == 0 {
		return nil, noModel // nothing at all to verify
	}
	return r, nil
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// job is a file to hash, and what to hash it with.
type job struct {
	file    *File
	gitSHA1 bool
	// chunk is the size of each read: a range request each over HTTP.
	chunk int
	open  func() (io.ReaderAt, int64, func(), error)
}

// meter reports the bytes hashed so far, of total, to report (if any),
// from any goroutine.
type meter struct {
	report func(done, total uint64)
	total  uint64
	done   atomic.Uint64
}

// newMeter returns the meter of the files' bytes.
func newMeter(report func(done, total uint64), files []File) *meter {
	m := &meter{report: report}
	for _, f := range files {
		m.total += uint64(max(f.Size, 0))
	}
	return m
}

func (m *meter) add(n uint64) {
	if m.report != nil {
		m.report(m.done.Add(n), m.total)
	}
}

// hashAll hashes the file of every job whose SHA256 is not known yet,
// big files first, on every core, setting SHA256 (and the git SHA-1 into
// gits, by index) or Err.
func hashAll(ctx context.Context, jobs []job, workers int, m *meter) []string {
	var order []int
	for i := range jobs {
		if jobs[i].file.SHA256 == "" {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(min(max(jobs[b].file.Size-jobs[a].file.Size, -1), 1)) })
	gits := make([]string, len(jobs))
	bufs := make([][2][]byte, workers)
	report := func(n int) { m.add(uint64(n)) }
	parallel.For(ctx, len(order), workers, func(worker, k int) error {
		i := order[k]
		j := jobs[i]
		// A remote file is read ahead of its hashing (its reads wait on
		// the network), a local one hashed in place (digest.File).
		n := digest.PieceSize
		if j.chunk > 0 {
			n = max(j.chunk, digest.BufferSize)
		}
		if len(bufs[worker][0]) < n {
			bufs[worker] = [2][]byte{make([]byte, n), make([]byte, n)}
		}
		ra, size, closeFn, err := j.open()
		if err != nil {
			j.file.Err = err
			return nil
		}
		defer closeFn()
		j.file.Size = size
		h := sha256.New()
		var w io.Writer = h
		var g hash.Hash
		if j.gitSHA1 {
			g = sha1.New()
			fmt.Fprintf(g, "blob %d\x00", size)
			w = io.MultiWriter(h, g)
		}
		if f, ok := ra.(*os.File); ok && j.chunk == 0 {
			err = digest.File(ctx, f, 0, size, bufs[worker][0][:n], w, report)
		} else {
			err = digest.RangeAhead(ctx, ra, 0, size, bufs[worker], w, report)
		}
		if err != nil {
			j.file.Err = fmt.Errorf("verify: %s: %w", j.file.Name, err)
			return nil
		}
		j.file.SHA256 = hex.EncodeToString(h.Sum(nil))
		if g != nil {
			gits[i] = hex.EncodeToString(g.Sum(nil))
		}
		return nil
	})
	if err := ctx.Err(); err != nil {
		for _, j := range jobs {
			if j.file.SHA256 == "" && j.file.Err == nil {
				j.file.Err = context.Cause(ctx)
			}
		}
	}
	return gits
}

// verifyLocal verifies a model on disk, and returns the read of its
// tensors for the manifest of o, if any.
func verifyLocal(ctx context.Context, target string, ck *checkpoint.Checkpoint, r *Report, o *options) (*tensorRead, error) {
	dir, only := target, ""
	if info, err := os.Stat(target); err != nil {
		return nil, err
	} else if !info.IsDir() {
		dir, only = filepath.Dir(target), filepath.Base(target)
	} else if ck != nil {
		dir = ck.Dir() // the snapshot of a model's cache folder
	} else {
		dir = snapshotOf(target)
	}
	r.Dir = dir
	folder, err := signing.OpenFolder(dir)
	if err != nil {
		return nil, err
	}
	defer folder.Close()
	ignore := slices.Clone(signing.GitPaths)
	var sigIgnore []string // the signature, when it is in the folder
	if rel, ok := inside(dir, o.sigName); ok {
		ignore = append(ignore, rel)
		sigIgnore = append(sigIgnore, rel)
	}
	var files []signing.File
	if only != "" {
		info, err := os.Stat(target)
		if err != nil {
			return nil, err
		}
		files = []signing.File{{Name: only, Size: info.Size(), Link: folder.Readlink(only)}}
	} else if files, err = folder.Files(ignore); err != nil {
		return nil, err
	}
	refs := gitRefs(ctx, dir)
	r.Files = make([]File, len(files))
	jobs := make([]job, len(files))
	for i, f := range files {
		r.Files[i] = File{Name: f.Name, Size: f.Size}
		name := f.Name
		blob := blobName(f.Link)
		jobs[i] = job{file: &r.Files[i], gitSHA1: len(blob) == 40 || refs[name].blob != "", open: func() (io.ReaderAt, int64, func(), error) {
			fh, err := folder.Open(name)
			if err != nil {
				return nil, 0, nil, err
			}
			info, err := fh.Stat()
			if err != nil {
				fh.Close()
				return nil, 0, nil, err
			}
			return fh, info.Size(), func() { fh.Close() }, nil
		}}
	}
	m := newMeter(o.progress, r.Files)
	// A file's SHA-256 is computed in the read of the tensors, if it is a
	// file of ck that no git SHA-1 is asked of: the file the folder holds.
	infos := make([]os.FileInfo, len(files)) // each opened once, if asked
	stat := func(i int) os.FileInfo {
		if infos[i] == nil {
			infos[i] = noFile{}
			if fh, err := folder.Open(files[i].Name); err == nil {
				if info, err := fh.Stat(); err == nil {
					infos[i] = info
				}
				fh.Close()
			}
		}
		return infos[i]
	}
	tr := readTensors(ctx, ck, r, o, m, func(ds safetensors.DataSection, i int) bool {
		return !jobs[i].gitSHA1 && ds.Info != nil && os.SameFile(stat(i), ds.Info)
	})
	gits := hashAll(ctx, jobs, runtime.GOMAXPROCS(0), m)
	for i, f := range files {
		rf := &r.Files[i]
		if rf.Err != nil {
			continue
		}
		if blob := blobName(f.Link); blob != "" {
			c := Check{Reference: RefCacheBlob, Source: path.Join(path.Dir(f.Name), f.Link), Expected: blob}
			if len(blob) == 64 {
				c.Algorithm, c.Actual = SHA256, rf.SHA256
			} else {
				c.Algorithm, c.Actual = GitSHA1, gits[i]
			}
			c.Holds = c.Expected == c.Actual
			rf.Checks = append(rf.Checks, c)
		}
		if ref, ok := refs[f.Name]; ok {
			gitChecks(rf, ref, gits[i])
		}
		if f.Size <= filekind.Len {
			pointerCheck(folder, rf)
		}
	}
	if o.sig != nil {
		signatureChecks(ctx, dir, r, o, sigIgnore)
	}
	return tr, nil
}

// snapshotOf returns the snapshot that refs/main names, for dir the cache
// folder of a model in the Hugging Face cache (models--ORG--NAME), as
// checkpoint.Open finds it; otherwise dir. It serves where Open failed.
func snapshotOf(dir string) string {
	if !strings.HasPrefix(filepath.Base(filepath.Clean(dir)), "models--") {
		return dir
	}
	ref, err := regular.ReadFile(regular.OpenFile, filepath.Join(dir, "refs", "main"))
	rev := strings.TrimSpace(string(ref))
	if err != nil || len(ref) > 256 || !filepath.IsLocal(rev) || strings.ContainsAny(rev, `/\`) || rev == "." {
		return dir
	}
	snap := filepath.Join(dir, "snapshots", rev)
	if info, err := os.Stat(snap); err == nil && info.IsDir() {
		return snap
	}
	return dir
}

// inside returns the path of name relative to dir if name is in dir.
func inside(dir, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	absDir, err1 := filepath.Abs(dir)
	absName, err2 := filepath.Abs(name)
	if err1 != nil || err2 != nil {
		return "", false
	}
	rel, err := filepath.Rel(absDir, absName)
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// blobName returns the blob a link of a cache snapshot leads to, its
// name a SHA-256 (64 hex digits) or a git SHA-1 (40), or "".
func blobName(link string) string {
	if link == "" || path.Base(path.Dir(filepath.ToSlash(link))) != "blobs" {
		return ""
	}
	b := path.Base(filepath.ToSlash(link))
	if len(b) != 64 && len(b) != 40 {
		return ""
	}
	if _, err := hex.DecodeString(b); err != nil || strings.ToLower(b) != b {
		return ""
	}
	return b
}

// pointerCheck adds to f, a small file, the check of a Git LFS pointer
// found in place of the file it stands for: a failed check, since the
// content is not there.
func pointerCheck(folder *signing.Folder, f *File) {
	fh, err := folder.Open(f.Name)
	if err != nil {
		return
	}
	defer fh.Close()
	b := make([]byte, filekind.Len)
	n, _ := io.ReadFull(fh, b)
	if filekind.Of(b[:n]) != filekind.LFSPointer {
		return
	}
	oid, size := filekind.LFS(b[:n])
	f.Checks = append(f.Checks, Check{Reference: RefLFSPointer, Algorithm: SHA256, Source: f.Name + " (the pointer, in place of the file: run 'git lfs pull')",
		Expected: strings.TrimPrefix(oid, "sha256:") + " (" + strconv.FormatInt(size, 10) + " bytes)", Actual: f.SHA256 + " (the pointer's own)"})
}

// signatureChecks checks the folder against the signature of o.
func signatureChecks(ctx context.Context, dir string, r *Report, o *options, ignore []string) {
	s := &SignatureResult{File: o.sigName}
	r.Signature = s
	known := make(map[string]string, len(r.Files))
	for _, f := range r.Files {
		if f.SHA256 != "" {
			known[f.Name] = f.SHA256
		}
	}
	res, err := signing.Verify(ctx, dir, o.sig, o.verifier, signing.Ignore(ignore...), signing.Digests(known))
	if err != nil {
		s.Err = fmt.Errorf("%s: %w", o.sigName, err)
		return
	}
	s.Model, s.Method = res.Manifest.Model, res.Manifest.Method
	byName := make(map[string]*File, len(r.Files))
	for i := range r.Files {
		byName[r.Files[i].Name] = &r.Files[i]
	}
	added := false
	for _, fr := range res.Files {
		switch fr.Status {
		case signing.StatusMissing:
			s.Missing = append(s.Missing, fr.Name)
		case signing.StatusExtra:
			s.Extra = append(s.Extra, fr.Name)
		default:
			f := byName[fr.Name]
			if f == nil {
				// A file the listing leaves out (git's) that the
				// signature signs: reported with its check.
				r.Files = append(r.Files, File{Name: fr.Name, Size: -1, SHA256: fr.Actual})
				f = &r.Files[len(r.Files)-1]
				if info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(fr.Name))); err == nil {
					f.Size = info.Size()
				}
				byName, added = nil, true // r.Files moved
			}
			c := Check{Reference: RefSignature, Algorithm: SHA256, Source: o.sigName, Expected: f.SHA256, Actual: f.SHA256, Holds: fr.Status == signing.StatusOK}
			if !c.Holds {
				c.Expected, c.Actual = fr.Expected, fr.Actual
				if fr.Shard != "" {
					c.Source += " (bytes " + strings.TrimPrefix(fr.Shard, fr.Name+":") + ")"
				}
			}
			f.Checks = append(f.Checks, c)
			if byName == nil {
				byName = make(map[string]*File, len(r.Files))
				for i := range r.Files {
					byName[r.Files[i].Name] = &r.Files[i]
				}
			}
		}
	}
	if added {
		slices.SortStableFunc(r.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	}
}

// remoteChunk is the size of the range requests that read a file over
// HTTP: a request per 16 MiB (the next one under way while one is hashed),
// and at most remoteWorkers files at once.
const (
	remoteChunk   = 16 << 20
	remoteWorkers = 4
)

// verifyRemote verifies a model over HTTP: its safetensors files and
// indexes, each read once, against what the server says of them.
func verifyRemote(ctx context.Context, ck *checkpoint.Checkpoint, r *Report, o *options) (*tensorRead, error) {
	if ck == nil {
		return nil, r.Structure
	}
	r.Dir = ck.Dir()
	names := ck.Files()
	if ck.Index() != "" {
		names = append(names, ck.Index())
	}
	for _, p := range ck.Parts() {
		if p.Index() != "" {
			names = append(names, partPath(p.Part(), p.Index()))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	single := len(ck.Files()) == 1 && ck.Index() == "" && ck.Parts() == nil
	r.Files = make([]File, len(names))
	jobs := make([]job, len(names))
	pubs := make([]remote.Published, len(names))
	urls := make([]string, len(names))
	for i, name := range names {
		r.Files[i] = File{Name: name, Size: -1}
		u := strings.TrimSuffix(ck.Dir(), "/") + "/" + name
		if single {
			u = ck.String()
		}
		urls[i] = u
		// Open each file first: what the server says decides the hashes.
		f, err := remote.OpenFile(ctx, o.client, u, o.remote...)
		if err != nil {
			r.Files[i].Err = err
			jobs[i] = job{file: &r.Files[i], open: func() (io.ReaderAt, int64, func(), error) { return nil, 0, nil, err }}
			continue
		}
		pubs[i] = f.Published()
		r.Files[i].Size = f.Size()
		jobs[i] = job{file: &r.Files[i], gitSHA1: pubs[i].LinkedETag == "" && isHex(pubs[i].ETag, 40), chunk: remoteChunk,
			open: func() (io.ReaderAt, int64, func(), error) { return f, f.Size(), func() {}, nil }}
	}
	m := newMeter(o.progress, r.Files)
	// A file's SHA-256 is computed in the read of the tensors, if it is a
	// file of ck that no git SHA-1 is asked of: the URL opened.
	tr := readTensors(ctx, ck, r, o, m, func(ds safetensors.DataSection, i int) bool {
		return !jobs[i].gitSHA1 && r.Files[i].Err == nil && ds.Name == urls[i]
	})
	gits := hashAll(ctx, jobs, remoteWorkers, m)
	for i := range r.Files {
		f, p := &r.Files[i], pubs[i]
		if f.Err != nil {
			continue
		}
		switch {
		case isHex(strings.ToLower(p.LinkedETag), 64):
			want := strings.ToLower(p.LinkedETag)
			f.Checks = append(f.Checks, Check{Reference: RefLinkedETag, Algorithm: SHA256, Source: urls[i], Expected: want, Actual: f.SHA256, Holds: want == f.SHA256})
			if p.LinkedSize >= 0 {
				want, got := strconv.FormatInt(p.LinkedSize, 10), strconv.FormatInt(f.Size, 10)
				f.Checks = append(f.Checks, Check{Reference: RefLinkedETag, Algorithm: Size, Source: urls[i], Expected: want, Actual: got, Holds: want == got})
			}
		case p.LinkedETag == "" && isHex(p.ETag, 40):
			f.Checks = append(f.Checks, Check{Reference: RefETag, Algorithm: GitSHA1, Source: urls[i], Expected: p.ETag, Actual: gits[i], Holds: p.ETag == gits[i]})
		}
	}
	return tr, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// noFile is the os.FileInfo of a file that could not be opened: the same
// file as none (os.SameFile).
type noFile struct{ os.FileInfo }

// tensorRead is the read of a model's tensors for the manifest of
// TensorDigests.
type tensorRead struct {
	got *Manifest // the model's tensors, or nil
	err error     // why they could not be read
}

// readTensors reads the tensors of ck once, for the manifest of o (nil
// where there is none, or no ck), and in the same pass computes the
// SHA-256 of its files, each of which is a file of r (same(ds, i) says
// which), setting their SHA256: those the files' own hashing then leaves
// out. Where a file of ck is none of r's, or one that same refuses (a
// file whose git SHA-1 is asked), the files are hashed on their own.
func readTensors(ctx context.Context, ck *checkpoint.Checkpoint, r *Report, o *options, m *meter, same func(ds safetensors.DataSection, i int) bool) *tensorRead {
	if o.manifest == nil || ck == nil {
		return nil
	}
	sections, err := ck.DataSections()
	if err != nil {
		return &tensorRead{err: err}
	}
	files := make([][]int, len(sections)) // the files of r each section is
	fused := true
	for k, ds := range sections {
		for i := range r.Files {
			if same(ds, i) {
				files[k] = append(files[k], i)
			}
		}
		fused = fused && len(files[k]) > 0
	}
	if !fused {
		got, err := sectionsManifest(ctx, sections, &manifestConfig{})
		return &tensorRead{got: got, err: err}
	}
	var d load.Digests
	var last uint64
	got, err := sectionsManifest(ctx, sections, &manifestConfig{files: &d, progress: func(done, _ uint64) {
		m.add(done - last) // the tensors' bytes, read once
		last = done
	}})
	if err != nil {
		return &tensorRead{err: err} // the files are hashed on their own
	}
	var rest uint64 // the headers, and any bytes no tensor covers
	for k, ds := range sections {
		sum, _ := d.File(ds.Name) // there: the load ended without an error
		for _, i := range files[k] {
			r.Files[i].SHA256 = hex.EncodeToString(sum[:])
		}
		rest += uint64(max(ds.Size, 0))
		for _, t := range ds.Tensors {
			rest -= t.DataOffsets[1] - t.DataOffsets[0]
		}
	}
	m.add(rest)
	return &tensorRead{got: got}
}

// tensorChecks checks the tensors of ck, as tr read them, against the
// manifest of o, if any, and adds a RefTensorDigests check to each
// safetensors file of r.
func tensorChecks(ctx context.Context, ck *checkpoint.Checkpoint, r *Report, o *options, tr *tensorRead) {
	if o.manifest == nil {
		return
	}
	if ck == nil || tr == nil {
		r.TensorsErr = fmt.Errorf("verify: %s: the tensors cannot be read, so the manifest %s was not checked", r.Model, o.manName)
		return
	}
	if tr.err != nil {
		r.TensorsErr = fmt.Errorf("verify: %s: %w", o.manName, tr.err)
		return
	}
	rep := o.manifest.Compare(tr.got.Tensors)
	r.Tensors = rep
	// Each file: how many of its tensors the manifest lists with the
	// same digest, and which differ or are not listed.
	type count struct {
		tensors int
		bad     []string
	}
	counts := map[string]*count{}
	for _, name := range ck.Names() {
		file, err := ck.File(name)
		if err != nil {
			continue
		}
		if counts[file] == nil {
			counts[file] = &count{}
		}
		counts[file].tensors++
	}
	badTensor := func(name, why string) {
		if file, err := ck.File(name); err == nil && counts[file] != nil {
			counts[file].bad = append(counts[file].bad, why)
		}
	}
	for _, c := range rep.Changed {
		badTensor(c.Name, c.String())
	}
	for _, name := range rep.Extra {
		badTensor(name, strconv.Quote(name)+" (not in the manifest)")
	}
	// An index holds when it leads to the manifest's tensors, all of
	// them and no other (the structure checked that it agrees with its
	// shards; a tensor whose digest changed is its shard's).
	indexes := map[string]bool{}
	if ck.Index() != "" {
		indexes[ck.Index()] = true
	}
	for _, p := range ck.Parts() {
		if p.Index() != "" {
			indexes[partPath(p.Part(), p.Index())] = true
		}
	}
	for i := range r.Files {
		f := &r.Files[i]
		if indexes[f.Name] {
			f.Checks = append(f.Checks, Check{Reference: RefTensorDigests, Algorithm: TensorSHA256, Source: o.manName,
				Expected: fmt.Sprintf("the manifest's %d tensors", len(o.manifest.Tensors)), Actual: fmt.Sprintf("%d missing, %d not listed", len(rep.Missing), len(rep.Extra)), Holds: len(rep.Missing) == 0 && len(rep.Extra) == 0})
			continue
		}
		c := counts[f.Name]
		if c == nil {
			continue
		}
		check := Check{Reference: RefTensorDigests, Algorithm: TensorSHA256, Source: o.manName,
			Expected: fmt.Sprintf("%d tensors as listed", c.tensors), Actual: fmt.Sprintf("%d as listed", c.tensors-len(c.bad)), Holds: len(c.bad) == 0}
		if !check.Holds {
			check.Actual += ": " + strings.Join(c.bad, ", ")
		}
		f.Checks = append(f.Checks, check)
	}
}

// partPath returns the path of name, a file of the part part, in the
// model's folder: "unet/name", or name for a part in the model's own.
func partPath(part, name string) string {
	if part == "" {
		return name
	}
	return part + "/" + name
}
