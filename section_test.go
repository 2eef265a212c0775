package safetensors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sectionTensors are tensors whose data section is 100 bytes: not a
// multiple of 64.
var sectionTensors = []Tensor{
	{Name: "a", DType: U8, Shape: []uint64{3}, Data: []byte{1, 2, 3}},
	{Name: "b", DType: F32, Shape: []uint64{2}, Data: []byte{4, 5, 6, 7, 8, 9, 10, 11}},
	{Name: "c", DType: U8, Shape: []uint64{89}, Data: bytes.Repeat([]byte{12}, 89)},
}

// writeSectionFile writes tensors to a new file, and returns its path and
// bytes.
func writeSectionFile(t *testing.T, tensors []Tensor) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	require.NoError(t, WriteFile(path, tensors, map[string]string{"format": "pt"}))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return path, raw
}

// ctxReaderAt is a ReaderAtContext that records how it is read. Where
// block is set, ReadAtContext waits for its ctx to be done before reading.
type ctxReaderAt struct {
	r         io.ReaderAt
	block     bool
	plain     atomic.Int64 // calls of ReadAt
	ctxCalls  atomic.Int64 // calls of ReadAtContext
	lastValue atomic.Value // ctx.Value(ctxKey{}) of the last ReadAtContext
	lastOff   atomic.Int64
	started   chan struct{} // receives once per blocked read, if not nil
}

type ctxKey struct{}

func (c *ctxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.plain.Add(1)
	return c.r.ReadAt(p, off)
}

func (c *ctxReaderAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	c.ctxCalls.Add(1)
	c.lastOff.Store(off)
	if v := ctx.Value(ctxKey{}); v != nil {
		c.lastValue.Store(v)
	}
	if c.block {
		if c.started != nil {
			c.started <- struct{}{}
		}
		<-ctx.Done()
		return 0, context.Cause(ctx)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.ReadAt(p, off)
}

var _ ReaderAtContext = (*ctxReaderAt)(nil)

// assertCancelled checks that err is what TensorContext gives for a
// context cancelled: a *TensorError naming the tensor, wrapping
// context.Canceled.
func assertCancelled(t *testing.T, err error, name string) {
	t.Helper()
	require.ErrorIs(t, err, context.Canceled)
	var te *TensorError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, name, te.Name)
}

// TestTensorContext reads tensors under a context: from memory, the
// tensor once ctx is checked; through a source, with its ReadAtContext
// under ctx where it has one, else with ReadAt. A context done gives a
// *TensorError wrapping context.Canceled.
func TestTensorContext(t *testing.T) {
	path, raw := writeSectionFile(t, sectionTensors)
	ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	t.Run("memory", func(t *testing.T) {
		open := map[string]func() (*Reader, error){
			"Open":      func() (*Reader, error) { return Open(path) },
			"ReadAll":   func() (*Reader, error) { return Open(path, ReadAll()) },
			"NewReader": func() (*Reader, error) { return NewReader(raw) },
		}
		for name, open := range open {
			t.Run(name, func(t *testing.T) {
				r, err := open()
				require.NoError(t, err)
				defer r.Close()
				for _, want := range sectionTensors {
					got, err := r.TensorContext(ctx, want.Name)
					require.NoError(t, err)
					assert.Equal(t, want, got)
				}
				_, err = r.TensorContext(cancelled, "a")
				assertCancelled(t, err, "a")
				_, err = r.TensorContext(ctx, "nope")
				assert.ErrorIs(t, err, ErrTensorNotFound)
				require.NoError(t, r.Close())
				_, err = r.TensorContext(ctx, "a")
				assert.ErrorIs(t, err, ErrClosed)
			})
		}
	})

	t.Run("ReaderAtContext", func(t *testing.T) {
		src := &ctxReaderAt{r: bytes.NewReader(raw)}
		r, err := NewReaderAt(src, int64(len(raw)))
		require.NoError(t, err)
		headerReads := src.plain.Load()
		for _, want := range sectionTensors {
			got, err := r.TensorContext(ctx, want.Name)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
		assert.Equal(t, int64(len(sectionTensors)), src.ctxCalls.Load(), "each tensor read through ReadAtContext")
		assert.Equal(t, headerReads, src.plain.Load(), "no tensor read with ReadAt")
		assert.Equal(t, "mine", src.lastValue.Load(), "the caller's ctx reaches ReadAtContext")
		c, err := r.Info("c")
		require.NoError(t, err)
		assert.Equal(t, int64(r.Header().DataOffset()+c.DataOffsets[0]), src.lastOff.Load(), "c read at its offset in the file")

		// Tensor reads under the source's own context: with ReadAt.
		got, err := r.Tensor("b")
		require.NoError(t, err)
		assert.Equal(t, sectionTensors[1], got)
		assert.Equal(t, headerReads+1, src.plain.Load())

		calls := src.ctxCalls.Load()
		_, err = r.TensorContext(cancelled, "b")
		assertCancelled(t, err, "b")
		assert.Equal(t, calls, src.ctxCalls.Load(), "a context already done reads nothing")
	})

	t.Run("cancelled during the read", func(t *testing.T) {
		src := &ctxReaderAt{r: bytes.NewReader(raw)}
		r, err := NewReaderAt(src, int64(len(raw)))
		require.NoError(t, err)
		src.block, src.started = true, make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := r.TensorContext(ctx, "c")
			done <- err
		}()
		select {
		case <-src.started:
		case <-time.After(30 * time.Second):
			t.Fatal("the read did not start")
		}
		cancel()
		select {
		case err := <-done:
			assertCancelled(t, err, "c")
		case <-time.After(10 * time.Second):
			t.Fatal("TensorContext did not return once its context was cancelled")
		}
	})

	t.Run("ReaderAt", func(t *testing.T) {
		src := &countingReaderAt{r: bytes.NewReader(raw)}
		r, err := NewReaderAt(src, int64(len(raw)))
		require.NoError(t, err)
		calls := src.calls.Load()
		got, err := r.TensorContext(ctx, "c")
		require.NoError(t, err)
		assert.Equal(t, sectionTensors[2], got)
		assert.Equal(t, calls+1, src.calls.Load(), "read with ReadAt")
		_, err = r.TensorContext(cancelled, "c")
		assertCancelled(t, err, "c")
		assert.Equal(t, calls+1, src.calls.Load(), "a context already done reads nothing")
	})
}

// TestInfo finds a tensor's entry of the header without reading it, even
// after Close.
func TestInfo(t *testing.T) {
	path, raw := writeSectionFile(t, sectionTensors)
	r, err := Open(path)
	require.NoError(t, err)
	at, err := NewReaderAt(headerOnly(t, raw), int64(len(raw)))
	require.NoError(t, err)
	for _, r := range []*Reader{r, at} {
		for _, want := range r.Header().Tensors {
			got, err := r.Info(want.Name)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
		for _, want := range sectionTensors {
			got, err := r.Info(want.Name)
			require.NoError(t, err)
			assert.Equal(t, want.DType, got.DType, want.Name)
			assert.Equal(t, want.Shape, got.Shape, want.Name)
			assert.Equal(t, uint64(len(want.Data)), got.DataOffsets[1]-got.DataOffsets[0], want.Name)
		}
		_, err = r.Info("nope")
		var te *TensorError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "nope", te.Name)
		assert.ErrorIs(t, err, ErrTensorNotFound)
		require.NoError(t, r.Close())
		got, err := r.Info("b")
		require.NoError(t, err, "Info works after Close")
		assert.Equal(t, []uint64{2}, got.Shape)
		assert.Equal(t, [2]uint64{0, 8}, got.DataOffsets, "b, of 8-byte dtype, first in the file")
	}
}

// headerOnly reads the header of raw, and fails every read past it: Info
// must read nothing.
func headerOnly(t *testing.T, raw []byte) io.ReaderAt {
	t.Helper()
	h, err := ReadHeader(bytes.NewReader(raw))
	require.NoError(t, err)
	return &truncatingAt{r: bytes.NewReader(raw), limit: int64(h.DataOffset())}
}

type truncatingAt struct {
	r     io.ReaderAt
	limit int64
}

func (f *truncatingAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.limit {
		return 0, errors.New("read past the header")
	}
	return f.r.ReadAt(p, off)
}

// TestDataSection describes each kind of Reader's file: Open's by its
// path, with its FileInfo and the data section's offset, and each one's
// data section through Data.
func TestDataSection(t *testing.T) {
	path, raw := writeSectionFile(t, sectionTensors)
	h, err := ReadHeader(bytes.NewReader(raw))
	require.NoError(t, err)
	offset := int64(h.DataOffset())
	section := raw[offset:]
	require.Len(t, section, 100)
	readAll := func(t *testing.T, d io.ReaderAt) {
		t.Helper()
		got := make([]byte, len(section))
		n, err := d.ReadAt(got, 0)
		require.Equal(t, len(section), n, "%v", err)
		assert.Equal(t, section, got)
		n, err = d.ReadAt(got[:10], 95)
		assert.Equal(t, 5, n)
		assert.ErrorIs(t, err, io.EOF, "a read past the section's end")
		assert.Equal(t, section[95:], got[:5])
		_, err = d.ReadAt(got[:1], -1)
		assert.Error(t, err, "a negative offset")
	}

	t.Run("Open", func(t *testing.T) {
		r, err := Open(path)
		require.NoError(t, err)
		defer r.Close()
		ds, err := firstSection(r.DataSections())
		require.NoError(t, err)
		assert.Equal(t, path, ds.Name)
		assert.Equal(t, path, ds.Path)
		assert.Equal(t, offset, ds.Offset)
		require.NotNil(t, ds.Info)
		info, err := os.Stat(path)
		require.NoError(t, err)
		assert.True(t, os.SameFile(info, ds.Info), "Info is the file's")
		assert.Equal(t, int64(len(raw)), ds.Info.Size())
		assert.Equal(t, r.Header().Tensors, ds.Tensors)
		readAll(t, ds.Data)
		require.NoError(t, r.Close())
		_, err = firstSection(r.DataSections())
		assert.ErrorIs(t, err, ErrClosed)
	})

	t.Run("memory", func(t *testing.T) {
		for name, open := range map[string]func() (*Reader, error){
			"ReadAll":   func() (*Reader, error) { return Open(path, ReadAll()) },
			"NewReader": func() (*Reader, error) { return NewReader(raw) },
		} {
			t.Run(name, func(t *testing.T) {
				r, err := open()
				require.NoError(t, err)
				defer r.Close()
				ds, err := firstSection(r.DataSections())
				require.NoError(t, err)
				assert.Empty(t, ds.Path, "no file to read again: the data is in memory")
				assert.Nil(t, ds.Info)
				assert.Zero(t, ds.Offset)
				assert.Equal(t, r.Header().Tensors, ds.Tensors)
				readAll(t, ds.Data)
			})
		}
	})

	t.Run("NewReaderAt", func(t *testing.T) {
		src := &ctxReaderAt{r: bytes.NewReader(raw)}
		r, err := NewReaderAt(src, int64(len(raw)))
		require.NoError(t, err)
		ds, err := firstSection(r.DataSections())
		require.NoError(t, err)
		assert.Empty(t, ds.Path)
		assert.Equal(t, r.Header().Tensors, ds.Tensors)
		plain := src.plain.Load()
		readAll(t, ds.Data)
		assert.Greater(t, src.plain.Load(), plain, "ReadAt reads the source's ReadAt")

		// Data keeps the source's ReadAtContext, from the section's start.
		rc, ok := ds.Data.(ReaderAtContext)
		require.True(t, ok, "Data of a ReaderAtContext source is a ReaderAtContext: %T", ds.Data)
		ctx := context.WithValue(context.Background(), ctxKey{}, "section")
		calls := src.ctxCalls.Load()
		got := make([]byte, 4)
		n, err := rc.ReadAtContext(ctx, got, 3)
		require.NoError(t, err)
		assert.Equal(t, 4, n)
		assert.Equal(t, section[3:7], got)
		assert.Equal(t, calls+1, src.ctxCalls.Load(), "the source's ReadAtContext read it")
		assert.Equal(t, "section", src.lastValue.Load(), "under the caller's ctx")
		assert.Equal(t, offset+3, src.lastOff.Load(), "at the offset in the file")
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err = rc.ReadAtContext(cancelled, got, 0)
		assert.ErrorIs(t, err, context.Canceled)
		_, err = rc.ReadAtContext(ctx, got, -1)
		assert.Error(t, err, "a negative offset")

		// A source without ReadAtContext is read with ReadAt, once ctx is
		// checked.
		counted := &countingReaderAt{r: bytes.NewReader(raw)}
		r2, err := NewReaderAt(counted, int64(len(raw)))
		require.NoError(t, err)
		ds2, err := firstSection(r2.DataSections())
		require.NoError(t, err)
		rc2, ok := ds2.Data.(ReaderAtContext)
		require.True(t, ok, "%T", ds2.Data)
		before := counted.calls.Load()
		_, err = rc2.ReadAtContext(ctx, got, 0)
		require.NoError(t, err)
		assert.Equal(t, section[:4], got)
		assert.Equal(t, before+1, counted.calls.Load())
		_, err = rc2.ReadAtContext(cancelled, got, 0)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, before+1, counted.calls.Load(), "a context already done reads nothing")
	})
}

// TestReadIntoShared opens two files with the same ReadInto option: the
// second's data section after the first's, at a multiple of 64 bytes,
// and a third that does not fit refused.
func TestReadIntoShared(t *testing.T) {
	pathA, rawA := writeSectionFile(t, sectionTensors) // 100 bytes of data
	second := []Tensor{{Name: "x", DType: U8, Shape: []uint64{30}, Data: bytes.Repeat([]byte{0x5A}, 30)}}
	pathB, _ := writeSectionFile(t, second)
	hA, err := ReadHeader(bytes.NewReader(rawA))
	require.NoError(t, err)
	require.Equal(t, uint64(100), hA.DataLen())

	offsetIn := func(buf, d []byte) int {
		return int(uintptr(unsafe.Pointer(unsafe.SliceData(d))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	buf := make([]byte, 128+30)
	into := ReadInto(buf)
	a, err := Open(pathA, into)
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(pathB, into)
	require.NoError(t, err)
	defer b.Close()
	for _, want := range sectionTensors {
		got, err := a.Tensor(want.Name)
		require.NoError(t, err)
		info, err := a.Info(want.Name)
		require.NoError(t, err)
		assert.Equal(t, int(info.DataOffsets[0]), offsetIn(buf, got.Data), "%s: the first file at buf's start", want.Name)
		assert.Equal(t, want.Data, got.Data)
	}
	x, err := b.Tensor("x")
	require.NoError(t, err)
	assert.Equal(t, 128, offsetIn(buf, x.Data), "the second file at the first multiple of 64 after the first")
	assert.Equal(t, second[0].Data, x.Data)
	assert.Equal(t, second[0].Data, buf[128:], "read into buf")
	assert.Equal(t, make([]byte, 28), buf[100:128], "nothing written between the sections")

	// No room for a third.
	_, err = Open(pathB, into)
	require.ErrorIs(t, err, io.ErrShortBuffer)
	assert.ErrorContains(t, err, pathB)
	assert.ErrorContains(t, err, fmt.Sprintf("the data section of 30 bytes does not fit in ReadInto's buffer of %d bytes, 158 of them taken by other files opened with it", len(buf)))

	// A new option hands buf out again, from its start.
	c, err := Open(pathB, ReadInto(buf))
	require.NoError(t, err)
	defer c.Close()
	x, err = c.Tensor("x")
	require.NoError(t, err)
	assert.Zero(t, offsetIn(buf, x.Data))

	// Exactly enough room, but not at a multiple of 64: refused.
	tight := ReadInto(make([]byte, 100+30))
	a2, err := Open(pathA, tight)
	require.NoError(t, err)
	defer a2.Close()
	_, err = Open(pathB, tight)
	assert.ErrorIs(t, err, io.ErrShortBuffer)
}

// TestNotAFile: Load of a folder, and Open of the JSON files of a model
// that the checkpoint package opens, say which package opens them.
func TestNotAFile(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Load(dir)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, dir)
	assert.ErrorContains(t, err, "a directory; a model's folder opens with the checkpoint package's Open, and loads whole with its Load")
	_, err = Open(dir)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, "checkpoint package's Open")

	for _, tt := range []struct {
		name, content, want string
	}{
		{"model.safetensors.index.json",
			`{"metadata": {"total_size": 768}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}`,
			"a sharded checkpoint's index (JSON with a weight_map), not a safetensors file: open it with the checkpoint package's Open, or load the model whole with its Load"},
		{"model_index.json",
			`{"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.42.0", "unet": ["diffusers", "UNet2DConditionModel"]}`,
			"a diffusers pipeline's model_index.json, not a safetensors file: open the pipeline with the checkpoint package's Open"},
		{"modules.json",
			`[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]`,
			"a sentence-transformers model's modules.json, not a safetensors file: open the model with the checkpoint package's Open"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))
			_, err := Open(path)
			require.ErrorIs(t, err, ErrHeaderTooLarge)
			require.ErrorIs(t, err, ErrNotSafetensors)
			assert.ErrorContains(t, err, "open "+path+": safetensors: "+tt.want)
			_, _, err = Load(path)
			require.ErrorIs(t, err, ErrNotSafetensors)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// brokenReaderAt fails every read at or after offset bad.
type brokenReaderAt struct {
	r   io.ReaderAt
	bad int64
}

var errDisk = errors.New("disk on fire")

func (f brokenReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.bad {
		return 0, errDisk
	}
	return f.r.ReadAt(p, off)
}

// TestReadAllParallel reads a file larger than several chunks with
// ReadAll, which reads it with several goroutines.
func TestReadAllParallel(t *testing.T) {
	data := make([]byte, 3*1024*1024+77)
	for i := range data {
		data[i] = byte(i*7 + i>>10)
	}
	for _, w := range []int{1, 2, 5} {
		got := make([]byte, len(data)-100)
		require.NoError(t, readParallel(bytes.NewReader(data), got, 100, w, 4096*3))
		assert.True(t, bytes.Equal(data[100:], got))
	}
	err := readParallel(brokenReaderAt{r: bytes.NewReader(data), bad: 1 << 20}, make([]byte, len(data)), 0, 4, 4096)
	assert.True(t, errors.Is(err, errDisk), "%v", err)
	err = readParallel(bytes.NewReader(data), make([]byte, len(data)), 1, 4, 4096)
	assert.True(t, errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
}

// firstSection returns the one section of a Reader's DataSections.
func firstSection(s []DataSection, err error) (DataSection, error) {
	if err != nil {
		return DataSection{}, err
	}
	return s[0], nil
}
