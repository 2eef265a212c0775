package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/hfindex"
	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/remote"
)

var (
	// ErrNoModel is returned by Open for a folder in which no model's
	// weights are found, where they are ambiguous (two files that could
	// each be the model, such as two *.safetensors files of no library's
	// names), or where only files of other variants than the one asked
	// for are. The error lists what was looked for, and the variants
	// there are.
	ErrNoModel = errors.New("checkpoint: no model found")

	// ErrInvalidIndex is returned by Open for an index file that is not
	// what the Hugging Face libraries write, or that disagrees with its
	// shards: a shard missing or invalid, a tensor missing from the shard
	// the index names or present in two shards, a total_size that is not
	// the sum of the tensors' sizes, or a shard name that leaves the
	// index's folder.
	ErrInvalidIndex = errors.New("checkpoint: invalid index")

	// ErrUnlistedTensor is returned, under the Strict option only, by Open
	// for a checkpoint whose shards hold tensors that the index does not
	// list. Without Strict such a checkpoint opens without an error: the
	// tensors are left out, as loaders leave them out, and Unlisted names
	// them.
	ErrUnlistedTensor = errors.New("checkpoint: tensor not listed in the index")
)

// Open opens the model at target, wherever it is and whatever library
// saved it, as that library's from_pretrained finds it. target is a path
// or an http:// or https:// URL of:
//
//   - a safetensors file;
//   - a sharded checkpoint's index, any file whose name ends in .json but
//     for model_index.json and modules.json (model.safetensors.index.json,
//     diffusion_pytorch_model.safetensors.index.fp16.json, ...);
//   - a folder, on disk or the base URL of one (such as
//     https://huggingface.co/{repo}/resolve/{revision}): see below;
//   - a diffusers pipeline's model_index.json, or a sentence-transformers
//     model's modules.json: their folder;
//   - a snapshot of the Hugging Face cache (.../models--org--name/snapshots/REVISION),
//     a folder whose files are links into the cache's blobs, or the model's
//     cache folder itself, .../models--org--name, whose refs/main names
//     the snapshot.
//
// In a folder it finds, in this order:
//
//   - a diffusers pipeline, by its model_index.json: each component whose
//     folder holds a model (a config.json beside weights, as ModelMixin
//     and transformers' models save them; schedulers, tokenizers and
//     feature extractors hold none) is a part, named after its folder
//     (unet, vae, text_encoder, ...);
//   - a sentence-transformers model, by its modules.json: each module
//     whose folder holds weights is a part, named after its folder (""
//     for the transformer in the model's own folder, 2_Dense, ...), and
//     so are the modules a Router routes to (2_Router/query_0_Dense, as
//     its router_config.json names them);
//   - the weights of one model, as transformers, timm and
//     sentence-transformers (model.safetensors, then
//     model.safetensors.index.json), diffusers (diffusion_pytorch_model.safetensors,
//     then its index), peft (adapter_model.safetensors) and open_clip
//     (open_clip_model.safetensors) name them, in that order, with the
//     Variant's names where one is given; and failing those, in a folder
//     on disk, the one *.safetensors.index.json, or the one *.safetensors
//     file (such as diffusers' pytorch_lora_weights.safetensors).
//
// Before those names, it reads the file that config.json names in
// "transformers_weights", and, in a folder on disk, a distributed
// checkpoint of transformers 5 (shard-00001-model-00001-of-00002.safetensors
// and the folder's other *.safetensors files), as transformers does; with a
// Variant, diffusers' former name of a variant's index
// (diffusion_pytorch_model.safetensors.fp16.index.json) after the
// current one. peft's adapters other than the default one, each in a
// subfolder named after it beside the default adapter_model.safetensors,
// are parts of the model on disk.
//
// A folder with none of these, or with several candidates and no way to
// choose, gives an error wrapping ErrNoModel that says what was looked
// for; one that holds only files of variants lists them, and one whose
// weights are in another format (pytorch_model.bin) says so. A part whose
// weights are in another format is left out, and Skipped says so.
//
// A sharded checkpoint opens every shard at once (up to eight at a time,
// in parallel over HTTP), since checking it needs every shard's header,
// and checks that the index is what the Hugging Face libraries write and
// agrees with the shards (errors wrap ErrInvalidIndex, and name the files
// and tensors involved), and that every shard is inside the index's
// folder (no "..", no absolute path, no symbolic link leading out; in a
// snapshot of the Hugging Face cache, the model's cache folder, whose
// blobs the snapshot's files link to). A tensor that a shard holds but the
// index does not list is no error: it is not readable through the
// Checkpoint, as loaders ignore it, and Unlisted names it (under Strict,
// it is an error wrapping ErrUnlistedTensor).
//
// A file on disk is opened with safetensors.NewFileReader, mapped, unless
// it is too large for the address space (on a 32-bit host, a file of 2 GiB
// or more), which is then read through the file as NewReaderAt reads it.
// A file over HTTP is read with range requests, as the remote package
// reads it: its header now, each tensor when it is asked for; ctx governs
// the requests of Open and, as for remote.OpenFile, the checkpoint's later
// reads but those given a context of their own (TensorContext, a load
// package Loader). An error never comes with a Checkpoint.
func Open(ctx context.Context, target string, opts ...Option) (*Checkpoint, error) {
	o, err := newOptions(opOpen, opts)
	if err != nil {
		return nil, err
	}
	c, _, err := open(ctx, target, o)
	return c, err
}

// open opens the model at target, as Open does, and reports whether target
// names a safetensors file.
func open(ctx context.Context, target string, o *options) (c *Checkpoint, isFile bool, err error) {
	dir, name, err := locate(target, o)
	if err != nil {
		return nil, false, err
	}
	switch {
	case name == "":
		c, err = openFolder(ctx, dir, o)
	case name == modelIndexFile || name == modulesFile:
		// The file stands for its folder, whose parts' files the
		// Variant selects.
		var data []byte
		if data, err = dir.read(ctx, name); err == nil && name == modelIndexFile {
			c, err = openPipeline(ctx, dir, data, o)
		} else if err == nil {
			c, err = openModules(ctx, dir, data, o)
		}
	case o.variant != "":
		return nil, false, fmt.Errorf("%w: Variant(%q) selects the files of a folder, and %s is a file: give its folder, or the file of the variant", safetensors.ErrInvalidOption, o.variant, target)
	case strings.HasSuffix(name, ".json"):
		var data []byte
		if data, err = dir.read(ctx, name); err == nil {
			c, err = openSharded(ctx, dir, name, data, o)
		}
	default:
		isFile = true
		var f *file
		if f, err = dir.open(ctx, name, o); err == nil {
			c = single(dir, f, variantOf(name))
		}
	}
	if err != nil {
		return nil, false, err
	}
	return c, isFile, nil
}

// urlScheme returns the scheme of target if it is a URL of the form
// scheme://..., or "".
func urlScheme(target string) string {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok || scheme == "" {
		return ""
	}
	for i, c := range scheme {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return scheme
}

// locate returns the folder target is, or the folder of the file it is
// and the file's name in it.
func locate(target string, o *options) (folder, string, error) {
	if remote.IsURL(target) {
		u, err := url.Parse(target)
		if err != nil {
			return nil, "", fmt.Errorf("checkpoint: %w", err)
		}
		base := *u
		base.RawQuery, base.Fragment, base.RawFragment = "", "", ""
		if strings.HasSuffix(u.Path, ".safetensors") || strings.HasSuffix(u.Path, ".json") {
			name := path.Base(u.Path)
			base.Path, base.RawPath = path.Dir(u.Path), ""
			file := *u
			file.Fragment, file.RawFragment = "", ""
			return &remoteFolder{base: &base, o: o, target: name, targetURL: file.String()}, name, nil
		}
		base.Path, base.RawPath = strings.TrimSuffix(base.Path, "/"), ""
		return &remoteFolder{base: &base, o: o}, "", nil
	}
	info, err := os.Stat(target)
	if err != nil {
		if scheme := urlScheme(target); scheme != "" && notExist(err) {
			// Such as hf://org/model or s3://bucket/model.safetensors.
			return nil, "", fmt.Errorf("checkpoint: %s is not a path on disk, and only http:// and https:// URLs are read, not %s:// ones: %w", target, scheme, err)
		}
		return nil, "", err
	}
	if !info.IsDir() {
		return &localFolder{dir: filepath.Dir(target)}, filepath.Base(target), nil
	}
	return &localFolder{dir: cacheSnapshot(target)}, "", nil
}

// cacheSnapshot returns the snapshot that refs/main names, for dir the
// cache folder of a model in the Hugging Face cache (models--org--name,
// with refs/ and snapshots/); otherwise dir.
func cacheSnapshot(dir string) string {
	base := filepath.Base(filepath.Clean(dir))
	if !strings.HasPrefix(base, "models--") && !strings.HasPrefix(base, "datasets--") && !strings.HasPrefix(base, "spaces--") {
		return dir
	}
	ref, err := (&localFolder{dir: dir}).read(context.Background(), "refs/main")
	if err != nil {
		return dir
	}
	rev := strings.TrimSpace(string(ref))
	if !localName(rev) || strings.Contains(rev, "/") || rev == "." {
		return dir // a revision is a commit hash, not a path
	}
	snapshot := filepath.Join(dir, "snapshots", rev)
	if info, err := os.Stat(snapshot); err == nil && info.IsDir() {
		return snapshot
	}
	return dir
}

// single returns the checkpoint of one file.
func single(dir folder, f *file, variant string) *Checkpoint {
	return &Checkpoint{dir: dir, variant: variant, files: []*file{f}, owner: true}
}

// maxOpenConcurrency bounds how many shards are opened at once.
const maxOpenConcurrency = 8

// openSharded opens the sharded checkpoint whose index, the file name in
// dir, holds data.
func openSharded(ctx context.Context, dir folder, name string, data []byte, o *options) (*Checkpoint, error) {
	indexPath := dir.path(name)
	indexErr := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidIndex, indexPath, fmt.Sprintf(format, args...))
	}
	ix, err := hfindex.Parse(data, MaxFileSize)
	if err != nil {
		if page := webPage(indexPath, data); page != "" {
			return nil, indexErr("%s", page)
		}
		return nil, indexErr("%v", err)
	}
	for name, file := range ix.WeightMap {
		if !localName(file) {
			return nil, indexErr("tensor %q: file %q is not inside the index's folder", name, file)
		}
	}
	shardDir, done, err := dir.shards(name)
	if err != nil {
		return nil, err
	}
	defer done()
	files, failed, err := openFiles(ctx, shardDir, ix.Files, o)
	if errors.Is(err, safetensors.ErrNotSafetensors) {
		// A shard of another kind, such as a Git LFS pointer: what it is
		// comes first, not the index.
		return nil, &shardError{err: err, index: indexPath}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: shard %s: %w", ErrInvalidIndex, indexPath, failed, err)
	}
	c := &Checkpoint{dir: dir, variant: indexVariant(name), index: name, indexMeta: ix.Metadata, files: files, owner: true}
	fail := func(err error) (*Checkpoint, error) {
		closeFiles(c.files)
		return nil, err
	}
	dirOf := path.Dir(name)
	for _, f := range c.files {
		if dirOf != "." {
			f.name = dirOf + "/" + f.name
		}
	}
	c.where = make(map[string]loc, len(ix.WeightMap))
	var unlisted []string
	var total uint64
	for i, f := range c.files {
		for _, t := range f.r.Header().Tensors {
			if l, dup := c.where[t.Name]; dup {
				return fail(indexErr("tensor %q is in two shards, %s and %s", t.Name, c.files[l.file].name, f.name))
			}
			c.where[t.Name] = loc{file: i, name: t.Name}
		}
	}
	for name, shard := range ix.WeightMap {
		l, ok := c.where[name]
		switch {
		case !ok:
			return fail(indexErr("tensor %q is not in its shard %s", name, shard))
		case ix.Files[l.file] != shard:
			return fail(indexErr("tensor %q is in shard %s, not in %s as the index says", name, ix.Files[l.file], shard))
		}
		info, _ := c.files[l.file].r.Info(name)
		total += info.DataOffsets[1] - info.DataOffsets[0] // no overflow: each shard's sizes sum to its data length
	}
	if err := ix.CheckTotalSize(total); err != nil {
		return fail(indexErr("%v", err))
	}
	for name := range c.where {
		if _, listed := ix.WeightMap[name]; !listed {
			unlisted = append(unlisted, name)
			delete(c.where, name)
		}
	}
	c.names = make([]string, 0, len(c.where))
	for name := range c.where {
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
	if len(unlisted) > 0 {
		slices.Sort(unlisted)
		if o.strict {
			return fail(fmt.Errorf("%w (strict): %s: %d tensors: %s", ErrUnlistedTensor, indexPath, len(unlisted), quoteNames(unlisted, 5)))
		}
		c.unlisted = unlisted
	}
	return c, nil
}

// openFiles opens the named safetensors files of dir, up to
// maxOpenConcurrency at once, as over HTTP they are best opened. Every
// file is opened, whatever the others give, so that the error is that of
// the first in order that fails, returned with its name once the others
// are closed.
func openFiles(ctx context.Context, dir folder, names []string, o *options) (files []*file, failed string, err error) {
	files = make([]*file, len(names))
	errs := make([]error, len(names))
	parallel.For(ctx, len(names), maxOpenConcurrency, func(_, i int) error {
		files[i], errs[i] = dir.open(ctx, names[i], o)
		return nil
	})
	for i, err := range errs {
		if err == nil && files[i] == nil {
			err = context.Cause(ctx) // not opened: stopped
		}
		if err != nil {
			closeFiles(files)
			return nil, names[i], err
		}
	}
	return files, "", nil
}

// closeFiles closes the files that are open.
func closeFiles(files []*file) {
	for _, f := range files {
		if f != nil {
			f.close()
		}
	}
}

// notExist reports whether err says that a file does not exist.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// shardError is the error of a shard that is not a safetensors file at
// all (a Git LFS pointer, a web page): its own diagnosis, then the index
// that lists it. It matches ErrInvalidIndex too.
type shardError struct {
	err   error // names the shard
	index string
}

func (e *shardError) Error() string {
	return "checkpoint: " + e.err.Error() + " (a shard that " + e.index + " lists)"
}

func (e *shardError) Unwrap() []error { return []error{e.err, ErrInvalidIndex} }
