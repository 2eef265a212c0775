package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/hfindex"
)

// A Checkpoint is a model's weights as a library saved them: one
// safetensors file, or shards and the index that maps each tensor to its
// shard, read as one set of tensors; or, for a model of several parts (a
// diffusers pipeline, a sentence-transformers model with modules in
// subfolders), the checkpoints of its parts, read as one set whose tensor
// names are those of each part behind the part's name and a slash
// ("unet/conv_in.weight"; a part in the model's own folder, such as the
// transformer of a sentence-transformers model, adds nothing). Parts
// gives each part on its own.
//
// A Checkpoint is safe for use by several goroutines at once, except for
// Close.
type Checkpoint struct {
	dir     folder // the folder of the files
	part    string // the part's name: its folder within the model's
	variant string

	index     string            // the index's file name in dir; "" for none
	indexMeta map[string]string // the index's "metadata"; nil if none

	files []*file // sorted by name
	// where maps each tensor the checkpoint holds to its file; nil for a
	// single file read whole, whose Reader finds its tensors.
	where    map[string]loc
	names    []string // sorted; nil where where is
	unlisted []string // tensors the files hold and the index does not list, sorted

	parts   []*Checkpoint // for a model of several parts
	skipped []string      // parts whose weights are in other formats, described
	owner   bool          // Close closes the files: false for a part
	closed  atomic.Bool
}

// file is one safetensors file of a checkpoint.
type file struct {
	name   string // its name in the checkpoint's folder, with "/"
	r      *safetensors.Reader
	closer io.Closer // what the Reader reads through and does not close, or nil
}

func (f *file) close() error {
	err := f.r.Close()
	if f.closer != nil {
		err = errors.Join(err, f.closer.Close())
	}
	return err
}

// loc is where a tensor is: its file, and its name there.
type loc struct {
	file int
	name string
}

// find returns where the named tensor is.
func (c *Checkpoint) find(name string) (loc, bool) {
	if c.where == nil {
		_, err := c.files[0].r.Info(name)
		return loc{0, name}, err == nil
	}
	l, ok := c.where[name]
	return l, ok
}

// notFound is the error for a tensor the checkpoint does not hold.
func (c *Checkpoint) notFound(name string) error {
	return &safetensors.TensorError{Name: name, Err: fmt.Errorf("%w in %s", safetensors.ErrTensorNotFound, c.dir.path(c.mainFile()))}
}

// mainFile returns the file that stands for the checkpoint in errors: its
// index, or its one file, or its folder.
func (c *Checkpoint) mainFile() string {
	switch {
	case c.index != "":
		return c.index
	case len(c.files) == 1 && c.parts == nil:
		return c.files[0].name
	}
	return ""
}

// Names returns the names of the tensors, sorted: those the index lists,
// for a sharded checkpoint.
func (c *Checkpoint) Names() []string {
	if c.where == nil {
		return c.files[0].r.Names()
	}
	return slices.Clone(c.names)
}

// Tensor returns the named tensor, from its file; see
// safetensors.Reader.Tensor. A file read over HTTP is read under the
// context the checkpoint was opened with.
func (c *Checkpoint) Tensor(name string) (safetensors.Tensor, error) {
	return c.tensor(nil, name)
}

// TensorContext returns the named tensor, from its file, read under ctx;
// see safetensors.Reader.TensorContext. A read over HTTP in flight is
// aborted when ctx is done.
func (c *Checkpoint) TensorContext(ctx context.Context, name string) (safetensors.Tensor, error) {
	return c.tensor(ctx, name)
}

func (c *Checkpoint) tensor(ctx context.Context, name string) (safetensors.Tensor, error) {
	l, ok := c.find(name)
	if !ok {
		return safetensors.Tensor{}, c.notFound(name)
	}
	var t safetensors.Tensor
	var err error
	if ctx == nil {
		t, err = c.files[l.file].r.Tensor(l.name)
	} else {
		t, err = c.files[l.file].r.TensorContext(ctx, l.name)
	}
	t.Name = name
	return t, c.fileError(l.file, err)
}

// fileError adds the file's name to an error of its Reader that does not
// give it.
func (c *Checkpoint) fileError(i int, err error) error {
	if err == nil {
		return nil
	}
	path := c.dir.path(c.files[i].name)
	if strings.Contains(err.Error(), path) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Tensors returns every tensor Names lists, file by file, each file's in
// file order; see safetensors.Reader.Tensors.
func (c *Checkpoint) Tensors() ([]safetensors.Tensor, error) {
	if c.where == nil {
		ts, err := c.files[0].r.Tensors()
		return ts, c.fileError(0, err)
	}
	out := make([]safetensors.Tensor, 0, len(c.names))
	for _, s := range c.sections() {
		r := c.files[s.file].r
		for _, info := range s.tensors {
			t, err := r.Tensor(info.local)
			if err != nil {
				return nil, c.fileError(s.file, err)
			}
			t.Name = info.name
			out = append(out, t)
		}
	}
	return out, nil
}

// TensorReader returns a reader of the named tensor's bytes, from its
// file; see safetensors.Reader.TensorReader.
func (c *Checkpoint) TensorReader(name string) (*io.SectionReader, error) {
	l, ok := c.find(name)
	if !ok {
		return nil, c.notFound(name)
	}
	sr, err := c.files[l.file].r.TensorReader(l.name)
	return sr, c.fileError(l.file, err)
}

// TensorElements returns the elements [start, end) of the named tensor,
// from its file, read under ctx; see safetensors.Reader.TensorElements.
func (c *Checkpoint) TensorElements(ctx context.Context, name string, start, end uint64, buf []byte) (safetensors.Tensor, error) {
	l, ok := c.find(name)
	if !ok {
		return safetensors.Tensor{}, c.notFound(name)
	}
	t, err := c.files[l.file].r.TensorElements(ctx, l.name, start, end, buf)
	t.Name = name
	return t, c.fileError(l.file, err)
}

// ReadSlice reads the named tensor's bytes, from its file, into dst,
// memory the caller owns, and returns how many it wrote: the selection the
// selectors make, or the whole tensor without selectors, contiguous, in
// row-major order; see safetensors.Reader.ReadSlice, whose errors it
// gives, behind the file's name. Info's Slice gives the selection's shape
// and size. It is read under ctx, whose end aborts a read over HTTP in
// flight. Like Reader.ReadSlice it allocates nothing once warm, from
// local files, sharded or not, and over HTTP beyond net/http's own
// allocations for each request.
func (c *Checkpoint) ReadSlice(ctx context.Context, name string, dst []byte, selectors ...safetensors.Selector) (int, error) {
	l, ok := c.find(name)
	if !ok {
		return 0, c.notFound(name)
	}
	n, err := c.files[l.file].r.ReadSlice(ctx, l.name, dst, selectors...)
	return n, c.fileError(l.file, err)
}

// Info returns the named tensor's dtype, shape and offsets in its file,
// with the name Names gives it.
func (c *Checkpoint) Info(name string) (safetensors.TensorInfo, error) {
	l, ok := c.find(name)
	if !ok {
		return safetensors.TensorInfo{}, c.notFound(name)
	}
	info, err := c.files[l.file].r.Info(l.name)
	info.Name = name
	return info, err
}

// Files returns the names of the checkpoint's safetensors files, in its
// folder (see Dir), sorted: its one file, or its shards, or those of its
// parts, behind their folders' names ("unet/diffusion_pytorch_model.safetensors").
func (c *Checkpoint) Files() []string {
	names := make([]string, len(c.files))
	for i, f := range c.files {
		names[i] = f.name
	}
	return names
}

// Header returns the header of the named file, one of Files: its metadata
// (such as {"format": "pt"}) and every tensor it holds, listed in the
// index or not, with the names the file gives them. It is shared and must
// not be modified.
func (c *Checkpoint) Header(name string) (*safetensors.Header, error) {
	i, ok := slices.BinarySearchFunc(c.files, name, func(f *file, name string) int { return strings.Compare(f.name, name) })
	if !ok {
		return nil, fmt.Errorf("checkpoint: %s: no file %q", c.dir.path(""), name)
	}
	return c.files[i].r.Header(), nil
}

// File returns the name of the file that holds the named tensor, one of
// Files.
func (c *Checkpoint) File(name string) (string, error) {
	l, ok := c.find(name)
	if !ok {
		return "", c.notFound(name)
	}
	return c.files[l.file].name, nil
}

// Index returns the name of the sharded checkpoint's index file in its
// folder, such as "model.safetensors.index.json", or "" for a checkpoint
// of one file, or of several parts.
func (c *Checkpoint) Index() string { return c.index }

// IndexMetadata returns a copy of the index's "metadata" object: string
// values as they are, and other JSON values as their JSON text, compacted,
// so that transformers' {"total_parameters": 8030261248, "total_size":
// 16060522496} gives {"total_parameters": "8030261248", "total_size":
// "16060522496"}. It is the index's bookkeeping of the checkpoint, which a
// single file of the same tensors does not have; it is nil when there is
// no index, or the index has no metadata or null.
func (c *Checkpoint) IndexMetadata() map[string]string { return maps.Clone(c.indexMeta) }

// Unlisted returns the names of the tensors that the shards hold and the
// index does not list, sorted: loaders ignore them, and so does the
// Checkpoint (they are not in Names, and Tensor does not find them), but a
// tool that reads the shards' files sees them. It is nil for a single file
// and for a checkpoint whose index lists every tensor.
func (c *Checkpoint) Unlisted() []string { return slices.Clone(c.unlisted) }

// Dir returns the folder of the checkpoint's files, in which Files and
// Index name them and ReadFile reads: a directory's path, or for a
// checkpoint read over HTTP a base URL. For a part, it is the part's
// folder.
func (c *Checkpoint) Dir() string { return c.dir.path("") }

// Part returns the part's name, its folder within the model's folder
// ("unet", "2_Dense"), for a checkpoint that Parts returned; "" for the
// checkpoint Open returned, and for a part in the model's own folder.
func (c *Checkpoint) Part() string { return c.part }

// Parts returns the checkpoints of the parts of a model of several parts,
// in the order of their names: the components of a diffusers pipeline
// that hold weights (unet, vae, text_encoder, ...), the modules of a
// sentence-transformers model that do (the transformer in the model's own
// folder, 2_Dense, ...). It is nil for a checkpoint of one part. The parts
// share the Checkpoint's files: they are closed with it, and their own
// Close does nothing.
func (c *Checkpoint) Parts() []*Checkpoint { return slices.Clone(c.parts) }

// Skipped describes the parts of a model of several parts whose weights
// are in another format than safetensors (a sentence-transformers module
// saved with safe_serialization=False, whose folder holds
// pytorch_model.bin), which the Checkpoint leaves out, one line a part:
// "2_Dense: pytorch_model.bin (weights in another format than
// safetensors, not read)". Over HTTP, a module's other formats are not
// looked for. It is nil when every part's weights are read.
func (c *Checkpoint) Skipped() []string { return slices.Clone(c.skipped) }

// Variant returns the variant the checkpoint's files are, such as "fp16"
// for diffusion_pytorch_model.fp16.safetensors, or "" for the files of no
// variant.
func (c *Checkpoint) Variant() string { return c.variant }

// ReadFile reads the named file of the checkpoint's folder (see Dir), such
// as "config.json", under ctx: from disk, or over HTTP with the options
// the checkpoint was opened with. name is slash-separated and may not
// leave the folder. A file that does not exist, or a folder, gives an
// error wrapping fs.ErrNotExist; one larger than MaxFileSize an error. A
// file on disk that is not a regular file is refused without reading it.
func (c *Checkpoint) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if !localName(name) {
		return nil, fmt.Errorf("checkpoint: %s: %q is not a file name inside the folder", c.dir.path(""), name)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", c.dir.path(name), context.Cause(ctx))
	}
	return c.dir.read(ctx, name)
}

// MaxFileSize bounds the files that ReadFile and Open read whole (indexes,
// config.json, model_index.json, modules.json), as
// safetensors.MaxHeaderSize bounds a header.
const MaxFileSize = safetensors.MaxHeaderSize

// DataSections describes the checkpoint's files for a loader, such as the
// load package's Loader, with the tensors Names lists, under those names;
// see safetensors.Reader.DataSections.
func (c *Checkpoint) DataSections() ([]safetensors.DataSection, error) {
	var out []safetensors.DataSection
	for _, s := range c.sections() {
		dss, err := c.files[s.file].r.DataSections()
		if err != nil {
			return nil, err
		}
		ds := dss[0]
		ds.Name = c.dir.path(c.files[s.file].name)
		if c.where != nil {
			r := c.files[s.file].r
			ds.Tensors = make([]safetensors.TensorInfo, len(s.tensors))
			for i, t := range s.tensors {
				info, _ := r.Info(t.local) // it is there: sections found it
				info.Name = t.name
				ds.Tensors[i] = info
			}
		}
		out = append(out, ds)
	}
	return out, nil
}

// section is the tensors of one file that the checkpoint lists, in file
// order.
type section struct {
	file    int
	tensors []sectionTensor
}

type sectionTensor struct{ name, local string }

// sections returns, file by file, the tensors the checkpoint lists.
func (c *Checkpoint) sections() []section {
	if c.where == nil {
		return []section{{file: 0}}
	}
	local := make([]map[string]string, len(c.files)) // local name → name
	for name, l := range c.where {
		if local[l.file] == nil {
			local[l.file] = make(map[string]string)
		}
		local[l.file][l.name] = name
	}
	out := make([]section, 0, len(c.files))
	for i, f := range c.files {
		s := section{file: i}
		for _, t := range f.r.Header().Tensors {
			if name, ok := local[i][t.Name]; ok {
				s.tensors = append(s.tensors, sectionTensor{name, t.Name})
			}
		}
		out = append(out, s)
	}
	return out
}

// Metadata returns the metadata of the model: that of its files' headers,
// such as {"format": "pt"}, which the Hugging Face libraries write into
// every file, together with the index's own metadata less its bookkeeping
// of the checkpoint (total_size and total_parameters, which a single file
// of the same tensors does not have), so that a sharded checkpoint and a
// single file of the same tensors and metadata have the same. A key on
// which the files, or the files and the index, disagree, or that only some
// files have, gets a value that says so and gives each one's value, such
// as
//
//	differs within the checkpoint: model-00001-of-00002.safetensors "pt", model-00002-of-00002.safetensors none
//
// It is nil when there is no such metadata.
func (c *Checkpoint) Metadata() map[string]string {
	metas := make([]map[string]string, 0, len(c.files)+1)
	names := make([]string, 0, len(c.files)+1)
	keys := map[string]bool{}
	for _, f := range c.files {
		m := f.r.Header().Metadata
		metas = append(metas, m)
		names = append(names, f.name)
		for k := range m {
			keys[k] = true
		}
	}
	nFiles := len(metas)
	index := c.IndexMetadata()
	for _, k := range hfindex.Bookkeeping {
		delete(index, k)
	}
	if len(index) > 0 {
		metas = append(metas, index)
		names = append(names, "the index")
		for k := range index {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	for k := range keys {
		// The value of the first source that has the key; the files must
		// all have it, the index need not.
		inFiles := false
		for _, m := range metas[:nFiles] {
			if _, ok := m[k]; ok {
				inFiles = true
			}
		}
		v, agree, seen := "", true, false
		for i, m := range metas {
			mv, ok := m[k]
			switch {
			case !ok && i < nFiles && inFiles:
				agree = false
			case !ok:
			case !seen:
				v, seen = mv, true
			case mv != v:
				agree = false
			}
		}
		if agree {
			out[k] = v
			continue
		}
		var b strings.Builder
		b.WriteString("differs within the checkpoint:")
		for i, m := range metas {
			mv, ok := m[k]
			if !ok && i >= nFiles {
				continue
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(" " + names[i] + " ")
			if ok {
				b.WriteString(strconv.Quote(mv))
			} else {
				b.WriteString("none")
			}
		}
		out[k] = b.String()
	}
	return out
}

// Prefetch asks the system to read the named tensors ahead, from their
// files; see safetensors.Reader.Prefetch. With no name, it asks for all.
func (c *Checkpoint) Prefetch(names ...string) error {
	if len(names) == 0 {
		var errs []error
		for _, f := range c.files {
			errs = append(errs, f.r.Prefetch())
		}
		return errors.Join(errs...)
	}
	for _, name := range names {
		l, ok := c.find(name)
		if !ok {
			return c.notFound(name)
		}
		if err := c.files[l.file].r.Prefetch(l.name); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the checkpoint's files. Tensors read through it must not be
// used after, unless they were read into memory of their own. A part's
// Close does nothing: see Parts. Close may be called more than once.
func (c *Checkpoint) Close() error {
	if !c.owner || c.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.close())
	}
	return errors.Join(errs...)
}

// String returns the checkpoint's main file or folder, for messages.
func (c *Checkpoint) String() string { return c.dir.path(c.mainFile()) }

var _ safetensors.ElementSource = (*Checkpoint)(nil)
