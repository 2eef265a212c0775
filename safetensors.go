// Package safetensors reads and writes files in the safetensors format, the
// format Hugging Face models publish their weights in.
//
// # Format
//
// A file has three parts:
//
//	8 bytes    N, the length of the header, as a little-endian uint64
//	N bytes    the header: a JSON object mapping each tensor's name to its dtype, shape
//	           and [begin, end) offsets, plus an optional "__metadata__" map of strings,
//	           padded with spaces
//	the rest   the data section: the tensors' bytes, little-endian, row-major, with no holes
//
// A [DType] is a tensor's element type, spelled as on the wire (F32, BF16,
// F8_E4M3, I64, BOOL, ...; [ParseDType] reads one), which says its size in
// bits and whether it is a float type and can hold NaN. A parsed [Header] holds
// the metadata and one [TensorInfo] per tensor: its name, dtype, shape and
// offsets into the data section. [MaxHeaderSize] and [MaxDepth] are the
// reference's limits. See the [format description] and the [reference
// implementation].
//
// # Reading
//
// A [Reader] gives the tensors of one file (Names, Tensor, Tensors,
// Metadata, Header, Prefetch). There are four ways to get one, and one to
// read only a header:
//
//   - [Open] maps a file into memory: opening costs what the header costs,
//     and tensors are slices of the mapping, read from disk when touched.
//   - [NewFileReader] is Open of an *os.File already open, such as one
//     opened inside an os.Root.
//   - [NewReader] wraps a whole file already in memory; tensors are slices
//     of it.
//   - [NewReaderAt] reads through any io.ReaderAt, such as an object in
//     remote storage: the header with at most two reads, each tensor when
//     asked for, into new memory of at most [MaxTensorAlloc] bytes;
//     [Reader.TensorReader] streams a larger tensor.
//   - [ReadHeader] reads the prefix and the header from a stream, for tools
//     that list a file's tensors.
//
// All of them give exactly the verdict of the reference implementation (the
// Hugging Face Rust crate) on every file: the same files are accepted, with
// the same error for the others, matched by the sentinel errors with
// errors.Is.
//
// A model's weights are often more than one file, laid out as the library
// that saved them lays them out: the checkpoint package opens them (a
// sharded checkpoint, a model's folder of any library, a diffusers
// pipeline, a snapshot of the Hugging Face cache, on disk or over HTTP)
// through Readers of this package. A Reader is a [TensorSource], the names
// and tensors that tools reading a model need, and [Reader.TensorContext]
// reads a tensor under a context. [Reader.DataSections] tells where its
// tensors are, for a loader that reads them its own way (the load
// package's Loader): a [DataSection], read through a [ReaderAtContext]
// where the source can abort a read in flight.
//
// A [ReadOption] changes how files are read: [ReadAll] makes Open read the
// data section into memory rather than map it (for network file systems,
// or tensors that outlive Close), [ReadInto] into a buffer the caller keeps
// from file to file, and [Strict] also rejects what the format description
// forbids but the reference tolerates.
//
// # Tensors
//
// A [Tensor] is a name, a dtype, a shape and the tensor's little-endian
// bytes, Data; [Tensor.NumElements] counts its elements (len(Data) is its
// size in bytes). [View] sees them as a []float32, []uint16, ... (any
// [Number] type that holds the dtype) without copying; [Values] decodes them
// into a new or reused slice. [Tensor.Float32s] decodes any real dtype to
// float32, F16, BF16 and the F8 types exactly, and [Tensor.AppendFloat32s]
// does it through a buffer the caller keeps. [Tensor.Slice] selects part of
// a tensor, as the reference's get_slice does, with one [Selector] per
// leading dimension ([At], [Range], [All]): the [TensorSlice] it gives is
// runs of the tensor's bytes, not a copy, whose values
// [TensorSlice.Float32s] decodes. [Tensor.Elements] cuts a flat range of
// elements, for work split between goroutines. [Tensor.Stats] counts a
// tensor's NaNs and infinities and gives its extremes, mean and standard
// deviation as [Stats], which [Stats.Merge] combines part by part, for
// checking weights as they are loaded.
//
// # Writing
//
// [Write] and [WriteFile] write tensors held in memory, byte for byte as the
// reference writer does: tensors ordered by dtype then name, compact JSON,
// the header padded with spaces so that the data section is 8-byte aligned
// (or more, with the [Alignment] option, up to [MaxAlignment]; a
// [WriteOption] changes how files are written).
//
// For files larger than memory, [NewWriter] takes each tensor's name, dtype
// and shape as a [TensorSpec], writes the header, and returns a [Writer]
// that takes the tensors' bytes: in file order, in chunks of any size
// ([Writer.Write], [Writer.WriteTensor]), or, on an io.WriterAt such as an
// *os.File, whole tensors at their places, in any order, from several
// goroutines ([Writer.WriteTensorAt]). Each tensor is written once; a
// tensor out of order gives [ErrWriteOrder], one written twice
// [ErrTensorWritten]. [CreateFile] returns a [FileWriter], a Writer into a
// temporary file that appears at its path only once it is complete.
// WriteFile and CreateFile never leave a partial file behind, and never
// leave their temporary files (named as [TempPattern] says) but when the
// process is killed.
//
// The checkpoint package writes a sharded checkpoint, shards and index, as
// transformers does, through Writers of this package.
//
// # Converting
//
// [F16ToF32], [BF16ToF32], [F32ToF16] and [F32ToBF16] convert single values,
// exactly or with a chosen [Rounding]: to nearest even, as PyTorch and NumPy
// do, or by truncation. The bulk forms ([F16ToF32s], [F16BytesToF32s],
// [F32sToBF16Bytes] and the others) convert slices and tensor bytes into a
// buffer the caller supplies, and [TensorFromFloat32s] builds a tensor for
// writing. On amd64 the bulk conversions use F16C and AVX2 when the CPU has
// them, and AVX-512's BF16 conversion where it exists; the purego build tag
// keeps them in pure Go.
//
// # Loading
//
// [Load] and [Save] do in one call what Python's load_file and save_file
// do: Load reads a file's tensors into memory that belongs to the caller,
// with nothing left open, and Save writes a map of tensors as WriteFile
// does.
//
// Load reads one file. To read a whole model in one call, use the
// checkpoint package's Load; to stream a model through memory of a bounded
// size, as an inference server fills a device, the load package's Loader.
//
// # Files that change while mapped
//
// A file that Open mapped and that is truncated while in use (another
// program rewrites it in place) makes reading its tensors' memory fault,
// which would kill the program (SIGBUS). The package's own functions that
// read tensor data turn that fault into an error wrapping [ErrFileChanged];
// [GuardFaults] does the same around code that reads a tensor's Data
// itself. The writers of this package replace a file rather than rewrite
// it in place, so writing a model over one that is mapped does not cause
// it.
//
// # Errors
//
// There is one sentinel error for each error of the reference
// implementation ([ErrHeaderTooSmall], [ErrHeaderTooLarge],
// [ErrInvalidHeaderLength], [ErrHeaderNotUTF8], [ErrInvalidHeader],
// [ErrInvalidOffset], [ErrShapeOverflow], [ErrMisalignedSlice],
// [ErrSizeMismatch], [ErrIncompleteBuffer], [ErrTensorNotFound]), so that a
// verdict compares with the reference's through errors.Is, and the
// package's own: [ErrUnknownDType], [ErrNotSafetensors] for a file of
// another kind (a Git LFS pointer, a web page, an index, a PyTorch
// checkpoint, ...; with the reference's verdict, [ErrHeaderTooLarge]),
// [ErrNotRegular] for a path that is not a regular file, [ErrClosed] for a Reader or Writer used after Close,
// [ErrWriteOrder] and [ErrTensorWritten] for a Writer given bytes it cannot
// take, [ErrInvalidSlice], [ErrDTypeMismatch], [ErrNoView] and
// [ErrTensorTooLarge] for tensors, [ErrFileChanged], and
// [ErrInvalidOption], which every function of the module that takes
// options wraps for an option it cannot take. The errors returned wrap
// them with the details: a [*TensorError] names the tensor, and a
// [*HeaderError] gives the position in the JSON header.
//
// # Concurrency and lifetimes
//
// A Reader is safe for use by several goroutines at once, except for
// Close. The Data of a tensor from Open is a slice of the mapping:
// read-only, and invalid after Close, unless ReadAll or ReadInto read it
// into memory. A Writer is for one goroutine at a time, except for
// WriteTensorAt.
//
// # Security
//
// The package is meant for files from untrusted sources. Every length, count
// and offset in a file is checked before it is used, with arithmetic that
// cannot overflow, and no input makes it panic (the parser is fuzzed). The
// limits are the reference's: a header of at most [MaxHeaderSize] bytes and
// JSON nested at most [MaxDepth] deep. Parsing allocates a small multiple of
// the header's size, never an amount read from the file. The data section
// must be exactly covered by the tensors, so a file cannot hide other content.
// Tensor values are not checked: NaN and Inf may be stored.
//
// # Other packages
//
// Above this package, and using it: checkpoint opens and writes models in
// every library's layout, on disk or over HTTP; load streams their tensors
// into bounded memory; remote reads files over HTTP with range requests;
// check, diff and quant check, compare and quantize models; dataset reads
// and writes datasets in the Spark connector's layout; and the safetensors
// command (cmd/safetensors) inspects, validates, summarizes, checks,
// compares, quantizes and converts models.
//
// [format description]: https://github.com/huggingface/safetensors#format
// [reference implementation]: https://github.com/huggingface/safetensors/tree/main/safetensors
package safetensors

import (
	"fmt"
	"io"
	"sync"

	"github.com/safetensors-go/safetensors/internal/pagecache"
)

// A ReadOption changes how a file is read. Pass options to [Open],
// [NewFileReader], [NewReader], [NewReaderAt] and [ReadHeader], and to the
// checkpoint package's Open through its ReadOptions.
type ReadOption func(*readConfig) error

// readConfig holds the settings of ReadOptions.
type readConfig struct {
	strict  bool
	readAll bool
	into    *intoBuffer // ReadInto's buffer, or nil
}

// intoBuffer is the buffer of one ReadInto option, handed out in
// consecutive parts to the data sections of the files opened with it, as
// the shards of a checkpoint are, several at once (hence mu).
type intoBuffer struct {
	buf  []byte
	mu   sync.Mutex
	used int // the bytes given to data sections so far
}

// intoAlign is where ReadInto places each data section after the first:
// at a multiple of it from the buffer's start.
const intoAlign = 64

// dest returns the memory a data section of n bytes is read into: the next
// part of ReadInto's buffer, or new memory.
func (c *readConfig) dest(n int) ([]byte, error) {
	if c.into == nil {
		b := make([]byte, n)
		pagecache.AdviseHugePages(b)
		return b, nil
	}
	b := c.into
	b.mu.Lock()
	defer b.mu.Unlock()
	start := b.used
	if start%intoAlign != 0 {
		start += intoAlign - start%intoAlign // no overflow: start <= len(b.buf)
	}
	if start > len(b.buf) || n > len(b.buf)-start {
		taken := ""
		if b.used > 0 {
			taken = fmt.Sprintf(", %d of them taken by other files opened with it", b.used)
		}
		return nil, fmt.Errorf("%sthe data section of %d bytes does not fit in ReadInto's buffer of %d bytes%s: %w",
			prefix, n, len(b.buf), taken, io.ErrShortBuffer)
	}
	b.used = start + n
	return b.buf[start : start+n : start+n], nil
}

func newReadConfig(opts []ReadOption) (*readConfig, error) {
	cfg := new(readConfig)
	for _, o := range opts {
		if err := o(cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// Strict returns an option that makes the parser also reject what the format
// description forbids but the reference accepts, for scanners and gateways
// that must not be fooled by two parsers reading one file differently. Under
// Strict these give ErrInvalidHeader:
//
//   - whitespace before the opening '{', or padding after the closing '}'
//     with anything but spaces;
//   - a tensor name given twice (the reference keeps the last);
//   - a metadata key given twice (the reference keeps the last);
//   - "__metadata__": null (the format wants a map of strings);
//   - a tensor entry written as an array [dtype, shape, data_offsets];
//   - a dtype written as an object, such as {"F32": null};
//   - fields other than dtype, shape and data_offsets in a tensor entry.
//
// Every file Strict accepts, the default parser accepts too, with the same
// tensors and metadata.
//
// The checkpoint package's Strict option reads every file of a checkpoint
// with Strict, and also refuses tensors that a shard holds but the index
// does not list.
func Strict() ReadOption {
	return func(c *readConfig) error {
		c.strict = true
		return nil
	}
}

// Tensor is one tensor: its name, element type, shape and bytes.
//
// In a Tensor returned by a [Reader], Shape and Data are shared with the
// Reader: Data is a slice of the file's memory, not a copy, and must not be
// modified; neither may Shape.
type Tensor struct {
	Name  string
	DType DType
	// Shape holds the dimensions, outermost first; empty for a scalar.
	Shape []uint64
	// Data holds the elements, little-endian and row-major: the product of
	// the dimensions times DType.Bits() / 8 bytes.
	Data []byte
}

// NumElements returns the number of elements the tensor holds, as
// PyTorch's numel() gives it: the product of the dimensions for every
// tensor that a Reader gives or a writer accepts. It is counted from
// len(Data) and the dtype's width, so that it cannot overflow, and is 0
// for a dtype of unknown width. The size in bytes is len(Data).
func (t Tensor) NumElements() uint64 { return elementCount(uint64(len(t.Data)), t.DType) }
