package safetensors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadFixture writes a file of tensors of awkward sizes: empty, smaller
// than a block, unaligned, and larger than several chunks.
func loadFixture(t *testing.T) (path string, tensors []Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, n := range []int{0, 1, 3, 4095, 4096, 4097, 100_000, 0, 70_001, 5, 300_000, 12_289} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32()) | 1
		}
		tensors = append(tensors, Tensor{Name: fmt.Sprintf("t%02d", i), DType: U8, Shape: []uint64{uint64(n)}, Data: data})
	}
	path = filepath.Join(t.TempDir(), "load.safetensors")
	require.NoError(t, WriteFile(path, tensors, map[string]string{"k": "v"}))
	return path, tensors
}

// collect loads src and returns copies of the tensors by name, checking
// that each is handed over once.
func collect(t *testing.T, l *Loader, src Source) map[string]Tensor {
	t.Helper()
	got := make(map[string]Tensor)
	for tensor, err := range l.Load(context.Background(), src) {
		require.NoError(t, err)
		_, dup := got[tensor.Name]
		require.False(t, dup, "%s handed over twice", tensor.Name)
		if l.Buffer != nil && len(tensor.Data) > 0 {
			b := uintptr(unsafe.Pointer(unsafe.SliceData(l.Buffer)))
			p := uintptr(unsafe.Pointer(unsafe.SliceData(tensor.Data)))
			require.True(t, p >= b && p+uintptr(len(tensor.Data)) <= b+uintptr(len(l.Buffer)), "in the caller's buffer")
		}
		tensor.Data = bytes.Clone(tensor.Data)
		got[tensor.Name] = tensor
	}
	return got
}

func assertTensors(t *testing.T, want []Tensor, got map[string]Tensor) {
	t.Helper()
	require.Len(t, got, len(want))
	for _, w := range want {
		g, ok := got[w.Name]
		require.True(t, ok, w.Name)
		assert.Equal(t, w.DType, g.DType, w.Name)
		assert.Equal(t, w.Shape, g.Shape, w.Name)
		assert.True(t, bytes.Equal(w.Data, g.Data), "%s: bytes differ", w.Name)
	}
}

// TestLoader loads a file through every kind of Reader, with memory small
// enough that the Loader reuses it many times, in every mode.
func TestLoader(t *testing.T) {
	path, tensors := loadFixture(t)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sources := map[string]func() (*Reader, error){
		"Open":        func() (*Reader, error) { return Open(path) },
		"ReadAll":     func() (*Reader, error) { return Open(path, ReadAll()) },
		"NewReader":   func() (*Reader, error) { return NewReader(raw) },
		"NewReaderAt": func() (*Reader, error) { return NewReaderAt(f, int64(len(raw))) },
	}
	loaders := map[string]*Loader{
		"default":         {},
		"small chunks":    {ChunkSize: 1, Concurrency: 3, MemoryLimit: 1},
		"one goroutine":   {Concurrency: 1, ChunkSize: 8192},
		"tight memory":    {ChunkSize: 16384, MemoryLimit: 310_000},
		"no cache":        {NoCache: true, ChunkSize: 8192, MemoryLimit: 400_000},
		"caller's buffer": {Buffer: make([]byte, 304_097), ChunkSize: 4096},
		"unaligned buffer, no cache": {
			Buffer: make([]byte, 500_000)[3:], NoCache: true, ChunkSize: 4096,
		},
	}
	for sname, open := range sources {
		for lname, l := range loaders {
			t.Run(sname+"/"+lname, func(t *testing.T) {
				r, err := open()
				require.NoError(t, err)
				defer r.Close()
				assertTensors(t, tensors, collect(t, l, r))
				// The Loader again, reusing its buffer.
				assertTensors(t, tensors, collect(t, l, r))
			})
		}
	}
}

// TestLoaderSharded loads a checkpoint: the tensors its index lists.
func TestLoaderSharded(t *testing.T) {
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	s, err := OpenIndex(dir)
	require.NoError(t, err)
	defer s.Close()
	for _, l := range []*Loader{{}, {ChunkSize: 4096, MemoryLimit: 1, NoCache: true}} {
		assertTensors(t, fx.tensors, collect(t, l, s))
	}

	editIndex(t, dir, func(ix map[string]any) {
		delete(weightMap(ix), "model.norm.weight")
		delete(ix["metadata"].(map[string]any), "total_size")
	})
	s2, err := OpenIndex(dir)
	require.True(t, errors.Is(err, ErrUnlistedTensor), "%v", err)
	defer s2.Close()
	got := collect(t, &Loader{}, s2)
	assert.Len(t, got, len(fx.tensors)-1)
	assert.NotContains(t, got, "model.norm.weight", "not listed, not loaded")
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

// TestLoaderErrors: a failing source ends the loop with an error naming
// the tensor and the file; a Buffer too small is refused.
func TestLoaderErrors(t *testing.T) {
	path, tensors := loadFixture(t)
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	files, err := r.LoadFiles()
	require.NoError(t, err)
	files[0].Data = brokenReaderAt{r: files[0].Data, bad: 200_000}
	files[0].local = nil
	var n int
	var last error
	for _, err := range (&Loader{ChunkSize: 4096}).Load(context.Background(), sourceFunc(func() ([]LoadFile, error) { return files, nil })) {
		n++
		last = err
	}
	require.Error(t, last)
	assert.True(t, errors.Is(last, errDisk), "%v", last)
	var te *TensorError
	require.True(t, errors.As(last, &te))
	assert.Equal(t, "t10", te.Name, "the tensor past offset 200000")
	assert.Contains(t, last.Error(), path)
	assert.Less(t, n, len(tensors)+1)

	_, err = first((&Loader{Buffer: make([]byte, 300_000+4095)}).Load(context.Background(), r))
	assert.ErrorContains(t, err, "cannot hold the largest tensor, of 300000 bytes")

	require.NoError(t, r.Close())
	_, err = first((&Loader{}).Load(context.Background(), r))
	assert.True(t, errors.Is(err, ErrClosed), "%v", err)
}

type sourceFunc func() ([]LoadFile, error)

func (f sourceFunc) LoadFiles() ([]LoadFile, error) { return f() }

// first returns the first error of a load.
func first(seq func(func(Tensor, error) bool)) (Tensor, error) {
	for t, err := range seq {
		if err != nil {
			return t, err
		}
	}
	return Tensor{}, nil
}

// TestLoaderStops breaks out of the loop and cancels the context: the
// loads end, and their goroutines with them.
func TestLoaderStops(t *testing.T) {
	path, _ := loadFixture(t)
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	l := &Loader{ChunkSize: 4096, MemoryLimit: 1, Concurrency: 4}
	for range 20 {
		n := 0
		for _, err := range l.Load(context.Background(), r) {
			require.NoError(t, err)
			if n++; n == 3 {
				break
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last error
	n := 0
	for _, err := range l.Load(ctx, r) {
		if n++; n == 2 {
			cancel()
		}
		last = err
	}
	assert.True(t, errors.Is(last, context.Canceled), "%v", last)
	stacks := func() string {
		buf := make([]byte, 1<<20)
		return string(buf[:runtime.Stack(buf, true)])
	}
	assert.Eventually(t, func() bool { return !strings.Contains(stacks(), "safetensors.(*load)") }, 5*time.Second, 10*time.Millisecond, "goroutines left behind")
}

// TestLoaderReplacedFile: a file replaced after Open is read from the
// mapping, never from the new file.
func TestLoaderReplacedFile(t *testing.T) {
	path, tensors := loadFixture(t)
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	other := append([]Tensor(nil), tensors...)
	other[4] = Tensor{Name: "t04", DType: U8, Shape: []uint64{4096}, Data: bytes.Repeat([]byte{9}, 4096)}
	require.NoError(t, WriteFile(path, other, map[string]string{"k": "v"}))
	assertTensors(t, tensors, collect(t, &Loader{NoCache: true}, r))
}

// TestArena allocates and releases at random and checks that live regions
// never overlap and sit at the phase asked for.
func TestArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{10_000, 65_536, 1 << 20} {
		mem := make([]byte, size+1)[1:]
		a := newArena(mem)
		base := int(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
		type live struct{ b, e, slot int }
		var lives []live
		for range 5000 {
			if len(lives) > 0 && (rng.IntN(2) == 0 || len(lives) > 20) {
				i := rng.IntN(len(lives))
				a.release(lives[i].slot)
				lives = append(lives[:i], lives[i+1:]...)
				continue
			}
			n := rng.IntN(size / 4)
			phase := rng.IntN(blockSize)
			p, slot, ok := a.tryAlloc(n, phase)
			for !ok {
				// No room: release the oldest, until there is.
				require.NotEmpty(t, lives, "no room in an empty arena for %d bytes", n)
				a.release(lives[0].slot)
				lives = lives[1:]
				p, slot, ok = a.tryAlloc(n, phase)
			}
			require.Len(t, p, n)
			b := int(uintptr(unsafe.Pointer(unsafe.SliceData(p)))) - base
			if n > 0 {
				assert.Equal(t, phase, (base+b)%blockSize)
			}
			for _, l := range lives {
				require.True(t, b+n <= l.b || l.e <= b || n == 0 || l.e == l.b, "[%d,%d) overlaps [%d,%d)", b, b+n, l.b, l.e)
			}
			lives = append(lives, live{b, b + n, slot})
		}
	}
}

// TestReadAllParallel reads a file larger than several chunks with
// ReadAll, which reads it with several goroutines.
func TestReadAllParallel(t *testing.T) {
	data := make([]byte, 3*1024*1024+77)
	for i := range data {
		data[i] = byte(i*7 + i>>10)
	}
	var buf bytes.Buffer
	for _, w := range []int{1, 2, 5} {
		buf.Reset()
		got := make([]byte, len(data)-100)
		require.NoError(t, readParallel(bytes.NewReader(data), got, 100, w, 4096*3))
		assert.True(t, bytes.Equal(data[100:], got))
	}
	err := readParallel(brokenReaderAt{r: bytes.NewReader(data), bad: 1 << 20}, make([]byte, len(data)), 0, 4, 4096)
	assert.True(t, errors.Is(err, errDisk), "%v", err)
	err = readParallel(bytes.NewReader(data), make([]byte, len(data)), 1, 4, 4096)
	assert.True(t, errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
}

// TestLoaderDirect checks that NoCache reads the aligned middle of large
// tensors with direct I/O, where the file system allows it.
func TestLoaderDirect(t *testing.T) {
	path, tensors := loadFixture(t)
	if f, err := openDirect(path); err != nil {
		t.Skipf("no direct I/O here: %v", err)
	} else {
		f.Close()
	}
	var direct atomic.Int64
	testHookDirectRead = func(n int) { direct.Add(int64(n)) }
	defer func() { testHookDirectRead = nil }()
	r, err := Open(path)
	require.NoError(t, err)
	defer r.Close()
	for _, buf := range [][]byte{nil, make([]byte, 1<<20+5)[5:]} {
		direct.Store(0)
		assertTensors(t, tensors, collect(t, &Loader{NoCache: true, ChunkSize: 8192, Buffer: buf}, r))
		// t10 alone, of 300000 bytes, has more than 290000 in whole blocks.
		assert.Greater(t, direct.Load(), int64(290_000))
	}
	direct.Store(0)
	collect(t, &Loader{}, r)
	assert.Zero(t, direct.Load(), "no direct I/O without NoCache")
}
