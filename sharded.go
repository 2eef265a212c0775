package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors/internal/parallel"
	"github.com/safetensors-go/safetensors/internal/pyjson"
)

var (
	// ErrInvalidIndex is returned by OpenIndex for an index file that is
	// not what the Hugging Face libraries write, or that disagrees with its
	// shards: a shard missing or invalid, a tensor missing from the shard
	// the index names or present in two shards, a total_size that is not
	// the sum of the tensors' sizes, or a shard path that leaves the index's
	// directory.
	ErrInvalidIndex = errors.New("safetensors: invalid sharded checkpoint")

	// ErrUnlistedTensor is returned, under the Strict option only, by
	// OpenIndex, OpenModel and NewSharded for a checkpoint whose shards hold
	// tensors that the index does not list. Without Strict such a
	// checkpoint opens without an error: the tensors are left out, as
	// loaders leave them out, and Sharded.Unlisted names them.
	ErrUnlistedTensor = errors.New("safetensors: tensor not listed in the index")
)

// IndexSuffix ends the name of the index file of a sharded checkpoint:
// model.safetensors.index.json.
const IndexSuffix = ".safetensors.index.json"

// Sharded is a sharded checkpoint, as the Hugging Face libraries write
// large models: shards named like model-00001-of-00030.safetensors, and an
// index, model.safetensors.index.json, that maps each tensor to its shard.
// It reads the tensors of all shards as one Reader reads those of one file.
// Like a Reader, it is safe for concurrent use, except for Close.
//
// A Sharded may also be a single file, as OpenIndex opens a model that
// fits in one: then it has one shard, and reads as that file's Reader does.
type Sharded struct {
	index     string            // what errors call the index: its path or URL (the file's, for a single file)
	metadata  map[string]string // the index's "metadata" (the file's, for a single file); nil if none
	totalSize json.RawMessage   // the metadata's total_size, or nil
	files     []string          // the shards' file names, sorted
	shards    []*Reader         // parallel to files
	where     map[string]int    // tensor name → index in shards; nil for a single file
	names     []string          // sorted; nil for a single file
	unlisted  []string          // tensors the shards hold and the index does not list, sorted
}

// OpenIndex opens a model's checkpoint as transformers finds it: path is a
// sharded checkpoint's index file (any name ending in .json), a single
// safetensors file, or a directory. In a directory it looks, as
// transformers' from_pretrained does, for model.safetensors first and then
// for model.safetensors.index.json; failing both, for the one index named
// *.safetensors.index.json in it, and failing that for the one
// *.safetensors file (such as adapter_model.safetensors or
// diffusion_pytorch_model.safetensors). More than one candidate is an
// error wrapping ErrInvalidIndex, since which to choose is not known.
// (transformers also reads a file name given by config.json's
// "transformers_weights", and names with a variant, such as
// model.fp16.safetensors; give OpenIndex such a file's path.)
//
// A single file opens with Open, and gives a Sharded of one shard whose
// Metadata is the file's: it costs what Open costs, plus a look at the
// directory. A sharded checkpoint opens every shard at once with Open,
// since checking the checkpoint needs every shard's header and Open costs
// no more than that: the data is mapped, not read. It checks what
// NewSharded checks, and that every shard is inside the index's directory
// (no "..", no absolute path, no symbolic link leading out). One layout
// widens that directory: in a snapshot of the Hugging Face cache
// (.../models--org--name/snapshots/REVISION/, where every file is a link to
// ../../blobs/HASH), shards may lead anywhere inside the model's cache
// directory, .../models--org--name, and no further. Errors wrap
// ErrInvalidIndex, and what a shard's Open returned; they name the files
// and tensors involved.
//
// A tensor that a shard holds but the index does not list is no error: it
// is not readable through the Sharded, as loaders ignore it, and Unlisted
// names it. Under the Strict option it is an error wrapping
// ErrUnlistedTensor. An error never comes with a Sharded.
//
// The options go to every shard's Open; the shards share ReadInto's
// buffer, as its documentation says.
func OpenIndex(path string, opts ...ReadOption) (*Sharded, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	path, isIndex, err := findCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return openCheckpoint(path, isIndex, cfg)
}

// openCheckpoint opens the checkpoint whose file findCheckpoint found: a
// safetensors file, or an index. Its result and error are OpenIndex's.
func openCheckpoint(path string, isIndex bool, cfg *readConfig) (*Sharded, error) {
	if !isIndex {
		return openSingle(path, cfg)
	}
	data, err := readIndexFile(path)
	if err != nil {
		return nil, err
	}
	rootDir, prefix := shardRoot(filepath.Dir(path))
	root, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return NewSharded(path, data, func(shard string) (*Reader, error) {
		return openShard(root, prefix, shard, cfg)
	})
}

// shardRoot returns the directory that the shards of an index in dir must
// stay inside, and dir's path inside it: dir itself, or, for a snapshot of
// the Hugging Face cache (a directory whose parent is named "snapshots",
// and whose grandparent is the model's cache directory, named
// models--org--name, datasets--... or spaces--...), the model's cache
// directory, whose blobs the snapshot's files link to.
func shardRoot(dir string) (root, prefix string) {
	dir = filepath.Clean(dir)
	snapshots := filepath.Dir(dir)
	repo := filepath.Dir(snapshots)
	if filepath.Base(snapshots) != "snapshots" || snapshots == dir || repo == snapshots {
		return dir, ""
	}
	for _, kind := range []string{"models--", "datasets--", "spaces--"} {
		if strings.HasPrefix(filepath.Base(repo), kind) {
			return repo, filepath.Join("snapshots", filepath.Base(dir))
		}
	}
	return dir, ""
}

// openSingle opens the safetensors file at path as a Sharded of one shard.
func openSingle(path string, cfg *readConfig) (*Sharded, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	r, err := openFile(f, path, cfg)
	closeUnlessKept(f, r)
	if err != nil {
		return nil, err
	}
	return &Sharded{
		index:    path,
		metadata: r.h.Metadata,
		files:    []string{filepath.Base(path)},
		shards:   []*Reader{r},
	}, nil
}

// Names of the files that transformers looks for in a model's directory, in
// its order.
const (
	modelFile  = "model.safetensors"
	modelIndex = "model" + IndexSuffix
)

// findCheckpoint returns the file that OpenIndex opens for path, and
// whether it is an index.
func findCheckpoint(path string) (file string, isIndex bool, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", false, err
	}
	if !info.IsDir() {
		return path, strings.HasSuffix(path, ".json"), nil
	}
	for _, c := range []struct {
		name    string
		isIndex bool
	}{{modelFile, false}, {modelIndex, true}} {
		file := filepath.Join(path, c.name)
		if info, err := os.Stat(file); err == nil && info.Mode().IsRegular() {
			return file, c.isIndex, nil
		}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return "", false, err
	}
	var indexes, files []string
	for _, e := range entries {
		switch name := e.Name(); {
		case e.IsDir():
		case strings.HasSuffix(name, IndexSuffix):
			indexes = append(indexes, name)
		case strings.HasSuffix(name, ".safetensors") && !strings.HasPrefix(name, "."):
			files = append(files, name)
		}
	}
	switch {
	case len(indexes) == 1:
		return filepath.Join(path, indexes[0]), true, nil
	case len(indexes) > 1:
		return "", false, fmt.Errorf("%w: %s: %d files named *%s (%s), want one", ErrInvalidIndex, path, len(indexes), IndexSuffix, strings.Join(indexes, ", "))
	case len(files) == 1:
		return filepath.Join(path, files[0]), false, nil
	case len(files) > 1:
		return "", false, fmt.Errorf("%w: %s: no %s nor %s, and %d files named *.safetensors, want one", ErrInvalidIndex, path, modelFile, modelIndex, len(files))
	}
	return "", false, fmt.Errorf("%w: %s: no %s, %s, nor any *.safetensors file", ErrInvalidIndex, path, modelFile, modelIndex)
}

// readIndexFile reads the index file at path, of at most maxIndexSize
// bytes.
func readIndexFile(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxIndexSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrInvalidIndex, path, maxIndexSize)
	}
	return data, nil
}

// maxOpenConcurrency bounds how many shards NewSharded opens at once.
const maxOpenConcurrency = 8

// NewSharded checks the sharded checkpoint whose index file holds the bytes
// index, and returns it with every shard open: the index names its shards,
// and NewSharded calls open once for each, with the shard's file name as
// the index gives it (such as "model-00001-of-00002.safetensors", relative
// to the index's directory or URL; never absolute and never with ".."). It
// calls open for up to eight shards at once, from several goroutines, so
// that shards on a network are opened in parallel. OpenIndex is NewSharded
// with open inside the index's directory; a checkpoint elsewhere, such as
// on an HTTP server, opens its shards with NewReaderAt. name is what errors
// call the index: its path or URL.
//
// NewSharded checks that the index is a JSON object of at most
// MaxHeaderSize bytes with a "weight_map" of tensor names to file names
// (no name twice, no file name that leaves the index's directory), that
// each tensor is in the shard the index names and in no other, and that
// the total_size in the index's "metadata", when present, is the sum of
// the tensors' sizes. The index of transformers 5 also gives
// total_parameters, which NewSharded does not check, since it counts
// parameters rather than tensors (see CreateSharded), nor needs; indexes
// without it, as transformers 4 wrote them, are as good. Errors wrap
// ErrInvalidIndex, and what open returned;
// they name the index, files and tensors involved. As with OpenIndex, a
// tensor a shard holds but the index does not list is left out, and
// Unlisted names it; if open read any shard with the Strict option, it is
// an error wrapping ErrUnlistedTensor instead. An error never comes with a
// Sharded.
//
// The Sharded owns the Readers open returned: its Close closes them, and
// NewSharded closes them itself when it fails.
func NewSharded(name string, index []byte, open func(shard string) (*Reader, error)) (*Sharded, error) {
	s := &Sharded{index: name}
	weightMap, err := s.readIndex(index)
	if err != nil {
		return nil, err
	}
	unlisted, err := s.openShards(weightMap, open)
	if err != nil {
		s.Close()
		return nil, err
	}
	if len(unlisted) == 0 {
		return s, nil
	}
	slices.Sort(unlisted)
	if s.strict() {
		s.Close()
		return nil, fmt.Errorf("%w (strict): %s: %d tensors: %s", ErrUnlistedTensor, name, len(unlisted), quoteNames(unlisted, 5))
	}
	s.unlisted = unlisted
	return s, nil
}

// quoteNames quotes the first max names, and says how many more there are.
func quoteNames(names []string, max int) string {
	quoted := make([]string, min(len(names), max))
	for i := range quoted {
		quoted[i] = strconv.Quote(names[i])
	}
	if len(names) > max {
		quoted = append(quoted, fmt.Sprintf("and %d more", len(names)-max))
	}
	return strings.Join(quoted, ", ")
}

// strict reports whether any shard was read with the Strict option.
func (s *Sharded) strict() bool {
	for _, r := range s.shards {
		if r.h.strict {
			return true
		}
	}
	return false
}

// maxIndexSize bounds the index file, as MaxHeaderSize bounds a header: an
// index lists names and file names, well under 100 bytes a tensor.
const maxIndexSize = MaxHeaderSize

// readIndex checks the index file's bytes, sets s.metadata and s.files,
// and returns the weight map.
func (s *Sharded) readIndex(data []byte) (map[string]string, error) {
	if len(data) > maxIndexSize {
		return nil, s.errorf("larger than %d bytes", maxIndexSize)
	}
	var top struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap json.RawMessage            `json:"weight_map"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&top); err != nil {
		return nil, s.errorf("%v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, s.errorf("data after the JSON object")
	}
	if top.WeightMap == nil {
		return nil, s.errorf(`no "weight_map"`)
	}
	weightMap, err := decodeWeightMap(top.WeightMap)
	if err != nil {
		return nil, s.errorf("weight_map: %v", err)
	}
	if top.Metadata != nil {
		s.metadata = make(map[string]string, len(top.Metadata))
		for k, raw := range top.Metadata {
			s.metadata[k] = jsonText(raw)
		}
		s.totalSize = top.Metadata["total_size"]
	}
	files := make(map[string]bool)
	for name, file := range weightMap {
		if !files[file] && !filepath.IsLocal(filepath.FromSlash(file)) {
			return nil, s.errorf("tensor %q: shard %q is not inside the index's directory", name, file)
		}
		files[file] = true
	}
	s.files = slices.Sorted(maps.Keys(files))
	return weightMap, nil
}

// decodeWeightMap decodes a JSON object of strings, refusing a name given
// twice, which would leave a tensor's shard ambiguous.
func decodeWeightMap(raw json.RawMessage) (map[string]string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	m := make(map[string]string)
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		name := t.(string) // object keys are strings
		var file string
		if err := d.Decode(&file); err != nil {
			return nil, fmt.Errorf("tensor %q: the shard is not a string", name)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("tensor %q is listed twice", name)
		}
		m[name] = file
	}
	return m, nil
}

// openShards opens the shards with open, several at once, and checks them
// against the weight map. It returns the tensors the shards hold that the
// index does not list.
func (s *Sharded) openShards(weightMap map[string]string, open func(string) (*Reader, error)) (unlisted []string, err error) {
	s.shards = make([]*Reader, len(s.files))
	errs := make([]error, len(s.files))
	openOne := func(i int) {
		r, err := open(s.files[i])
		if err == nil && r == nil {
			err = errors.New("no Reader")
		}
		s.shards[i], errs[i] = r, err
	}
	// Every shard is opened, whatever the others give, so that the error
	// is that of the first shard in order that fails.
	parallel.For(context.Background(), len(s.files), maxOpenConcurrency, func(_, i int) error {
		openOne(i)
		return nil
	})
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%w: %s: shard %s: %w", ErrInvalidIndex, s.index, s.files[i], err)
		}
	}
	s.where = make(map[string]int, len(weightMap))
	for i, r := range s.shards {
		for _, t := range r.Header().Tensors {
			if j, dup := s.where[t.Name]; dup {
				return nil, s.errorf("tensor %q is in two shards, %s and %s", t.Name, s.files[j], s.files[i])
			}
			s.where[t.Name] = i
		}
	}
	var total uint64
	for name, file := range weightMap {
		i, ok := s.where[name]
		switch {
		case !ok:
			return nil, s.errorf("tensor %q is not in its shard %s", name, file)
		case s.files[i] != file:
			return nil, s.errorf("tensor %q is in shard %s, not in %s as the index says", name, s.files[i], file)
		}
		info, _ := s.shards[i].tensorInfo(name)
		total += info.DataOffsets[1] - info.DataOffsets[0] // no overflow: each shard's sizes sum to its data length
	}
	if err := s.checkTotalSize(total); err != nil {
		return nil, err
	}
	for name := range s.where {
		if _, listed := weightMap[name]; !listed {
			unlisted = append(unlisted, name)
			delete(s.where, name)
		}
	}
	s.names = slices.Sorted(maps.Keys(s.where))
	return unlisted, nil
}

// openShard opens the named shard of the index in directory prefix of
// root.
func openShard(root *os.Root, prefix, file string, cfg *readConfig) (*Reader, error) {
	name := filepath.Join(prefix, filepath.FromSlash(file))
	f, err := openRegularIn(root, name)
	if err != nil {
		return nil, err
	}
	r, err := openFile(f, file, cfg)
	closeUnlessKept(f, r)
	if err == nil && r.local != nil {
		// A Loader opens the file again by this path, and checks that it
		// is this file.
		r.local.path = filepath.Join(root.Name(), name)
	}
	return r, err
}

// checkTotalSize checks the metadata's total_size, if any, against the sum
// of the tensors' sizes.
func (s *Sharded) checkTotalSize(total uint64) error {
	if s.totalSize == nil {
		return nil
	}
	size, ok := jsonCount(s.totalSize)
	if !ok {
		return s.errorf("total_size is %s, not a number", s.totalSize)
	}
	if size != total {
		return s.errorf("total_size is %d, but the tensors' sizes add up to %d", size, total)
	}
	return nil
}

// jsonCount returns the value of raw, a JSON value, if it is a number whose
// value is an integer from 0 to 2^64-1. Writers in Python may write a
// float, such as 1.6e10, for an integer.
func jsonCount(raw json.RawMessage) (uint64, bool) {
	var n json.Number
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	if v, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		return v, true
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f >= math.Exp2(64) || f != math.Trunc(f) {
		return 0, false
	}
	return uint64(f), true
}

// errorf returns an error wrapping ErrInvalidIndex that names the index.
func (s *Sharded) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidIndex, s.index, fmt.Sprintf(format, args...))
}

// jsonText returns a JSON value as Sharded.Metadata gives it: a string as
// it is, anything else as its compact JSON text.
func jsonText(raw json.RawMessage) string {
	var str string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &str) == nil {
		return str
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw) // cannot happen: the decoder checked it
	}
	return b.String()
}

// Names returns the names of the tensors the index lists, sorted.
func (s *Sharded) Names() []string {
	if s.where == nil {
		return s.shards[0].Names()
	}
	return slices.Clone(s.names)
}

// Unlisted returns the names of the tensors that the shards hold and the
// index does not list, sorted: loaders ignore them, and so does the
// Sharded (they are not in Names, and Tensor does not find them), but a
// tool that reads the shards' files sees them. It is nil for a single file
// and for a checkpoint whose index lists every tensor.
func (s *Sharded) Unlisted() []string { return slices.Clone(s.unlisted) }

// Metadata returns a copy of the index's "metadata" object, as
// Reader.Metadata returns a file's: string values as they are, and other
// JSON values as their JSON text, compacted, so that transformers'
// {"total_parameters": 8030261248, "total_size": 16060522496} gives
// {"total_parameters": "8030261248", "total_size": "16060522496"}. It is
// nil if the index has no metadata or null. For a single file, it is the
// file's metadata, such as {"format": "pt"}. An index's metadata is mostly
// its bookkeeping of the checkpoint, which a single file of the same
// tensors does not have; the metadata that the model's files carry, such
// as {"format": "pt"}, is in each shard's Header.
func (s *Sharded) Metadata() map[string]string { return maps.Clone(s.metadata) }

// find returns the index in s.shards of the shard that holds the named
// tensor.
func (s *Sharded) find(name string) (int, bool) {
	if s.where == nil {
		_, ok := s.shards[0].tensorInfo(name)
		return 0, ok
	}
	i, ok := s.where[name]
	return i, ok
}

// Shards returns the file names of the shards, as the index gives them,
// sorted.
func (s *Sharded) Shards() []string { return slices.Clone(s.files) }

// Header returns the header of the named shard, one of Shards(): its
// metadata (such as {"format": "pt"}) and every tensor it holds, listed in
// the index or not. It is shared and must not be modified.
func (s *Sharded) Header(shard string) (*Header, error) {
	i, ok := slices.BinarySearch(s.files, shard)
	if !ok {
		return nil, fmt.Errorf("%s%s: no shard %q", prefix, s.index, shard)
	}
	return s.shards[i].Header(), nil
}

// Shard returns the file name of the shard that holds the named tensor.
func (s *Sharded) Shard(name string) (string, error) {
	i, ok := s.find(name)
	if !ok {
		return "", tensorErrorf(name, ErrTensorNotFound, "no such tensor in %s", s.index)
	}
	return s.files[i], nil
}

// Tensor returns the named tensor, from its shard; see Reader.Tensor.
func (s *Sharded) Tensor(name string) (Tensor, error) {
	i, ok := s.find(name)
	if !ok {
		return Tensor{}, tensorErrorf(name, ErrTensorNotFound, "no such tensor in %s", s.index)
	}
	return s.shards[i].Tensor(name)
}

// Tensors returns every tensor the index lists, shard by shard, each
// shard's in file order.
func (s *Sharded) Tensors() ([]Tensor, error) {
	if s.where == nil {
		return s.shards[0].Tensors()
	}
	out := make([]Tensor, 0, len(s.names))
	for i, r := range s.shards {
		for _, info := range r.Header().Tensors {
			if j, ok := s.where[info.Name]; !ok || j != i {
				continue // not listed
			}
			t, err := r.Tensor(info.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// Prefetch asks the system to read the named tensors ahead, from their
// shards; see Reader.Prefetch.
func (s *Sharded) Prefetch(names ...string) error {
	for _, name := range names {
		i, ok := s.find(name)
		if !ok {
			return tensorErrorf(name, ErrTensorNotFound, "no such tensor in %s", s.index)
		}
		if err := s.shards[i].Prefetch(name); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every shard. Tensors read through s must not be used after.
func (s *Sharded) Close() error {
	var errs []error
	for _, r := range s.shards {
		if r != nil { // nil for a shard NewSharded failed to open
			errs = append(errs, r.Close())
		}
	}
	return errors.Join(errs...)
}

// ShardedWriter writes a sharded checkpoint, shard by shard through
// FileWriters, and its index last; see CreateSharded.
type ShardedWriter struct {
	dir, base string
	files     []string      // the shards' file names, in order
	shards    []*FileWriter // parallel to files
	where     map[string]int
	index     []byte // the index file's bytes; nil for a single shard
	total     uint64 // the tensors' bytes, the index's total_size
	params    uint64 // the tensors' elements, the index's total_parameters
	closed    bool
	err       error // the result of Close
}

// CreateSharded starts writing a sharded checkpoint of the tensors specs
// describes into the directory dir, created as transformers creates it if
// it does not exist (os.MkdirAll, mode 0777 before the umask), splitting
// them as the Hugging Face
// libraries do: in the order given, each shard filled until the next tensor
// would take it past maxShardSize bytes of tensor data, and a tensor larger
// than maxShardSize in a shard of its own, placed when it comes. The shards
// are named base-00001-of-00030.safetensors and so on (base is "model" for
// transformers), and the index base.safetensors.index.json as transformers
// 5 writes it: keys sorted, two-space indents, a trailing newline, and
// {"total_parameters": P, "total_size": N} as metadata, N the tensors'
// bytes and P their elements. transformers' P is model.num_parameters(),
// which counts parameters, not tensors: the index is byte for byte what
// transformers writes when every tensor is a parameter, as in most
// models, but it differs for a model that saves buffers (not counted there)
// or 4-bit bitsandbytes weights (counted there as twice their bytes).
// As in those libraries, tensors that fit in one shard make a single file
// named base.safetensors, with no index.
//
// metadata, such as {"format": "pt"}, goes into every shard; the options
// apply to every shard.
//
// The tensors' bytes then go through WriteTensor, in any order, from any
// number of goroutines. Until Close succeeds, the shards have temporary
// names (see TempPattern): Close checks that every byte arrived and puts the
// checkpoint in place.
//
// A checkpoint already in dir, sharded or a single file, is replaced
// safely: on Linux and other Unix systems, at every instant of the write, a
// crash included, the directory holds a complete checkpoint, the old one or
// the new one, that OpenIndex and the Hugging Face loaders (which look for
// base.safetensors before the index) read with the right bytes. The index
// is the commit point: it is replaced atomically, after the new shards are
// in place under names the old index does not use. When the new shards'
// names are taken, as when a model is saved again with as many shards, the
// index first names the shards by their temporary names, and then, once the
// shards have hard links under their final names, by those; where hard
// links are not supported (FAT, some network file systems), the shards keep
// the temporary names, which the index lists. After the new checkpoint is
// in place, Close removes what the old one used and the new one does not:
// the shards the old index named, files named like this checkpoint's
// shards, a single file base.safetensors beside a new index, and an old
// index beside a new single file. On Windows, where a file open elsewhere
// cannot be replaced, the same order applies but a rename may fail; a
// failure before the commit point leaves the old checkpoint as it was.
func CreateSharded(dir, base string, specs []TensorSpec, maxShardSize int64, metadata map[string]string, opts ...WriteOption) (*ShardedWriter, error) {
	if maxShardSize <= 0 {
		return nil, fmt.Errorf("%smaximum shard size %d is not positive", prefix, maxShardSize)
	}
	if base == "" || !filepath.IsLocal(base) || strings.ContainsAny(base, `/\`) {
		return nil, fmt.Errorf("%sbase name %q is not a file name", prefix, base)
	}
	// Check the tensors as one file would hold them: names, dtypes, shapes,
	// no name twice.
	if _, err := planSpecs(specs, metadata, opts); err != nil {
		return nil, err
	}
	groups, total := splitShards(specs, uint64(maxShardSize))
	params, err := countParameters(specs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	w := &ShardedWriter{dir: dir, base: base, where: make(map[string]int, len(specs))}
	weightMap := make(map[string]string, len(specs))
	for i, group := range groups {
		file := base + ".safetensors"
		if len(groups) > 1 {
			file = fmt.Sprintf("%s-%05d-of-%05d.safetensors", base, i+1, len(groups))
		}
		fw, err := CreateFile(filepath.Join(dir, file), group, metadata, opts...)
		if err != nil {
			w.Abort()
			return nil, err
		}
		w.files = append(w.files, file)
		w.shards = append(w.shards, fw)
		for _, spec := range group {
			w.where[spec.Name] = i
			weightMap[spec.Name] = file
		}
	}
	if len(groups) != 1 {
		w.index = appendIndex(nil, params, total, weightMap)
	}
	w.total, w.params = total, params
	return w, nil
}

// splitShards splits specs into shards as huggingface_hub's
// split_state_dict_into_shards does, and returns them with the total size.
func splitShards(specs []TensorSpec, maxSize uint64) (shards [][]TensorSpec, total uint64) {
	var current []TensorSpec
	var currentSize uint64
	for _, spec := range specs {
		size, _ := byteSize(spec.DType, spec.Shape) // checked by planSpecs
		total += size
		if size > maxSize {
			shards = append(shards, []TensorSpec{spec})
			continue
		}
		if currentSize+size > maxSize {
			shards = append(shards, current)
			current, currentSize = nil, 0
		}
		current = append(current, spec)
		currentSize += size
	}
	if len(current) > 0 {
		shards = append(shards, current)
	}
	return shards, total
}

// countParameters returns the number of elements of the tensors specs
// describes, which transformers writes as total_parameters.
func countParameters(specs []TensorSpec) (uint64, error) {
	var n uint64
	for _, spec := range specs {
		elems := uint64(1)
		for _, d := range spec.Shape {
			elems *= d // no overflow: checked by planSpecs
		}
		var carry uint64
		if n, carry = bits.Add64(n, elems, 0); carry != 0 {
			return 0, fmt.Errorf("%sthe tensors have more than 2^64-1 elements in all", prefix)
		}
	}
	return n, nil
}

// appendIndex appends the index file as transformers 5 writes it:
// json.dumps(index, indent=2, sort_keys=True) followed by a newline, with
// {"total_parameters": params, "total_size": size} as metadata.
func appendIndex(dst []byte, params, size uint64, weightMap map[string]string) []byte {
	dst = append(dst, "{\n  \"metadata\": {\n    \"total_parameters\": "...)
	dst = strconv.AppendUint(dst, params, 10)
	dst = append(dst, ",\n    \"total_size\": "...)
	dst = strconv.AppendUint(dst, size, 10)
	dst = append(dst, "\n  },\n  \"weight_map\": {"...)
	for i, name := range slices.Sorted(maps.Keys(weightMap)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "\n    "...)
		dst = pyjson.AppendString(dst, name)
		dst = append(dst, ": "...)
		dst = pyjson.AppendString(dst, weightMap[name])
	}
	if len(weightMap) > 0 {
		dst = append(dst, "\n  "...)
	}
	return append(dst, "}\n}\n"...)
}

// Shards returns the file names of the shards, in order.
func (w *ShardedWriter) Shards() []string { return slices.Clone(w.files) }

// Shard returns the file name of the shard that will hold the named tensor.
func (w *ShardedWriter) Shard(name string) (string, error) {
	i, ok := w.where[name]
	if !ok {
		return "", tensorErrorf(name, ErrTensorNotFound, "not one of the checkpoint's tensors")
	}
	return w.files[i], nil
}

// WriteTensor writes the named tensor's bytes, read from r, into its shard:
// exactly as many as its shape and dtype need, as Writer.WriteTensorAt does.
// Tensors may come in any order, from several goroutines at once, each
// once: a tensor written before gives an error wrapping ErrTensorWritten,
// and a name not in the checkpoint one wrapping ErrTensorNotFound.
func (w *ShardedWriter) WriteTensor(name string, r io.Reader) error {
	i, ok := w.where[name]
	if !ok {
		return tensorErrorf(name, ErrTensorNotFound, "not one of the checkpoint's tensors")
	}
	return w.shards[i].WriteTensorAt(name, r)
}

// Close completes the checkpoint: it checks that every shard received all
// its bytes and syncs it, puts the shards and the index in place, and then
// removes what an earlier checkpoint in the directory left and the new one
// does not use (see CreateSharded for the order, which keeps a complete
// checkpoint in the directory at every instant). On failure before the new
// checkpoint is in place, it removes the new shards and leaves the old
// checkpoint as it was. Close must not be called concurrently with
// WriteTensor; a second call returns the result of the first.
func (w *ShardedWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	w.err = w.commit()
	return w.err
}

// Abort stops writing and removes the shards' temporary files; the
// directory keeps the checkpoint it had. After Close, it does nothing.
func (w *ShardedWriter) Abort() {
	for _, fw := range w.shards {
		fw.Abort()
	}
}

// WriteSharded writes tensors held in memory as a sharded checkpoint in
// dir, through CreateSharded.
func WriteSharded(dir, base string, tensors []Tensor, maxShardSize int64, metadata map[string]string, opts ...WriteOption) error {
	specs := make([]TensorSpec, len(tensors))
	for i, t := range tensors {
		specs[i] = TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	w, err := CreateSharded(dir, base, specs, maxShardSize, metadata, opts...)
	if err != nil {
		return err
	}
	for _, t := range tensors {
		if err := w.WriteTensor(t.Name, bytes.NewReader(t.Data)); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}
