package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/safetensors-go/safetensors/internal/regular"
)

// Dataset is a dataset opened for reading; see Open. Its methods may be
// called from several goroutines, except Close.
type Dataset struct {
	dir      string
	root     *os.Root
	m        Manifest
	mode     Mode
	sep      string
	sepGiven bool     // Separator was given: a hint of key-value mode
	colNames []string // given with Columns, longest first
	readOpts []safetensors.ReadOption
	columns  []Column       // sorted by name
	shardNum map[string]int // shard path → its position in the manifest

	mu        sync.Mutex
	readers   map[int]*safetensors.Reader // the shards opened so far
	index     map[string]int              // tensor key → shard, once read
	indexKind indexKind
}

// indexKind is what _tensor_index.parquet is in a dataset's directory.
type indexKind int

const (
	noIndex   indexKind = iota
	indexFile           // a single Parquet file
	indexDir            // a directory of Parquet part files, as Spark writes it
)

// maxManifestSize bounds the manifest: a key-value dataset lists each of
// its tensors in the schema, in about 80 bytes.
const maxManifestSize = 1 << 30

// Open opens the dataset in dir by its manifest, and checks it: the shards
// it lists exist inside dir, are regular files, and have the sizes it gives;
// each is a valid safetensors file; the schema and the sample counts agree
// with the shards (below); the totals add up. It reads each shard's header,
// not its data. Errors wrap ErrInvalidDataset and name the file; a FIFO or
// other special file is refused without blocking.
//
// The mode is told by the shards' tensors. In Batch mode every shard holds
// the same tensors, one per column, each with the shard's sample count as
// its first dimension, and the schema gives each column's dtype and shape
// with a batch dimension first, as the connector writes it (a per-sample
// shape, as older versions of this package wrote, is accepted too). In
// KeyValue mode the schema has one entry per tensor, named key + separator
// + column; every key of a shard has a tensor of every column; a shard's
// sample count may exceed its keys, since the connector counts every row
// it was given, also those that a later row with the same key replaced
// (duplicatesStrategy lastWin). The same key may be in two shards (the
// connector does not catch a key given to two Spark tasks): Samples yields
// both, and Tensor finds the later one. An empty dataset ("schema": {}, no
// shards) opens with no mode and no columns.
//
// It takes the options Separator, Columns and ReadOptions; those of
// Create fail with an error wrapping safetensors.ErrInvalidOption.
func Open(dir string, opts ...Option) (*Dataset, error) {
	c, err := newConfig("Open", forOpen, opts)
	if err != nil {
		return nil, err
	}
	d := &Dataset{dir: dir, sep: c.sep, sepGiven: c.sepGiven, colNames: c.colNames, readOpts: c.readOpts, readers: make(map[int]*safetensors.Reader)}
	slices.SortFunc(d.colNames, func(a, b string) int { return len(b) - len(a) })
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
	if info, err := root.Stat(IndexName); err == nil {
		switch {
		case info.IsDir():
			d.indexKind = indexDir
		default:
			d.indexKind = indexFile // checked to be a regular file when read
		}
	}
	return d, nil
}

func (d *Dataset) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidDataset, d.dir, fmt.Sprintf(format, args...))
}

func (d *Dataset) readManifest() error {
	f, err := openRegular(d.root, d.dir, ManifestName)
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
	for _, name := range slices.Sorted(maps.Keys(m.Schema)) {
		cs := m.Schema[name]
		dt, err := safetensors.ParseDType(cs.DType)
		if err != nil || !sparkDType(dt) {
			return d.errorf("%s: schema entry %q: dtype %q", ManifestName, name, cs.DType)
		}
		for _, v := range cs.Shape {
			if v < 0 {
				return d.errorf("%s: schema entry %q: shape %v", ManifestName, name, cs.Shape)
			}
		}
	}
	var samples, size int64
	d.shardNum = make(map[string]int, len(m.Shards))
	for i, s := range m.Shards {
		switch {
		case !filepath.IsLocal(filepath.FromSlash(s.Path)):
			return d.errorf("%s: shard %q is not inside the dataset's directory", ManifestName, s.Path)
		case d.listed(s.Path):
			return d.errorf("%s: shard %q is listed twice", ManifestName, s.Path)
		case s.Samples < 0 || s.Bytes < 0:
			return d.errorf("%s: shard %q: negative count or size", ManifestName, s.Path)
		}
		d.shardNum[s.Path] = i
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
	if len(m.Shards) == 0 && len(m.Schema) > 0 {
		// An empty dataset of an older version of this package, whose
		// schema gave per-sample shapes: its columns, for Columns.
		for _, name := range slices.Sorted(maps.Keys(m.Schema)) {
			cs := m.Schema[name]
			dt, _ := safetensors.ParseDType(cs.DType)
			d.columns = append(d.columns, Column{Name: name, DType: dt, Shape: toUint64s(cs.Shape)})
		}
	}
	return nil
}

// listed reports whether a shard of the manifest, before the one being
// read, has the given path.
func (d *Dataset) listed(path string) bool {
	_, ok := d.shardNum[path]
	return ok
}

func toUint64s(s []int64) []uint64 {
	out := make([]uint64, len(s))
	for i, v := range s {
		out[i] = uint64(v)
	}
	return out
}

// checkShards reads every shard's header, tells the mode, and checks the
// shards against the manifest.
func (d *Dataset) checkShards() error {
	if len(d.m.Shards) == 0 {
		return nil
	}
	headers := make([]*safetensors.Header, len(d.m.Shards))
	for i, s := range d.m.Shards {
		h, err := d.shardHeader(s)
		if err != nil {
			return err
		}
		headers[i] = h
	}
	d.mode = d.tellMode(headers)
	if d.mode == Batch {
		return d.checkBatch(headers)
	}
	return d.checkKV(headers)
}

// tellMode tells the mode from the shards' tensors: Batch when every shard
// holds the schema's tensors and nothing else, each with the shard's
// sample count as its first dimension, unless the names split into more
// than one key at the separator (or into one, where Separator or Columns
// was given); KeyValue otherwise.
func (d *Dataset) tellMode(headers []*safetensors.Header) Mode {
	keys := make(map[string]int)
	cols := make(map[string]bool)
	splits := d.sep != "" || len(d.colNames) > 0
	for i, h := range headers {
		if len(h.Tensors) != len(d.m.Schema) {
			return KeyValue
		}
		for _, t := range h.Tensors {
			if _, ok := d.m.Schema[t.Name]; !ok || len(t.Shape) == 0 || t.Shape[0] != uint64(d.m.Shards[i].Samples) {
				return KeyValue
			}
			if splits && i == 0 {
				key, col, ok := d.splitName(t.Name)
				splits = ok
				keys[key]++
				cols[col] = true
			}
		}
	}
	// Both readings fit the shards: key-value if the names split into
	// several keys that each have every column, or into one key where the
	// caller named the separator or the columns, which only key-value
	// datasets have.
	if splits && (len(keys) > 1 || d.sepGiven || len(d.colNames) > 0) {
		for _, n := range keys {
			if n != len(cols) {
				return Batch
			}
		}
		return KeyValue
	}
	return Batch
}

// checkBatch checks Batch shards: the same tensors in each, whose dtypes
// and shapes past the first agree with each other and with the schema.
func (d *Dataset) checkBatch(headers []*safetensors.Header) error {
	for _, t := range headers[0].Tensors {
		d.columns = append(d.columns, Column{Name: t.Name, DType: t.DType, Shape: slices.Clone(t.Shape[1:])})
	}
	slices.SortFunc(d.columns, func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range d.columns {
		cs := d.m.Schema[c.Name]
		shape := toUint64s(cs.Shape)
		if cs.DType != c.DType.String() || !(len(shape) > 0 && slices.Equal(shape[1:], c.Shape) || slices.Equal(shape, c.Shape)) {
			return d.errorf("%s: schema entry %q is %s %v, the shards hold %v [n %v]", ManifestName, c.Name, cs.DType, cs.Shape, c.DType, c.Shape)
		}
	}
	for i, h := range headers {
		s := d.m.Shards[i]
		for _, t := range h.Tensors {
			c := d.column(t.Name)
			want := append([]uint64{uint64(s.Samples)}, c.Shape...)
			if t.DType != c.DType || !slices.Equal(t.Shape, want) {
				return d.errorf("shard %s: tensor %q is %v %v, the schema and sample count make it %v %v", s.Path, t.Name, t.DType, t.Shape, c.DType, want)
			}
		}
	}
	return nil
}

// checkKV checks KeyValue shards: every tensor is in the schema with its
// dtype, every schema entry is in a shard with its dtype and shape, every
// key of a shard has one tensor per column, and a shard's sample count is
// at least its number of keys.
func (d *Dataset) checkKV(headers []*safetensors.Header) error {
	cols := make(map[string]Column)
	matched := make(map[string]bool, len(d.m.Schema))
	for i, h := range headers {
		s := d.m.Shards[i]
		for _, t := range h.Tensors {
			_, col, ok := d.splitName(t.Name)
			if !ok {
				return d.errorf("shard %s: tensor %q has no separator %q; give the writer's with Separator", s.Path, t.Name, d.sep)
			}
			cs, ok := d.m.Schema[t.Name]
			if !ok {
				return d.errorf("shard %s: tensor %q is not in the schema of %s", s.Path, t.Name, ManifestName)
			}
			if cs.DType != t.DType.String() {
				return d.errorf("shard %s: tensor %q is %v, the schema says %s", s.Path, t.Name, t.DType, cs.DType)
			}
			if slices.Equal(toUint64s(cs.Shape), t.Shape) {
				matched[t.Name] = true
			}
			if _, ok := cols[col]; !ok {
				cols[col] = Column{Name: col, DType: t.DType, Shape: slices.Clone(t.Shape)}
			}
		}
	}
	for name, cs := range d.m.Schema {
		if !matched[name] {
			return d.errorf("%s: schema entry %q (%s %v) is in no shard with that shape", ManifestName, name, cs.DType, cs.Shape)
		}
	}
	d.columns = slices.SortedFunc(maps.Values(cols), func(a, b Column) int { return strings.Compare(a.Name, b.Name) })
	for i, h := range headers {
		s := d.m.Shards[i]
		counts := make(map[string]int)
		for _, t := range h.Tensors {
			key, _, _ := d.splitName(t.Name)
			counts[key]++
		}
		for key, n := range counts {
			if n != len(d.columns) {
				return d.errorf("shard %s: key %q has %d of the %d columns", s.Path, key, n, len(d.columns))
			}
		}
		if int64(len(counts)) > s.Samples && !d.tensorSamples() {
			return d.errorf("shard %s holds %d keys, more than the %d samples the manifest gives it", s.Path, len(counts), s.Samples)
		}
	}
	return nil
}

// shardHeader reads and checks the header of a shard, and its size.
func (d *Dataset) shardHeader(s Shard) (*safetensors.Header, error) {
	f, err := openRegular(d.root, d.dir, filepath.FromSlash(s.Path))
	if errors.Is(err, regular.ErrNotRegular) {
		return nil, err // it names the shard
	}
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

func (d *Dataset) column(name string) Column {
	i, _ := findColumn(d.columns, name)
	return d.columns[i]
}

// splitName splits a key-value tensor name into its key and column: at the
// longest column given with Columns that ends it after the separator, else
// at the last separator; with neither, the name is the key and the column
// is "".
func (d *Dataset) splitName(name string) (key, col string, ok bool) {
	if len(d.colNames) > 0 {
		for _, c := range d.colNames {
			if strings.HasSuffix(name, d.sep+c) {
				return name[:len(name)-len(d.sep)-len(c)], c, true
			}
		}
		return "", "", false
	}
	if d.sep == "" {
		return name, "", true
	}
	i := strings.LastIndex(name, d.sep)
	if i < 0 {
		return "", "", false
	}
	return name[:i], name[i+len(d.sep):], true
}

// tensorSamples reports whether each tensor of a key-value dataset is read
// as a sample of its own: with the empty separator and no columns given.
func (d *Dataset) tensorSamples() bool { return d.sep == "" && len(d.colNames) == 0 }

// Manifest returns the dataset's manifest.
func (d *Dataset) Manifest() Manifest { return d.m }

// Mode returns the dataset's mode; it is 0 for a dataset with no shards.
func (d *Dataset) Mode() Mode { return d.mode }

// Columns returns the columns, sorted by name. In Batch mode each has the
// shape of one sample. In KeyValue mode the dtype and shape are those of
// the column's first tensor: the connector lets them differ from key to
// key, and each sample's tensors carry their own.
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
	path := d.m.Shards[i].Path
	f, err := openRegular(d.root, d.dir, filepath.FromSlash(path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := safetensors.NewFileReader(f, d.readOpts...)
	if err != nil {
		return nil, d.errorf("shard %s: %v", path, err)
	}
	if size := r.Header().DataOffset() + r.Header().DataLen(); size != uint64(d.m.Shards[i].Bytes) {
		r.Close()
		return nil, d.errorf("shard %s changed since the dataset was opened", path)
	}
	d.readers[i] = r
	return r, nil
}

// Sample is one sample: its key in KeyValue mode, where it is, and one
// tensor for each column, in the order of Columns. The tensors' Data are
// the caller's: copies of the shard's bytes, 8-byte aligned (the
// connector does not align tensors in its shards), so that they stay
// valid after Close and the next sample, and the safetensors package's
// zero-copy views work on them.
type Sample struct {
	Key     string
	Shard   string // the shard's file name
	Index   int    // the sample's position in its shard
	Tensors []safetensors.Tensor
}

// Samples iterates over every sample, shard by shard in the manifest's
// order; within a Batch shard in order, pad samples included; within a
// KeyValue shard in the order of the keys' first tensors in the file. It
// stops at the first error, which it yields: once ctx is done, ctx's
// error, checked before each sample. Each sample's bytes are copied out of
// the shard with safetensors.GuardFaults: a shard that another process
// truncates while it is mapped gives an error wrapping both ErrShardFault
// and safetensors.ErrFileChanged, naming the shard and the tensor, not a
// crash.
func (d *Dataset) Samples(ctx context.Context) iter.Seq2[Sample, error] {
	return func(yield func(Sample, error) bool) {
		for i, s := range d.m.Shards {
			if err := ctx.Err(); err != nil {
				yield(Sample{}, err)
				return
			}
			r, err := d.shard(i)
			if err != nil {
				yield(Sample{}, err)
				return
			}
			if d.mode == Batch {
				if !d.batchSamples(ctx, r, s, yield) {
					return
				}
			} else if !d.kvSamples(ctx, r, s, yield) {
				return
			}
		}
	}
}

// copySample returns a sample of the given tensors, whose Data it copies
// into one new buffer, guarded against faults; it first checks ctx.
func (d *Dataset) copySample(ctx context.Context, smp Sample, ts []safetensors.Tensor) (Sample, error) {
	if err := ctx.Err(); err != nil {
		return Sample{}, err
	}
	// Each tensor at a multiple of 8 bytes, so that the copies are
	// aligned for views of any dtype.
	offs := make([]int, len(ts))
	n := 0
	for j, t := range ts {
		offs[j] = n
		n += (len(t.Data) + 7) &^ 7
	}
	buf := make([]byte, n)
	j := 0
	err := safetensors.GuardFaults(func() error {
		for ; j < len(ts); j++ {
			copy(buf[offs[j]:], ts[j].Data)
		}
		return nil
	})
	if err != nil {
		return Sample{}, fmt.Errorf("%w: sample %d: %w", ErrShardFault, smp.Index, &safetensors.TensorError{Name: ts[j].Name, Err: err})
	}
	smp.Tensors = make([]safetensors.Tensor, len(ts))
	for j, t := range ts {
		t.Data = buf[offs[j] : offs[j]+len(t.Data) : offs[j]+len(t.Data)]
		t.Shape = slices.Clone(t.Shape)
		smp.Tensors[j] = t
	}
	return smp, nil
}

func (d *Dataset) batchSamples(ctx context.Context, r *safetensors.Reader, s Shard, yield func(Sample, error) bool) bool {
	cols := make([]safetensors.Tensor, len(d.columns))
	for j, c := range d.columns {
		t, err := r.Tensor(c.Name)
		if err != nil {
			return yield(Sample{}, err) && false
		}
		cols[j] = t
	}
	parts := make([]safetensors.Tensor, len(cols))
	for i := range int(s.Samples) {
		for j, t := range cols {
			size := len(t.Data) / int(s.Samples)
			parts[j] = safetensors.Tensor{Name: t.Name, DType: t.DType, Shape: d.columns[j].Shape, Data: t.Data[i*size : (i+1)*size]}
		}
		smp, err := d.copySample(ctx, Sample{Shard: s.Path, Index: i}, parts)
		if err != nil {
			return yield(Sample{}, err) && false
		}
		if !yield(smp, nil) {
			return false
		}
	}
	return true
}

func (d *Dataset) kvSamples(ctx context.Context, r *safetensors.Reader, s Shard, yield func(Sample, error) bool) bool {
	// The keys in the order of their first tensor, and each key's tensors
	// by column.
	var keys []string
	byKey := make(map[string][]int)
	for k, t := range r.Header().Tensors {
		key, col, _ := d.splitName(t.Name)
		idx, ok := byKey[key]
		if !ok {
			keys = append(keys, key)
			idx = make([]int, len(d.columns))
			byKey[key] = idx
		}
		j, _ := findColumn(d.columns, col)
		idx[j] = k
	}
	parts := make([]safetensors.Tensor, len(d.columns))
	for i, key := range keys {
		for j, k := range byKey[key] {
			t, err := r.Tensor(r.Header().Tensors[k].Name)
			if err != nil {
				return yield(Sample{}, err) && false
			}
			parts[j] = t
		}
		smp, err := d.copySample(ctx, Sample{Key: key, Shard: s.Path, Index: i}, parts)
		if err != nil {
			return yield(Sample{}, err) && false
		}
		if !yield(smp, nil) {
			return false
		}
	}
	return true
}

// Batches iterates over the shards of a Batch dataset: each shard's
// tensors, one for each column in the order of Columns, shaped [samples,
// shape...]. Their Data are slices of the mapped shard (unless the dataset
// was opened with ReadOptions(safetensors.ReadAll())), valid until Close, and not aligned
// if the writer did not align them (the connector does not): reading them
// as typed slices needs Values, not the core's zero-copy views. For a
// KeyValue dataset it yields an error.
func (d *Dataset) Batches() iter.Seq2[[]safetensors.Tensor, error] {
	return func(yield func([]safetensors.Tensor, error) bool) {
		if d.mode == KeyValue {
			yield(nil, fmt.Errorf("%w: %s is a key-value dataset; use Samples", ErrWrongMode, d.dir))
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

// Tensor returns the tensor of the given name: a column's in a Batch
// shard, key + separator + column in a KeyValue dataset (whatever the
// separator, the empty one included). With an index, it finds the shard
// there (the index, a Parquet file or Spark's directory of part files, is
// read on first use) and reads only that shard; without, it reads the
// shards' headers, from the last, until one holds the tensor. Either way,
// a name written again in a later shard is found there. Data is a slice of
// the mapped shard, as from the safetensors package's Open: valid until
// Close, and touching it after another process truncated the shard faults.
func (d *Dataset) Tensor(name string) (safetensors.Tensor, error) {
	i, err := d.find(name)
	if err != nil {
		return safetensors.Tensor{}, err
	}
	r, err := d.shard(i)
	if err != nil {
		return safetensors.Tensor{}, err
	}
	return r.Tensor(name)
}

// Shard returns the file name of the shard holding the tensor of the given
// name, found as Tensor finds it.
func (d *Dataset) Shard(name string) (string, error) {
	i, err := d.find(name)
	if err != nil {
		return "", err
	}
	return d.m.Shards[i].Path, nil
}

// find returns the number of the shard that holds the tensor.
func (d *Dataset) find(name string) (int, error) {
	d.mu.Lock()
	closed := d.root == nil
	d.mu.Unlock()
	if closed {
		return 0, safetensors.ErrClosed
	}
	notFound := &safetensors.TensorError{Name: name, Err: safetensors.ErrTensorNotFound}
	if d.indexKind != noIndex {
		d.mu.Lock()
		if d.index == nil {
			m, err := d.readIndex()
			if err != nil {
				d.mu.Unlock()
				return 0, err
			}
			d.index = m
		}
		i, ok := d.index[name]
		d.mu.Unlock()
		if !ok {
			return 0, notFound
		}
		return i, nil
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
			if t.Name == name {
				return i, nil
			}
		}
	}
	return 0, notFound
}

// Close closes the shards opened so far. Tensors from Tensor and Batches
// must not be used after, unless the dataset was opened with
// ReadOptions(safetensors.ReadAll()).
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

// openRegular opens name inside root for reading without blocking, and
// refuses anything but a regular file (a FIFO, a device, a directory) with
// an error wrapping ErrInvalidDataset and safetensors.ErrNotRegular that
// names it.
func openRegular(root *os.Root, dir, name string) (*os.File, error) {
	f, err := regular.Open(root.OpenFile, name)
	if errors.Is(err, regular.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidDataset, dir, err)
	}
	return f, err
}
