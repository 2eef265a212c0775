package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/safetensors-go/safetensors/internal/filekind"
)

// Format constants.
const (
	// MaxHeaderSize is the largest header length N the reference accepts,
	// 100,000,000 bytes. A larger N gives ErrHeaderTooLarge.
	MaxHeaderSize = 100_000_000

	// MaxDepth is how deeply objects and arrays may nest in the header,
	// counting the header object itself: 127, the limit of the reference's
	// JSON parser. Deeper nesting gives ErrInvalidHeader.
	MaxDepth = 127

	// prefixLen is the size of the little-endian header length, N_LEN in the
	// reference.
	prefixLen = 8

	// headerAlign is the multiple the writer pads the header length to with
	// spaces, so that the data section starts 8-byte aligned.
	headerAlign = 8

	// metadataKey is the reserved key of the metadata map.
	metadataKey = "__metadata__"
)

// Header is a parsed and validated header: the metadata map and every
// tensor's entry. Rust calls it Metadata.
type Header struct {
	// Metadata is the "__metadata__" map. It is nil when the key is absent
	// or null, and empty but not nil when it is {}.
	Metadata map[string]string

	// Tensors lists the tensor entries in file order: by DataOffsets, then
	// by name for zero-sized tensors at the same offset.
	Tensors []TensorInfo

	// Len is N, the length in bytes of the JSON header including its
	// padding, as the 8-byte prefix gives it.
	Len uint64
}

// DataOffset returns the offset in the file of the data section, 8 + N.
// DataOffsets are relative to it.
func (h *Header) DataOffset() uint64 { return prefixLen + h.Len }

// DataLen returns the length of the data section the tensors cover: the end
// of the last tensor, or 0 without tensors. A valid file is exactly
// DataOffset() + DataLen() bytes long.
func (h *Header) DataLen() uint64 {
	if len(h.Tensors) == 0 {
		return 0
	}
	return h.Tensors[len(h.Tensors)-1].DataOffsets[1]
}

// TensorInfo is one tensor's entry in the header.
type TensorInfo struct {
	Name  string
	DType DType
	// Shape holds the dimensions, outermost first; empty for a scalar. The
	// reference accepts any dimension up to 2^64-1, such as [0, 2^64-1].
	Shape []uint64
	// DataOffsets is [begin, end) of the tensor's bytes in the data section.
	DataOffsets [2]uint64
}

// NumElements returns the number of elements of the tensor the entry
// describes: the product of the dimensions in a validated header. It is
// counted from the size in bytes, DataOffsets[1] - DataOffsets[0], and the
// dtype's width, which cannot overflow, and is 0 for an entry whose offsets
// are reversed or whose dtype has no known width.
func (i TensorInfo) NumElements() uint64 {
	if i.DataOffsets[1] < i.DataOffsets[0] {
		return 0
	}
	return elementCount(i.DataOffsets[1]-i.DataOffsets[0], i.DType)
}

// elementCount returns the number of elements of dtype d that size bytes
// hold, size*8/d.Bits() computed in 128 bits, or 0 for a dtype of unknown
// width. A count above 2^64-1, which only the packed F4 and F6 reach and
// only for more bytes than a valid header's bit count allows, gives
// 2^64-1.
func elementCount(size uint64, d DType) uint64 {
	nbits := uint64(d.Bits())
	if nbits == 0 {
		return 0
	}
	hi, lo := bits.Mul64(size, 8)
	if hi >= nbits {
		return math.MaxUint64
	}
	n, _ := bits.Div64(hi, lo, nbits)
	return n
}

// byteSize returns the size in bytes of a tensor of the given dtype and
// shape, with the reference's checks in its order: the product of the
// dimensions, folded left to right, then that times the bit width, must not
// overflow 64 bits (ErrShapeOverflow), and must be a whole number of bytes
// (ErrMisalignedSlice).
func byteSize(dtype DType, shape []uint64) (uint64, error) {
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, errorf(ErrShapeOverflow, "shape %v has more than 2^64-1 elements", shape)
		}
		n = lo
	}
	hi, nbits := bits.Mul64(n, uint64(dtype.Bits()))
	if hi != 0 {
		return 0, errorf(ErrShapeOverflow, "shape %v of %v has more than 2^64-1 bits", shape, dtype)
	}
	if nbits%8 != 0 {
		return 0, errorf(ErrMisalignedSlice, "shape %v of %v is %d bits, not a whole number of bytes", shape, dtype, nbits)
	}
	return nbits / 8, nil
}

// headerLen decodes the 8-byte prefix and checks N against MaxHeaderSize and
// against the size of the file, if known (size >= 0).
// When N is too large, the file's first bytes (as many as the caller has
// read, up to filekind.Len) may say what else the file is: the error then
// says so (ErrNotSafetensors).
func headerLen(prefix []byte, size int64) (uint64, error) {
	n := binary.LittleEndian.Uint64(prefix)
	if n > MaxHeaderSize {
		if err := notSafetensors(prefix); err != nil {
			return 0, err
		}
		return 0, errorf(ErrHeaderTooLarge, "header length %d is more than the limit of %d bytes", n, MaxHeaderSize)
	}
	if size >= 0 && n > uint64(size)-prefixLen {
		rest := uint64(size) - prefixLen
		return 0, errorf(ErrInvalidHeaderLength, "header length %d is more than the %d bytes after the length prefix: the file is %d bytes, the header needs %d more (a truncated file?)",
			n, rest, size, n-rest)
	}
	return n, nil
}

// scalarShape is the Shape of every scalar tensor read: empty, not nil, and
// shared, which is safe because it has no capacity to append into.
var scalarShape = []uint64{}

// parsedHeader is a Header with its name index.
type parsedHeader struct {
	Header
	names  nameTable
	strict bool // parsed with the Strict option
	// raw is the file's bytes before the data section, as read: the 8-byte
	// length and the JSON text; nil for ReadHeader.
	raw []byte
}

// parseHeader parses and validates the JSON header text hdr: everything but
// the length of the data section, which the caller checks against DataLen.
func parseHeader(hdr []byte, cfg *readConfig) (*parsedHeader, error) {
	if !utf8.Valid(hdr) {
		i := 0
		for i < len(hdr) {
			r, size := utf8.DecodeRune(hdr[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return nil, errorf(ErrHeaderNotUTF8, "invalid byte 0x%02x at header byte %d (file offset %d)", hdr[i], i, i+prefixLen)
	}
	p := newScanner(hdr, cfg.strict)
	if err := p.parse(); err != nil {
		return nil, err
	}

	// Later entries replace earlier ones of the same name, as the reference's
	// hash map does.
	tensors := p.tensors
	names, dups := buildNameTable(tensors)
	stale := len(dups) > 0
	if stale {
		if cfg.strict {
			name := strings.Clone(tensors[dups[0]].Name)
			return nil, &TensorError{Name: name, Err: errorf(ErrInvalidHeader, "duplicate tensor name (strict)")}
		}
		tensors = deleteIndices(tensors, dups)
	}
	p.own(tensors)
	if !offsetsSorted(tensors) {
		slices.SortFunc(tensors, compareOffsets)
		stale = true
	}
	if stale {
		names, _ = buildNameTable(tensors)
	}
	if err := validateLayout(tensors); err != nil {
		return nil, err
	}
	return &parsedHeader{
		Header: Header{Metadata: p.meta, Tensors: tensors, Len: uint64(len(hdr))},
		names:  names,
		strict: cfg.strict,
	}, nil
}

// deleteIndices removes the elements at the given indices from s.
func deleteIndices(s []TensorInfo, del []int) []TensorInfo {
	slices.Sort(del)
	out := s[:del[0]]
	for k, d := range del {
		next := len(s)
		if k+1 < len(del) {
			next = del[k+1]
		}
		out = append(out, s[d+1:next]...)
	}
	clear(s[len(out):])
	return out
}

// offsetsSorted reports whether tensors are in the order of compareOffsets,
// as files from the reference writer are.
func offsetsSorted(tensors []TensorInfo) bool {
	for i := 1; i < len(tensors); i++ {
		a, b := &tensors[i-1].DataOffsets, &tensors[i].DataOffsets
		if a[0] < b[0] || a[0] == b[0] && compareOffsets(tensors[i-1], tensors[i]) <= 0 {
			continue
		}
		return false
	}
	return true
}

// compareOffsets orders tensors by their offsets, then by name, so that the
// order is the same on every run (the reference breaks ties at random).
func compareOffsets(a, b TensorInfo) int {
	if c := cmp.Compare(a.DataOffsets[0], b.DataOffsets[0]); c != 0 {
		return c
	}
	if c := cmp.Compare(a.DataOffsets[1], b.DataOffsets[1]); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// validateLayout checks tensors in file order as the reference does: each
// starts where the previous one ends, with no holes and no overlaps, and its
// byte range matches its shape and dtype.
func validateLayout(tensors []TensorInfo) error {
	var end uint64
	for i := range tensors {
		t := &tensors[i]
		b, e := t.DataOffsets[0], t.DataOffsets[1]
		if b != end {
			return tensorErrorf(t.Name, ErrInvalidOffset, "data_offsets [%d, %d]: begin must be %d, the end of the previous tensor", b, e, end)
		}
		if e < b {
			return tensorErrorf(t.Name, ErrInvalidOffset, "data_offsets [%d, %d]: end is before begin", b, e)
		}
		end = e
		n, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return &TensorError{Name: t.Name, Err: err}
		}
		if e-b != n {
			return tensorErrorf(t.Name, ErrSizeMismatch, "data_offsets [%d, %d] hold %d bytes, shape %v of %v needs %d", b, e, e-b, t.Shape, t.DType, n)
		}
	}
	return nil
}

// ReadHeader reads the 8-byte prefix and the JSON header from r, and no more,
// and returns the validated header: for tools that list a file's tensors and
// for remote reads. (Of a file of another kind, which fails with
// ErrNotSafetensors, it reads up to 1 KiB, to say what it is.) It does not
// know the file's size, so it cannot check that the data section is exactly
// [Header.DataLen] bytes long; NewReader does.
//
// A stream that ends within the prefix gives ErrHeaderTooSmall, within the
// header ErrInvalidHeaderLength; both also match io.ErrUnexpectedEOF. ReadHeader
// reads the header in growing chunks, so a large N in a short stream does not
// make it allocate N bytes.
func ReadHeader(r io.Reader, opts ...ReadOption) (*Header, error) {
	cfg, err := newReadConfig(opts)
	if err != nil {
		return nil, err
	}
	var prefix [prefixLen]byte
	if n, err := io.ReadFull(r, prefix[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, errorf(ErrHeaderTooSmall, "stream ended after %d bytes: %w", n, io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	n, err := headerLen(prefix[:], -1)
	if errors.Is(err, ErrHeaderTooLarge) && filekind.Of(prefix[:]) != filekind.Unknown {
		// A file of another kind: a few more bytes say which.
		head := make([]byte, prefixLen, filekind.Len)
		copy(head, prefix[:])
		m, _ := io.ReadFull(r, head[prefixLen:filekind.Len])
		_, err = headerLen(head[:prefixLen+m], -1)
	}
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	// bytes.Buffer grows as data arrives, never to more than twice what came.
	if got, err := io.Copy(&buf, io.LimitReader(r, int64(n))); err != nil {
		return nil, err
	} else if uint64(got) < n {
		return nil, errorf(ErrInvalidHeaderLength, "header length is %d but the stream ended after %d header bytes, %d bytes short: %w", n, got, n-uint64(got), io.ErrUnexpectedEOF)
	}
	h, err := parseHeader(buf.Bytes(), cfg)
	if err != nil {
		return nil, err
	}
	return &h.Header, nil
}

// appendString appends s as a JSON string, escaped as the reference writer
// (serde_json) does: \" \\ \n \r \t \b \f, other control characters as
// \u00xx, everything else as it is.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendHeader appends the 8-byte prefix and the JSON header for the given
// tensor entries, in the given order, as the reference writer does: compact
// JSON, "__metadata__" first when metadata is not nil (its keys sorted, where
// the reference uses hash order), each entry as dtype, shape, data_offsets,
// and spaces so that the data section, at 8 + N, starts at a multiple of
// align (8 gives the reference's padding of N to a multiple of 8).
func appendHeader(dst []byte, metadata map[string]string, tensors []TensorInfo, align int) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, prefixLen)...)
	dst = append(dst, '{')
	if metadata != nil {
		dst = append(dst, `"__metadata__":{`...)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, metadata[k])
		}
		dst = append(dst, '}')
		if len(tensors) > 0 {
			dst = append(dst, ',')
		}
	}
	for i := range tensors {
		t := &tensors[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, t.Name)
		dst = append(dst, `:{"dtype":"`...)
		dst = append(dst, t.DType.String()...)
		dst = append(dst, `","shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, d, 10)
		}
		dst = append(dst, `],"data_offsets":[`...)
		dst = strconv.AppendUint(dst, t.DataOffsets[0], 10)
		dst = append(dst, ',')
		dst = strconv.AppendUint(dst, t.DataOffsets[1], 10)
		dst = append(dst, "]}"...)
	}
	dst = append(dst, '}')
	for (len(dst)-start)%align != 0 {
		dst = append(dst, ' ')
	}
	binary.LittleEndian.PutUint64(dst[start:], uint64(len(dst)-start-prefixLen))
	return dst
}
