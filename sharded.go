package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

var (
	// ErrInvalidIndex is returned by OpenIndex for an index file that is
	// not what the Hugging Face libraries write, or that disagrees with its
	// shards: a shard missing or invalid, a tensor missing from the shard
	// the index names or present in two shards, a total_size that is not
	// the sum of the tensors' sizes, or a shard path that leaves the index's
	// directory.
	ErrInvalidIndex = errors.New("safetensors: invalid sharded checkpoint")

	// ErrUnlistedTensor is returned by OpenIndex when a shard holds tensors
	// that the index does not list, which loaders ignore. OpenIndex then
	// returns a usable Sharded along with the error, so that a caller may
	// accept such a checkpoint with errors.Is(err, ErrUnlistedTensor).
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
type Sharded struct {
	index    string         // the index file's path
	metadata map[string]any // the index's "metadata"
	files    []string       // the shards' file names, sorted
	shards   []*Reader      // parallel to files
	where    map[string]int // tensor name → index in shards
	names    []string       // sorted
}

// OpenIndex opens the sharded checkpoint whose index file is at path, or,
// if path is a directory, whose index is the one file in it named
// *.safetensors.index.json.
//
// It opens every shard at once with Open, since checking the checkpoint
// needs every shard's header and Open costs no more than that: the data is
// mapped, not read. It checks that the index is well formed, that every
// shard it names is a valid safetensors file inside the index's directory
// (no "..", no absolute path, no symbolic link leading out), that each
// tensor is in the shard the index names and in no other, and that the
// total_size in the index's metadata, when present, is the sum of the
// tensors' sizes. Errors wrap ErrInvalidIndex, and what a shard's Open
// returned; they name the files and tensors involved.
//
// A tensor that a shard holds but the index does not list is not readable
// through the Sharded (loaders ignore it), and makes OpenIndex return an
// error wrapping ErrUnlistedTensor together with a usable Sharded, which
// the caller may keep, or close.
//
// The options go to every shard's Open.
func OpenIndex(path string, opts ...ReadOption) (*Sharded, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	path, err = findIndex(path)
	if err != nil {
		return nil, err
	}
	s := &Sharded{index: path}
	weightMap, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	unlisted, err := s.openShards(weightMap, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	if len(unlisted) > 0 {
		slices.Sort(unlisted)
		more := ""
		if len(unlisted) > 5 {
			more = fmt.Sprintf(" and %d more", len(unlisted)-5)
			unlisted = unlisted[:5]
		}
		return s, fmt.Errorf("%w: %s: %s%s", ErrUnlistedTensor, path, strings.Join(unlisted, ", "), more)
	}
	return s, nil
}

// findIndex returns path if it is a file, or the one index file in it if it
// is a directory.
func findIndex(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return path, nil
	}
	matches, err := filepath.Glob(filepath.Join(globEscape(path), "*"+IndexSuffix))
	if err != nil {
		return "", err
	}
	if len(matches) != 1 {
		return "", fmt.Errorf("%w: %s: %d files named *%s, want one", ErrInvalidIndex, path, len(matches), IndexSuffix)
	}
	return matches[0], nil
}

// globEscape escapes the characters of s that filepath.Glob would take as
// a pattern.
func globEscape(s string) string {
	if filepath.Separator == '\\' {
		return s // Glob has no escapes on Windows, where * ? [ cannot be in names anyway
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// maxIndexSize bounds the index file, as MaxHeaderSize bounds a header: an
// index lists names and file names, well under 100 bytes a tensor.
const maxIndexSize = MaxHeaderSize

// readIndex reads and checks the index file, sets s.metadata and s.files,
// and returns the weight map.
func (s *Sharded) readIndex() (map[string]string, error) {
	f, err := openRegular(s.index)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxIndexSize {
		return nil, s.errorf("larger than %d bytes", maxIndexSize)
	}
	var top struct {
		Metadata  map[string]any  `json:"metadata"`
		WeightMap json.RawMessage `json:"weight_map"`
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
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
	s.metadata = top.Metadata
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

// openShards opens the shards through a root at the index's directory, so
// that no shard path leaves it, and checks them against the weight map. It
// returns the tensors the shards hold that the index does not list.
func (s *Sharded) openShards(weightMap map[string]string, cfg *readConfig) (unlisted []string, err error) {
	root, err := os.OpenRoot(filepath.Dir(s.index))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	s.where = make(map[string]int, len(weightMap))
	for i, file := range s.files {
		r, err := openShard(root, file, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: shard %s: %w", ErrInvalidIndex, s.index, file, err)
		}
		s.shards = append(s.shards, r)
		for _, t := range r.Header().Tensors {
			if j, dup := s.where[t.Name]; dup {
				return nil, s.errorf("tensor %q is in two shards, %s and %s", t.Name, s.files[j], file)
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
			unlisted = append(unlisted, strconv.Quote(name))
			delete(s.where, name)
		}
	}
	s.names = slices.Sorted(maps.Keys(s.where))
	return unlisted, nil
}

// openShard opens the named shard inside root.
func openShard(root *os.Root, file string, cfg *readConfig) (*Reader, error) {
	f, err := openRegularIn(root, filepath.FromSlash(file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return openFile(f, file, cfg)
}

// checkTotalSize checks the metadata's total_size, if any, against the sum
// of the tensors' sizes.
func (s *Sharded) checkTotalSize(total uint64) error {
	v, ok := s.metadata["total_size"]
	if !ok {
		return nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return s.errorf("total_size is %v, not a number", v)
	}
	// Writers in Python may write a float, such as 1.6e10: take any number
	// whose value is an exact integer.
	size, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil || f < 0 || f >= math.Exp2(64) || f != math.Trunc(f) {
			return s.errorf("total_size %s is not a byte count", n)
		}
		size = uint64(f)
	}
	if size != total {
		return s.errorf("total_size is %d, but the tensors' sizes add up to %d", size, total)
	}
	return nil
}

// errorf returns an error wrapping ErrInvalidIndex that names the index.
func (s *Sharded) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidIndex, s.index, fmt.Sprintf(format, args...))
}

// Names returns the names of the tensors the index lists, sorted.
func (s *Sharded) Names() []string { return slices.Clone(s.names) }

// Metadata returns the index's "metadata" object, with numbers as
// json.Number: {"total_size": 16060522496} from transformers. It is nil if
// the index has none.
func (s *Sharded) Metadata() map[string]any { return maps.Clone(s.metadata) }

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
	i, ok := s.where[name]
	if !ok {
		return "", tensorErrorf(name, ErrTensorNotFound, "no such tensor in %s", s.index)
	}
	return s.files[i], nil
}

// Tensor returns the named tensor, from its shard; see Reader.Tensor.
func (s *Sharded) Tensor(name string) (Tensor, error) {
	i, ok := s.where[name]
	if !ok {
		return Tensor{}, tensorErrorf(name, ErrTensorNotFound, "no such tensor in %s", s.index)
	}
	return s.shards[i].Tensor(name)
}

// Tensors returns every tensor the index lists, shard by shard, each
// shard's in file order.
func (s *Sharded) Tensors() ([]Tensor, error) {
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
		i, ok := s.where[name]
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
		errs = append(errs, r.Close())
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
	closed    bool
	err       error // the result of Close
}

// CreateSharded starts writing a sharded checkpoint of the tensors specs
// describes into the directory dir, splitting them as the Hugging Face
// libraries do: in the order given, each shard filled until the next tensor
// would take it past maxShardSize bytes of tensor data, and a tensor larger
// than maxShardSize in a shard of its own, placed when it comes. The shards
// are named base-00001-of-00030.safetensors and so on (base is "model" for
// transformers), and the index base.safetensors.index.json, with the keys sorted, two-space indents, a
// trailing newline and {"total_size": N} as metadata, byte for byte as
// transformers writes it. As in those libraries, tensors that fit in one
// shard make a single file named base.safetensors, with no index.
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
		w.index = appendIndex(nil, total, weightMap)
	}
	w.total = total
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

// appendIndex appends the index file as transformers writes it:
// json.dumps(index, indent=2, sort_keys=True) followed by a newline.
func appendIndex(dst []byte, total uint64, weightMap map[string]string) []byte {
	dst = append(dst, "{\n  \"metadata\": {\n    \"total_size\": "...)
	dst = strconv.AppendUint(dst, total, 10)
	dst = append(dst, "\n  },\n  \"weight_map\": {"...)
	for i, name := range slices.Sorted(maps.Keys(weightMap)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "\n    "...)
		dst = appendPythonString(dst, name)
		dst = append(dst, ": "...)
		dst = appendPythonString(dst, weightMap[name])
	}
	if len(weightMap) > 0 {
		dst = append(dst, "\n  "...)
	}
	return append(dst, "}\n}\n"...)
}

// appendPythonString appends s as Python's json.dumps quotes it by default
// (ensure_ascii): \" \\ \b \f \n \r \t, other characters outside the
// printable ASCII range as \u escapes in lowercase hexadecimal, those
// beyond the Basic Multilingual Plane as surrogate pairs. s is valid UTF-8.
func appendPythonString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\b':
			dst = append(dst, `\b`...)
		case r == '\f':
			dst = append(dst, `\f`...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r >= ' ' && r <= '~':
			dst = append(dst, byte(r))
		case r > 0xffff:
			r -= 0x10000
			dst = u(dst, 0xd800+r>>10)
			dst = u(dst, 0xdc00+r&0x3ff)
		default:
			dst = u(dst, r)
		}
	}
	return append(dst, '"')
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
// Tensors may come in any order, from several goroutines at once.
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
