package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/safetensors-go/safetensors/internal/atomicfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamTensors returns tensors with distinct, non-zero bytes, some empty.
func streamTensors() []Tensor {
	mk := func(name string, d DType, shape ...uint64) Tensor {
		size, _ := byteSize(d, shape)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(len(name)*31 + i*7 + 1)
		}
		return Tensor{Name: name, DType: d, Shape: shape, Data: data}
	}
	return []Tensor{
		mk("embed", BF16, 64, 33),
		mk("bias", F32, 17),
		mk("empty", F32, 0, 5),
		mk("counts", I64, 3),
		mk("mask", BOOL, 9),
		mk("scale", F64),
		mk("packed", F4, 6),
	}
}

func specsOf(tensors []Tensor) []TensorSpec {
	specs := make([]TensorSpec, len(tensors))
	for i, t := range tensors {
		specs[i] = TensorSpec{Name: t.Name, DType: t.DType, Shape: t.Shape}
	}
	return specs
}

// dataInOrder returns the data section: the tensors' bytes in file order.
func dataInOrder(t *testing.T, h *Header, tensors []Tensor) []byte {
	byName := map[string][]byte{}
	for _, tensor := range tensors {
		byName[tensor.Name] = tensor.Data
	}
	var data []byte
	for _, info := range h.Tensors {
		d, ok := byName[info.Name]
		require.True(t, ok)
		data = append(data, d...)
	}
	return data
}

func TestWriterStream(t *testing.T) {
	tensors := streamTensors()
	want, err := writeBytes(tensors, map[string]string{"format": "pt"})
	require.NoError(t, err)

	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one_byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, specsOf(tensors), map[string]string{"format": "pt"})
			require.NoError(t, err)
			data := dataInOrder(t, w.Header(), tensors)
			assert.Equal(t, want[:w.Header().DataOffset()], buf.Bytes(), "NewWriter writes the header at once")
			n, err := io.Copy(w, wrap(bytes.NewReader(data)))
			require.NoError(t, err)
			assert.Equal(t, int64(len(data)), n)
			require.NoError(t, w.Close())
			assert.Equal(t, want, buf.Bytes())
		})
	}
}

func TestWriterWriteTensor(t *testing.T) {
	tensors := streamTensors()
	want, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	byName := map[string]Tensor{}
	for _, tensor := range tensors {
		byName[tensor.Name] = tensor
	}

	var buf bytes.Buffer
	w, err := NewWriter(&buf, specsOf(tensors), nil)
	require.NoError(t, err)
	order := w.Header().Tensors
	assert.Equal(t, "counts", order[0].Name, "I64 comes first")
	assert.Equal(t, "scale", order[1].Name, "then F64")

	// Out of order.
	err = w.WriteTensor(order[1].Name, bytes.NewReader(byName[order[1].Name].Data))
	require.ErrorIs(t, err, ErrWriteOrder)
	assert.Contains(t, err.Error(), fmt.Sprintf("in tensor %q", order[0].Name))
	err = w.WriteTensor("nope", strings.NewReader(""))
	require.ErrorIs(t, err, ErrTensorNotFound)

	for _, info := range order {
		// A source with more bytes than the tensor needs: the rest stays.
		src := io.MultiReader(bytes.NewReader(byName[info.Name].Data), strings.NewReader("extra"))
		require.NoError(t, w.WriteTensor(info.Name, src), info.Name)
	}
	require.NoError(t, w.Close())
	assert.Equal(t, want, buf.Bytes())

	_, err = w.Write([]byte{1})
	assert.ErrorIs(t, err, ErrClosed)
	assert.NoError(t, w.Close())
}

func TestWriterErrors(t *testing.T) {
	tensors := streamTensors()
	newW := func() (*Writer, *bytes.Buffer, []byte) {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, specsOf(tensors), nil)
		require.NoError(t, err)
		return w, &buf, dataInOrder(t, w.Header(), tensors)
	}

	t.Run("too_long", func(t *testing.T) {
		w, buf, data := newW()
		n, err := w.Write(append(data, 1, 2, 3))
		assert.Equal(t, len(data), n, "what fits is written")
		require.ErrorIs(t, err, ErrSizeMismatch)
		assert.Contains(t, err.Error(), "past the end")
		size := buf.Len()
		_, err2 := w.Write([]byte{1})
		assert.Same(t, err, err2, "errors are sticky")
		assert.Equal(t, size, buf.Len())
		assert.Same(t, err, w.Close())
	})
	t.Run("incomplete", func(t *testing.T) {
		w, _, data := newW()
		first := w.Header().Tensors[0] // counts, 24 bytes
		_, err := w.Write(data[:first.DataOffsets[1]+3])
		require.NoError(t, err)
		err = w.Close()
		require.ErrorIs(t, err, ErrSizeMismatch)
		next := w.Header().Tensors[1]
		size := next.DataOffsets[1] - next.DataOffsets[0]
		assert.Equal(t, fmt.Sprintf("safetensors: tensor %q: byte size does not match shape and dtype: 3 of %d bytes written, %d missing", next.Name, size, size-3), err.Error())
	})
	t.Run("nothing_written", func(t *testing.T) {
		w, _, _ := newW()
		err := w.Close()
		var te *TensorError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "counts", te.Name)
	})
	t.Run("short_source", func(t *testing.T) {
		w, _, _ := newW()
		err := w.WriteTensor("counts", strings.NewReader("1234"))
		require.ErrorIs(t, err, ErrSizeMismatch)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Contains(t, err.Error(), `tensor "counts": byte size does not match shape and dtype: the source ended after 4 of 24 bytes`)
		_, err2 := w.Write([]byte{1})
		assert.Same(t, err, err2)
	})
	t.Run("failing_source", func(t *testing.T) {
		w, _, _ := newW()
		boom := errors.New("network down")
		err := w.WriteTensor("counts", io.MultiReader(strings.NewReader("12"), iotest.ErrReader(boom)))
		require.ErrorIs(t, err, boom)
		var te *TensorError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "counts", te.Name)
		assert.ErrorIs(t, w.Close(), boom)
	})
	t.Run("failing_destination", func(t *testing.T) {
		boom := errors.New("disk full")
		_, err := NewWriter(&failingWriter{n: 10, err: boom}, specsOf(tensors), nil)
		assert.ErrorIs(t, err, boom, "the header fails")
		w, err := NewWriter(&failingWriter{n: 1000, err: boom}, specsOf(tensors), nil)
		require.NoError(t, err)
		_, err = io.Copy(w, bytes.NewReader(dataInOrder(t, w.Header(), tensors)))
		assert.ErrorIs(t, err, boom)
		assert.ErrorIs(t, w.Close(), boom)
	})
	t.Run("at_needs_writer_at", func(t *testing.T) {
		w, _, _ := newW()
		err := w.WriteTensorAt("scale", strings.NewReader("12345678"))
		require.ErrorIs(t, err, errors.ErrUnsupported)
		var te *TensorError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "scale", te.Name)
		assert.ErrorContains(t, err, "io.WriterAt")
	})
	t.Run("no_tensors", func(t *testing.T) {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, nil, nil)
		require.NoError(t, err)
		size := buf.Len()
		n, err := w.Write([]byte{1})
		assert.Zero(t, n)
		require.ErrorIs(t, err, ErrSizeMismatch)
		assert.Equal(t, size, buf.Len())
	})
	t.Run("invalid_specs", func(t *testing.T) {
		var buf bytes.Buffer
		_, err := NewWriter(&buf, []TensorSpec{{Name: "a", DType: U8}, {Name: "a", DType: U8}}, nil)
		assert.ErrorIs(t, err, ErrInvalidHeader)
		assert.Zero(t, buf.Len())
		_, err = NewWriter(&buf, nil, nil, Alignment(12))
		assert.Error(t, err)
	})
}

// TestWriterMisuse: each way of breaking a Writer's rules is refused with
// a *TensorError naming the tensor and wrapping the sentinel that says what
// happened; nothing is written, and the Writer goes on to write the file.
func TestWriterMisuse(t *testing.T) {
	tensors := streamTensors()
	want, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	byName := map[string][]byte{}
	for _, tensor := range tensors {
		byName[tensor.Name] = tensor.Data
	}
	// newW returns a Writer to a file, which is an io.WriterAt, and the
	// tensors in file order.
	newW := func(t *testing.T) (*Writer, *os.File, []TensorInfo) {
		f, err := os.Create(filepath.Join(t.TempDir(), "w.safetensors"))
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		w, err := NewWriter(f, specsOf(tensors), nil)
		require.NoError(t, err)
		return w, f, w.Header().Tensors
	}
	refused := func(t *testing.T, err, sentinel error, name string) {
		t.Helper()
		require.ErrorIs(t, err, sentinel)
		var te *TensorError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, name, te.Name)
	}
	size := func(t *testing.T, f *os.File) int64 {
		info, err := f.Stat()
		require.NoError(t, err)
		return info.Size()
	}
	finish := func(t *testing.T, w *Writer, f *os.File) {
		t.Helper()
		require.NoError(t, w.Close())
		got, err := os.ReadFile(f.Name())
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}

	t.Run("in_order_twice", func(t *testing.T) {
		w, f, order := newW(t)
		require.NoError(t, w.WriteTensor(order[0].Name, bytes.NewReader(byName[order[0].Name])))
		before := size(t, f)
		err := w.WriteTensor(order[0].Name, bytes.NewReader(byName[order[0].Name]))
		refused(t, err, ErrTensorWritten, order[0].Name)
		assert.Equal(t, before, size(t, f), "nothing written")
		for _, info := range order[1:] {
			require.NoError(t, w.WriteTensor(info.Name, bytes.NewReader(byName[info.Name])))
		}
		finish(t, w, f)
	})
	t.Run("at_after_in_order", func(t *testing.T) {
		w, f, order := newW(t)
		require.NoError(t, w.WriteTensor(order[0].Name, bytes.NewReader(byName[order[0].Name])))
		err := w.WriteTensorAt(order[0].Name, bytes.NewReader(byName[order[0].Name]))
		refused(t, err, ErrTensorWritten, order[0].Name)
		for i := len(order) - 1; i > 0; i-- { // backwards, at their places
			require.NoError(t, w.WriteTensorAt(order[i].Name, bytes.NewReader(byName[order[i].Name])))
		}
		err = w.WriteTensorAt(order[1].Name, bytes.NewReader(byName[order[1].Name]))
		refused(t, err, ErrTensorWritten, order[1].Name)
		finish(t, w, f)
	})
	t.Run("at_of_a_begun_tensor", func(t *testing.T) {
		w, f, order := newW(t)
		_, err := w.Write(byName[order[0].Name][:3])
		require.NoError(t, err)
		err = w.WriteTensorAt(order[0].Name, bytes.NewReader(byName[order[0].Name]))
		refused(t, err, ErrTensorWritten, order[0].Name)
		_, err = w.Write(byName[order[0].Name][3:])
		require.NoError(t, err, "the Writer goes on")
		for _, info := range order[1:] {
			require.NoError(t, w.WriteTensor(info.Name, bytes.NewReader(byName[info.Name])))
		}
		finish(t, w, f)
	})
	t.Run("in_order_after_at", func(t *testing.T) {
		w, f, order := newW(t)
		last := order[len(order)-1]
		require.NoError(t, w.WriteTensorAt(last.Name, bytes.NewReader(byName[last.Name])))
		err := w.WriteTensor(order[0].Name, bytes.NewReader(byName[order[0].Name]))
		refused(t, err, ErrWriteOrder, order[0].Name)
		_, err = w.Write(byName[order[0].Name])
		refused(t, err, ErrWriteOrder, order[0].Name)
		for _, info := range order[:len(order)-1] {
			require.NoError(t, w.WriteTensorAt(info.Name, bytes.NewReader(byName[info.Name])))
		}
		finish(t, w, f)
	})
	t.Run("at_twice_at_once", func(t *testing.T) {
		w, f, order := newW(t)
		name := order[0].Name
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- w.WriteTensorAt(name, pr) }()
		_, err := pw.Write(byName[name][:1]) // the first call is writing
		require.NoError(t, err)
		err = w.WriteTensorAt(name, bytes.NewReader(byName[name]))
		refused(t, err, ErrTensorWritten, name)
		assert.ErrorContains(t, err, "another WriteTensorAt")
		_, err = pw.Write(byName[name][1:])
		require.NoError(t, err)
		require.NoError(t, <-done)
		for _, info := range order[1:] {
			require.NoError(t, w.WriteTensorAt(info.Name, bytes.NewReader(byName[info.Name])))
		}
		finish(t, w, f)
	})
}

// TestWriteTensorAt writes the tensors of a file from several goroutines at
// once, in random order, through CreateFile; run it with -race.
func TestWriteTensorAt(t *testing.T) {
	tensors := generateTensors(t, 300)
	want, err := writeBytes(tensors, map[string]string{"k": "v"})
	require.NoError(t, err)

	dir := t.TempDir()
	path := filepath.Join(dir, "parallel.safetensors")
	fw, err := CreateFile(path, specsOf(tensors), map[string]string{"k": "v"})
	require.NoError(t, err)

	work := make(chan Tensor)
	var wg sync.WaitGroup
	errs := make(chan error, len(tensors))
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tensor := range work {
				errs <- fw.WriteTensorAt(tensor.Name, iotest.HalfReader(bytes.NewReader(tensor.Data)))
			}
		}()
	}
	for _, i := range rand.Perm(len(tensors)) {
		work <- tensors[i]
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, statErr := os.Stat(path)
	assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing at the path before Close")

	err = fw.WriteTensorAt(tensors[0].Name, bytes.NewReader(tensors[0].Data))
	assert.ErrorIs(t, err, ErrTensorWritten, "each tensor once")
	_, err = fw.Write([]byte{1})
	assert.ErrorIs(t, err, ErrWriteOrder, "no sequential writes after WriteTensorAt")

	require.NoError(t, fw.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assertDir(t, dir, "parallel.safetensors")
}

// generateTensors returns n small tensors of varied dtypes and shapes.
func generateTensors(t *testing.T, n int) []Tensor {
	t.Helper()
	r, err := NewReader(generateModel(t, n))
	require.NoError(t, err)
	tensors, err := r.Tensors()
	require.NoError(t, err)
	return tensors
}

func TestWriteTensorAtIncomplete(t *testing.T) {
	tensors := streamTensors()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	fw, err := CreateFile(path, specsOf(tensors), nil)
	require.NoError(t, err)
	require.NoError(t, fw.WriteTensorAt("bias", bytes.NewReader(tensors[1].Data)))
	err = fw.Close()
	require.ErrorIs(t, err, ErrSizeMismatch)
	assert.Contains(t, err.Error(), `tensor "counts": byte size does not match shape and dtype: 0 of 24 bytes written, 24 missing`)
	assertDir(t, dir)
}

// TestWriteTensorAtEmpty: a tensor of no bytes needs no write, in either
// way of writing.
func TestWriteTensorAtEmpty(t *testing.T) {
	tensors := streamTensors()
	want, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	byName := map[string][]byte{}
	for _, tensor := range tensors {
		byName[tensor.Name] = tensor.Data
	}
	for _, at := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		fw, err := CreateFile(path, specsOf(tensors), nil)
		require.NoError(t, err)
		for _, info := range fw.Header().Tensors {
			data := byName[info.Name]
			switch {
			case len(data) == 0:
			case at:
				require.NoError(t, fw.WriteTensorAt(info.Name, bytes.NewReader(data)))
			default:
				require.NoError(t, fw.WriteTensor(info.Name, bytes.NewReader(data)))
			}
		}
		require.NoError(t, fw.Close(), "WriteTensorAt: %v", at)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
}

func TestAlignment(t *testing.T) {
	tensors := streamTensors()
	def, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, tensors, nil, Alignment(8)))
	assert.Equal(t, def, buf.Bytes())

	for _, align := range []int{16, 64, 4096, MaxAlignment} {
		buf.Reset()
		require.NoError(t, Write(&buf, tensors, map[string]string{"a": "b"}, Alignment(align)))
		r, err := NewReader(buf.Bytes(), Strict())
		require.NoError(t, err, "align %d", align)
		h := r.Header()
		assert.Zero(t, h.DataOffset()%uint64(align), "align %d", align)
		assert.Less(t, h.DataOffset(), uint64(8+len(`{"__metadata__":{"a":"b"}}`)+4000+align))
		// The padding is spaces after the JSON.
		hdr := buf.Bytes()[prefixLen:h.DataOffset()]
		assert.Equal(t, hdr, append(bytes.TrimRight(hdr, " "), bytes.Repeat([]byte{' '}, len(hdr)-len(bytes.TrimRight(hdr, " ")))...))
		for _, want := range tensors {
			got, err := r.Tensor(want.Name)
			require.NoError(t, err)
			assert.Equal(t, want.Data, got.Data)
		}
	}
	for _, bad := range []int{0, 1, 4, 12, 100, 2 * MaxAlignment, -8} {
		assert.Error(t, Write(io.Discard, tensors, nil, Alignment(bad)), "align %d", bad)
	}
}

func TestCreateFile(t *testing.T) {
	tensors := streamTensors()
	want, err := writeBytes(tensors, nil)
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))

	write := func(src func(Tensor) io.Reader) error {
		fw, err := CreateFile(path, specsOf(tensors), nil)
		require.NoError(t, err)
		byName := map[string]Tensor{}
		for _, tensor := range tensors {
			byName[tensor.Name] = tensor
		}
		for _, info := range fw.Header().Tensors {
			if err := fw.WriteTensor(info.Name, src(byName[info.Name])); err != nil {
				assert.Equal(t, err, fw.Close(), "Close returns the error")
				return err
			}
		}
		return fw.Close()
	}

	// A source that fails part way: nothing changes at path.
	boom := errors.New("source failed")
	err = write(func(tensor Tensor) io.Reader {
		if tensor.Name == "embed" {
			return io.MultiReader(bytes.NewReader(tensor.Data[:100]), iotest.ErrReader(boom))
		}
		return bytes.NewReader(tensor.Data)
	})
	require.ErrorIs(t, err, boom)
	got, _ := os.ReadFile(path)
	assert.Equal(t, "old", string(got))
	assertDir(t, dir, "model.safetensors")

	// Abort.
	fw, err := CreateFile(path, specsOf(tensors), nil)
	require.NoError(t, err)
	fw.Abort()
	assert.ErrorIs(t, fw.Close(), ErrClosed)
	assertDir(t, dir, "model.safetensors")

	// Success replaces the file.
	require.NoError(t, write(func(tensor Tensor) io.Reader { return bytes.NewReader(tensor.Data) }))
	got, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assertDir(t, dir, "model.safetensors")

	// Invalid specs create nothing.
	_, err = CreateFile(filepath.Join(dir, "bad.safetensors"), []TensorSpec{{Name: "x"}}, nil)
	assert.ErrorIs(t, err, ErrUnknownDType)
	assertDir(t, dir, "model.safetensors")
}

// TestCreateFileDiskFailure simulates a disk that fails part way through a
// streamed file.
func TestCreateFileDiskFailure(t *testing.T) {
	tensors := streamTensors()
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	boom := errors.New("no space left on device")
	wrapTemp(t, func(f *os.File) (atomicfile.Temp, error) {
		return &fakeFile{File: f, w: io.MultiWriter(f, &failingWriter{n: 600, err: boom})}, nil
	})
	fw, err := CreateFile(path, specsOf(tensors), nil)
	require.NoError(t, err)
	_, err = io.Copy(fw, bytes.NewReader(dataInOrder(t, fw.Header(), tensors)))
	require.ErrorIs(t, err, boom)
	assert.ErrorIs(t, fw.Close(), boom)
	assertDir(t, dir)
}

// TestWriteTensorFromFile copies tensors from one file into another, which
// the kernel may do without passing the bytes through user memory.
func TestWriteTensorFromFile(t *testing.T) {
	tensors := streamTensors()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	require.NoError(t, WriteFile(src, tensors, nil))
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	r, err := NewReader(data)
	require.NoError(t, err)

	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	dst := filepath.Join(dir, "dst.safetensors")
	fw, err := CreateFile(dst, specsOf(tensors), nil)
	require.NoError(t, err)
	for _, info := range r.Header().Tensors {
		sr := io.NewSectionReader(f, int64(r.Header().DataOffset()+info.DataOffsets[0]), int64(info.DataOffsets[1]-info.DataOffsets[0]))
		require.NoError(t, fw.WriteTensor(info.Name, sr))
	}
	require.NoError(t, fw.Close())
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, data, got)
}
