package safetensors

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors/internal/regular"
)

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.safetensors")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

func TestOpen(t *testing.T) {
	data := generateModel(t, 500)
	path := writeTemp(t, data)
	r, err := Open(path)
	require.NoError(t, err)
	want, err := NewReader(data)
	require.NoError(t, err)
	assert.Equal(t, want.Header(), r.Header())

	all, err := r.Tensors()
	require.NoError(t, err)
	second := bytes.Clone(all[1].Data) // all[1].Data dies with the mapping
	for i, tensor := range all {
		w, err := want.Tensor(tensor.Name)
		require.NoError(t, err)
		assert.Equal(t, w, tensor)
		again, err := r.Tensor(tensor.Name)
		require.NoError(t, err)
		// Zero-copy: the same memory each time, back to back in file order.
		assert.Equal(t, unsafe.SliceData(tensor.Data), unsafe.SliceData(again.Data))
		if i > 0 && len(tensor.Data) > 0 && len(all[i-1].Data) > 0 {
			prev := all[i-1].Data
			assert.Equal(t, uintptr(unsafe.Pointer(unsafe.SliceData(prev)))+uintptr(len(prev)), uintptr(unsafe.Pointer(unsafe.SliceData(tensor.Data))))
		}
	}
	if mmapSupported {
		assert.NotNil(t, r.mapping, "Open maps the file")
		assert.NoError(t, r.Prefetch())
		assert.NoError(t, r.Prefetch(all[3].Name, all[7].Name))
		assert.ErrorIs(t, r.Prefetch("missing"), ErrTensorNotFound)
	}
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	_, err = r.Tensor(all[0].Name)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, r.Prefetch(), ErrClosed)
	assert.Len(t, r.Names(), 500, "the header stays readable")

	// ReadAll: the data in memory, valid after Close.
	r, err = Open(path, ReadAll())
	require.NoError(t, err)
	assert.Nil(t, r.mapping)
	tensor, err := r.Tensor(all[1].Name)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, second, tensor.Data)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "missing.safetensors"))
	assert.ErrorIs(t, err, fs.ErrNotExist)

	empty := filepath.Join(dir, "empty.safetensors")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = Open(empty)
	assert.ErrorIs(t, err, ErrHeaderTooSmall)
	var pe *fs.PathError
	assert.ErrorAs(t, err, &pe)

	_, err = Open(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")

	if runtime.GOOS == "linux" {
		_, err = Open("/dev/zero")
		assert.ErrorContains(t, err, "not a regular file")
		assert.ErrorIs(t, err, ErrNotRegular)
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "/dev/zero", pe.Path)
		assert.Equal(t, "open /dev/zero: safetensors: not a regular file (mode "+pe.Err.(*regular.NotRegularError).Mode.String()+")", err.Error())

		// NewFileReader of a file already open refuses it the same way.
		f, err := os.Open("/dev/zero")
		require.NoError(t, err)
		defer f.Close()
		_, err = NewFileReader(f)
		assert.ErrorIs(t, err, ErrNotRegular)
		assert.ErrorContains(t, err, "open /dev/zero: safetensors: not a regular file (mode D")
	}

	// The one sentinel: the internal package's refusals are ErrNotRegular.
	assert.True(t, ErrNotRegular == regular.ErrNotRegular)

	// A file that shrinks while Open maps it, or reads it. Windows
	// refuses to shrink a mapped file (ERROR_USER_MAPPED_FILE): there, a
	// mapped file cannot change size under its mapping.
	for _, opts := range [][]ReadOption{nil, {ReadAll()}} {
		path := writeTemp(t, generateModel(t, 50))
		var truncated error
		testHookOpened = func(*os.File) { truncated = os.Truncate(path, 100) }
		r, err := Open(path, opts...)
		testHookOpened = nil
		if runtime.GOOS == "windows" && opts == nil {
			assert.Error(t, truncated, "Windows shrank a mapped file")
			require.NoError(t, err)
			require.NoError(t, r.Close())
			continue
		}
		require.NoError(t, truncated)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "changed size")
	}

	// A file cut short: the verdict, not a crash.
	data := generateModel(t, 50)
	cut := writeTemp(t, data[:len(data)-10])
	_, err = Open(cut)
	assert.ErrorIs(t, err, ErrIncompleteBuffer)
}

// countingReaderAt counts the calls of ReadAt and the bytes they ask for.
type countingReaderAt struct {
	r     io.ReaderAt
	calls atomic.Int64
	bytes atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	c.bytes.Add(int64(len(p)))
	return c.r.ReadAt(p, off)
}

// TestOpenLFSPointer: a Git LFS pointer in place of the weights, as a
// clone without git-lfs leaves it, gives an error that names the file and
// leads with what it is and what to do; the reference's verdict stays.
func TestOpenLFSPointer(t *testing.T) {
	path := writeTemp(t, []byte("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 5000000\n"))
	_, err := Open(path)
	require.ErrorIs(t, err, ErrNotSafetensors)
	require.ErrorIs(t, err, ErrHeaderTooLarge)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, path, pe.Path)
	assert.EqualError(t, err, "open "+path+": safetensors: a Git LFS pointer, not the file it points to (oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393, 5000000 bytes): run 'git lfs pull' in its repository to fetch the file")
}

func TestNewReaderAt(t *testing.T) {
	for _, tt := range []struct {
		name  string
		count int
		calls int64
	}{
		{"small_header", 10, 1},
		{"large_header", 5000, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := generateModel(t, tt.count)
			c := &countingReaderAt{r: bytes.NewReader(data)}
			r, err := NewReaderAt(c, int64(len(data)))
			require.NoError(t, err)
			assert.Equal(t, tt.calls, c.calls.Load(), "calls to read the header")
			assert.LessOrEqual(t, c.bytes.Load(), max(int64(r.Header().DataOffset()), headerProbe))

			want, err := NewReader(data)
			require.NoError(t, err)
			name := want.Names()[3]
			before := c.calls.Load()
			got, err := r.Tensor(name)
			require.NoError(t, err)
			w, _ := want.Tensor(name)
			assert.Equal(t, w, got)
			assert.Equal(t, before+1, c.calls.Load(), "one read per tensor, on demand")
			require.NoError(t, r.Close())
			assert.Equal(t, w.Data, got.Data, "read tensors stay valid after Close")
		})
	}

	// A source that fails, or is shorter than it claims.
	data := generateModel(t, 10)
	boom := errors.New("connection reset")
	_, err := NewReaderAt(failingReaderAt{boom}, int64(len(data)))
	assert.ErrorIs(t, err, boom)
	_, err = NewReaderAt(bytes.NewReader(data[:100]), int64(len(data)))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	r, err := NewReaderAt(&truncatingReaderAt{data: data, after: 1}, int64(len(data)))
	require.NoError(t, err)
	_, err = r.Tensor(r.Names()[0])
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	var te *TensorError
	assert.ErrorAs(t, err, &te)
	_, err = NewReaderAt(bytes.NewReader(nil), 0)
	assert.ErrorIs(t, err, ErrHeaderTooSmall)
}

type failingReaderAt struct{ err error }

func (f failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, f.err }

// truncatingReaderAt serves data for the first calls, then nothing.
type truncatingReaderAt struct {
	data  []byte
	after int
	calls int
}

func (r *truncatingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.calls++
	if r.calls > r.after {
		return 0, io.EOF
	}
	return bytes.NewReader(r.data).ReadAt(p, off)
}

// TestOpenConcurrent reads one mapped Reader from many goroutines, with
// typed views and slices; run it with -race.
func TestOpenConcurrent(t *testing.T) {
	data := generateModel(t, 1000)
	r, err := Open(writeTemp(t, data))
	require.NoError(t, err)
	defer r.Close()
	names := r.Names()
	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				tensor, err := r.Tensor(names[(i*7+g)%len(names)])
				if err != nil {
					failures.Add(1)
					continue
				}
				var sum uint64
				switch tensor.DType {
				case BF16:
					v, err := Values[uint16](tensor, nil)
					if err != nil {
						failures.Add(1)
					}
					for _, x := range v {
						sum += uint64(x)
					}
				case F32:
					if _, err := Values[float32](tensor, nil); err != nil {
						failures.Add(1)
					}
				}
				if len(tensor.Shape) > 0 {
					s, err := tensor.Slice(At(0))
					if err != nil {
						failures.Add(1)
						continue
					}
					_ = s.AppendTo(nil)
				}
				_ = sum
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, failures.Load())
}
