package safetensors

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/safetensors-go/safetensors/internal/filekind"
)

// The sentinel errors. There is one for each error variant of the reference
// implementation (named in each comment), so that a verdict can be compared
// with errors.Is, and then the package's own: a Reader or Writer used after
// Close, and the misuses of a Writer. The errors the package returns wrap
// them and add the values involved: the tensor, the offsets, the expected
// and actual sizes, the position in the JSON header.
var (
	// ErrHeaderTooSmall is returned when the file is shorter than the 8-byte
	// header length (HeaderTooSmall). Errors from a stream that ends early
	// also match io.ErrUnexpectedEOF.
	ErrHeaderTooSmall = errors.New("safetensors: header too small")

	// ErrHeaderTooLarge is returned when the header length N exceeds
	// MaxHeaderSize (HeaderTooLarge). It is checked before the file size, so a
	// tiny file with a huge N gets this error. It is what files of other
	// kinds give, their first eight bytes read as N: when the file is of a
	// kind that can be named, the error matches ErrNotSafetensors too, and
	// its message says what the file is instead.
	ErrHeaderTooLarge = errors.New("safetensors: header too large")

	// ErrNotSafetensors is returned for a file of another kind, named by its
	// first bytes: a Git LFS pointer in place of the file it points to, a
	// web page (such as the Hugging Face Hub's page of a file, not the
	// file), a sharded checkpoint's index or other JSON, a PyTorch
	// checkpoint (zip or pickle), GGUF, HDF5, NumPy, gzip, zstd, XML or
	// other text. The message leads with what the file is and says what to
	// do:
	//
	//	safetensors: a Git LFS pointer, not the file it points to (oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393, 548105171 bytes): run 'git lfs pull' in its repository to fetch the file
	//
	// The error matches the reference's verdict on such a file too,
	// ErrHeaderTooLarge: its first eight bytes, read as the header length,
	// are more than MaxHeaderSize.
	ErrNotSafetensors = errors.New("safetensors: not a safetensors file")

	// ErrInvalidHeaderLength is returned when 8 + N is more than the file size
	// (InvalidHeaderLength), as for a file truncated within its header; the
	// message says how many bytes are missing.
	ErrInvalidHeaderLength = errors.New("safetensors: invalid header length")

	// ErrHeaderNotUTF8 is returned when the N header bytes are not valid UTF-8
	// (InvalidHeader). Writers return it for names and metadata that are not
	// valid UTF-8.
	ErrHeaderNotUTF8 = errors.New("safetensors: header is not valid UTF-8")

	// ErrInvalidHeader is returned for a JSON syntax or schema error in the
	// header (InvalidHeaderDeserialization): a top level that is not an
	// object, a missing, duplicated or ill-typed field, an unknown dtype, a
	// metadata value that is not a string, nesting deeper than MaxDepth,
	// numbers that are not non-negative integers fitting in 64 bits. The
	// error is a [*HeaderError], often inside a [*TensorError]. Writers
	// return it for a header they cannot write (a duplicate name, a tensor
	// named "__metadata__").
	ErrInvalidHeader = errors.New("safetensors: invalid JSON header")

	// ErrInvalidOffset is returned when a tensor does not start where the
	// previous one (in offset order) ends, or the first at 0, or when its end
	// is before its begin (InvalidOffset). The data section may have no holes
	// and no overlaps.
	ErrInvalidOffset = errors.New("safetensors: invalid data offsets")

	// ErrShapeOverflow is returned when the product of a tensor's dimensions,
	// or that product times the dtype's bit width, overflows 64 bits
	// (ValidationOverflow).
	ErrShapeOverflow = errors.New("safetensors: shape overflows 64 bits")

	// ErrMisalignedSlice is returned when a sub-byte tensor (F4, F6_*) does
	// not fill a whole number of bytes (MisalignedSlice).
	ErrMisalignedSlice = errors.New("safetensors: tensor does not end on a byte boundary")

	// ErrSizeMismatch is returned when a tensor's byte range does not match
	// its shape and dtype (TensorInvalidInfo). Writers return it when
	// len(Data) does not match.
	ErrSizeMismatch = errors.New("safetensors: byte size does not match shape and dtype")

	// ErrIncompleteBuffer is returned when the data section is not exactly
	// covered by the tensors: it is shorter than the last tensor's end, as in
	// a truncated file (the message says how many bytes are missing), or has
	// bytes after it (MetadataIncompleteBuffer).
	ErrIncompleteBuffer = errors.New("safetensors: data section not exactly covered by tensors")

	// ErrTensorNotFound is returned by Reader.Tensor for a name the file does
	// not have (TensorNotFound).
	ErrTensorNotFound = errors.New("safetensors: tensor not found")

	// ErrUnknownDType is returned by ParseDType for a name that is not one of
	// the 22 dtypes. A header that names one fails with ErrInvalidHeader,
	// which the reference gives; the error matches both.
	ErrUnknownDType = errors.New("safetensors: unknown dtype")

	// ErrClosed is returned by the methods of a Reader or Writer after
	// Close.
	ErrClosed = errors.New("safetensors: already closed")

	// ErrWriteOrder is returned by a Writer (and a FileWriter) for bytes
	// given out of the order it takes them in: WriteTensor for a tensor
	// whose bytes do not come next in file order, or Write and WriteTensor
	// after WriteTensorAt. Nothing is written, and the Writer goes on.
	ErrWriteOrder = errors.New("safetensors: tensor written out of order")

	// ErrTensorWritten is returned by a Writer, a FileWriter and the
	// checkpoint package's Writer for a tensor whose bytes were already written, or are
	// being written by another goroutine: each tensor is written once.
	// Nothing is written, and the writer goes on.
	ErrTensorWritten = errors.New("safetensors: tensor already written")

	// ErrInvalidOption is wrapped by the error of every function of this
	// module that takes options (ReadOption, WriteOption, and the options of
	// the check, diff, dataset and remote packages) for an option given a
	// value out of its range, or given where it does not apply; the error
	// names the option.
	ErrInvalidOption = errors.New("safetensors: invalid option")
)

// prefix starts every error message of the package, once.
const prefix = "safetensors: "

// A TensorError reports a problem with one tensor. Err is or wraps one of the
// sentinel errors, so errors.Is(err, ErrInvalidOffset) works through it, and
// errors.As recovers the name:
//
//	safetensors: tensor "bias": invalid data offsets: begin 12, want 8 (the end of the previous tensor)
type TensorError struct {
	Name string // the tensor's name
	Err  error  // what is wrong, wrapping a sentinel
}

// Error returns the message of e.Err, prefixed with the tensor's name.
func (e *TensorError) Error() string {
	return prefix + "tensor " + strconv.Quote(e.Name) + ": " + strings.TrimPrefix(e.Err.Error(), prefix)
}

// Unwrap returns e.Err.
func (e *TensorError) Unwrap() error { return e.Err }

// A HeaderError reports a JSON syntax or schema error in the header, at a byte
// offset of the JSON text. It matches [ErrInvalidHeader] with errors.Is, and
// Err too when it is set:
//
//	safetensors: invalid JSON header at byte 57 (file offset 65): number with a leading zero
type HeaderError struct {
	Offset int64  // offset in the JSON header; add 8 for the offset in the file
	Msg    string // what is wrong
	Err    error  // a more specific cause such as ErrUnknownDType, or nil
}

// Error returns the message with the offsets in the header and in the file.
func (e *HeaderError) Error() string {
	return fmt.Sprintf("%sat byte %d (file offset %d): %s", ErrInvalidHeader.Error()+" ", e.Offset, e.Offset+prefixLen, e.Msg)
}

// Unwrap returns ErrInvalidHeader and e.Err.
func (e *HeaderError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidHeader}
	}
	return []error{ErrInvalidHeader, e.Err}
}

// detailError is a sentinel with the details of one occurrence.
type detailError struct {
	kind   error // the sentinel
	detail error // the details, which may wrap another error
}

func (e *detailError) Error() string   { return e.kind.Error() + ": " + e.detail.Error() }
func (e *detailError) Unwrap() []error { return []error{e.kind, e.detail} }

// errorf returns an error that matches kind and adds details to its message.
// The format may use %w.
func errorf(kind error, format string, args ...any) error {
	return &detailError{kind: kind, detail: fmt.Errorf(format, args...)}
}

// tensorErrorf returns a *TensorError for the named tensor.
func tensorErrorf(name string, kind error, format string, args ...any) error {
	return &TensorError{Name: name, Err: errorf(kind, format, args...)}
}

// A notSafetensorsError is the error for a file of another kind, which
// matches ErrNotSafetensors and the reference's verdict, ErrHeaderTooLarge.
type notSafetensorsError struct {
	msg string // what the file is, what to do, and figures
}

func (e *notSafetensorsError) Error() string { return prefix + e.msg }

func (e *notSafetensorsError) Unwrap() []error {
	return []error{ErrNotSafetensors, ErrHeaderTooLarge}
}

// notSafetensors returns the error for a file that starts with b (as many
// bytes as the caller read) and whose header length is more than
// MaxHeaderSize, if b says what else the file is; otherwise nil.
func notSafetensors(b []byte) error {
	var msg string
	switch k := filekind.Of(b); k {
	case filekind.Unknown:
		return nil
	case filekind.LFSPointer:
		var figures []string
		oid, size := filekind.LFS(b)
		if oid != "" {
			figures = append(figures, "oid "+oid)
		}
		if size >= 0 {
			figures = append(figures, strconv.FormatInt(size, 10)+" bytes")
		}
		msg = "a Git LFS pointer, not the file it points to"
		if len(figures) > 0 {
			msg += " (" + strings.Join(figures, ", ") + ")"
		}
		msg += ": run 'git lfs pull' in its repository to fetch the file"
	case filekind.HTML:
		msg = "a web page (HTML), not a safetensors file: download the file itself; for the Hugging Face Hub, use the resolve/ form of its URL, https://huggingface.co/REPO/resolve/REVISION/FILE, not the page's blob/ form"
	case filekind.Index:
		msg = "a sharded checkpoint's index (JSON with a weight_map), not a safetensors file: open it with the checkpoint package's Open, or load the model whole with its Load (the safetensors command takes it as a MODEL)"
	case filekind.Pipeline:
		msg = "a diffusers pipeline's model_index.json, not a safetensors file: open the pipeline with the checkpoint package's Open (the safetensors command takes it as a MODEL)"
	case filekind.Modules:
		msg = "a sentence-transformers model's modules.json, not a safetensors file: open the model with the checkpoint package's Open (the safetensors command takes it as a MODEL)"
	case filekind.JSON:
		msg = "a JSON document, likely a sharded checkpoint's index, not a safetensors file: open an index with the checkpoint package's Open (the safetensors command takes it as a MODEL); it starts " + filekind.Excerpt(b)
	case filekind.JSONError:
		msg = "a JSON document, such as a server's error message, not a safetensors file: it starts " + filekind.Excerpt(b)
	case filekind.XML:
		msg = "an XML document, such as an object store's error message, not a safetensors file: it starts " + filekind.Excerpt(b)
	case filekind.Text:
		msg = "text, such as an error message saved in the file's place, not a safetensors file: it starts " + filekind.Excerpt(b)
	case filekind.PyTorchZip:
		msg = "a PyTorch checkpoint (torch.save's zip format), not a safetensors file: convert it to safetensors first (in Python, with safetensors.torch.save_file)"
	case filekind.Pickle:
		msg = "a Python pickle, such as a PyTorch checkpoint in the legacy format, not a safetensors file: convert it to safetensors first (in Python, with safetensors.torch.save_file)"
	default:
		msg = kindMessages[k]
	}
	return &notSafetensorsError{msg: msg}
}

// kindMessages are the messages of notSafetensors for the other binary
// formats.
var kindMessages = map[filekind.Kind]string{
	filekind.Zip:      "a zip archive, not a safetensors file",
	filekind.EmptyZip: "an empty zip archive, not a safetensors file",
	filekind.GGUF:     "a GGUF file (llama.cpp's format), not a safetensors file",
	filekind.HDF5:     "an HDF5 file, such as Keras weights (.h5), not a safetensors file",
	filekind.NumPy:    "a NumPy array (.npy), not a safetensors file",
	filekind.Gzip:     "a gzip-compressed file, not a safetensors file: decompress it first",
	filekind.Zstd:     "a zstd-compressed file, not a safetensors file: decompress it first",
}
