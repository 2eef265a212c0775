package dataset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/safetensors-go/safetensors"
)

// Dataset is a dataset opened for reading; see Open. Its methods may be
// called from several goroutines, except Close.
type Dataset struct {
	dir     string
	root    *os.Root
	m       Manifest
	mode    Mode
	sep     string
	columns []Column // sorted by name

	mu      sync.Mutex
	readers map[int]*safetensors.Reader // the shards opened so far
	index   map[string]string           // tensor key → shard file, once read
	hasIdx  bool
}

// OpenOption is an option of Open.
type OpenOption func(*Dataset)

// Separator sets the separator between key and column in the tensor names
// of a key-value dataset, "__" unless the writer chose another.
func Separator(sep string) OpenOption { return func(d *Dataset) { d.sep = sep } }

// maxManifestSize bounds the manifest, which lists each shard in under 200
// bytes.
const maxManifestSize = 256 << 20

// Open opens the dataset in dir by its manifest, and checks it: the shards
// it lists exist inside dir with the sizes it gives; each is a valid
// safetensors file whose tensors match the schema (dtype, shape, and
// sample count: the leading dimension in Batch mode, the number of keys in
// KeyValue mode); the totals add up. It reads each shard's header, not its
// data. The mode is told by the tensor names: the columns' own in Batch
// mode, key + separator + column in KeyValue mode. Errors wrap
// ErrInvalidDataset and name the file.
func Open(dir string, opts ...OpenOption) (*Dataset, error) {
	d := &Dataset{dir: dir, sep: "__", readers: make(map[int]*safetensors.Reader)}
	for _, o := range opts {
		o(d)
	}
	if d.sep == "" {
		return nil, fmt.Errorf("%w: empty separator", ErrInvalidOptions)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	d.root = root
	if err := d.readManifest(); err != nil {
		root.Close()
		return nil, err
	}
	if err := d.checkShards(); err != nil {
		root.Close()
		return nil, err
	}
	if _, err := root.Stat(IndexName); err == nil {
		d.hasIdx = true
	}
	return d, nil
}

func (d *Dataset) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidDataset, d.dir, fmt.Sprintf(format, args...))
}

func (d *Dataset) readManifest() error {
	f, err := d.root.Open(ManifestName)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return err
	}
	if len(data) > maxManifestSize {
		return d.errorf("%s is larger than %d bytes", ManifestName, maxManifestSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d.m); err != nil {
		return d.errorf("%s: %v", ManifestName, err)
	}
	m := &d.m
	if m.FormatVersion != FormatVersion {
		return d.errorf("%s: format_version %q, want %q", ManifestName, m.FormatVersion, FormatVersion)
	}
	if len(m.Schema) == 0 {
		return d.errorf("%s: no schema", ManifestName)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Schema)) {
		cs := m.Schema[name]
		dt, err := safetensors.ParseDType(cs.DType)
		if err != nil || !sparkDType(dt) {
			return d.errorf("%s: column %q: dtype %q", ManifestName, name, cs.DType)
		}
		shape := make([]uint64, len(cs.Shape))
		for i, v := range cs.Shape {
			if v < 0 {
				return d.errorf("%s: column %q: shape %v", ManifestName, name, cs.Shape)
			}
			shape[i] = uint64(v)
		}
		d.columns = append(d.columns, Column{Name: name, DType: dt, Shape: shape})
	}
	var samples, size int64
	seen := make(map[string]bool)
	for _, s := range m.Shards {
		switch {
		case !filepath.IsLocal(filepath.FromSlash(s.Path)):
			return d.errorf("%s: shard %q is not inside the dataset's directory", ManifestName, s.Path)
		case seen[s.Path]:
			return d.errorf("%s: shard %q is listed twice", ManifestName, s.Path)
		case s.Samples < 0 || s.Bytes < 0:
			return d.errorf("%s: shard %q: negative count or size", ManifestName, s.Path)
		}
		seen[s.Path] = true
		samples += s.Samples
		size += s.Bytes
		if samples < 0 || size < 0 {
			return d.errorf("%s: the totals overflow", ManifestName)
		}
	}
	if samples != m.TotalSamples || size != m.TotalBytes {
		return d.errorf("%s: total_samples %d and total_bytes %d, but the shards add up to %d and %d",
			ManifestName, m.TotalSamples, m.TotalBytes, samples, size)
	}
	return nil
}

// checkShards checks every shard's size and header against the manifest,
// and tells the mode.
func (d *Dataset) checkShards() error {
	for _, s := range d.m.Shards {
		h, err := d.shardHeader(s)
		if err != nil {
			return err
		}
		mode, err := d.checkShard(s, h)
		if err != nil {
			return err
		}
		if d.mode != 0 && mode != d.mode {
			return d.errorf("shard %s is in %v mode, the ones before in %v mode", s.Path, mode, d.mode)
		}
		d.mode = mode
	}
	return nil
}

// shardHeader reads and checks the header of a shard, and its size.
func (d *Dataset) shardHeader(s Shard) (*safetensors.Header, error) {
	f, err := d.root.Open(filepath.FromSlash(s.Path))
	if err != nil {
		return nil, d.errorf("shard %s: %v", s.Path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() != s.Bytes {
		return nil, d.errorf("shard %s is %d bytes, the manifest says %d", s.Path, info.Size(), s.Bytes)
	}
	h, err := safetensors.ReadHeader(f)
	if err != nil {
		return nil, d.errorf("shard %s: %v", s.Path, err)
	}
	if h.DataOffset()+h.DataLen() != uint64(s.Bytes) {
		return nil, d.errorf("shard %s: the header describes %d bytes, the file has %d", s.Path, h.DataOffset()+h.DataLen(), s.Bytes)
	}
	return h, nil
}

// checkShard checks a shard's tensors against the schema and its sample
// count, and returns its mode.
func (d *Dataset) checkShard(s Shard, h *safetensors.Header) (Mode, error) {
	if d.isBatch(h) {
		for _, t := range h.Tensors {
			c := d.column(t.Name)
			want := append([]uint64{uint64(s.Samples)}, c.Shape...)
			if t.DType != c.DType || !slices.Equal(t.Shape, want) {
				return 0, d.errorf("shard %s: tensor %q is %v %v, the schema and sample count make it %v %v", s.Path, t.Name, t.DType, t.Shape, c.DType, want)
			}
		}
		return Batch, nil
	}
	keys := make(map[string]int)
	for _, t := range h.Tensors {
		key, c, ok := d.splitName(t.Name)
		if !ok {
			return 0, d.errorf("shard %s: tensor %q is neither a column nor key%scolumn", s.Path, t.Name, d.sep)
		}
		if t.DType != c.DType || !slices.Equal(t.Shape, c.Shape) {
			return 0, d.errorf("shard %s: tensor %q is %v %v, the schema says %v %v", s.Path, t.Name, t.DType, t.Shape, c.DType, c.Shape)
		}
		keys[key]++
	}
	for key, n := range keys {
		if n != len(d.columns) {
			return 0, d.errorf("shard %s: key %q has %d of the %d columns", s.Path, key, n, len(d.columns))
		}
	}
	if int64(len(keys)) != s.Samples {
		return 0, d.errorf("shard %s holds %d samples, the manifest says %d", s.Path, len(keys), s.Samples)
	}
	return KeyValue, nil
}

// isBatch reports whether the header's tensors are the columns themselves.
func (d *Dataset) isBatch(h *safetensors.Header) bool {
	if len(h.Tensors) != len(d.columns) {
		return false
	}
	for _, t := range h.Tensors {
		if _, ok := findColumn(d.columns, t.Name); !ok {
			return false
		}
	}
	return true
}

func (d *Dataset) column(name string) Column {
	i, _ := findColumn(d.columns, name)
	return d.columns[i]
}

// splitName splits a key-value tensor name into its key and column; when
// several columns end the name, the longest wins.
func (d *Dataset) splitName(name string) (string, Column, bool) {
	best := -1
	for i, c := range d.columns {
		if strings.HasSuffix(name, d.sep+c.Name) && (best < 0 || len(c.Name) > len(d.columns[best].Name)) {
			best = i
		}
	}
	if best < 0 {
		return "", Column{}, false
	}
	c := d.columns[best]
	return name[:len(name)-len(d.sep)-len(c.Name)], c, true
}

// Manifest returns the dataset's manifest.
func (d *Dataset) Manifest() Manifest { return d.m }

// Mode returns the dataset's mode; it is 0 for a dataset with no shards.
func (d *Dataset) Mode() Mode { return d.mode }

// Columns returns the schema's columns, sorted by name.
func (d *Dataset) Columns() []Column { return slices.Clone(d.columns) }

// shard returns the Reader of the i-th shard, opening it on first use.
func (d *Dataset) shard(i int) (*safetensors.Reader, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.readers[i]; r != nil {
		return r, nil
	}
	if d.root == nil {
		return nil, safetensors.ErrClosed
	}
	f, err := d.root.Open(filepath.FromSlash(d.m.Shards[i].Path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := safetensors.OpenFile(f)
	if err != nil {
		return nil, err
	}
	if size := r.Header().DataOffset() + r.Header().DataLen(); size != uint64(d.m.Shards[i].Bytes) {
		r.Close()
		return nil, d.errorf("shard %s changed since the dataset was opened", d.m.Shards[i].Path)
	}
	d.readers[i] = r
	return r, nil
}

// Sample is one sample: its key in KeyValue mode, where it is, and one
// tensor for each column, in the order of Columns. The tensors' Data are
// slices of the mapped shard, valid until Close.
type Sample struct {
	Key     string
	Shard   string // the shard's file name
	Index   int    // the sample's position in its shard
	Tensors []safetensors.Tensor
}

// Samples iterates over every sample, shard by shard in the manifest's
// order; within a Batch shard in order, within a KeyValue shard in the
// order of the keys. It stops at the first error, which it yields.
func (d *Dataset) Samples() iter.Seq2[Sample, error] {
	return func(yield func(Sample, error) bool) {
		for i, s := range d.m.Shards {
			r, err := d.shard(i)
			if err != nil {
				yield(Sample{}, err)
				return
			}
			if d.mode == Batch {
				if !d.batchSamples(r, s, yield) {
					return
				}
			} else if !d.kvSamples(r, s, yield) {
				return
			}
		}
	}
}

func (d *Dataset) batchSamples(r *safetensors.Reader, s Shard, yield func(Sample, error) bool) bool {
	cols := make([]safetensors.Tensor, len(d.columns))
	for j, c := range d.columns {
		t, err := r.Tensor(c.Name)
		if err != nil {
			return yield(Sample{}, err) && false
		}
		cols[j] = t
	}
	for i := range int(s.Samples) {
		smp := Sample{Shard: s.Path, Index: i, Tensors: make([]safetensors.Tensor, len(cols))}
		for j, t := range cols {
			size := len(t.Data) / int(s.Samples)
			smp.Tensors[j] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: d.columns[j].Shape, Data: t.Data[i*size : (i+1)*size]}
		}
		if !yield(smp, nil) {
			return false
		}
	}
	return true
}

func (d *Dataset) kvSamples(r *safetensors.Reader, s Shard, yield func(Sample, error) bool) bool {
	keys := make(map[string]bool)
	for _, t := range r.Header().Tensors {
		key, _, _ := d.splitName(t.Name)
		keys[key] = true
	}
	for i, key := range slices.Sorted(maps.Keys(keys)) {
		smp := Sample{Key: key, Shard: s.Path, Index: i, Tensors: make([]safetensors.Tensor, len(d.columns))}
		for j, c := range d.columns {
			t, err := r.Tensor(key + d.sep + c.Name)
			if err != nil {
				return yield(Sample{}, err) && false
			}
			smp.Tensors[j] = t
		}
		if !yield(smp, nil) {
			return false
		}
	}
	return true
}

// Batches iterates over the shards of a Batch dataset: each shard's
// tensors, one for each column in the order of Columns, shaped [samples,
// shape...]. For a KeyValue dataset it yields an error.
func (d *Dataset) Batches() iter.Seq2[[]safetensors.Tensor, error] {
	return func(yield func([]safetensors.Tensor, error) bool) {
		if d.mode == KeyValue {
			yield(nil, fmt.Errorf("%w: %s is a key-value dataset; use Samples", ErrInvalidOptions, d.dir))
			return
		}
		for i := range d.m.Shards {
			r, err := d.shard(i)
			if err != nil {
				yield(nil, err)
				return
			}
			ts := make([]safetensors.Tensor, len(d.columns))
			for j, c := range d.columns {
				if ts[j], err = r.Tensor(c.Name); err != nil {
					yield(nil, err)
					return
				}
			}
			if !yield(ts, nil) {
				return
			}
		}
	}
}

// Tensor returns the tensor of the given key, key + separator + column in
// a KeyValue dataset. With an index, it finds the shard there (the index is
// read on first use) and reads only that shard; without, it reads the
// shards' headers, from the last, until one holds the tensor. Either way, a
// key written again in a later shard is found there.
func (d *Dataset) Tensor(key string) (safetensors.Tensor, error) {
	i, err := d.find(key)
	if err != nil {
		return safetensors.Tensor{}, err
	}
	r, err := d.shard(i)
	if err != nil {
		return safetensors.Tensor{}, err
	}
	return r.Tensor(key)
}

// Shard returns the file name of the shard holding the tensor of the given
// key, found as Tensor finds it.
func (d *Dataset) Shard(key string) (string, error) {
	i, err := d.find(key)
	if err != nil {
		return "", err
	}
	return d.m.Shards[i].Path, nil
}

// find returns the number of the shard that holds the key.
func (d *Dataset) find(key string) (int, error) {
	d.mu.Lock()
	closed := d.root == nil
	d.mu.Unlock()
	if closed {
		return 0, safetensors.ErrClosed
	}
	notFound := &safetensors.TensorError{Name: key, Err: safetensors.ErrTensorNotFound}
	if d.hasIdx {
		d.mu.Lock()
		if d.index == nil {
			m, err := readIndex(d.root)
			if err != nil {
				d.mu.Unlock()
				return 0, err
			}
			d.index = m
		}
		file, ok := d.index[key]
		d.mu.Unlock()
		if !ok {
			return 0, notFound
		}
		for i, s := range d.m.Shards {
			if s.Path == file {
				return i, nil
			}
		}
		return 0, d.errorf("%s: tensor %q is in %s, which the manifest does not list", IndexName, key, file)
	}
	for i := len(d.m.Shards) - 1; i >= 0; i-- {
		s := d.m.Shards[i]
		d.mu.Lock()
		r := d.readers[i]
		d.mu.Unlock()
		var h *safetensors.Header
		if r != nil {
			h = r.Header()
		} else {
			var err error
			if h, err = d.shardHeader(s); err != nil {
				return 0, err
			}
		}
		for _, t := range h.Tensors {
			if t.Name == key {
				return i, nil
			}
		}
	}
	return 0, notFound
}

// Close closes the shards opened so far. Tensors read from the dataset
// must not be used after.
func (d *Dataset) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	for _, r := range d.readers {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}
	clear(d.readers)
	if d.root != nil {
		d.root.Close()
		d.root = nil
	}
	return err
}
