package signing

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/safetensors-go/safetensors/internal/digest"
	"github.com/safetensors-go/safetensors/internal/parallel"
)

// An Option changes how Sign and Verify read a model.
type Option func(*options) error

type options struct {
	shardSize int64
	ignore    []string
	noGit     bool
	chain     [][]byte
	name      string
	progress  func(done, total uint64)
	digests   map[string]string
}

func newOptions(opts []Option) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Shards makes Sign write the "shards" serialization: a digest of each
// size bytes of each file, as model_signing's
// hashing.Config().use_shard_serialization(shard_size=size) does, rather
// than one digest a file.
func Shards(size int64) Option {
	return func(o *options) error {
		if size < 1 || size > maxShardSize {
			return fmt.Errorf("signing: shard size %d is not from 1 to 2^62", size)
		}
		o.shardSize = size
		return nil
	}
}

// Ignore leaves the paths (relative to the model's folder, files or
// folders) out of what Sign signs, and Verify out of the files it
// compares with the signature; Sign records them in the signature, as
// model_signing does.
func Ignore(paths ...string) Option {
	return func(o *options) error {
		for _, p := range paths {
			if p = filepath.ToSlash(filepath.Clean(p)); !localPath(p) {
				return fmt.Errorf("signing: ignored path %q is not inside the model's folder", p)
			}
			o.ignore = append(o.ignore, p)
		}
		return nil
	}
}

// KeepGit makes Sign sign the files of git (GitPaths), which it leaves out
// by default, as model_signing's --ignore_git_paths=false.
func KeepGit() Option {
	return func(o *options) error { o.noGit = true; return nil }
}

// Certificates makes Sign write a signature of certificate mode: the
// certificates in pemData (the signing certificate, whose key is the
// private key, then the chain to a trusted root) go in the bundle, where
// a CertificateVerifier finds them.
func Certificates(pemData []byte) Option {
	return func(o *options) error {
		v, err := CertificateVerifier(pemData)
		if err != nil {
			return err
		}
		o.chain = v.pins
		return nil
	}
}

// ModelName sets the subject's name that Sign writes; by default, the base
// name of the model's folder.
func ModelName(name string) Option {
	return func(o *options) error { o.name = name; return nil }
}

// Progress makes Sign and Verify call report, from any goroutine, with the
// count of the bytes hashed so far and of those to hash.
func Progress(report func(done, total uint64)) Option {
	return func(o *options) error { o.progress = report; return nil }
}

// Digests gives Verify the SHA-256 (hex) of files of the folder that the
// caller has already hashed, by name, so that a signature of the "files"
// serialization is checked without reading them again.
func Digests(sha256s map[string]string) Option {
	return func(o *options) error { o.digests = sha256s; return nil }
}

// hashJob is one resource to hash: a file, or a shard of it.
type hashJob struct {
	file       int
	start, end int64 // end -1: the whole file
}

// hash computes the resources of the folder's files, with the
// serialization of m (Method, ShardSize), reusing known digests.
func hash(ctx context.Context, f *Folder, files []File, m *Manifest, o *options) ([]Resource, error) {
	var jobs []hashJob
	for i, file := range files {
		if m.Method == "files" {
			jobs = append(jobs, hashJob{i, 0, -1})
			continue
		}
		for start := int64(0); start < file.Size; start += m.ShardSize {
			jobs = append(jobs, hashJob{i, start, min(start+m.ShardSize, file.Size)})
		}
	}
	var total uint64
	for _, j := range jobs {
		if j.end >= 0 {
			total += uint64(j.end - j.start)
		} else if _, ok := o.digests[files[j.file].Name]; !ok {
			total += uint64(files[j.file].Size)
		}
	}
	out := make([]Resource, len(jobs))
	bufs := make([][]byte, parallelism()) // for files that cannot be mapped
	var done atomic.Uint64
	report := func(n int) {
		if o.progress != nil {
			o.progress(done.Add(uint64(n)), total)
		}
	}
	err := parallel.For(ctx, len(jobs), len(bufs), func(worker, i int) error {
		j := jobs[i]
		file := files[j.file]
		r := Resource{Path: file.Name, Name: file.Name, Start: j.start, End: j.end, Algorithm: "sha256"}
		if j.end >= 0 {
			r.Name = file.Name + ":" + strconv.FormatInt(j.start, 10) + ":" + strconv.FormatInt(j.end, 10)
			r.Algorithm = "sha256-sharded-" + strconv.FormatInt(m.ShardSize, 10)
		}
		if d, ok := o.digests[file.Name]; ok && j.end < 0 {
			r.Digest = d
			out[i] = r
			return nil
		}
		fh, err := f.Open(file.Name)
		if err != nil {
			return err
		}
		defer fh.Close()
		end := j.end
		if end < 0 {
			info, err := fh.Stat()
			if err != nil {
				return err
			}
			end = info.Size()
		}
		if bufs[worker] == nil {
			bufs[worker] = make([]byte, digest.PieceSize)
		}
		h := sha256.New()
		if err := digest.File(ctx, fh, j.start, end, bufs[worker], h, report); err != nil {
			return fmt.Errorf("signing: %s: %w", filepath.Join(f.dir, filepath.FromSlash(file.Name)), err)
		}
		r.Digest = hex.EncodeToString(h.Sum(nil))
		out[i] = r
		return nil
	})
	return out, err
}

// parallelism is how many files are hashed at once.
func parallelism() int { return runtime.GOMAXPROCS(0) }

// Sign hashes the files of the model's folder dir (all of them, in its
// subfolders too, but those of git and those Ignore names) and returns the
// signature, signed by key: a Sigstore bundle of an OMS v1.0 statement
// that 'model_signing verify key' accepts (or, with Certificates,
// 'model_signing verify certificate'). Files are hashed in parallel; a
// symbolic link counts as the file it leads to, inside the folder (or the
// cache folder of a snapshot), and sets allow_symlinks.
func Sign(ctx context.Context, dir string, key *ecdsa.PrivateKey, opts ...Option) ([]byte, *Manifest, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	f, err := OpenFolder(dir)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	ignore := slices.Clone(o.ignore)
	if !o.noGit {
		ignore = append(ignore, GitPaths...)
	}
	files, err := f.Files(ignore)
	if err != nil {
		return nil, nil, err
	}
	m := &Manifest{Model: o.name, Method: "files", HashType: "sha256", IgnorePaths: ignore}
	if m.Model == "" {
		abs, _ := filepath.Abs(dir)
		m.Model = filepath.Base(abs)
	}
	if o.shardSize > 0 {
		m.Method, m.ShardSize = "shards", o.shardSize
	}
	for _, file := range files {
		m.AllowSymlinks = m.AllowSymlinks || file.Link != ""
	}
	if m.Resources, err = hash(ctx, f, files, m, o); err != nil {
		return nil, nil, err
	}
	sortResources(m.Resources)
	payload, err := m.statement()
	if err != nil {
		return nil, nil, err
	}
	bundle, err := sign(key, payload, o.chain)
	if err != nil {
		return nil, nil, fmt.Errorf("signing: %w", err)
	}
	return bundle, m, nil
}

// sortResources sorts rs as model_signing does: by path elements, then
// by the shards' offsets.
func sortResources(rs []Resource) {
	slices.SortFunc(rs, func(a, b Resource) int {
		if c := comparePaths(a.Path, b.Path); c != 0 {
			return c
		}
		if a.Start != b.Start {
			return compareInt(a.Start, b.Start)
		}
		return compareInt(a.End, b.End)
	})
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The verdicts of FileResult.Status.
const (
	StatusOK = "ok"
	// StatusDiffers is a file whose digest (or that of one of its
	// shards) is not the one signed.
	StatusDiffers = "differs"
	// StatusMissing is a file the signature lists and the folder does not
	// hold.
	StatusMissing = "missing"
	// StatusExtra is a file of the folder the signature does not list.
	StatusExtra = "extra"
)

// A Result is what Verify found: the manifest signed, and a verdict on
// every file it lists or the folder holds.
type Result struct {
	Manifest *Manifest
	// Files are sorted by name.
	Files []FileResult
}

// A FileResult is the verdict on one file.
type FileResult struct {
	Name   string
	Status string // StatusOK, ...
	// Expected and Actual are the digests (hex SHA-256) signed and found;
	// for the "shards" serialization, those of the first shard that
	// differs, named by Shard ("file:START:END"), and "" where all hold.
	Expected, Actual string
	Shard            string
}

// Err returns nil when every file is as signed, or an error wrapping
// ErrMismatch that names the files that differ, are missing, or are not
// signed.
func (r *Result) Err() error {
	var differ, missing, extra []string
	for _, f := range r.Files {
		switch f.Status {
		case StatusDiffers:
			d := fmt.Sprintf("%s (signed sha256 %s, found %s", f.Name, f.Expected, f.Actual)
			if f.Shard != "" {
				d += " in bytes " + strings.TrimPrefix(f.Shard, f.Name+":")
			}
			differ = append(differ, d+")")
		case StatusMissing:
			missing = append(missing, f.Name)
		case StatusExtra:
			extra = append(extra, f.Name)
		}
	}
	var parts []string
	if len(differ) > 0 {
		parts = append(parts, "changed: "+strings.Join(differ, ", "))
	}
	if len(missing) > 0 {
		parts = append(parts, "missing: "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		parts = append(parts, "not signed: "+strings.Join(extra, ", "))
	}
	if parts == nil {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrMismatch, strings.Join(parts, "; "))
}

// Verify checks the model's folder dir against the signature sig (the
// bytes of a signature file) with v: the signature itself, then every
// file against it (the signature's ignore_paths, git's files and those
// Ignore names left out). It returns an error for a signature that cannot
// be trusted (ErrInvalidSignature, ErrBadSignature, ErrCertificate,
// ErrUnsupported) and otherwise a Result, whose Err says whether the files
// are those signed. Nothing is read outside the folder (or, for a cache
// snapshot, the model's cache folder).
func Verify(ctx context.Context, dir string, sig []byte, v *Verifier, opts ...Option) (*Result, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	b, err := ParseBundle(sig)
	if err != nil {
		return nil, err
	}
	m, err := v.Verify(b)
	if err != nil {
		return nil, err
	}
	f, err := OpenFolder(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return m.check(ctx, f, o)
}

// check compares the folder's files with m.
func (m *Manifest) check(ctx context.Context, f *Folder, o *options) (*Result, error) {
	ignore := slices.Clone(o.ignore)
	paths := m.Paths()
	for _, g := range GitPaths {
		// git's files are left out, as model_signing leaves them out,
		// unless the signature signs them (--no-ignore-git-paths).
		if !slices.ContainsFunc(paths, func(p string) bool { return ignored(p, []string{g}) }) {
			ignore = append(ignore, g)
		}
	}
	for _, p := range m.IgnorePaths {
		if p = strings.TrimSuffix(filepath.ToSlash(p), "/"); localPath(p) {
			ignore = append(ignore, p)
		}
	}
	files, err := f.Files(ignore)
	if err != nil {
		return nil, err
	}
	signed := make(map[string][]Resource)
	for _, r := range m.Resources {
		signed[r.Path] = append(signed[r.Path], r)
	}
	var present []File
	res := &Result{Manifest: m}
	for _, file := range files {
		if _, ok := signed[file.Name]; ok || m.Method == "shards" && file.Size == 0 {
			present = append(present, file)
			continue
		}
		res.Files = append(res.Files, FileResult{Name: file.Name, Status: StatusExtra})
	}
	actual, err := hash(ctx, f, present, m, o)
	if err != nil {
		return nil, err
	}
	got := make(map[string]Resource, len(actual))
	for _, r := range actual {
		got[r.Name] = r
	}
	have := make(map[string]bool, len(present))
	for _, file := range present {
		have[file.Name] = true
	}
	for _, file := range present {
		fr := FileResult{Name: file.Name, Status: StatusOK}
		if w := signed[file.Name]; m.Method == "files" && len(w) == 1 {
			fr.Expected, fr.Actual = w[0].Digest, got[w[0].Name].Digest
		}
		want := signed[file.Name]
		n := 0
		for _, r := range actual {
			if r.Path == file.Name {
				n++
			}
		}
		for _, w := range want {
			a, ok := got[w.Name]
			if !ok || a.Digest != w.Digest {
				fr.Status, fr.Expected, fr.Actual = StatusDiffers, w.Digest, a.Digest
				if m.Method == "shards" {
					fr.Shard = w.Name
				}
				break
			}
		}
		if fr.Status == StatusOK && n != len(want) {
			// Shards of another size: the file's length changed.
			fr.Status = StatusDiffers
			fr.Expected = fmt.Sprintf("%d shards", len(want))
			fr.Actual = fmt.Sprintf("%d shards", n)
		}
		res.Files = append(res.Files, fr)
	}
	for _, p := range m.Paths() {
		if !have[p] {
			res.Files = append(res.Files, FileResult{Name: p, Status: StatusMissing})
		}
	}
	slices.SortFunc(res.Files, func(a, b FileResult) int { return comparePaths(a.Name, b.Name) })
	return res, nil
}
