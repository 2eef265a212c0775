package dataset

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/atomicfile"
)

// Tail is what Batch mode does with the last samples when they are fewer
// than BatchSize; Create takes it with TailStrategy.
type Tail int

const (
	// TailWrite writes a shorter last shard, as the connector does by
	// default (tail_strategy write).
	TailWrite Tail = iota
	// TailDrop drops them.
	TailDrop
	// TailPad fills the batch up with zero samples; the shard and the
	// manifest count BatchSize samples, as the connector counts them.
	TailPad
)

// Duplicates is what KeyValue mode does with a key given twice within a
// shard; Create takes it with DuplicatesStrategy. As in the connector, a key given again after its shard was
// written is not noticed, so that memory stays bounded by one shard: it
// ends up in two shards, and Dataset.Tensor finds the later one, as if the
// last had won.
type Duplicates int

const (
	// DuplicatesFail fails the whole dataset with ErrDuplicateKey, as the
	// connector's job fails (duplicatesStrategy fail, its default): the
	// call returns the error and everything written is removed.
	DuplicatesFail Duplicates = iota
	// DuplicatesLastWins replaces the first sample with the second, which
	// moves to the end of the shard; the shard's sample count counts both,
	// as the connector counts every row (duplicatesStrategy lastWin).
	DuplicatesLastWins
)

// Writer writes a dataset, shard by shard, through the safetensors
// package's header writer; see Create. A Writer is for one goroutine at a
// time.
//
// A sample that the Writer refuses, with an error wrapping
// ErrInvalidSample (values that do not fit the columns, a method of the
// other mode), changes nothing: no part of it is kept, and the Writer
// takes the next samples as if it had not been given. Every other error
// fails the dataset (a file that cannot be written, a key given twice with
// DuplicatesFail, two samples whose tensor names collide): the Writer
// removes everything it wrote, as Abort does, and every later call, Close
// included, returns that same error.
type Writer struct {
	dir   string
	opts  *config
	cols  []Column // sorted by name
	uuid  string
	next  int      // the next shard's number
	err   error    // sticky
	done  bool     // closed or aborted
	paths []string // files and directories written into place, removed by Abort

	shards       []Shard
	totalSamples int64
	totalBytes   int64
	first        *safetensors.Header // a Batch dataset's first shard's, for its schema

	// Batch mode: the shard being written.
	batch batchShard

	// KeyValue mode: the current shard's samples. Only this shard's: the
	// memory stays bounded by one shard however many samples are written.
	kv kvShard

	// colOffsets[i] is where column i of cols starts in a key-value
	// sample's bytes; sepInColumn is whether a column's name holds the
	// separator.
	colOffsets  []int
	sepInColumn bool

	// perm[i] is the position in cols of the column columns[i] of Create;
	// sortBuf holds a sample's values in that order. given, shapeOf and
	// shapeBuf serve WriteKVTensors: which columns a sample gave, their
	// shapes, and the sample's entry of kvShard.shapes.
	perm     []int
	sortBuf  [][]byte
	given    []bool
	shapeOf  [][]uint64
	shapeBuf []uint32

	// The hashes of the keys of the key-value shards written, which tell
	// Close the keys that may be in two shards.
	keyHashes []uint64
	keySeed   maphash.Seed

	// Every tensor written: its name, shard, dtype and shape, spilled to a
	// temporary file until Close writes the schema and the index.
	spill    *os.File
	spillBuf *bufio.Writer
	scratch  []byte
}

// Create starts writing a dataset of the given mode and columns into dir,
// which is created if needed. It checks the options at once: Batch mode
// needs BatchSize; every option is for one mode or both (see each), and
// one for the other mode fails with an error wrapping
// safetensors.ErrInvalidOption; a mode or columns that cannot make a
// dataset, with ErrInvalidColumns. The columns' dtypes
// must be those the connector reads: F16 F32 F64 BF16 U8 I8 U16 I16 U32
// I32 U64 I64.
//
// The directory must not hold a dataset, nor what a writer killed before
// its end leaves (shards part-*.safetensors without a manifest, hidden
// temporary files, an index): Create refuses it with ErrExists and names
// what it found, rather than let the connector's reader, which reads every
// shard of the directory, take another writer's shards for this dataset's.
// Shards are written as they fill up, each atomically; Close writes the
// index (with TensorIndex) and the manifest last. On any error, and with
// Abort, everything written is removed. Every file gets mode 0666 and
// every directory 0777, less the umask.
func Create(dir string, mode Mode, columns []Column, opts ...Option) (*Writer, error) {
	cfg, err := createConfig(mode, columns, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	w := &Writer{
		dir:     dir,
		opts:    cfg,
		cols:    slices.SortedFunc(slices.Values(cfg.columns), func(a, b Column) int { return strings.Compare(a.Name, b.Name) }),
		uuid:    uuid4(),
		keySeed: maphash.MakeSeed(),
	}
	switch cfg.mode {
	case Batch:
		// The shard's size, known now, must stay under 2 GiB.
		var hdr bytes.Buffer
		if _, err := safetensors.NewWriter(&hdr, w.batchSpecs(cfg.batchSize), nil); err != nil {
			return nil, fmt.Errorf("%w: BatchSize(%d): %w", safetensors.ErrInvalidOption, cfg.batchSize, err)
		}
		var size uint64
		for _, c := range w.cols {
			size += uint64(cfg.batchSize) * c.sampleBytes()
		}
		if uint64(hdr.Len())+size > maxShardSize {
			return nil, fmt.Errorf("%w: BatchSize(%d): a batch makes a shard of %d bytes, 2 GiB or more, which the connector cannot read", safetensors.ErrInvalidOption, cfg.batchSize, uint64(hdr.Len())+size)
		}
	case KeyValue:
		off := 0
		for _, c := range w.cols {
			w.colOffsets = append(w.colOffsets, off)
			off += int(c.sampleBytes())
			w.sepInColumn = w.sepInColumn || cfg.sep == "" || strings.Contains(c.Name, cfg.sep)
		}
		w.kv = newKVShard(w.cols)
		w.given, w.shapeOf = make([]bool, len(w.cols)), make([][]uint64, len(w.cols))
	}
	w.perm = make([]int, len(cfg.columns))
	for i, c := range cfg.columns {
		w.perm[i], _ = findColumn(w.cols, c.Name)
	}
	w.sortBuf = make([][]byte, len(cfg.columns))
	f, err := atomicfile.CreateTemp(dir, ".tensor_index-spill")
	if err != nil {
		return nil, err
	}
	w.spill, w.spillBuf = f, bufio.NewWriter(f)
	return w, nil
}

// uuid4 returns a random UUID, as the connector names its shards.
func uuid4() string {
	var id [16]byte
	rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// leftBehind reports whether a file name is one that a writer of a dataset
// leaves: a dataset's files, or the temporary files of this package and of
// the safetensors package, which start with a dot.
func leftBehind(name string) bool {
	switch {
	case name == ManifestName, name == IndexName:
		return true
	case strings.HasPrefix(name, "part-") && strings.HasSuffix(name, ".safetensors"):
		return true
	case strings.HasPrefix(name, ".part-"), strings.HasPrefix(name, "."+ManifestName),
		strings.HasPrefix(name, "."+IndexName), strings.HasPrefix(name, ".tensor_index-"):
		return true
	}
	return false
}

// checkEmpty returns an error wrapping ErrExists, naming the files, if dir
// holds a dataset or what a writer left behind.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var found []string
	for _, e := range entries {
		if leftBehind(e.Name()) {
			found = append(found, e.Name())
		}
	}
	switch {
	case len(found) == 0:
		return nil
	case slices.Contains(found, ManifestName):
		return fmt.Errorf("%w: %s", ErrExists, dir)
	case len(found) > 5:
		found = append(found[:5], fmt.Sprintf("and %d more", len(found)-5))
	}
	return fmt.Errorf("%w: %s holds files of a dataset writer that did not finish (%s): remove them first", ErrExists, dir, strings.Join(found, ", "))
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
// column; values are in the order of Create's columns.
func (w *Writer) checkValues(values [][]byte) error {
	if len(values) != len(w.opts.columns) {
		return fmt.Errorf("%w: %d values for %d columns", ErrInvalidSample, len(values), len(w.opts.columns))
	}
	for i, c := range w.opts.columns {
		if uint64(len(values[i])) != c.sampleBytes() {
			return fmt.Errorf("%w: column %q: %d bytes, want %d (%v %v)", ErrInvalidSample, c.Name, len(values[i]), c.sampleBytes(), c.DType, c.Shape)
		}
	}
	return nil
}

// sorted returns the values of a sample, given in the order of
// Create's columns, in the order of w.cols, in a buffer that the next call
// reuses.
func (w *Writer) sorted(values [][]byte) [][]byte {
	for i, v := range values {
		w.sortBuf[w.perm[i]] = v
	}
	return w.sortBuf
}

// WriteSample adds a sample in Batch mode: one value for each column, in
// the order of the columns given to Create, as the little-endian bytes of the column's
// dtype and shape. The bytes are copied. A shard is written each BatchSize
// samples, in pieces as they come, so that memory stays bounded whatever
// the batch size.
func (w *Writer) WriteSample(values ...[]byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.opts.mode != Batch {
		return fmt.Errorf("%w: WriteSample is for batch mode; use WriteKV", ErrInvalidSample)
	}
	if err := w.checkValues(values); err != nil {
		return err
	}
	if err := w.batchAdd(w.sorted(values)); err != nil {
		return w.fail(err)
	}
	if w.batch.n == w.opts.batchSize {
		return w.batchFinish()
	}
	return nil
}

// WriteKV adds a sample in KeyValue mode: its key, and one value for each
// column as WriteSample takes them, in the shape of its column; a column
// without a shape takes a scalar, one element (see WriteKVTensors for
// other shapes). Its tensors are named key + separator + column. As in the
// connector, a shard is written once the samples given to it reach the
// target size, counting 200 bytes of header per tensor.
func (w *Writer) WriteKV(key string, values ...[]byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.opts.mode != KeyValue {
		return fmt.Errorf("%w: WriteKV is for key-value mode; use WriteSample", ErrInvalidSample)
	}
	if err := w.checkValues(values); err != nil {
		return err
	}
	hdr, err := w.checkHeaderSize(key, nil)
	if err != nil {
		return err
	}
	return w.addKV(key, w.sorted(values), nil, hdr)
}

// WriteKVTensors adds a sample in KeyValue mode, as WriteKV does, from
// tensors that carry their shapes: one tensor for each column, in any
// order, each named after its column and of its dtype. A column with a
// shape takes a tensor of that shape only; a column without one (Shape
// nil) takes a tensor of any shape, which may differ from key to key, as
// the connector takes any shape in every row. The tensors are named key +
// separator + column in the shard, and the manifest's schema gives each
// its own shape. Each dimension must fit the connector's int shapes (at
// most 2^31-1), and a sample's tensors may hold 512 MiB in all. The bytes
// are copied.
func (w *Writer) WriteKVTensors(key string, tensors ...safetensors.Tensor) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.opts.mode != KeyValue {
		return fmt.Errorf("%w: WriteKVTensors is for key-value mode; use WriteSample", ErrInvalidSample)
	}
	if len(tensors) != len(w.cols) {
		return fmt.Errorf("%w: key %s: %d tensors for %d columns", ErrInvalidSample, quoteKey(key), len(tensors), len(w.cols))
	}
	clear(w.given)
	values := w.sortBuf
	varies := false
	var total uint64
	for _, t := range tensors {
		i, ok := findColumn(w.cols, t.Name)
		if !ok {
			return fmt.Errorf("%w: key %s: tensor %q names no column", ErrInvalidSample, quoteKey(key), t.Name)
		}
		if w.given[i] {
			return fmt.Errorf("%w: key %s: column %q is given twice", ErrInvalidSample, quoteKey(key), t.Name)
		}
		w.given[i] = true
		c := w.cols[i]
		if t.DType != c.DType {
			return fmt.Errorf("%w: key %s: column %q is %v, the tensor %v", ErrInvalidSample, quoteKey(key), c.Name, c.DType, t.DType)
		}
		if c.Shape != nil && !slices.Equal(t.Shape, c.Shape) {
			return fmt.Errorf("%w: key %s: column %q has shape %v, the tensor %s", ErrInvalidSample, quoteKey(key), c.Name, c.Shape, shapeText(t.Shape))
		}
		n, err := kvTensorBytes(t.DType, t.Shape)
		if err != nil {
			return fmt.Errorf("%w: key %s: column %q: %w", ErrInvalidSample, quoteKey(key), c.Name, err)
		}
		if uint64(len(t.Data)) != n {
			return fmt.Errorf("%w: key %s: column %q: %d bytes, want %d (%v %s)", ErrInvalidSample, quoteKey(key), c.Name, len(t.Data), n, t.DType, shapeText(t.Shape))
		}
		if total += n; total > maxKVSampleSize {
			return fmt.Errorf("%w: key %s: a sample of more than %d bytes", ErrInvalidSample, quoteKey(key), maxKVSampleSize)
		}
		varies = varies || c.Shape == nil && len(t.Shape) > 0
		values[i], w.shapeOf[i] = t.Data, t.Shape
	}
	var shapes []uint32
	if varies {
		// Each column's rank and dimensions, for the shard; checked by
		// kvTensorBytes to fit.
		shapes = w.shapeBuf[:0]
		for _, shape := range w.shapeOf {
			shapes = appendShape(shapes, shape)
		}
		w.shapeBuf = shapes
	}
	hdr, err := w.checkHeaderSize(key, shapes)
	if err != nil {
		return err
	}
	return w.addKV(key, values, shapes, hdr)
}

// checkHeaderSize returns sampleHeaderSize, or refuses a key-value sample
// whose tensors alone would make a shard's header too large.
func (w *Writer) checkHeaderSize(key string, shapes []uint32) (int, error) {
	hdr := w.sampleHeaderSize(key, shapes)
	if hdr > maxShardHeader {
		return 0, fmt.Errorf("%w: key %s: the tensors' names and shapes make a header of up to %d bytes, more than %d", ErrInvalidSample, quoteKey(key), hdr, maxShardHeader)
	}
	return hdr, nil
}

// shapeText formats a shape for an error, shortened if it has many
// dimensions.
func shapeText(shape []uint64) string {
	if len(shape) > 8 {
		return fmt.Sprintf("%v... (%d dimensions)", shape[:8], len(shape))
	}
	return fmt.Sprint(shape)
}

// quoteKey returns a key quoted for an error, or its length if it is long.
func quoteKey(key string) string {
	if len(key) > 256 {
		return fmt.Sprintf("of %d bytes", len(key))
	}
	return strconv.Quote(key)
}

// kvTensorBytes returns the size of a key-value tensor of the dtype and
// shape, or an error for a dimension that does not fit the connector's int
// shapes or a tensor larger than a sample may be.
func kvTensorBytes(dtype safetensors.DType, shape []uint64) (uint64, error) {
	n := uint64(dtype.Bits() / 8)
	zero := false
	for _, d := range shape {
		if d > math.MaxInt32 {
			return 0, fmt.Errorf("dimension %d of shape %s does not fit the connector's int shapes", d, shapeText(shape))
		}
		zero = zero || d == 0
	}
	if zero {
		return 0, nil
	}
	for _, d := range shape {
		if n > maxKVSampleSize/d {
			return 0, fmt.Errorf("shape %s of %v is more than %d bytes", shapeText(shape), dtype, maxKVSampleSize)
		}
		n *= d
	}
	return n, nil
}

// sampleHeaderSize estimates, from above, the bytes that a key-value
// sample's tensors add to a shard's header; shapes is the sample's entry
// of kvShard.shapes, or nil when its tensors have their columns' shapes.
func (w *Writer) sampleHeaderSize(key string, shapes []uint32) int {
	hdr, p := 0, 0
	for _, c := range w.cols {
		rank := len(c.Shape)
		if shapes != nil {
			rank = int(shapes[p])
			p += 1 + rank
		}
		hdr += tensorHeaderSize(key, w.opts.sep, c.Name, rank)
	}
	return hdr
}

// addKV adds a key-value sample that fits the columns: its values in the
// order of cols, its entry of kvShard.shapes, or nil when its tensors have
// their columns' shapes, and its sampleHeaderSize.
func (w *Writer) addKV(key string, values [][]byte, shapes []uint32, hdr int) error {
	size := 0
	for _, v := range values {
		size += len(v)
	}
	if w.kv.len() > 0 && w.kv.hdrEst+hdr > maxShardHeader {
		if err := w.flushKV(); err != nil {
			return err
		}
	}
	i, h := w.kv.find(key)
	if i >= 0 {
		if w.opts.duplicates == DuplicatesFail {
			return w.fail(fmt.Errorf("%w: %q in shard %04d of %s (Duplicates is DuplicatesFail; nothing was kept)", ErrDuplicateKey, key, w.next, w.dir))
		}
		w.kv.remove(i)
	}
	if i < 0 || shapes != nil {
		// A sample that replaces another adds nothing to the header,
		// unless its shapes, which may have more dimensions, are its own:
		// then it counts again, from above.
		w.kv.hdrEst += hdr
	}
	w.kv.add(key, h, values, shapes)
	w.kv.rows++
	w.kv.estimate += int64(size) + 200*int64(len(values))
	if w.kv.estimate >= int64(w.opts.targetMB)<<20 {
		return w.flushKV()
	}
	return nil
}

// maxShardHeader keeps a shard's header well under the reference's limit
// of 100 MB, which a shard of many small samples could reach before its
// target size.
const maxShardHeader = safetensors.MaxHeaderSize / 2

// tensorHeaderSize estimates, from above, the bytes a tensor of the given
// rank adds to a header:
// {"name":{"dtype":"F32","shape":[...],"data_offsets":[b,e]}}, with a
// name that JSON may escape.
func tensorHeaderSize(key, sep, column string, rank int) int {
	return 2*(len(key)+len(sep)+len(column)) + 60 + 21*rank
}

// shardName returns the name of the next shard, and counts it.
func (w *Writer) shardName() string {
	name := w.peekShardName()
	w.next++
	return name
}

// peekShardName returns the name of the next shard.
func (w *Writer) peekShardName() string {
	return fmt.Sprintf("part-%05d-%04d-%s.safetensors", w.opts.taskID, w.next, w.uuid)
}

// flushKV writes the current key-value shard.
func (w *Writer) flushKV() error {
	ncol := len(w.cols)
	live, nlive := w.kv.live(), w.kv.len()-w.kv.removed
	specs := make([]safetensors.TensorSpec, 0, nlive*ncol)
	// The names, as substrings of one string rather than a string each.
	var sb strings.Builder
	for l := range nlive {
		key := w.kv.key(liveSample(live, l))
		for _, c := range w.cols {
			sb.Write(key)
			sb.WriteString(w.opts.sep)
			sb.WriteString(c.Name)
		}
	}
	// Names can collide only if a column's name holds the separator: "a" +
	// "__" + "b__c" is "a__b" + "__" + "c".
	var seen map[string]bool
	if w.sepInColumn {
		seen = make(map[string]bool, cap(specs))
	}
	// Where samples have shapes of their own, each tensor's shape and
	// place in the arena.
	var shapes [][]uint64
	var offs []int
	if w.kv.varies {
		shapes, offs = w.kv.layout(w.cols, live, nlive)
	}
	all, pos := sb.String(), 0
	for l := range nlive {
		keyLen := len(w.kv.key(liveSample(live, l)))
		for _, c := range w.cols {
			name := all[pos : pos+keyLen+len(w.opts.sep)+len(c.Name)]
			pos += len(name)
			if seen != nil {
				if seen[name] {
					return w.fail(fmt.Errorf("%w: tensor name %q comes from two samples", ErrDuplicateKey, name))
				}
				seen[name] = true
			}
			shape := c.Shape
			if shapes != nil {
				shape = shapes[len(specs)]
			}
			specs = append(specs, safetensors.TensorSpec{Name: name, DType: c.DType, Shape: shape})
		}
	}
	name := w.shardName()
	path := filepath.Join(w.dir, name)
	fw, err := safetensors.CreateFile(path, specs, nil)
	if err != nil {
		return w.fail(err)
	}
	// The tensors in the writer's order, found by position: spec j is
	// column j%ncol of live sample j/ncol, whose bytes follow the sample's
	// earlier columns in the arena. Staged in chunks of 1 MiB.
	const chunk = 1 << 20
	stage := make([]byte, 0, chunk)
	for k, j := range fw.SpecOrder() {
		var off int
		if offs != nil {
			off = offs[j]
		} else {
			off = w.kv.off(liveSample(live, j/ncol)) + w.colOffsets[j%ncol]
		}
		t := fw.Header().Tensors[k]
		b := w.kv.arena[off : off+int(t.DataOffsets[1]-t.DataOffsets[0])]
		if len(stage)+len(b) > chunk && len(stage) > 0 {
			if _, err = fw.Write(stage); err != nil {
				break
			}
			stage = stage[:0]
		}
		if len(b) >= chunk {
			if _, err = fw.Write(b); err != nil {
				break
			}
			continue
		}
		stage = append(stage, b...)
	}
	if err == nil {
		_, err = fw.Write(stage)
	}
	if err != nil {
		fw.Abort()
		return w.fail(err)
	}
	if err := fw.Close(); err != nil {
		return w.fail(err)
	}
	if err := w.recordShard(name, int64(w.kv.rows), fw.Header()); err != nil {
		return err
	}
	w.keyHashes = slices.Grow(w.keyHashes, nlive)
	for l := range nlive {
		w.keyHashes = append(w.keyHashes, maphash.Bytes(w.keySeed, w.kv.key(liveSample(live, l))))
	}
	w.kv.reset()
	return nil
}

// recordShard records a shard written into place, and spills its tensors.
func (w *Writer) recordShard(name string, samples int64, h *safetensors.Header) error {
	w.paths = append(w.paths, filepath.Join(w.dir, name))
	size := int64(h.DataOffset() + h.DataLen())
	w.shards = append(w.shards, Shard{Path: name, Samples: samples, Bytes: size})
	w.totalSamples += samples
	w.totalBytes += size
	if w.first == nil && w.opts.mode == Batch {
		// Only a batch header, of one tensor a column, is kept: a
		// key-value header may hold a million tensors.
		w.first = h
	}
	for _, t := range h.Tensors {
		if err := w.spillTensor(t, len(w.shards)-1); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// spillTensor appends a tensor's entry to the spill file: the name's
// length and bytes, the shard's number, the dtype, the rank and the
// dimensions, as uvarints.
func (w *Writer) spillTensor(t safetensors.TensorInfo, shard int) error {
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
	_, err := w.spillBuf.Write(b)
	return err
}

// Close writes what remains: the last batch as TailStrategy says, or the
// last key-value shard; then the index, with TensorIndex, and the
// manifest, each atomically. On failure everything written is removed.
// On Windows, an index or manifest that a process has open without
// sharing it for deletion, or mapped, cannot be replaced: the error then
// wraps safetensors.ErrFileInUse.
func (w *Writer) Close() error {
	if err := w.check(); err != nil {
		return err
	}
	switch {
	case w.opts.mode == Batch && w.batch.f != nil:
		if err := w.batchFinish(); err != nil {
			return err
		}
	case w.opts.mode == KeyValue && w.kv.len() > 0:
		if err := w.flushKV(); err != nil {
			return err
		}
	}
	w.kv = kvShard{} // its memory, for the index and the manifest
	if w.opts.index && len(w.shards) > 0 {
		if err := w.writeIndex(); err != nil {
			return w.fail(err)
		}
	}
	if err := w.writeManifest(); err != nil {
		return w.fail(err)
	}
	w.closeSpill()
	w.done = true
	return nil
}

func (w *Writer) closeSpill() {
	if w.spill != nil {
		w.spill.Close()
		os.Remove(w.spill.Name())
		w.spill = nil
	}
}

// Manifest returns the manifest as Close writes it, or has written it:
// the shards written so far, their totals, and the schema as the
// connector writes it. In Batch mode the schema gives each column's dtype
// and the first shard's shape, batch dimension included ("image": [4, 3,
// 224, 224]); in KeyValue mode it has an entry for each tensor, named key +
// separator + column, with the dtype and shape of its first shard. An
// empty dataset has an empty schema. After Close, Manifest reads the
// manifest back from its file.
func (w *Writer) Manifest() Manifest {
	if w.done && w.err == nil {
		var m Manifest
		if data, err := os.ReadFile(filepath.Join(w.dir, ManifestName)); err == nil && json.Unmarshal(data, &m) == nil {
			return m
		}
	}
	m := Manifest{
		FormatVersion:      FormatVersion,
		SafetensorsVersion: SafetensorsVersion,
		TotalSamples:       w.totalSamples,
		TotalBytes:         w.totalBytes,
		Shards:             slices.Clone(w.shards),
		Schema:             make(map[string]ColumnSchema),
	}
	if m.Shards == nil {
		m.Shards = []Shard{}
	}
	w.schema(func(name []byte, dtype safetensors.DType, shape []uint64) error {
		m.Schema[string(name)] = ColumnSchema{DType: dtype.String(), Shape: toInt64s(shape)}
		return nil
	})
	return m
}

// schema calls f with each schema entry: a Batch dataset's columns, with
// the first shard's shapes, or each tensor of a KeyValue dataset, read
// from the spill file, with its first shard's shape.
func (w *Writer) schema(f func(name []byte, dtype safetensors.DType, shape []uint64) error) error {
	if len(w.shards) == 0 {
		return nil
	}
	if w.opts.mode == Batch {
		for _, t := range w.first.Tensors {
			if err := f([]byte(t.Name), t.DType, t.Shape); err != nil {
				return err
			}
		}
		return nil
	}
	// A name is in two shards only if its key was given again after its
	// shard was written: the keys' hashes, sorted, tell which keys may be;
	// only the names of those are kept, to write each once.
	// Sorted in place: their order does not matter.
	hashes := w.keyHashes
	slices.Sort(hashes)
	var twice map[uint64]bool
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			if twice == nil {
				twice = make(map[uint64]bool)
			}
			twice[hashes[i]] = true
		}
	}
	names := make(map[string]bool)
	sep := []byte(w.opts.sep)
	return w.readSpill(func(e *spillEntry) error {
		if twice != nil {
			// The key is the name less the separator and a column.
			key := e.name
			for _, c := range w.cols { // the longest column that ends the name
				if k, ok := bytes.CutSuffix(e.name, append(sep, c.Name...)); ok && len(k) < len(key) {
					key = k
				}
			}
			if twice[maphash.Bytes(w.keySeed, key)] {
				if names[string(e.name)] {
					return nil
				}
				names[string(e.name)] = true
			}
		}
		return f(e.name, e.dtype, e.shape)
	})
}

func toInt64s(s []uint64) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// readSpill calls f with each entry of the spill file, in order, in a
// spillEntry that the next call reuses.
func (w *Writer) readSpill(f func(*spillEntry) error) error {
	if w.spill == nil { // aborted
		return nil
	}
	if err := w.spillBuf.Flush(); err != nil {
		return err
	}
	size, err := w.spill.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(io.NewSectionReader(w.spill, 0, size), 1<<20)
	var e spillEntry
	for {
		err := readSpilled(r, &e)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(&e); err != nil {
			return err
		}
	}
}

// writeManifest writes dataset_manifest.json laid out as the connector's
// Jackson pretty printer lays it out, streaming the schema from the spill.
func (w *Writer) writeManifest() error {
	path := filepath.Join(w.dir, ManifestName)
	err := atomicfile.WriteFile(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		b := make([]byte, 0, 4096)
		b = append(b, "{\n  \"format_version\" : "...)
		b = appendJSONString(b, FormatVersion)
		b = append(b, ",\n  \"safetensors_version\" : "...)
		b = appendJSONString(b, SafetensorsVersion)
		b = append(b, ",\n  \"total_samples\" : "...)
		b = strconv.AppendInt(b, w.totalSamples, 10)
		b = append(b, ",\n  \"total_bytes\" : "...)
		b = strconv.AppendInt(b, w.totalBytes, 10)
		b = append(b, ",\n  \"shards\" : ["...)
		for i, s := range w.shards {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, " {\n    \"shard_path\" : "...)
			b = appendJSONString(b, s.Path)
			b = append(b, ",\n    \"samples_count\" : "...)
			b = strconv.AppendInt(b, s.Samples, 10)
			b = append(b, ",\n    \"bytes\" : "...)
			b = strconv.AppendInt(b, s.Bytes, 10)
			b = append(b, "\n  }"...)
			bw.Write(b)
			b = b[:0]
		}
		b = append(b, " ],\n  \"schema\" : {"...)
		n := 0
		err := w.schema(func(name []byte, dtype safetensors.DType, shape []uint64) error {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, "\n    "...)
			b = appendJSONString(b, name)
			b = append(b, " : {\n      \"dtype\" : \""...)
			b = append(b, dtype.String()...)
			b = append(b, "\",\n      \"shape\" : ["...)
			for i, d := range shape {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, ' ')
				b = strconv.AppendUint(b, d, 10)
			}
			b = append(b, " ]\n    }"...)
			_, err := bw.Write(b)
			b = b[:0]
			return err
		})
		if err != nil {
			return err
		}
		if n > 0 {
			b = append(b, "\n  }\n}"...)
		} else {
			b = append(b, " }\n}"...)
		}
		bw.Write(b)
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	w.paths = append(w.paths, path)
	return nil
}

// appendJSONString appends s as a JSON string: as it is when nothing in
// it needs escaping, else as encoding/json writes it (without escaping
// HTML characters, as Jackson).
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(string(s))
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// Abort stops writing and removes every file written: the shards, the
// index, the manifest, the temporary files. Close after Abort returns
// ErrClosed.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.batchAbort()
	for _, p := range w.paths {
		os.RemoveAll(p)
	}
	w.paths = nil
	w.closeSpill()
}

// WriteFloat32s is WriteSample for columns of dtype F32, F64, F16 or BF16,
// from float32 values. F16 and BF16 are encoded as the connector encodes
// them (see the package documentation), or rounded to nearest even with
// RoundToNearest.
func (w *Writer) WriteFloat32s(values ...[]float32) error {
	encoded, err := w.encode(values)
	if err != nil {
		return err
	}
	return w.WriteSample(encoded...)
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
	if len(values) != len(w.opts.columns) {
		return nil, fmt.Errorf("%w: %d values for %d columns", ErrInvalidSample, len(values), len(w.opts.columns))
	}
	out := make([][]byte, len(values))
	for i, c := range w.opts.columns {
		v := values[i]
		switch c.DType {
		case safetensors.F16:
			if w.opts.roundToNearest {
				out[i] = safetensors.F32sToF16Bytes(nil, v, safetensors.RoundNearestEven)
			} else {
				out[i] = appendSparkF16(nil, v)
			}
		case safetensors.BF16:
			if w.opts.roundToNearest {
				out[i] = safetensors.F32sToBF16Bytes(nil, v, safetensors.RoundNearestEven)
			} else {
				out[i] = appendSparkBF16(nil, v)
			}
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
