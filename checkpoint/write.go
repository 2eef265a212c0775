package checkpoint

import (
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/safetensors-go/safetensors/internal/hfindex"
)

// A Writer writes a checkpoint, shard by shard, and its index last; see
// Create.
type Writer struct {
	dir        string
	base, stem string // the base name, and with the variant: model, model.fp16
	indexName  string // base.safetensors.index(.variant).json
	files      []string
	shards     []*shardWriter // parallel to files
	where      map[string]int
	index      []byte // the index file's bytes; nil for a single file
	total      uint64 // the tensors' bytes, the index's total_size
	params     uint64 // the tensors' elements, the index's total_parameters
	closed     bool
	err        error // the result of Close
	aborted    bool
}

// shardWriter is one shard being written: a safetensors Writer into a
// temporary file.
type shardWriter struct {
	w *safetensors.Writer
	f *atomicfile.File
}

// Create starts writing a checkpoint of the tensors specs describes into
// the folder dir, created as transformers creates it if it does not exist
// (os.MkdirAll, mode 0777 before the umask), splitting them as the Hugging
// Face libraries do: in the order given, each shard filled until the next
// tensor would take it past MaxShardSize bytes of tensor data, and a
// tensor larger than that in a shard of its own, placed when it comes; or,
// with the Shards option, into exactly n shards balanced by bytes. The
// shards are named model-00001-of-00003.safetensors and so on (the
// BaseName and the Variant change "model" as the libraries do:
// model.fp16-00001-of-00003.safetensors), and the index
// model.safetensors.index.json as transformers 5 writes it: keys sorted,
// two-space indents, a trailing newline, and {"total_parameters": P,
// "total_size": N} as metadata, N the tensors' bytes and P their elements.
// transformers' P is model.num_parameters(), which counts parameters, not
// tensors: the index is byte for byte what transformers writes when every
// tensor is a parameter, as in most models, but it differs for a model
// that saves buffers (not counted there) or 4-bit bitsandbytes weights
// (counted there as twice their bytes). As in those libraries, tensors
// that fit in one shard make a single file named model.safetensors, with
// no index.
//
// The FileMetadata, such as {"format": "pt"}, goes into every shard; the
// WriteOptions apply to every shard.
//
// The tensors' bytes then go through WriteTensor, in any order, from any
// number of goroutines. Until Close succeeds, the shards have temporary
// names (see safetensors.TempPattern): Close checks that every byte
// arrived and puts the checkpoint in place.
//
// A checkpoint already in dir, sharded or a single file, is replaced
// safely: on Linux and other Unix systems, at every instant of the write, a
// crash included, the folder holds a complete checkpoint, the old one or
// the new one, that Open and the Hugging Face loaders (which look for
// model.safetensors before the index) read with the right bytes. The index
// is the commit point: it is replaced atomically, after the new shards are
// in place under names the old index does not use. When the new shards'
// names are taken, as when a model is saved again with as many shards, the
// index first names the shards by their temporary names, and then, once the
// shards have hard links under their final names, by those; where hard
// links are not supported (FAT, some network file systems), the shards keep
// the temporary names, which the index lists. After the new checkpoint is
// in place, Close removes what the old one used and the new one does not:
// the shards the old index named, files named like this checkpoint's
// shards, a single file model.safetensors beside a new index, and an old
// index beside a new single file. On Windows, where a file open elsewhere
// cannot be replaced, the same order applies but a rename may fail; a
// failure before the commit point leaves the old checkpoint as it was.
func Create(dir string, specs []safetensors.TensorSpec, opts ...Option) (*Writer, error) {
	o, err := newOptions(opWrite, opts)
	if err != nil {
		return nil, err
	}
	// Check the tensors as one file would hold them: names, dtypes, shapes,
	// no name twice.
	if _, err := safetensors.NewWriter(io.Discard, specs, o.fileMeta, o.write...); err != nil {
		return nil, err
	}
	var groups [][]safetensors.TensorSpec
	var total uint64
	switch {
	case o.shards > 0 && o.shardSizeSet:
		return nil, fmt.Errorf("%w: Shards(%d) and MaxShardSize(%d) both given: they choose the shards two ways", safetensors.ErrInvalidOption, o.shards, o.maxShardSize)
	case o.shards > len(specs):
		return nil, fmt.Errorf("%w: Shards(%d): %d tensors cannot fill %d shards", safetensors.ErrInvalidOption, o.shards, len(specs), o.shards)
	case o.shards > 0:
		groups, total = splitInto(specs, o.shards)
	default:
		groups, total = splitShards(specs, uint64(o.maxShardSize))
	}
	params, err := countParameters(specs)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	stem := o.base
	if o.variant != "" {
		stem += "." + o.variant
	}
	w := &Writer{dir: dir, base: o.base, stem: stem, indexName: indexName(o.base, o.variant), where: make(map[string]int, len(specs))}
	weightMap := make(map[string]string, len(specs))
	for i, group := range groups {
		name := fileName(o.base, o.variant)
		if len(groups) > 1 {
			name = shardName(o.base, o.variant, i+1, len(groups))
		}
		f, err := atomicfile.Create(filepath.Join(dir, name))
		if err != nil {
			w.Abort()
			return nil, err
		}
		sw, err := safetensors.NewWriter(f, group, o.fileMeta, o.write...)
		if err != nil {
			f.Abort()
			w.Abort()
			return nil, err
		}
		w.files = append(w.files, name)
		w.shards = append(w.shards, &shardWriter{w: sw, f: f})
		for _, spec := range group {
			w.where[spec.Name] = i
			weightMap[spec.Name] = name
		}
	}
	if len(groups) != 1 {
		w.index = hfindex.Append(nil, params, total, weightMap)
	}
	w.total, w.params = total, params
	return w, nil
}

// splitShards splits specs into shards as huggingface_hub's
// split_state_dict_into_shards does, and returns them with the total size.
func splitShards(specs []safetensors.TensorSpec, maxSize uint64) (shards [][]safetensors.TensorSpec, total uint64) {
	var current []safetensors.TensorSpec
	var currentSize uint64
	for _, spec := range specs {
		size := specSize(spec)
		total += size
		if size > maxSize {
			shards = append(shards, []safetensors.TensorSpec{spec})
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

// splitInto splits specs, in order, into exactly n shards, n at most
// len(specs), whose largest holds the fewest bytes possible, and returns
// them with the total size. The least such largest size is found by
// bisection: a size fits when shards filled greedily up to it number at
// most n. Shards are then filled greedily up to that size, and each of the
// last tensors starts a shard of its own when as many tensors are left as
// shards to fill, which makes exactly n and keeps each within the size.
func splitInto(specs []safetensors.TensorSpec, n int) (shards [][]safetensors.TensorSpec, total uint64) {
	sizes := make([]uint64, len(specs))
	var largest uint64
	for i, spec := range specs {
		sizes[i] = specSize(spec)
		total += sizes[i] // no overflow: NewWriter checked the data section's size
		largest = max(largest, sizes[i])
	}
	// count returns how many shards the greedy split up to limit makes.
	count := func(limit uint64) int {
		k, current := 1, uint64(0)
		for _, size := range sizes {
			if current+size > limit { // no overflow: both are at most total
				k, current = k+1, 0
			}
			current += size
		}
		return k
	}
	lo, hi := largest, total // count(hi) is 1; the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		if count(mid) <= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	limit := lo
	shards = make([][]safetensors.TensorSpec, 0, n)
	start, current := 0, uint64(0)
	for i, size := range sizes {
		left := n - len(shards) - 1 // the shards to fill after the current one
		if i > start && (current+size > limit || len(specs)-i == left) {
			shards = append(shards, specs[start:i:i])
			start, current = i, 0
		}
		current += size
	}
	shards = append(shards, specs[start:])
	return shards, total
}

// specSize returns the bytes of the tensor spec describes, which
// NewWriter checked to fit in 64 bits.
func specSize(spec safetensors.TensorSpec) uint64 {
	n := uint64(spec.DType.Bits())
	for _, d := range spec.Shape {
		n *= d
	}
	return n / 8
}

// countParameters returns the number of elements of the tensors specs
// describes, which transformers writes as total_parameters.
func countParameters(specs []safetensors.TensorSpec) (uint64, error) {
	var n uint64
	for _, spec := range specs {
		elems := uint64(1)
		for _, d := range spec.Shape {
			elems *= d // no overflow: checked by NewWriter
		}
		var carry uint64
		if n, carry = bits.Add64(n, elems, 0); carry != 0 {
			return 0, fmt.Errorf("checkpoint: the tensors have more than 2^64-1 elements in all")
		}
	}
	return n, nil
}

// Files returns the names of the files the checkpoint is written to, in
// order.
func (w *Writer) Files() []string { return slices.Clone(w.files) }

// File returns the name of the file that will hold the named tensor.
func (w *Writer) File(name string) (string, error) {
	i, ok := w.where[name]
	if !ok {
		return "", &safetensors.TensorError{Name: name, Err: fmt.Errorf("%w: not one of the checkpoint's tensors", safetensors.ErrTensorNotFound)}
	}
	return w.files[i], nil
}

// WriteTensor writes the named tensor's bytes, read from r, into its
// file: exactly as many as its shape and dtype need, as
// safetensors.Writer.WriteTensorAt does. Tensors may come in any order,
// from several goroutines at once, each once: a tensor written before gives
// an error wrapping safetensors.ErrTensorWritten, and a name not in the
// checkpoint one wrapping safetensors.ErrTensorNotFound.
func (w *Writer) WriteTensor(name string, r io.Reader) error {
	i, ok := w.where[name]
	if !ok {
		return &safetensors.TensorError{Name: name, Err: fmt.Errorf("%w: not one of the checkpoint's tensors", safetensors.ErrTensorNotFound)}
	}
	return w.shards[i].w.WriteTensorAt(name, r)
}

// Close completes the checkpoint: it checks that every file received all
// its bytes and syncs it, puts the files and the index in place, and then
// removes what an earlier checkpoint in the folder left and the new one
// does not use (see Create for the order, which keeps a complete
// checkpoint in the folder at every instant). On failure before the new
// checkpoint is in place, it removes the new files and leaves the old
// checkpoint as it was. On Windows, a file of the old checkpoint that a
// process has open without sharing it for deletion, or mapped (as a
// Reader maps it), cannot be replaced: the error then wraps
// safetensors.ErrFileInUse. Close must not be called concurrently with
// WriteTensor; a second call returns the result of the first.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.aborted {
		w.err = fmt.Errorf("checkpoint: %s: %w", w.dir, safetensors.ErrClosed)
		return w.err
	}
	w.err = w.commit()
	return w.err
}

// Abort stops writing and removes the files' temporary files; the folder
// keeps the checkpoint it had. After Close, it does nothing.
func (w *Writer) Abort() {
	if !w.closed {
		w.aborted = true
	}
	for _, s := range w.shards {
		s.f.Abort()
	}
}

// Write writes tensors held in memory as a checkpoint in dir, through
// Create, which takes the same options.
func Write(dir string, tensors []safetensors.Tensor, opts ...Option) error {
	specs := make([]safetensors.TensorSpec, len(tensors))
	for i, t := range tensors {
		specs[i] = safetensors.TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	w, err := Create(dir, specs, opts...)
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
