package dataset

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/safetensors-go/safetensors"
)

// Tail is what Batch mode does with the last samples when they are fewer
// than BatchSize.
type Tail int

const (
	// TailDrop drops them, as the connector does by default.
	TailDrop Tail = iota
	// TailPad fills the batch up with zero samples; the shard counts
	// BatchSize samples, as the connector counts them.
	TailPad
	// TailWrite writes a shorter last shard.
	TailWrite
)

// Duplicates is what KeyValue mode does with a key given twice within a
// shard. As in the connector, a key given again after its shard was
// written is not noticed, so that memory stays bounded by one shard: it
// ends up in two shards, and Dataset.Tensor finds the later one, as if the
// last had won.
type Duplicates int

const (
	// DuplicatesFail refuses the second sample with ErrDuplicateKey.
	DuplicatesFail Duplicates = iota
	// DuplicatesLastWins replaces the first sample with the second.
	DuplicatesLastWins
)

// Options describe a dataset to write. Mode and Columns are required; the
// other fields apply to one mode and must be zero for the other.
type Options struct {
	Mode    Mode
	Columns []Column // dtypes the connector reads: F16 F32 F64 BF16 U8 I8 U16 I16 U32 I32 U64 I64

	// Batch mode.
	BatchSize int  // samples a shard, at least 1
	Tail      Tail // TailDrop by default

	// KeyValue mode.
	Separator         string     // between key and column in tensor names; "__" when empty
	TargetShardSizeMB int        // from 50 to 1000; 300 when zero
	Duplicates        Duplicates // DuplicatesFail by default

	// Index writes _tensor_index.parquet: each tensor's key, shard, shape
	// and dtype.
	Index bool

	// RoundToNearest makes WriteFloat32s and WriteKVFloat32s round to
	// nearest even when they encode F16 and BF16, instead of truncating as
	// the connector does.
	RoundToNearest bool

	// TaskID is the first number in the shards' names, from 0 to 99999, so
	// that writers of the same dataset from several processes do not pick
	// the same names; the manifest of each lists only its own shards.
	TaskID int
}

// check validates o, filling in defaults, and returns the columns sorted
// by name.
func (o *Options) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch o.Mode {
	case Batch:
		if o.BatchSize < 1 {
			return bad("batch mode needs a BatchSize of at least 1, not %d", o.BatchSize)
		}
		if o.Tail < TailDrop || o.Tail > TailWrite {
			return bad("unknown Tail %d", o.Tail)
		}
		if o.Separator != "" || o.TargetShardSizeMB != 0 || o.Duplicates != DuplicatesFail {
			return bad("Separator, TargetShardSizeMB and Duplicates are for key-value mode")
		}
	case KeyValue:
		if o.BatchSize != 0 || o.Tail != TailDrop {
			return bad("BatchSize and Tail are for batch mode; key-value mode rolls shards over by size")
		}
		if o.Separator == "" {
			o.Separator = "__"
		}
		if o.TargetShardSizeMB == 0 {
			o.TargetShardSizeMB = 300
		}
		if o.TargetShardSizeMB < 50 || o.TargetShardSizeMB > 1000 {
			return bad("TargetShardSizeMB %d is not from 50 to 1000", o.TargetShardSizeMB)
		}
		if o.Duplicates < DuplicatesFail || o.Duplicates > DuplicatesLastWins {
			return bad("unknown Duplicates %d", o.Duplicates)
		}
	default:
		return bad("Mode must be Batch or KeyValue")
	}
	if o.TaskID < 0 || o.TaskID > 99999 {
		return bad("TaskID %d is not from 0 to 99999", o.TaskID)
	}
	if len(o.Columns) == 0 {
		return bad("no columns")
	}
	seen := make(map[string]bool)
	for _, c := range o.Columns {
		switch {
		case c.Name == "":
			return bad("a column has no name")
		case seen[c.Name]:
			return bad("column %q is given twice", c.Name)
		case !sparkDType(c.DType):
			return bad("column %q: the connector does not read dtype %v", c.Name, c.DType)
		}
		seen[c.Name] = true
		n := uint64(c.DType.Bits() / 8)
		for _, d := range c.Shape {
			if d > math.MaxInt32 {
				return bad("column %q: dimension %d does not fit the connector's int shapes", c.Name, d)
			}
			if d != 0 && n > math.MaxInt32/d {
				return bad("column %q: a sample of shape %v is larger than 2 GiB", c.Name, c.Shape)
			}
			n *= d
		}
		if o.Mode == Batch && n > 0 && uint64(o.BatchSize) > (1<<40)/n {
			return bad("column %q: a batch of %d samples of %d bytes is too large", c.Name, o.BatchSize, n)
		}
	}
	return nil
}

// Writer writes a dataset, shard by shard, through the safetensors
// package's streaming writer; see Create. A Writer is for one goroutine at
// a time. Errors are sticky: after a failed write, which removes what was
// written, every call returns the same error.
type Writer struct {
	dir   string
	opts  Options
	cols  []Column // sorted by name
	uuid  string
	next  int      // the next shard's number
	err   error    // sticky
	done  bool     // closed or aborted
	paths []string // files written into place, removed by Abort

	shards       []Shard
	totalSamples int64
	totalBytes   int64

	// Batch mode: the current batch, a buffer for each column.
	batch   [][]byte
	inBatch int

	// KeyValue mode: the current shard's samples. Only this shard's: the
	// memory stays bounded by one shard however many samples are written.
	kv kvShard

	// colOffsets[i] is where column i of cols starts in a key-value
	// sample's bytes; sepInColumn is whether a column's name holds the
	// separator.
	colOffsets  []int
	sepInColumn bool

	// perm[i] is the position in cols of the column Options.Columns[i];
	// sortBuf holds a sample's values in that order.
	perm    []int
	sortBuf [][]byte

	// The index entries, spilled to a temporary file until Close.
	index    *os.File
	indexBuf *bufio.Writer
	scratch  []byte
}

// Create starts writing a dataset into dir, which is created if needed and
// must not hold a dataset already. It checks the options at once. Shards are
// written as they fill up, each atomically; Close writes the index (with
// Options.Index) and the manifest last. On any error, and with Abort,
// everything written is removed.
func Create(dir string, opts Options) (*Writer, error) {
	opts.Columns = slices.Clone(opts.Columns)
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrExists, dir)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	w := &Writer{
		dir:  dir,
		opts: opts,
		cols: slices.SortedFunc(slices.Values(opts.Columns), func(a, b Column) int { return strings.Compare(a.Name, b.Name) }),
		uuid: fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16]),
	}
	switch opts.Mode {
	case Batch:
		w.batch = make([][]byte, len(w.cols))
		for i, c := range w.cols {
			w.batch[i] = make([]byte, 0, uint64(opts.BatchSize)*c.sampleBytes())
		}
	case KeyValue:
		off := 0
		for _, c := range w.cols {
			w.colOffsets = append(w.colOffsets, off)
			off += int(c.sampleBytes())
			w.sepInColumn = w.sepInColumn || strings.Contains(c.Name, opts.Separator)
		}
	}
	w.perm = make([]int, len(opts.Columns))
	for i, c := range opts.Columns {
		w.perm[i], _ = findColumn(w.cols, c.Name)
	}
	w.sortBuf = make([][]byte, len(opts.Columns))
	if opts.Index {
		f, err := os.CreateTemp(dir, ".tensor_index-*.tmp")
		if err != nil {
			return nil, err
		}
		w.index, w.indexBuf = f, bufio.NewWriter(f)
	}
	return w, nil
}

// fail records err, removes everything written, and returns err.
func (w *Writer) fail(err error) error {
	w.Abort()
	w.err = err
	return err
}

func (w *Writer) check() error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return safetensors.ErrClosed
	}
	return nil
}

// checkValues checks that values has one value of the right size for each
// column; values are in the order of Options.Columns.
func (w *Writer) checkValues(values [][]byte) error {
	if len(values) != len(w.opts.Columns) {
		return fmt.Errorf("%w: %d values for %d columns", ErrInvalidSample, len(values), len(w.opts.Columns))
	}
	for i, c := range w.opts.Columns {
		if uint64(len(values[i])) != c.sampleBytes() {
			return fmt.Errorf("%w: column %q: %d bytes, want %d (%v %v)", ErrInvalidSample, c.Name, len(values[i]), c.sampleBytes(), c.DType, c.Shape)
		}
	}
	return nil
}

// sorted returns the values of a sample, given in the order of
// Options.Columns, in the order of w.cols, in a buffer that the next call
// reuses.
func (w *Writer) sorted(values [][]byte) [][]byte {
	for i, v := range values {
		w.sortBuf[w.perm[i]] = v
	}
	return w.sortBuf
}

// Write adds a sample in Batch mode: one value for each column, in the
// order of Options.Columns, as the little-endian bytes of the column's
// dtype and shape. The bytes are copied.
func (w *Writer) Write(values ...[]byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.opts.Mode != Batch {
		return fmt.Errorf("%w: Write is for batch mode; use WriteKV", ErrInvalidSample)
	}
	if err := w.checkValues(values); err != nil {
		return err
	}
	for i, v := range w.sorted(values) {
		w.batch[i] = append(w.batch[i], v...)
	}
	w.inBatch++
	if w.inBatch == w.opts.BatchSize {
		return w.flushBatch()
	}
	return nil
}

// WriteKV adds a sample in KeyValue mode: its key, and one value for each
// column as Write takes them. Its tensors are named key + separator +
// column.
func (w *Writer) WriteKV(key string, values ...[]byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.opts.Mode != KeyValue {
		return fmt.Errorf("%w: WriteKV is for key-value mode; use Write", ErrInvalidSample)
	}
	if err := w.checkValues(values); err != nil {
		return err
	}
	values = w.sorted(values)
	if i := w.kv.find(key); i >= 0 {
		if w.opts.Duplicates == DuplicatesFail {
			return fmt.Errorf("%w: %q", ErrDuplicateKey, key)
		}
		off := w.kv.samples[i].off // the same columns, so the same sizes
		for _, v := range values {
			off += copy(w.kv.arena[off:], v)
		}
		return nil
	}
	size, hdr := 0, 0
	for i, v := range values {
		size += len(v)
		hdr += tensorHeaderSize(key, w.opts.Separator, w.cols[i])
	}
	target := w.opts.TargetShardSizeMB << 20
	if len(w.kv.samples) > 0 && (len(w.kv.arena)+w.kv.hdrEst+size+hdr > target || w.kv.hdrEst+hdr > maxShardHeader) {
		if err := w.flushKV(); err != nil {
			return err
		}
	}
	w.kv.add(key, values)
	w.kv.hdrEst += hdr
	return nil
}

// maxShardHeader keeps a shard's header well under the reference's limit
// of 100 MB, which a shard of many small samples could reach before its
// target size.
const maxShardHeader = safetensors.MaxHeaderSize / 2

// tensorHeaderSize estimates, from above, the bytes a tensor adds to a
// header: {"name":{"dtype":"F32","shape":[...],"data_offsets":[b,e]}},
// with a name that JSON may escape.
func tensorHeaderSize(key, sep string, c Column) int {
	return 2*(len(key)+len(sep)+len(c.Name)) + 60 + 21*len(c.Shape)
}

// shardPath returns the name and path of the next shard.
func (w *Writer) shardPath() (string, string) {
	name := fmt.Sprintf("part-%05d-%04d-%s.safetensors", w.opts.TaskID, w.next, w.uuid)
	w.next++
	return name, filepath.Join(w.dir, name)
}

// flushBatch writes the current batch as a shard.
func (w *Writer) flushBatch() error {
	n := w.inBatch
	specs := make([]safetensors.TensorSpec, len(w.cols))
	for i, c := range w.cols {
		specs[i] = safetensors.TensorSpec{Name: c.Name, DType: c.DType, Shape: append([]uint64{uint64(n)}, c.Shape...)}
	}
	err := w.writeShard(specs, int64(n), func(fw *safetensors.FileWriter) error {
		for _, i := range fw.SpecOrder() { // spec i is column i
			if _, err := fw.Write(w.batch[i]); err != nil {
				return err
			}
		}
		return nil
	})
	for i := range w.batch {
		w.batch[i] = w.batch[i][:0]
	}
	w.inBatch = 0
	return err
}

// flushKV writes the current key-value shard.
func (w *Writer) flushKV() error {
	ncol := len(w.cols)
	specs := make([]safetensors.TensorSpec, 0, len(w.kv.samples)*ncol)
	// The names, as substrings of one string rather than a string each.
	var sb strings.Builder
	for i := range w.kv.samples {
		key := w.kv.key(i)
		for _, c := range w.cols {
			sb.Write(key)
			sb.WriteString(w.opts.Separator)
			sb.WriteString(c.Name)
		}
	}
	// Names can collide only if a column's name holds the separator: "a" +
	// "__" + "b__c" is "a__b" + "__" + "c".
	var seen map[string]bool
	if w.sepInColumn {
		seen = make(map[string]bool, cap(specs))
	}
	all, pos := sb.String(), 0
	for i := range w.kv.samples {
		keyLen := len(w.kv.key(i))
		for _, c := range w.cols {
			name := all[pos : pos+keyLen+len(w.opts.Separator)+len(c.Name)]
			pos += len(name)
			if seen != nil {
				if seen[name] {
					return w.fail(fmt.Errorf("%w: tensor name %q comes from two samples", ErrDuplicateKey, name))
				}
				seen[name] = true
			}
			specs = append(specs, safetensors.TensorSpec{Name: name, DType: c.DType, Shape: c.Shape})
		}
	}
	err := w.writeShard(specs, int64(len(w.kv.samples)), func(fw *safetensors.FileWriter) error {
		// The tensors in the writer's order, found by position: spec j is
		// column j%ncol of sample j/ncol, whose bytes follow the sample's
		// earlier columns in the arena. Staged in chunks of 1 MiB.
		const chunk = 1 << 20
		stage := make([]byte, 0, chunk)
		for k, j := range fw.SpecOrder() {
			off := w.kv.samples[j/ncol].off + w.colOffsets[j%ncol]
			b := w.kv.arena[off : off+int(fw.Header().Tensors[k].DataOffsets[1]-fw.Header().Tensors[k].DataOffsets[0])]
			if len(stage)+len(b) > chunk && len(stage) > 0 {
				if _, err := fw.Write(stage); err != nil {
					return err
				}
				stage = stage[:0]
			}
			if len(b) >= chunk {
				if _, err := fw.Write(b); err != nil {
					return err
				}
				continue
			}
			stage = append(stage, b...)
		}
		_, err := fw.Write(stage)
		return err
	})
	if err != nil {
		return err
	}
	w.kv.reset()
	return nil
}

// writeShard writes a shard of the given tensors, whose bytes fill writes
// in the order of the writer's header, and records it.
func (w *Writer) writeShard(specs []safetensors.TensorSpec, samples int64, fill func(*safetensors.FileWriter) error) error {
	name, path := w.shardPath()
	fw, err := safetensors.CreateFile(path, specs, nil)
	if err != nil {
		return w.fail(err)
	}
	if err := fill(fw); err != nil {
		fw.Abort()
		return w.fail(err)
	}
	if err := fw.Close(); err != nil {
		return w.fail(err)
	}
	w.paths = append(w.paths, path)
	h := fw.Header()
	size := int64(h.DataOffset() + h.DataLen())
	w.shards = append(w.shards, Shard{Path: name, Samples: samples, Bytes: size})
	w.totalSamples += samples
	w.totalBytes += size
	if w.index != nil {
		for _, t := range h.Tensors {
			if err := w.spillIndex(t, len(w.shards)-1); err != nil {
				return w.fail(err)
			}
		}
	}
	return nil
}

// spillIndex appends an index entry to the temporary file: the key's
// length and bytes, the shard's number, the dtype, the rank and the
// dimensions, as uvarints.
func (w *Writer) spillIndex(t safetensors.TensorInfo, shard int) error {
	b := w.scratch[:0]
	b = binary.AppendUvarint(b, uint64(len(t.Name)))
	b = append(b, t.Name...)
	b = binary.AppendUvarint(b, uint64(shard))
	b = binary.AppendUvarint(b, uint64(t.DType))
	b = binary.AppendUvarint(b, uint64(len(t.Shape)))
	for _, d := range t.Shape {
		b = binary.AppendUvarint(b, d)
	}
	w.scratch = b
	_, err := w.indexBuf.Write(b)
	return err
}

// Close writes what remains: the last batch as Options.Tail says, or the
// last key-value shard; then the index, with Options.Index, and the
// manifest, each atomically. On failure everything written is removed.
func (w *Writer) Close() error {
	if err := w.check(); err != nil {
		return err
	}
	switch {
	case w.opts.Mode == Batch && w.inBatch > 0:
		switch w.opts.Tail {
		case TailPad:
			for i, c := range w.cols {
				w.batch[i] = append(w.batch[i], make([]byte, uint64(w.opts.BatchSize-w.inBatch)*c.sampleBytes())...)
			}
			w.inBatch = w.opts.BatchSize
			if err := w.flushBatch(); err != nil {
				return err
			}
		case TailWrite:
			if err := w.flushBatch(); err != nil {
				return err
			}
		}
	case w.opts.Mode == KeyValue && len(w.kv.samples) > 0:
		if err := w.flushKV(); err != nil {
			return err
		}
	}
	if w.index != nil {
		if err := w.writeIndex(); err != nil {
			return w.fail(err)
		}
	}
	if err := w.writeManifest(); err != nil {
		return w.fail(err)
	}
	w.done = true
	return nil
}

// Manifest returns the manifest as Close writes it, or has written it.
func (w *Writer) Manifest() Manifest {
	m := Manifest{
		FormatVersion:      FormatVersion,
		SafetensorsVersion: SafetensorsVersion,
		TotalSamples:       w.totalSamples,
		TotalBytes:         w.totalBytes,
		Shards:             slices.Clone(w.shards),
		Schema:             make(map[string]ColumnSchema, len(w.cols)),
	}
	if m.Shards == nil {
		m.Shards = []Shard{}
	}
	for _, c := range w.cols {
		shape := make([]int64, len(c.Shape))
		for i, d := range c.Shape {
			shape[i] = int64(d)
		}
		m.Schema[c.Name] = ColumnSchema{DType: c.DType.String(), Shape: shape}
	}
	return m
}

func (w *Writer) writeManifest() error {
	data, err := json.MarshalIndent(w.Manifest(), "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(w.dir, ManifestName)
	if err := writeAtomic(path, func(f io.Writer) error {
		_, err := f.Write(append(data, '\n'))
		return err
	}); err != nil {
		return err
	}
	w.paths = append(w.paths, path)
	return nil
}

// writeAtomic writes the file at path through a temporary file in the same
// directory, synced and renamed into place.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*.tmp")
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Abort stops writing and removes every file written: the shards, the
// index, the manifest, the temporary files. Close after Abort returns
// ErrClosed.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	for _, p := range w.paths {
		os.Remove(p)
	}
	w.paths = nil
	if w.index != nil {
		w.index.Close()
		os.Remove(w.index.Name())
	}
}

// WriteFloat32s is Write for columns of dtype F32, F64, F16 or BF16, from
// float32 values; F16 and BF16 are truncated, as the connector does, or
// rounded to nearest even with Options.RoundToNearest.
func (w *Writer) WriteFloat32s(values ...[]float32) error {
	encoded, err := w.encode(values)
	if err != nil {
		return err
	}
	return w.Write(encoded...)
}

// WriteKVFloat32s is WriteKV from float32 values, encoded as WriteFloat32s
// does.
func (w *Writer) WriteKVFloat32s(key string, values ...[]float32) error {
	encoded, err := w.encode(values)
	if err != nil {
		return err
	}
	return w.WriteKV(key, encoded...)
}

// encode encodes float32 values for the columns, in order.
func (w *Writer) encode(values [][]float32) ([][]byte, error) {
	if len(values) != len(w.opts.Columns) {
		return nil, fmt.Errorf("%w: %d values for %d columns", ErrInvalidSample, len(values), len(w.opts.Columns))
	}
	r := safetensors.Truncate
	if w.opts.RoundToNearest {
		r = safetensors.RoundNearestEven
	}
	out := make([][]byte, len(values))
	for i, c := range w.opts.Columns {
		v := values[i]
		switch c.DType {
		case safetensors.F16:
			out[i] = safetensors.F32sToF16Bytes(nil, v, r)
		case safetensors.BF16:
			out[i] = safetensors.F32sToBF16Bytes(nil, v, r)
		case safetensors.F32:
			b := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			out[i] = b
		case safetensors.F64:
			b := make([]byte, 8*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint64(b[8*j:], math.Float64bits(float64(f)))
			}
			out[i] = b
		default:
			return nil, fmt.Errorf("%w: column %q is %v, not a float dtype", ErrInvalidSample, c.Name, c.DType)
		}
	}
	return out, nil
}
