package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/safetensors-go/safetensors/internal/pagecache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadFixture writes a file of tensors of awkward sizes: empty, smaller
// than a block, unaligned, and larger than several chunks.
func loadFixture(t *testing.T) (path string, tensors []safetensors.Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, n := range []int{0, 1, 3, 4095, 4096, 4097, 100_000, 0, 70_001, 5, 300_000, 12_289} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32()) | 1
		}
		tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("t%02d", i), DType: safetensors.U8, Shape: []uint64{uint64(n)}, Data: data})
	}
	path = filepath.Join(t.TempDir(), "load.safetensors")
	require.NoError(t, safetensors.WriteFile(path, tensors, map[string]string{"k": "v"}))
	return path, tensors
}

// sourceFunc is a Source of the caller's data sections.
type sourceFunc func() ([]safetensors.DataSection, error)

func (f sourceFunc) DataSections() ([]safetensors.DataSection, error) { return f() }

// What the checkpoint package opens, a Loader reads.
var _ Source = (*checkpoint.Checkpoint)(nil)

// collect loads src and returns copies of the tensors by name, checking
// that each is handed over once.
func collect(t *testing.T, l *Loader, src Source) map[string]safetensors.Tensor {
	t.Helper()
	got := make(map[string]safetensors.Tensor)
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

func assertTensors(t *testing.T, want []safetensors.Tensor, got map[string]safetensors.Tensor) {
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

// TestLoader loads a file through every kind of Reader, and as a
// checkpoint of one file, with memory small enough that the Loader reuses
// it many times, in every mode.
func TestLoader(t *testing.T) {
	path, tensors := loadFixture(t)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	reader := func(open func() (*safetensors.Reader, error)) func() (Source, io.Closer, error) {
		return func() (Source, io.Closer, error) {
			r, err := open()
			if err != nil {
				return nil, nil, err
			}
			return r, r, nil
		}
	}
	sources := map[string]func() (Source, io.Closer, error){
		"Open":        reader(func() (*safetensors.Reader, error) { return safetensors.Open(path) }),
		"ReadAll":     reader(func() (*safetensors.Reader, error) { return safetensors.Open(path, safetensors.ReadAll()) }),
		"NewReader":   reader(func() (*safetensors.Reader, error) { return safetensors.NewReader(raw) }),
		"NewReaderAt": reader(func() (*safetensors.Reader, error) { return safetensors.NewReaderAt(f, int64(len(raw))) }),
		"checkpoint": func() (Source, io.Closer, error) {
			c, err := checkpoint.Open(context.Background(), path)
			return c, c, err
		},
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
				src, closer, err := open()
				require.NoError(t, err)
				defer closer.Close()
				assertTensors(t, tensors, collect(t, l, src))
				// The Loader again, reusing its buffer.
				assertTensors(t, tensors, collect(t, l, src))
			})
		}
	}
}

// shardedFixture is testdata/sharded: tensors.json, the tensors that
// make_index.py gives the Hugging Face libraries to shard, and the largest
// shard it asks for.
type shardedFixture struct {
	maxSize int64
	tensors []safetensors.Tensor
}

func loadShardedFixture(t *testing.T) shardedFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "sharded", "tensors.json"))
	require.NoError(t, err)
	var spec struct {
		MaxShardSize int64 `json:"max_shard_size"`
		Tensors      []struct {
			Name  string            `json:"name"`
			DType safetensors.DType `json:"dtype"`
			Shape []uint64          `json:"shape"`
		} `json:"tensors"`
	}
	require.NoError(t, json.Unmarshal(raw, &spec))
	fx := shardedFixture{maxSize: spec.MaxShardSize}
	for i, s := range spec.Tensors {
		bits := uint64(s.DType.Bits())
		for _, n := range s.Shape {
			bits *= n
		}
		require.Zero(t, bits%8, s.Name)
		data := make([]byte, bits/8)
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		fx.tensors = append(fx.tensors, safetensors.Tensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: data})
	}
	return fx
}

// writeFixture writes the fixture's checkpoint into a new directory.
func writeFixture(t *testing.T, fx shardedFixture) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, checkpoint.Write(dir, fx.tensors, checkpoint.MaxShardSize(fx.maxSize), checkpoint.FileMetadata(map[string]string{"format": "pt"})))
	return dir
}

// editIndex rewrites the checkpoint's index through edit.
func editIndex(t *testing.T, dir string, edit func(index map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var index map[string]any
	require.NoError(t, d.Decode(&index))
	edit(index)
	raw, err = json.Marshal(index)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
}

func weightMap(index map[string]any) map[string]any { return index["weight_map"].(map[string]any) }

// TestLoaderSharded loads a checkpoint: the tensors its index lists.
func TestLoaderSharded(t *testing.T) {
	ctx := context.Background()
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	s, err := checkpoint.Open(ctx, dir)
	require.NoError(t, err)
	defer s.Close()
	require.Greater(t, len(s.Files()), 1)
	for _, l := range []*Loader{{}, {ChunkSize: 4096, MemoryLimit: 1, NoCache: true}} {
		assertTensors(t, fx.tensors, collect(t, l, s))
	}

	editIndex(t, dir, func(ix map[string]any) {
		delete(weightMap(ix), "model.norm.weight")
		delete(ix["metadata"].(map[string]any), "total_size")
	})
	s2, err := checkpoint.Open(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, []string{"model.norm.weight"}, s2.Unlisted())
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
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	ds, err := firstSection(r.DataSections())
	require.NoError(t, err)
	require.Equal(t, path, ds.Path)
	ds.Data = brokenReaderAt{r: ds.Data, bad: 200_000}
	ds.Path, ds.Info = "", nil // read through Data, not the file
	files := []safetensors.DataSection{ds}
	var n int
	var last error
	for _, err := range (&Loader{ChunkSize: 4096}).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) { return files, nil })) {
		n++
		last = err
	}
	require.Error(t, last)
	assert.True(t, errors.Is(last, errDisk), "%v", last)
	var te *safetensors.TensorError
	require.True(t, errors.As(last, &te))
	assert.Equal(t, "t10", te.Name, "the tensor past offset 200000")
	assert.Contains(t, last.Error(), path)
	assert.Less(t, n, len(tensors)+1)

	bad := []safetensors.DataSection{{Name: "custom", Data: ds.Data, Tensors: []safetensors.TensorInfo{{Name: "x", DType: safetensors.U8, Shape: []uint64{1}, DataOffsets: [2]uint64{5, 4}}}}}
	_, err = first((&Loader{}).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) { return bad, nil })))
	assert.True(t, errors.Is(err, safetensors.ErrInvalidOffset), "%v", err)
	assert.ErrorContains(t, err, `tensor "x": invalid data offsets: custom: offsets [5, 4)`)

	_, err = first((&Loader{Buffer: make([]byte, 300_000+4095)}).Load(context.Background(), r))
	assert.ErrorIs(t, err, io.ErrShortBuffer)
	assert.ErrorContains(t, err, "cannot hold the largest tensor, of 300000 bytes")

	// An error of DataSections ends the loop.
	boom := errors.New("no sections")
	_, err = first((&Loader{}).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) { return nil, boom })))
	assert.ErrorIs(t, err, boom)

	require.NoError(t, r.Close())
	_, err = first((&Loader{}).Load(context.Background(), r))
	assert.True(t, errors.Is(err, safetensors.ErrClosed), "%v", err)
}

// first returns the first error of a load.
func first(seq func(func(safetensors.Tensor, error) bool)) (safetensors.Tensor, error) {
	for t, err := range seq {
		if err != nil {
			return t, err
		}
	}
	return safetensors.Tensor{}, nil
}

// TestLoaderStops breaks out of the loop and cancels the context: the
// loads end, and their goroutines with them.
func TestLoaderStops(t *testing.T) {
	path, _ := loadFixture(t)
	r, err := safetensors.Open(path)
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
	assertNoLoadGoroutines(t)
}

// assertNoLoadGoroutines checks that no goroutine of a load is left
// running, once those that are ending have ended.
func assertNoLoadGoroutines(t *testing.T) {
	t.Helper()
	stacks := func() string {
		buf := make([]byte, 1<<20)
		return string(buf[:runtime.Stack(buf, true)])
	}
	assert.Eventually(t, func() bool { return !strings.Contains(stacks(), "load.(*load)") }, 5*time.Second, 10*time.Millisecond, "goroutines left behind")
}

// blockingSource is a safetensors.ReaderAtContext whose ReadAtContext
// blocks until its ctx is done, as an HTTP read of a stalled server does
// until the request is aborted.
type blockingSource struct {
	started   chan struct{} // closed when the first read starts
	once      sync.Once
	cancelled atomic.Bool  // a read saw its ctx done
	cause     atomic.Value // what ctx.Err() said then
	plain     atomic.Int64 // calls of ReadAt
}

func (s *blockingSource) ReadAt(p []byte, off int64) (int, error) {
	s.plain.Add(1)
	return 0, errors.New("ReadAt of a source that has ReadAtContext")
}

func (s *blockingSource) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	s.once.Do(func() { close(s.started) })
	<-ctx.Done()
	s.cancelled.Store(true)
	s.cause.Store(ctx.Err())
	return 0, ctx.Err()
}

var _ safetensors.ReaderAtContext = (*blockingSource)(nil)

// TestLoaderCancelBlockedRead cancels a load while its reads are blocked
// inside a ReaderAtContext source: the loop ends within 100 ms, with an
// error wrapping context.Canceled, and the source's reads saw their
// context cancelled: they are aborted, not waited for.
func TestLoaderCancelBlockedRead(t *testing.T) {
	src := &blockingSource{started: make(chan struct{})}
	sections := []safetensors.DataSection{{
		Name: "stalled://model.safetensors",
		Data: src,
		Tensors: []safetensors.TensorInfo{
			{Name: "a", DType: safetensors.U8, Shape: []uint64{1 << 20}, DataOffsets: [2]uint64{0, 1 << 20}},
			{Name: "b", DType: safetensors.U8, Shape: []uint64{10}, DataOffsets: [2]uint64{1 << 20, 1<<20 + 10}},
		},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		errs  []error
		names []string // tensors handed over
		ended time.Time
	}
	done := make(chan result, 1)
	go func() {
		var res result
		for tensor, err := range (&Loader{ChunkSize: 4096, Concurrency: 4}).Load(ctx, sourceFunc(func() ([]safetensors.DataSection, error) { return sections, nil })) {
			if err == nil {
				res.names = append(res.names, tensor.Name)
			}
			res.errs = append(res.errs, err)
		}
		res.ended = time.Now()
		done <- res
	}()
	select {
	case <-src.started:
	case <-time.After(30 * time.Second):
		t.Fatal("no read started")
	}
	cancelled := time.Now()
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end after its context was cancelled: the reads blocked in the source were not aborted")
	}
	took := res.ended.Sub(cancelled)
	assert.Empty(t, res.names, "tensors handed over from a source that never answers")
	errs := res.errs
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], context.Canceled)
	assert.Less(t, took, 100*time.Millisecond, "the loop ended %v after the cancel", took)
	assert.True(t, src.cancelled.Load(), "the source never saw its context done")
	assert.Equal(t, context.Canceled, src.cause.Load())
	assert.Zero(t, src.plain.Load(), "ReadAt called")
	assertNoLoadGoroutines(t)
}

// countingSource reads data through ReadAtContext, where withContext, and
// counts the calls of each method; it checks that the load's ctx, which
// carries ctxKey, reaches ReadAtContext.
type countingSource struct {
	data     []byte
	plain    atomic.Int64
	ctxReads atomic.Int64
	badCtx   atomic.Int64 // ReadAtContext calls whose ctx lacks ctxKey
}

type ctxKey struct{}

func (s *countingSource) ReadAt(p []byte, off int64) (int, error) {
	s.plain.Add(1)
	return bytes.NewReader(s.data).ReadAt(p, off)
}

// withContext is countingSource with ReadAtContext.
type withContext struct{ *countingSource }

func (s withContext) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	s.ctxReads.Add(1)
	if ctx.Value(ctxKey{}) != "load" {
		s.badCtx.Add(1)
	}
	return bytes.NewReader(s.data).ReadAt(p, off)
}

// TestLoaderReadAt: a source with ReadAtContext is read through it, under
// the load's context, and a source without it is read with ReadAt.
func TestLoaderReadAt(t *testing.T) {
	path, tensors := loadFixture(t)
	r, err := safetensors.Open(path, safetensors.ReadAll())
	require.NoError(t, err)
	defer r.Close()
	ds, err := firstSection(r.DataSections())
	require.NoError(t, err)
	data := make([]byte, r.Header().DataLen())
	_, err = ds.Data.ReadAt(data, 0)
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), ctxKey{}, "load")
	load := func(t *testing.T, src io.ReaderAt) {
		t.Helper()
		got := make(map[string]safetensors.Tensor)
		sections := []safetensors.DataSection{{Name: "counted", Data: src, Tensors: ds.Tensors}}
		for tensor, err := range (&Loader{ChunkSize: 4096}).Load(ctx, sourceFunc(func() ([]safetensors.DataSection, error) { return sections, nil })) {
			require.NoError(t, err)
			tensor.Data = bytes.Clone(tensor.Data)
			got[tensor.Name] = tensor
		}
		assertTensors(t, tensors, got)
	}

	t.Run("ReadAt", func(t *testing.T) {
		src := &countingSource{data: data}
		_, isCtx := io.ReaderAt(src).(safetensors.ReaderAtContext)
		require.False(t, isCtx)
		load(t, src)
		assert.Greater(t, src.plain.Load(), int64(len(tensors)/2), "read with ReadAt")
		assert.Zero(t, src.ctxReads.Load())
	})
	t.Run("ReadAtContext", func(t *testing.T) {
		src := &countingSource{data: data}
		load(t, withContext{src})
		assert.Greater(t, src.ctxReads.Load(), int64(len(tensors)/2), "read with ReadAtContext")
		assert.Zero(t, src.plain.Load(), "ReadAt called")
		assert.Zero(t, src.badCtx.Load(), "reads under a context that is not the load's")
	})
}

// TestLoaderReplacedFile: a file replaced after Open is read from the
// mapping, never from the new file. Windows refuses to replace a mapped
// file, with ErrFileInUse, leaving it as it was.
func TestLoaderReplacedFile(t *testing.T) {
	path, tensors := loadFixture(t)
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	other := append([]safetensors.Tensor(nil), tensors...)
	other[4] = safetensors.Tensor{Name: "t04", DType: safetensors.U8, Shape: []uint64{4096}, Data: bytes.Repeat([]byte{9}, 4096)}
	err = safetensors.WriteFile(path, other, map[string]string{"k": "v"})
	if runtime.GOOS == "windows" && err != nil {
		require.ErrorIs(t, err, safetensors.ErrFileInUse)
	} else {
		require.NoError(t, err)
	}
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
			phase := rng.IntN(pagecache.BlockSize)
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
				assert.Equal(t, phase, (base+b)%pagecache.BlockSize)
			}
			for _, l := range lives {
				require.True(t, b+n <= l.b || l.e <= b || n == 0 || l.e == l.b, "[%d,%d) overlaps [%d,%d)", b, b+n, l.b, l.e)
			}
			lives = append(lives, live{b, b + n, slot})
		}
	}
}

// TestLoaderDirect checks that NoCache reads the aligned middle of large
// tensors of a file that is not cached with direct I/O, where the file
// system allows it, and leaves none of the file's data in the cache.
func TestLoaderDirect(t *testing.T) {
	_, tensors, f, probe, r := directFixture(t)
	data, size := int64(r.Header().DataOffset()), int64(r.Header().DataLen())
	var direct, other atomic.Int64
	testHookRead = func(how int, off int64, n int) {
		if how == readDirect {
			direct.Add(int64(n))
		} else {
			other.Add(int64(n))
		}
	}
	defer func() { testHookRead = nil }()
	for _, buf := range [][]byte{nil, make([]byte, 1<<20+5)[5:]} {
		uncache(t, f, probe)
		direct.Store(0)
		other.Store(0)
		assertTensors(t, tensors, collect(t, &Loader{NoCache: true, ChunkSize: 8192, Buffer: buf}, r))
		// t10 alone, of 300000 bytes, has more than 290000 in whole blocks.
		assert.Greater(t, direct.Load(), int64(290_000))
		assert.Equal(t, size, direct.Load()+other.Load(), "every byte read once")
		_, some := probe.Cached(data, size)
		assert.False(t, some, "pages of the data left in the cache")
	}
	direct.Store(0)
	collect(t, &Loader{}, r)
	assert.Zero(t, direct.Load(), "no direct I/O without NoCache")
}

// skipWithoutDirect skips the test where the file system refuses direct
// I/O of the file at path.
func skipWithoutDirect(t *testing.T, path string) {
	t.Helper()
	f, err := pagecache.OpenDirect(path)
	if err != nil {
		t.Skipf("no direct I/O here: %v", err)
	}
	f.Close()
}

// directFixture returns loadFixture's file, its path and tensors, opened
// with a pagecache.Probe and with Open; it skips the test where the file system
// refuses direct I/O or no probe can tell which pages are cached.
func directFixture(t *testing.T) (path string, tensors []safetensors.Tensor, f *os.File, probe *pagecache.Probe, r *safetensors.Reader) {
	t.Helper()
	path, tensors = loadFixture(t)
	skipWithoutDirect(t, path)
	f, probe = probeFile(t, path)
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return path, tensors, f, probe, r
}

// probeFile opens the file at path with a pagecache.Probe, or skips the test
// where there is none.
func probeFile(t *testing.T, path string) (*os.File, *pagecache.Probe) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	info, err := f.Stat()
	require.NoError(t, err)
	probe := newProbe(f, path, info)
	if probe == nil {
		t.Skip("no way here to tell which pages of a file are cached")
	}
	t.Cleanup(probe.Close)
	return f, probe
}

// fileSize returns the size of f.
func fileSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	info, err := f.Stat()
	require.NoError(t, err)
	return info.Size()
}

// eachProbe runs test once with each way a pagecache.Probe may ask the kernel:
// cachestat where it has it, and mincore.
func eachProbe(t *testing.T, test func(t *testing.T)) {
	for _, mincore := range []bool{false, true} {
		t.Run(map[bool]string{false: "cachestat", true: "mincore"}[mincore], func(t *testing.T) {
			testForceMincore = mincore
			defer func() { testForceMincore = false }()
			test(t)
		})
	}
}

// uncache drops the file from the page cache, or skips the test where the
// file system keeps it (tmpfs).
func uncache(t *testing.T, f *os.File, probe *pagecache.Probe) {
	t.Helper()
	require.NoError(t, f.Sync())
	n := fileSize(t, f)
	pagecache.Drop(f, 0, n)
	if _, some := probe.Cached(0, n); some {
		t.Skip("the file system keeps the file in the page cache")
	}
}

// cacheWhole reads the file at path through the page cache until probe
// finds it cached whole. The kernel may evict pages at any time (under
// memory pressure, or with proactive reclaim), so it tries a few times, and
// skips the test where the pages never stay.
func cacheWhole(t *testing.T, path string, probe *pagecache.Probe, size int64) {
	t.Helper()
	for range 5 {
		_, err := os.ReadFile(path)
		require.NoError(t, err)
		if all, _ := probe.Cached(0, size); all {
			return
		}
	}
	t.Skip("the kernel evicts the file's pages as fast as the test reads them")
}

// readLog records how a Loader read each chunk, through testHookRead.
type readLog struct {
	mu    sync.Mutex
	reads []loggedRead
}

type loggedRead struct {
	how    int
	off, n int64
}

func logReads(t *testing.T) *readLog {
	l := &readLog{}
	testHookRead = func(how int, off int64, n int) {
		l.mu.Lock()
		l.reads = append(l.reads, loggedRead{how, off, int64(n)})
		l.mu.Unlock()
	}
	t.Cleanup(func() { testHookRead = nil })
	return l
}

// take returns the reads logged and forgets them.
func (l *readLog) take() []loggedRead {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reads
	l.reads = nil
	return r
}

// mappingsOf counts the mappings of the file at path in this process, or
// returns -1 where /proc/self/maps cannot tell.
func mappingsOf(path string) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return -1
	}
	return strings.Count(string(maps), " "+path+"\n")
}

// TestLoaderNoCacheCached: with NoCache, a file that is cached whole is
// copied from the cache, never read with direct I/O, and left uncached;
// the mapping that told the Loader so is gone once the load ends, however
// it ends.
func TestLoaderNoCacheCached(t *testing.T) { eachProbe(t, testLoaderNoCacheCached) }

func testLoaderNoCacheCached(t *testing.T) {
	path, tensors, f, probe, r := directFixture(t)
	data, size := int64(r.Header().DataOffset()), int64(r.Header().DataLen())
	log := logReads(t)
	maps := mappingsOf(path)
	for _, buf := range [][]byte{nil, make([]byte, 1<<20+5)[5:]} {
		// A page the kernel evicts during the load sends its chunk to the
		// disk, rightly: such a round is tried again.
		var direct []int64
		for range 3 {
			uncache(t, f, probe)
			cacheWhole(t, path, probe, fileSize(t, f))
			assertTensors(t, tensors, collect(t, &Loader{NoCache: true, ChunkSize: 8192, Buffer: buf}, r))
			var cached, total int64
			direct = nil
			for _, rd := range log.take() {
				if rd.how == readDirect {
					direct = append(direct, rd.off)
				}
				if rd.how == readCached {
					cached += rd.n
				}
				total += rd.n
			}
			assert.Equal(t, size, total, "every byte read once")
			_, some := probe.Cached(data, size)
			assert.False(t, some, "pages of the data left in the cache")
			assert.Equal(t, maps, mappingsOf(path), "a mapping left behind")
			if len(direct) == 0 {
				assert.Greater(t, cached, int64(290_000), "the aligned middles copied from the cache")
				break
			}
		}
		assert.Empty(t, direct, "chunks read from the disk, at these offsets, in every round")
	}

	// A load stopped early unmaps the file too, and drops the pages it
	// found cached, read or not.
	cacheWhole(t, path, probe, fileSize(t, f))
	for _, err := range (&Loader{NoCache: true, ChunkSize: 4096}).Load(context.Background(), r) {
		require.NoError(t, err)
		if maps >= 0 && probe.Mapped() {
			assert.Equal(t, maps+1, mappingsOf(path), "the file mapped during the load")
		}
		break
	}
	assert.Equal(t, maps, mappingsOf(path), "a mapping left behind")
	_, some := probe.Cached(data, size)
	assert.False(t, some, "pages of the data left in the cache")
}

// TestLoaderNoCachePartlyCached: with NoCache, of a file whose first half
// is cached, the chunks cached whole are copied from the cache and the
// others read with direct I/O; the data is right and nothing stays cached.
func TestLoaderNoCachePartlyCached(t *testing.T) { eachProbe(t, testLoaderNoCachePartlyCached) }

func testLoaderNoCachePartlyCached(t *testing.T) {
	path, tensors, f, probe, r := directFixture(t)
	data, size := int64(r.Header().DataOffset()), int64(r.Header().DataLen())
	page := int64(os.Getpagesize())
	log := logReads(t)
	for _, chunk := range []int{8192, 12288, 1 << 20} {
		// The pages up to half (a page boundary inside t10, the largest
		// tensor) cached, those after not.
		t10 := r.Header().Tensors[10]
		require.Equal(t, "t10", t10.Name)
		half := (data + int64(t10.DataOffsets[0]+t10.DataOffsets[1])/2) &^ (page - 1)
		// The kernel may evict a page of the first half before the load
		// reads it, which sends that chunk to the disk, rightly: such a
		// round is tried again.
		var evicted []string
		for attempt := range 3 {
			uncache(t, f, probe)
			// Read with no readahead, which would cache more, maybe in
			// large folios across half, that no drop of the second half
			// can drop.
			g, err := os.Open(path)
			require.NoError(t, err)
			pagecache.NoReadahead(g)
			_, err = g.ReadAt(make([]byte, half), 0)
			g.Close()
			require.NoError(t, err)
			all, _ := probe.Cached(0, half)
			_, some := probe.Cached(half, fileSize(t, f)-half)
			if !all || some {
				if attempt == 2 {
					t.Skip("the kernel does not keep the first half of the file cached, and only it")
				}
				continue
			}

			assertTensors(t, tensors, collect(t, &Loader{NoCache: true, ChunkSize: chunk}, r))
			var total int64
			var kinds [3]int
			evicted = nil
			for _, rd := range log.take() {
				total += rd.n
				kinds[rd.how]++
				if rd.how == readBuffered {
					continue // an unaligned head or tail
				}
				if rd.off+rd.n <= half {
					if rd.how != readCached {
						evicted = append(evicted, fmt.Sprintf("[%d, %d)", rd.off, rd.off+rd.n))
					}
				} else {
					assert.Equal(t, readDirect, rd.how, "chunk [%d, %d) is not cached whole", rd.off, rd.off+rd.n)
				}
			}
			assert.Equal(t, size, total, "every byte read once")
			assert.NotZero(t, kinds[readCached], "no chunk copied from the cache")
			assert.NotZero(t, kinds[readDirect], "no chunk read with direct I/O")
			_, some = probe.Cached(data, size)
			assert.False(t, some, "pages of the data left in the cache")
			if len(evicted) == 0 {
				break
			}
		}
		assert.Empty(t, evicted, "chunks of the cached half not copied from the cache, in every round")
	}
}

// TestLoaderNoCacheLargeFolios: a file cached by a sequential read, which
// the kernel may cache in large folios (several pages in one, dropped
// only whole), loads with NoCache, in chunks whose bounds fall inside
// such folios, and leaves no page cached.
func TestLoaderNoCacheLargeFolios(t *testing.T) { eachProbe(t, testLoaderNoCacheLargeFolios) }

func testLoaderNoCacheLargeFolios(t *testing.T) {
	var tensors []safetensors.Tensor
	for i, n := range []int{5, 3<<20 + 1001, 4 << 20, 6<<20 - 77, 1 << 20} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i + j>>12 + 1)
		}
		tensors = append(tensors, safetensors.Tensor{Name: fmt.Sprintf("t%d", i), DType: safetensors.U8, Shape: []uint64{uint64(n)}, Data: data})
	}
	path := filepath.Join(t.TempDir(), "large.safetensors")
	require.NoError(t, safetensors.WriteFile(path, tensors, nil))
	skipWithoutDirect(t, path)
	f, probe := probeFile(t, path)
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	size := fileSize(t, f)
	for _, chunk := range []int{1 << 20, 3 << 20} {
		uncache(t, f, probe)
		cacheWhole(t, path, probe, size)
		assertTensors(t, tensors, collect(t, &Loader{NoCache: true, ChunkSize: chunk}, r))
		_, some := probe.Cached(0, size)
		assert.False(t, some, "pages of the file left in the cache")
	}
}

// dataAt returns the offset of d's memory from buf's start, and whether d
// lies within buf.
func dataAt(buf, d []byte) (int, bool) {
	b := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	return int(p - b), p >= b && p+uintptr(len(d)) <= b+uintptr(len(buf))
}

// TestReadInto opens a file and a sharded checkpoint with ReadInto: the
// data in the caller's buffer, where the documentation says, valid after
// Close, and a buffer too small refused.
func TestReadInto(t *testing.T) {
	path, tensors := loadFixture(t)
	plain, err := safetensors.Open(path)
	require.NoError(t, err)
	defer plain.Close()
	size := int(plain.Header().DataLen())
	ds, err := firstSection(plain.DataSections())
	require.NoError(t, err)
	section := make([]byte, size)
	_, err = ds.Data.ReadAt(section, 0)
	require.NoError(t, err)

	inside := func(t *testing.T, buf []byte, d []byte) {
		t.Helper()
		if len(d) == 0 {
			return
		}
		_, ok := dataAt(buf, d)
		require.True(t, ok, "in the caller's buffer")
	}
	for _, extra := range []int{0, 1, 4096} {
		buf := make([]byte, size+extra)
		for i := range buf {
			buf[i] = 0xEE
		}
		r, err := safetensors.Open(path, safetensors.ReadInto(buf))
		require.NoError(t, err)
		rds, err := firstSection(r.DataSections())
		require.NoError(t, err)
		assert.Empty(t, rds.Path, "read into memory, not mapped")
		got, err := r.Tensors()
		require.NoError(t, err)
		require.NoError(t, r.Close())
		for i, g := range got {
			inside(t, buf[:size], g.Data)
			assert.Equal(t, tensors[i].Data, g.Data, g.Name)
		}
		assert.True(t, bytes.Equal(section, buf[:size]), "the data section at buf's start")
		assert.Equal(t, bytes.Repeat([]byte{0xEE}, extra), buf[size:], "nothing written past it")
	}

	for _, buf := range [][]byte{nil, make([]byte, size-1)} {
		_, err = safetensors.Open(path, safetensors.ReadInto(buf))
		assert.ErrorIs(t, err, io.ErrShortBuffer)
		assert.ErrorContains(t, err, path)
		assert.ErrorContains(t, err, fmt.Sprintf("data section of %d bytes does not fit in ReadInto's buffer of %d bytes", size, len(buf)))
	}
	empty := filepath.Join(t.TempDir(), "empty.safetensors")
	require.NoError(t, safetensors.WriteFile(empty, []safetensors.Tensor{{Name: "e", DType: safetensors.F32, Shape: []uint64{0}}}, nil))
	r, err := safetensors.Open(empty, safetensors.ReadInto(nil))
	require.NoError(t, err, "an empty data section fits in no buffer")
	require.NoError(t, r.Close())

	// A checkpoint: each shard's section at a multiple of 64 bytes, none
	// overlapping, all within the sum of the sections rounded up.
	ctx := context.Background()
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	s, err := checkpoint.Open(ctx, dir)
	require.NoError(t, err)
	need, sum := 0, 0
	for _, shard := range s.Files() {
		h, err := s.Header(shard)
		require.NoError(t, err)
		need += (int(h.DataLen()) + 63) / 64 * 64
		sum += int(h.DataLen())
	}
	require.NoError(t, s.Close())
	buf := make([]byte, need)
	s, err = checkpoint.Open(ctx, dir, checkpoint.ReadOptions(safetensors.ReadInto(buf)), checkpoint.Strict())
	require.NoError(t, err)
	got, err := s.Tensors()
	require.NoError(t, err)
	type span struct{ b, e int }
	var spans []span
	for _, shard := range s.Files() {
		// Where the shard's data section is in buf, from its tensors: each
		// at its offset from the section's start.
		h, err := s.Header(shard)
		require.NoError(t, err)
		start := -1
		for _, info := range h.Tensors {
			tensor, err := s.Tensor(info.Name)
			require.NoError(t, err)
			inside(t, buf, tensor.Data)
			if len(tensor.Data) == 0 {
				continue
			}
			at, _ := dataAt(buf, tensor.Data)
			if start < 0 {
				start = at - int(info.DataOffsets[0])
			}
			assert.Equal(t, start+int(info.DataOffsets[0]), at, "%s: %s not at its offset from the section's start", shard, info.Name)
		}
		if start < 0 {
			continue // no bytes
		}
		end := start + int(h.DataLen())
		assert.True(t, start >= 0 && end <= len(buf), "%s: [%d, %d) outside the buffer", shard, start, end)
		assert.Zero(t, start%64, "%s at offset %d", shard, start)
		for _, o := range spans {
			assert.True(t, end <= o.b || o.e <= start, "%s overlaps another shard", shard)
		}
		spans = append(spans, span{start, end})
	}
	require.Len(t, spans, len(s.Files()))
	require.NoError(t, s.Close())
	require.Len(t, got, len(fx.tensors))
	for _, g := range got {
		inside(t, buf, g.Data)
		found := false
		for _, w := range fx.tensors {
			if w.Name == g.Name {
				found = true
				assert.Equal(t, w.Data, g.Data, g.Name)
			}
		}
		assert.True(t, found, g.Name)
	}
	_, err = checkpoint.Open(ctx, dir, checkpoint.ReadOptions(safetensors.ReadInto(make([]byte, sum-1))))
	assert.ErrorIs(t, err, io.ErrShortBuffer)
	assert.ErrorContains(t, err, "taken by other files opened with it")
}

// firstSection returns the one section of a Reader's DataSections.
func firstSection(s []safetensors.DataSection, err error) (safetensors.DataSection, error) {
	if err != nil {
		return safetensors.DataSection{}, err
	}
	return s[0], nil
}

// TestLoaderReusesMemory: a load takes the memory of a load that ended,
// which holds that load's bytes, and hands over its own: two files of the
// same layout and other bytes, loaded in turns, each with its own bytes,
// each load from a goroutine of its own (which the scheduler may run on
// another processor than the last load's), and at most two loads in ten
// take memory other than the last load's: the first, and one after the
// garbage collector reclaimed the spare memory.
func TestLoaderReusesMemory(t *testing.T) {
	const size = 1 << 20
	var paths [2]string
	var want [2][]safetensors.Tensor
	for i := range paths {
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(j*7 + i*101)
		}
		want[i] = []safetensors.Tensor{{Name: "w", DType: safetensors.U8, Shape: []uint64{uint64(len(data))}, Data: data}}
		paths[i] = filepath.Join(t.TempDir(), "m.safetensors")
		require.NoError(t, safetensors.WriteFile(paths[i], want[i], nil))
	}
	var readers [2]*safetensors.Reader
	for i, p := range paths {
		r, err := safetensors.Open(p)
		require.NoError(t, err)
		defer r.Close()
		readers[i] = r
	}
	// Memory of the Go heap or a mapping: a load's tensor is at the same
	// address as the last load's where it took that load's memory.
	var at []*byte
	for k := range 10 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for tensor, err := range (&Loader{}).Load(context.Background(), readers[k%2]) {
				if !assert.NoError(t, err) {
					return
				}
				if !bytes.Equal(want[k%2][0].Data, tensor.Data) {
					t.Errorf("load %d: the bytes of the other file", k)
				}
				at = append(at, &tensor.Data[0])
			}
		}()
		<-done
	}
	require.Len(t, at, 10)
	fresh := 1
	for k := 1; k < len(at); k++ {
		if at[k] != at[k-1] {
			fresh++
		}
	}
	assert.LessOrEqual(t, fresh, 2, "loads that did not take the last load's memory; their tensors' addresses: %v", at)
}

// TestSpareMemoryAcrossProcessors: the memory one goroutine gives back is
// the memory that a goroutine on another processor takes next, which a
// sync.Pool would keep from it (its slot of the first processor's). The
// first goroutine spins while the second takes, so that they run on two
// processors. Of ten turns, one may find the spare memory reclaimed by the
// garbage collector.
func TestSpareMemoryAcrossProcessors(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two processors")
	}
	const size = 1 << 20
	reused := 0
	for range 10 {
		mem := takeMemory(size)
		var took atomic.Pointer[byte]
		given := make(chan struct{})
		go func() {
			putMemory(mem)
			close(given)
			for took.Load() == nil { // hold this processor
			}
		}()
		<-given
		got := takeMemory(size)
		took.Store(&got.b[0])
		if &got.b[0] == &mem.b[0] {
			reused++
		}
	}
	assert.GreaterOrEqual(t, reused, 9, "turns in which the memory given back was taken")
}
