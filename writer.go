package safetensors

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Write writes tensors and metadata to w as a safetensors file, byte for byte
// as the reference writer does:
//
//   - the tensors in order of descending DType (U64 first, BOOL last), then
//     of name, each starting where the previous one ends;
//   - compact JSON with "__metadata__" first, written when metadata is not
//     nil (even if empty), its keys sorted so the output is deterministic
//     (the reference uses hash order);
//   - names and strings escaped as serde_json does;
//   - the header padded with spaces so that the data section starts at a
//     multiple of 8.
//
// Write checks everything before it writes a byte: names must be valid UTF-8
// (ErrHeaderNotUTF8), unique, and not "__metadata__" (ErrInvalidHeader); the
// DType must be one of the constants (ErrUnknownDType); the shape must not
// overflow (ErrShapeOverflow) and must fill whole bytes (ErrMisalignedSlice);
// len(Data) must match the shape and dtype (ErrSizeMismatch). Metadata keys
// and values must be valid UTF-8. Errors about a tensor are *TensorErrors.
//
// Write does not close w. With zero tensors and empty metadata it writes
// {"__metadata__":{}}, where the reference writes invalid JSON.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	hdr, order, err := prepare(tensors, metadata)
	if err != nil {
		return err
	}
	return writeTo(w, hdr, tensors, order)
}

// prepare validates tensors and metadata and returns the prefix and header,
// and the order of the tensors in the file.
func prepare(tensors []Tensor, metadata map[string]string) ([]byte, []int, error) {
	infos, order, err := layout(len(tensors), func(i int) (string, DType, []uint64) {
		t := &tensors[i]
		return t.Name, t.DType, t.Shape
	}, metadata)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range order {
		t := &tensors[i]
		if size := infos[k].DataOffsets[1] - infos[k].DataOffsets[0]; uint64(len(t.Data)) != size {
			return nil, nil, tensorErrorf(t.Name, ErrSizeMismatch, "len(Data) is %d, shape %v of %v needs %d bytes", len(t.Data), t.Shape, t.DType, size)
		}
	}
	hdr := appendHeader(nil, metadata, infos, headerAlign)
	if n := len(hdr) - prefixLen; n > MaxHeaderSize {
		return nil, nil, errorf(ErrHeaderTooLarge, "the header would be %d bytes, more than the limit of %d", n, MaxHeaderSize)
	}
	return hdr, order, nil
}

// layout validates the n tensors that tensor(i) describes, and the metadata,
// and lays the tensors out as the reference writer does. It returns their
// entries in file order, and order[k], the index of the k-th of them.
func layout(n int, tensor func(i int) (string, DType, []uint64), metadata map[string]string) ([]TensorInfo, []int, error) {
	for k, v := range metadata {
		if !utf8.ValidString(k) {
			return nil, nil, errorf(ErrHeaderNotUTF8, "metadata key %q is not valid UTF-8", k)
		}
		if !utf8.ValidString(v) {
			return nil, nil, errorf(ErrHeaderNotUTF8, "metadata value of %q is not valid UTF-8", k)
		}
	}
	infos := make([]TensorInfo, n)
	seen := make(map[string]struct{}, n)
	for i := range infos {
		name, dtype, shape := tensor(i)
		switch {
		case !utf8.ValidString(name):
			return nil, nil, &TensorError{Name: name, Err: errorf(ErrHeaderNotUTF8, "the name is not valid UTF-8")}
		case name == metadataKey:
			return nil, nil, &TensorError{Name: name, Err: errorf(ErrInvalidHeader, "the name is reserved for the metadata")}
		case !dtype.valid():
			return nil, nil, &TensorError{Name: name, Err: fmt.Errorf("%w: %v", ErrUnknownDType, dtype)}
		}
		if _, dup := seen[name]; dup {
			return nil, nil, &TensorError{Name: name, Err: errorf(ErrInvalidHeader, "duplicate tensor name")}
		}
		seen[name] = struct{}{}
		size, err := byteSize(dtype, shape)
		if err != nil {
			return nil, nil, &TensorError{Name: name, Err: err}
		}
		// DataOffsets[1] holds the size until the offsets are known.
		infos[i] = TensorInfo{Name: name, DType: dtype, Shape: shape, DataOffsets: [2]uint64{0, size}}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(infos[b].DType, infos[a].DType); c != 0 {
			return c
		}
		return cmp.Compare(infos[a].Name, infos[b].Name)
	})
	sorted := make([]TensorInfo, n)
	var off uint64
	for k, i := range order {
		t := infos[i]
		size := t.DataOffsets[1]
		if off+size < off {
			return nil, nil, &TensorError{Name: t.Name, Err: errorf(ErrShapeOverflow, "the data section would be more than 2^64-1 bytes")}
		}
		t.DataOffsets = [2]uint64{off, off + size}
		off += size
		sorted[k] = t
	}
	return sorted, order, nil
}

// writeTo writes the prefix and header hdr, then the tensors' data in order.
func writeTo(w io.Writer, hdr []byte, tensors []Tensor, order []int) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	for _, i := range order {
		if _, err := bw.Write(tensors[i].Data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes tensors and metadata to the named file as Write does. It
// never leaves a partial file at path: it writes a temporary file in the same
// directory, syncs it to disk, renames it to path, and then syncs the
// directory where the platform allows. On any error the temporary file is
// removed and an existing file at path is left as it was. Nothing is created
// if the tensors are invalid. The new file gets mode 0666 before the umask.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	hdr, order, err := prepare(tensors, metadata)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, func(w io.Writer) error {
		return writeTo(w, hdr, tensors, order)
	})
}

// fileWriter is what writeFileAtomic needs of the temporary file.
type fileWriter interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// createTemp creates the temporary file; tests replace it to simulate
// failing disks.
var createTemp = func(name string) (fileWriter, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// writeFileAtomic writes path with write, through a temporary file that it
// renames over path only once write and Sync succeeded.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	var f fileWriter
	for range 100 {
		tmp := filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(rand.Uint64(), 36))
		f, err = createTemp(tmp)
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable where the platform allows; it is
// best effort, since the new file is in place whatever it returns.
func syncDir(dir string) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return
	}
	if dir == "" {
		dir = "."
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
