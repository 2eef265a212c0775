package load

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileSums returns the SHA-256 of each file, read whole by crypto/sha256.
func fileSums(t *testing.T, paths ...string) map[string][sha256.Size]byte {
	t.Helper()
	out := map[string][sha256.Size]byte{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = sha256.Sum256(raw)
	}
	return out
}

// tensorDigests returns Tensor.Digest of each tensor.
func tensorDigests(tensors []safetensors.Tensor) map[string]safetensors.TensorDigest {
	out := map[string]safetensors.TensorDigest{}
	for _, t := range tensors {
		out[t.Name] = t.Digest()
	}
	return out
}

// loadHashed loads src with HashFiles and DigestTensors into one Digests,
// checking that each tensor's digest is there when it is handed over.
func loadHashed(t *testing.T, l *Loader, src Source) (map[string]safetensors.Tensor, *Digests) {
	t.Helper()
	var d Digests
	got := map[string]safetensors.Tensor{}
	for tensor, err := range l.Load(context.Background(), src, HashFiles(&d), DigestTensors(&d)) {
		require.NoError(t, err)
		dg, ok := d.Tensor(tensor.Name)
		require.True(t, ok, "%s handed over before its digest", tensor.Name)
		assert.Equal(t, tensor.Digest(), dg, tensor.Name)
		tensor.Data = append([]byte(nil), tensor.Data...)
		got[tensor.Name] = tensor
	}
	return got, &d
}

// TestLoaderDigests loads a file through every kind of Reader and every
// kind of Loader with HashFiles and DigestTensors: each file's SHA-256 is
// crypto/sha256's of the file read whole, each tensor's digest
// Tensor.Digest's, and the tensors are those of the file.
func TestLoaderDigests(t *testing.T) {
	path, tensors := loadFixture(t)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	opens := map[string]func() (*safetensors.Reader, error){
		"Open":        func() (*safetensors.Reader, error) { return safetensors.Open(path) },
		"ReadAll":     func() (*safetensors.Reader, error) { return safetensors.Open(path, safetensors.ReadAll()) },
		"NewReader":   func() (*safetensors.Reader, error) { return safetensors.NewReader(raw) },
		"NewReaderAt": func() (*safetensors.Reader, error) { return safetensors.NewReaderAt(f, int64(len(raw))) },
	}
	loaders := map[string]*Loader{
		"default":       {},
		"small chunks":  {ChunkSize: 1, Concurrency: 3, MemoryLimit: 1},
		"one goroutine": {Concurrency: 1, ChunkSize: 8192},
		"tight memory":  {ChunkSize: 16384, MemoryLimit: 310_000},
		"no cache":      {NoCache: true, ChunkSize: 8192, MemoryLimit: 400_000},
		"buffer":        {Buffer: make([]byte, 304_097), ChunkSize: 4096, Concurrency: 8},
	}
	want := sha256.Sum256(raw)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for oname, open := range opens {
		for lname, l := range loaders {
			t.Run(oname+"/"+lname, func(t *testing.T) {
				r, err := open()
				require.NoError(t, err)
				defer r.Close()
				ds, err := firstSection(r.DataSections())
				require.NoError(t, err)
				// One processor: a local file read in order by one
				// goroutine; four: its pieces read in parallel.
				for _, procs := range []int{1, 4} {
					runtime.GOMAXPROCS(procs)
					got, d := loadHashed(t, l, r)
					assertTensors(t, tensors, got)
					assert.Equal(t, map[string][sha256.Size]byte{ds.Name: want}, d.Files(), "GOMAXPROCS %d", procs)
					assert.Equal(t, tensorDigests(tensors), d.Tensors())
				}
			})
		}
	}
}

// TestLoaderDigestsSharded hashes a sharded checkpoint, read several
// files side by side, and one whose index leaves out tensors: its files'
// hashes still cover every byte, the tensors left out read for the hash.
func TestLoaderDigestsSharded(t *testing.T) {
	ctx := context.Background()
	fx := loadShardedFixture(t)
	dir := writeFixture(t, fx)
	c, err := checkpoint.Open(ctx, dir)
	require.NoError(t, err)
	defer c.Close()
	var paths []string
	for _, f := range c.Files() {
		paths = append(paths, filepath.Join(dir, f))
	}
	require.Greater(t, len(paths), 2)
	sums := fileSums(t, paths...)
	// With one processor, each file is read in order by a goroutine of
	// its own, each chunk in pieces (of 1000 bytes, then 1 MiB); with
	// many, its pieces are read in parallel and hashed as they arrive.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 64} {
		runtime.GOMAXPROCS(procs)
		for _, piece := range []int{1000, 1 << 20} {
			setSequentialChunk(t, piece)
			for _, l := range []*Loader{{}, {ChunkSize: 4096, MemoryLimit: 1, Concurrency: 5}, {ChunkSize: 4096, NoCache: true}} {
				got, d := loadHashed(t, l, c)
				assertTensors(t, fx.tensors, got)
				assert.Equal(t, sums, d.Files(), "GOMAXPROCS %d, pieces of %d", procs, piece)
				assert.Equal(t, tensorDigests(fx.tensors), d.Tensors())
			}
		}
	}

	// Leave out of the index the first tensor of each shard that has
	// others, and the last of those that have three.
	left := map[string]bool{}
	for _, p := range paths {
		r, err := safetensors.Open(p)
		require.NoError(t, err)
		ts := r.Header().Tensors
		if len(ts) > 1 {
			left[ts[0].Name] = true
		}
		if len(ts) > 2 {
			left[ts[len(ts)-1].Name] = true
		}
		r.Close()
	}
	editIndex(t, dir, func(ix map[string]any) {
		for n := range left {
			delete(weightMap(ix), n)
		}
		delete(ix["metadata"].(map[string]any), "total_size")
	})
	c2, err := checkpoint.Open(ctx, dir)
	require.NoError(t, err)
	defer c2.Close()
	var kept []safetensors.Tensor
	for _, tn := range fx.tensors {
		if !left[tn.Name] {
			kept = append(kept, tn)
		}
	}
	// A shard all of whose tensors are left out is not read.
	read := map[string][sha256.Size]byte{}
	sections, err := c2.DataSections()
	require.NoError(t, err)
	for _, s := range sections {
		read[s.Name] = sums[s.Name]
	}
	require.Greater(t, len(read), 1)
	for _, l := range []*Loader{{}, {ChunkSize: 4096, MemoryLimit: 1, Concurrency: 2}} {
		got, d := loadHashed(t, l, c2)
		assertTensors(t, kept, got)
		assert.Equal(t, read, d.Files())
		assert.Equal(t, tensorDigests(kept), d.Tensors())
	}
}

// TestLoaderDigestsOrder hashes the data sections of a source of the
// caller's that lists a file's tensors out of order, one twice and one
// overlapping another: the file's hash is still its bytes in order.
func TestLoaderDigestsOrder(t *testing.T) {
	path, _ := loadFixture(t)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	ds, err := firstSection(r.DataSections())
	require.NoError(t, err)
	ts := ds.Tensors
	n := len(ts)
	overlap := ts[n-2]
	overlap.Name = "overlap"
	overlap.DataOffsets[0] -= 7
	overlap.Shape = []uint64{overlap.DataOffsets[1] - overlap.DataOffsets[0]}
	ds.Tensors = []safetensors.TensorInfo{ts[n-1], ts[3], ts[0], overlap, ts[n-2], ts[6], ts[3]}
	ds.Tensors[len(ds.Tensors)-1].Name = "again"
	src := sourceFunc(func() ([]safetensors.DataSection, error) { return []safetensors.DataSection{ds}, nil })
	// With one processor, the file is read in order by a goroutine of its
	// own, in pieces of 1000 bytes: the overlap is cut inside one.
	setSequentialChunk(t, 1000)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for _, l := range []*Loader{{}, {ChunkSize: 4096, MemoryLimit: 1, Concurrency: 3}} {
			got, d := loadHashed(t, l, src)
			assert.Len(t, got, len(ds.Tensors))
			assert.Equal(t, map[string][sha256.Size]byte{path: sha256.Sum256(raw)}, d.Files(), "GOMAXPROCS %d", procs)
		}
	}
}

// setSequentialChunk sets sequentialChunk for the test.
func setSequentialChunk(t *testing.T, n int) {
	old := sequentialChunk
	sequentialChunk = n
	t.Cleanup(func() { sequentialChunk = old })
}

// oneTensorFiles writes a file for each name, of one U8 tensor of that
// name and size bytes, and returns their data sections, the files mapped
// until the test ends.
func oneTensorFiles(t *testing.T, size int, names ...string) []safetensors.DataSection {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 13)
	}
	var sections []safetensors.DataSection
	for i, name := range names {
		path := filepath.Join(dir, fmt.Sprintf("%d.safetensors", i))
		require.NoError(t, safetensors.WriteFile(path, []safetensors.Tensor{{Name: name, DType: safetensors.U8, Shape: []uint64{uint64(size)}, Data: data}}, nil))
		r, err := safetensors.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		ds, err := firstSection(r.DataSections())
		require.NoError(t, err)
		sections = append(sections, ds)
	}
	return sections
}

// TestLoaderHashesFilesSideBySide: with HashFiles, files read in order by
// goroutines of their own are fed side by side: while the goroutine of
// one file is held in its first read, the other file's is read, though
// the first file's tensor has more chunks than a queue of 32 (the
// scheduler once blocked on that queue, and the files took turns).
func TestLoaderHashesFilesSideBySide(t *testing.T) {
	sections := oneTensorFiles(t, 64*4096, "a", strings.Repeat("b", 32))
	bases := []int64{sections[0].Offset, sections[1].Offset}
	// The files' data sections start at different offsets modulo 4096,
	// which tell their reads apart.
	require.NotEqual(t, bases[0]%4096, bases[1]%4096)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)
	second := make(chan struct{})
	var once sync.Once
	var waited atomic.Bool
	testHookRead = func(how int, off int64, n int) {
		switch off % 4096 {
		case bases[1] % 4096:
			once.Do(func() { close(second) })
		case bases[0] % 4096:
			if off == bases[0] {
				select {
				case <-second:
				case <-time.After(10 * time.Second):
					waited.Store(true)
				}
			}
		}
	}
	defer func() { testHookRead = nil }()
	src := sourceFunc(func() ([]safetensors.DataSection, error) { return sections, nil })
	var d Digests
	for _, err := range (&Loader{ChunkSize: 4096}).Load(context.Background(), src, HashFiles(&d)) {
		require.NoError(t, err)
	}
	assert.False(t, waited.Load(), "the second file was not read while the first file's goroutine was held")
	for _, s := range sections {
		assert.Equal(t, fileSums(t, s.Path)[s.Path], d.Files()[s.Name])
	}
}

// TestLoaderHashesFilesAtMostProcessors: with HashFiles, no more files
// are read in order, each by a goroutine of its own, at once than there
// are processors, though the memory holds them all: the next file's
// reads start after the last read of one before it (with more files at
// once, a goroutine back from a read waited for a processor, while the
// piece it read left its processor's cache: 1.2x the time of hashing
// alone, 4 files of 256 MiB, tensors of 64 MiB).
func TestLoaderHashesFilesAtMostProcessors(t *testing.T) {
	var names []string
	for i := range 6 {
		names = append(names, strings.Repeat("x", 8*i+1)) // headers of different lengths
	}
	sections := oneTensorFiles(t, 16*4096, names...)
	file := map[int64]int{} // a file's number, by its data section's offset modulo 4096
	for i, ds := range sections {
		_, dup := file[ds.Offset%4096]
		require.False(t, dup, "two files' data sections start at the same offset modulo 4096")
		file[ds.Offset%4096] = i
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	setSequentialChunk(t, 4096)
	src := sourceFunc(func() ([]safetensors.DataSection, error) { return sections, nil })
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		// The reads of each file, in the order they were made.
		var mu sync.Mutex
		var reads []int
		testHookRead = func(how int, off int64, n int) {
			mu.Lock()
			reads = append(reads, file[off%4096])
			mu.Unlock()
			time.Sleep(100 * time.Microsecond) // a read that takes time: the files' goroutines overlap
		}
		var d Digests
		for _, err := range (&Loader{ChunkSize: 4096}).Load(context.Background(), src, HashFiles(&d)) {
			require.NoError(t, err)
		}
		testHookRead = nil
		for _, s := range sections {
			assert.Equal(t, fileSums(t, s.Path)[s.Path], d.Files()[s.Name])
		}
		first, last := map[int]int{}, map[int]int{}
		for k, f := range reads {
			if _, ok := first[f]; !ok {
				first[f] = k
			}
			last[f] = k
		}
		require.Len(t, first, len(sections))
		most := 0
		for k := range reads {
			at := 0 // files read before and after the k-th read
			for f := range first {
				if first[f] <= k && k <= last[f] {
					at++
				}
			}
			most = max(most, at)
		}
		assert.LessOrEqual(t, most, procs, "GOMAXPROCS %d: files read at once", procs)
	}
}

// TestMemoryLimit: the memory of a load, and for HashFiles by default
// enough for a tensor of each file hashed side by side and one more.
func TestMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		set               int64
		need, total, want uint64
		side              int
	}{
		{0, mib, 4096 * mib, 256 * mib, 0},          // the default
		{0, 300 * mib, 4096 * mib, 300 * mib, 0},    // the largest tensor
		{0, mib, 100 * mib, 100 * mib, 0},           // all the tensors
		{64 * mib, mib, 4096 * mib, 64 * mib, 2},    // set: kept, hashing or not
		{0, 128 * mib, 4096 * mib, 384 * mib, 2},    // 2 files hashed: 3 tensors
		{0, 64 * mib, 4096 * mib, 256 * mib, 2},     // at least the default
		{0, 128 * mib, 300 * mib, 300 * mib, 2},     // all the tensors
		{0, 100 * mib, 4096 * mib, 1024 * mib, 16},  // at most 1 GiB
		{0, 2048 * mib, 4096 * mib, 2048 * mib, 16}, // the largest tensor
		{0, 1 << 62, 1 << 63, 1 << 62, 1 << 20},     // no overflow
	} {
		assert.Equal(t, c.want, memoryLimit(c.set, c.need, c.total, c.side), "%+v", c)
	}
}

// TestHeldTensors: the tensors a load with HashFiles holds at once are
// two for each file hashed side by side whose pieces are read in parallel
// (one hashed while the next is read), one for each read and hashed by
// one goroutine, and at most one for each processor.
func TestHeldTensors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	var d Digests
	files, tensors, both := options{files: &d}, options{tensors: &d}, options{files: &d, tensors: &d}
	for _, c := range []struct {
		files, tensors int
		opts           options
		want           int
	}{
		{1, 4, files, 2},     // one file: its pieces read in parallel
		{8, 32, files, 16},   // half as many files as processors
		{9, 36, files, 9},    // more: each read and hashed by one goroutine
		{40, 160, files, 16}, // one a processor
		{8, 32, tensors, 16}, // a digest a processor
		{2, 3, tensors, 3},   // or a tensor
		{4, 16, both, 16},    // the more of the two
		{8, 8, options{}, 0}, // neither
	} {
		assert.Equal(t, c.want, heldTensors(c.files, c.tensors, c.opts), "%+v", c)
	}
}

// TestLoaderDigestsErrors: a source that cannot be hashed is refused at
// the start; a read that fails in a gap names the file; a cancelled load
// stops with its goroutines.
func TestLoaderDigestsErrors(t *testing.T) {
	path, _ := loadFixture(t)
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	ds, err := firstSection(r.DataSections())
	require.NoError(t, err)

	noHeader := ds
	noHeader.HeaderBytes = nil
	var d Digests
	_, err = first(new(Loader).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) {
		return []safetensors.DataSection{noHeader}, nil
	}), HashFiles(&d)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot hash "+path)
	// Without HashFiles it loads.
	_, err = first(new(Loader).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) {
		return []safetensors.DataSection{noHeader}, nil
	}), DigestTensors(&d)))
	require.NoError(t, err)

	short := ds
	short.Size = int64(len(ds.HeaderBytes)) + 10
	_, err = first(new(Loader).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) {
		return []safetensors.DataSection{short}, nil
	}), HashFiles(&d)))
	assert.ErrorIs(t, err, safetensors.ErrInvalidOffset)

	// A gap whose read fails: the source breaks past the first tensor,
	// which is the only one loaded.
	gap := ds
	gap.Path = ""
	gap.Data = brokenReaderAt{r: ds.Data, bad: int64(ds.Tensors[3].DataOffsets[1])}
	gap.Tensors = ds.Tensors[3:4]
	_, err = first(new(Loader).Load(context.Background(), sourceFunc(func() ([]safetensors.DataSection, error) {
		return []safetensors.DataSection{gap}, nil
	}), HashFiles(&d)))
	assert.ErrorIs(t, err, errDisk)
	assert.Contains(t, err.Error(), "hashing "+path)

	// Cancelled, and broken out of, the file read in order by one
	// goroutine (one processor) and in parallel (four).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 4} {
		runtime.GOMAXPROCS(procs)
		l := &Loader{ChunkSize: 4096, MemoryLimit: 1, Concurrency: 4}
		for range 10 {
			n := 0
			for _, err := range l.Load(context.Background(), r, HashFiles(&d), DigestTensors(&d)) {
				require.NoError(t, err)
				if n++; n == 3 {
					break
				}
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var last error
		n := 0
		for _, err := range l.Load(ctx, r, HashFiles(&d)) {
			if n++; n == 2 {
				cancel()
			}
			last = err
		}
		cancel()
		assert.True(t, errors.Is(last, context.Canceled), "GOMAXPROCS %d: %v", procs, last)
		assertNoLoadGoroutines(t)
	}
}

var _ io.ReaderAt = brokenReaderAt{}
