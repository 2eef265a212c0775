package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
	// kinds usually give, their first eight bytes read as N: the message then
	// says what the file looks like (a zip archive such as a PyTorch
	// checkpoint, a pickle, GGUF, HDF5, NumPy, gzip, a Git LFS pointer, an
	// HTML page, JSON or other text).
	ErrHeaderTooLarge = errors.New("safetensors: header too large")

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

// formatMagic names a kind of file by how it starts, for the errors about a
// file that is not a safetensors file at all.
var formatMagic = []struct {
	magic string
	what  string
}{
	{"PK\x03\x04", "a zip archive, such as a PyTorch checkpoint saved by torch.save"},
	{"PK\x05\x06", "an empty zip archive"},
	{"\x80\x02", "a Python pickle, such as a PyTorch checkpoint in the legacy format"},
	{"\x80\x03", "a Python pickle, such as a PyTorch checkpoint in the legacy format"},
	{"\x80\x04", "a Python pickle"},
	{"\x80\x05", "a Python pickle"},
	{"GGUF", "a GGUF file (llama.cpp)"},
	{"\x89HDF\r\n\x1a\n", "an HDF5 file, such as Keras weights (.h5)"},
	{"\x93NUMPY", "a NumPy array (.npy)"},
	{"\x1f\x8b", "a gzip-compressed file"},
	{"\x28\xb5\x2f\xfd", "a zstd-compressed file"},
	{"version https://git-lfs", "a Git LFS pointer file: the weights themselves were not downloaded (git lfs pull fetches them)"},
	{"<!DOCTYP", "an HTML page, such as a web server's error page"},
	{"<!doctyp", "an HTML page, such as a web server's error page"},
	{"<html", "an HTML page, such as a web server's error page"},
	{"<HTML", "an HTML page, such as a web server's error page"},
	{"<?xml", "an XML document, such as an object store's error response"},
}

// notSafetensors describes the start of a file, b, whose length prefix is
// too large: "; not a safetensors file: it looks like ..." for a known format
// or for text, or "" for anything else.
func notSafetensors(b []byte) string {
	for _, m := range formatMagic {
		if len(b) >= len(m.magic) && string(b[:len(m.magic)]) == m.magic {
			return "; not a safetensors file: it looks like " + m.what
		}
	}
	// Text, such as JSON, an error message or a pointer file: show its start.
	// A safetensors file never starts with eight bytes of text, since a
	// header length of at most MaxHeaderSize has four zero bytes.
	text := b[:min(len(b), 64)]
	if len(text) < prefixLen || !utf8.Valid(text[:prefixLen]) {
		return ""
	}
	for _, r := range string(text[:prefixLen]) {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f {
			return ""
		}
	}
	kind := "text"
	switch text[0] {
	case '{', '[':
		kind = "JSON or other text"
		switch {
		case bytes.Contains(b, []byte(`"weight_map"`)):
			return "; not a safetensors file: it is a sharded checkpoint's index (JSON with a weight_map): open it with the checkpoint package's Open, or read the model whole with its Load"
		case bytes.Contains(b, []byte(`"_class_name"`)) && bytes.Contains(b, []byte(`"_diffusers_version"`)):
			return "; not a safetensors file: it is a diffusers pipeline's model_index.json: open the pipeline with the checkpoint package's Open"
		case bytes.Contains(b, []byte(`"sentence_transformers.`)):
			return "; not a safetensors file: it is a sentence-transformers model's modules.json: open the model with the checkpoint package's Open"
		}
	}
	if i := bytes.IndexAny(text, "\r\n"); i >= 0 {
		text = text[:i]
	}
	for !utf8.Valid(text) { // cut at a whole character
		text = text[:len(text)-1]
	}
	return fmt.Sprintf("; not a safetensors file: it looks like %s, starting %q", kind, text)
}
