// Package safetensors reads and writes files in the safetensors format, the
// format Hugging Face models publish their weights in.
//
// A file has three parts:
//
//	8 bytes    N, the length of the header, as a little-endian uint64
//	N bytes    the header: a JSON object mapping each tensor's name to its dtype, shape
//	           and [begin, end) offsets, plus an optional "__metadata__" map of strings,
//	           padded with spaces
//	the rest   the data section: the tensors' bytes, little-endian, row-major, with no holes
//
// See the [format description] and the [reference implementation].
//
// # Reading
//
// There are three ways to read a file, and one to read only its header:
//
//   - [Open] maps a file into memory: opening costs what the header costs,
//     and tensors are slices of the mapping, read from disk when touched.
//     The ReadAll option reads the data into memory instead.
//   - [NewReader] wraps a whole file already in memory; tensors are slices
//     of it.
//   - [NewReaderAt] reads through any io.ReaderAt, such as an object in
//     remote storage: the header with at most two reads, each tensor when
//     asked for, into new memory.
//   - [ReadHeader] reads the prefix and the header from a stream, for tools
//     that list a file's tensors.
//
// All of them give exactly the verdict of the reference implementation (the
// Hugging Face Rust crate) on every file: the same files are accepted, with
// the same error for the others, matched by the sentinel errors with
// errors.Is. The [Strict] option also rejects what the format description
// forbids but the reference tolerates.
//
// A [Tensor]'s Data holds its little-endian bytes. [View] sees them as a
// []float32, []uint16, ... without copying; [Values] decodes them into a new
// slice; [Tensor.Float32s] decodes any real dtype to float32, F16, BF16 and
// the F8 types exactly, and [Tensor.AppendFloat32s] does it through a buffer
// the caller keeps. [Tensor.Slice] selects part of a tensor, as the
// reference's get_slice does, as runs of its bytes. [Tensor.Stats] counts a
// tensor's NaNs and infinities and gives its extremes, mean and standard
// deviation, for checking weights as they are loaded.
//
// [OpenIndex] opens a sharded checkpoint (model.safetensors.index.json and
// its shards) as one, after checking the index against every shard;
// [CreateSharded] and [WriteSharded] write one as transformers does.
//
// The remote subpackage reads files over HTTP with range requests, and the
// safetensors command (cmd/safetensors) inspects, validates, summarizes and
// converts files.
//
// # Converting
//
// [F16ToF32], [BF16ToF32], [F32ToF16] and [F32ToBF16] convert single values,
// exactly or with a chosen [Rounding]: to nearest even, as PyTorch and NumPy
// do, or by truncation. The bulk forms convert
// slices and tensor bytes into a buffer the caller supplies, and
// [TensorFromFloat32s] builds a tensor for writing. On amd64 the bulk
// conversions use F16C and AVX2 when the CPU has them, and AVX-512's BF16
// conversion where it exists; the purego build tag keeps them in pure Go.
//
// # Writing
//
// [Write] and [WriteFile] write tensors held in memory, byte for byte as the
// reference writer does: tensors ordered by dtype then name, compact JSON,
// the header padded with spaces so that the data section is 8-byte aligned
// (or more, with the [Alignment] option).
//
// For files larger than memory, [NewWriter] takes the tensors' names, dtypes
// and shapes first, writes the header, and then takes their bytes in chunks
// of any size ([Writer.Write], [Writer.WriteTensor]), or, on an io.WriterAt
// such as an *os.File, whole tensors in any order from several goroutines
// ([Writer.WriteTensorAt]). [CreateFile] does the same into a file that
// appears only once it is complete. WriteFile and CreateFile never leave a
// partial file behind.
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
// [OpenFile], [OpenIndex], [NewReader], [NewReaderAt] and [ReadHeader].
type ReadOption func(*readConfig) error

// readConfig holds the settings of ReadOptions.
type readConfig struct {
	strict  bool
	readAll bool
	// readAtLarge makes a file too large for the address space a Reader
	// that reads through the file (NewReaderAt) rather than an error; set
	// by OpenModel only.
	readAtLarge bool

	// into is ReadInto's buffer, if hasInto; used counts its bytes given
	// to data sections so far (shards open at once, hence mu).
	hasInto bool
	into    []byte
	mu      sync.Mutex
	used    int
}

// intoAlign is where ReadInto places each data section after the first:
// at a multiple of it from the buffer's start.
const intoAlign = 64

// dest returns the memory a data section of n bytes is read into: the next
// part of ReadInto's buffer, or new memory.
func (c *readConfig) dest(n int) ([]byte, error) {
	if !c.hasInto {
		b := make([]byte, n)
		pagecache.AdviseHugePages(b)
		return b, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.used
	if start%intoAlign != 0 {
		start += intoAlign - start%intoAlign // no overflow: start <= len(c.into)
	}
	if start > len(c.into) || n > len(c.into)-start {
		taken := ""
		if c.used > 0 {
			taken = fmt.Sprintf(", %d of them taken by other shards", c.used)
		}
		return nil, fmt.Errorf("%sthe data section of %d bytes does not fit in ReadInto's buffer of %d bytes%s: %w",
			prefix, n, len(c.into), taken, io.ErrShortBuffer)
	}
	c.used = start + n
	return c.into[start : start+n : start+n], nil
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
