package safetensors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors/internal/pagecache"
)

// defaultChunkSize is how many bytes one read asks for, by default: large
// enough that a read's cost is its copy, small enough to spread one large
// tensor over several goroutines.
const defaultChunkSize = 16 << 20

// defaultConcurrency is how many reads run at once by default: one a
// processor, and at least four, so that a disk or a network has requests
// in flight while the processors copy.
func defaultConcurrency() int { return max(4, runtime.GOMAXPROCS(0)) }

// readParallel fills p from r at off, as readFullAt does, with up to
// workers goroutines each reading chunks of chunk bytes.
func readParallel(r io.ReaderAt, p []byte, off int64, workers, chunk int) error {
	n := (len(p) + chunk - 1) / chunk
	if n <= 1 || workers <= 1 {
		return readFullAt(r, p, off)
	}
	workers = min(workers, n)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Worker w reads chunks w, w+workers, ...: each goroutine
			// streams through its own part, in order.
			for i := w; i < n; i += workers {
				b, e := i*chunk, min((i+1)*chunk, len(p))
				if err := readFullAt(r, p[b:e], off+int64(b)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// A LoadFile is one file, or one object, that a Loader reads tensors from.
// Reader.LoadFiles and Sharded.LoadFiles (and so Model's) describe theirs;
// a caller may describe any other source of safetensors data, such as an
// object store, with an io.ReaderAt, in a LoadSource of its own.
type LoadFile struct {
	// Name is what errors call the file: its path or URL.
	Name string
	// Data reads the file's data section: offset 0 is the first byte after
	// the header. It must allow concurrent ReadAt calls.
	Data io.ReaderAt
	// Tensors are the tensors to load, with their offsets into Data. A
	// Loader reads them in this order, several at once.
	Tensors []TensorInfo

	// local is the file on disk that Data reads, which the Loader opens
	// itself, so that it can read it with direct I/O.
	local *localFile
}

// localFile is a file on disk, as Open found it.
type localFile struct {
	path       string
	info       os.FileInfo // to check that the path still names the same file
	dataOffset int64
}

// A LoadSource is what a Loader reads: the files of a Reader, a Sharded or
// a Model, or those a caller describes.
type LoadSource interface {
	// LoadFiles describes the files to read, and in each the tensors to
	// load. It is called once by each Loader.Load, when the loop starts.
	LoadFiles() ([]LoadFile, error)
}

// LoadFiles describes the Reader's file for a Loader. A Reader from Open is
// read from its file with pread, which the Loader opens again by name (or,
// if the name no longer leads to the file Open mapped, from the mapping);
// one from NewReaderAt through its io.ReaderAt; one from NewReader, or
// Open with ReadAll, from its memory.
func (r *Reader) LoadFiles() ([]LoadFile, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	lf := LoadFile{Name: r.name, Tensors: r.h.Tensors}
	switch {
	case r.ra != nil:
		lf.Data = io.NewSectionReader(r.ra, r.base, int64(r.h.DataLen()))
	case r.local != nil && r.mapping != nil:
		lf.local = r.local
		lf.Data = sliceReaderAt(r.data)
	default:
		lf.Data = sliceReaderAt(r.data)
	}
	return []LoadFile{lf}, nil
}

// LoadFiles describes the checkpoint's shards for a Loader, with the
// tensors the index lists; see Reader.LoadFiles.
func (s *Sharded) LoadFiles() ([]LoadFile, error) {
	var out []LoadFile
	for i, r := range s.shards {
		lfs, err := r.LoadFiles()
		if err != nil {
			return nil, err
		}
		lf := lfs[0]
		lf.Name = s.files[i]
		if s.where != nil {
			lf.Tensors = nil
			for _, t := range r.h.Tensors {
				if j, ok := s.where[t.Name]; ok && j == i {
					lf.Tensors = append(lf.Tensors, t)
				}
			}
		}
		out = append(out, lf)
	}
	return out, nil
}

// sliceReaderAt reads a byte slice.
type sliceReaderAt []byte

func (s sliceReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(s)) {
		return 0, fmt.Errorf("%soffset %d outside %d bytes", prefix, off, len(s))
	}
	n := copy(p, s[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// A Loader reads tensors from files, checkpoints or any random-access
// source with several goroutines in large chunks, into a bounded amount of
// memory that it reuses, and hands each tensor over as soon as all its
// bytes have arrived: the way an inference server fills a device from a
// checkpoint, at the speed of the disk, the page cache or the network.
//
// To read one file whole into memory of its own, in one call, use Load.
//
// The zero Loader is ready to use. A Loader may be used for several loads,
// one after the other, or at once if it has no Buffer (each load then has
// memory of its own). Its fields must not change while a load is under
// way.
type Loader struct {
	// Concurrency is how many reads run at once; 0 means one per
	// processor, and at least four.
	Concurrency int

	// ChunkSize is the most bytes one read asks for, rounded up to a
	// multiple of 4096; 0 means 16 MiB. A tensor larger than a chunk is
	// read by several goroutines.
	ChunkSize int

	// MemoryLimit bounds the memory that holds tensors read but not yet
	// released: the Loader reads ahead of the caller until it is full.
	// 0 means 256 MiB. It is raised to what the largest tensor needs (its
	// size and 4 KiB), and lowered to what all the tensors need.
	MemoryLimit int64

	// Buffer, if not nil, is the memory the Loader reads into, in place of
	// memory of its own of MemoryLimit bytes: pinned memory for a device,
	// or memory kept from one load to the next. It must hold the largest
	// tensor and 4 KiB more (a smaller one gives an error wrapping
	// io.ErrShortBuffer). Tensors are handed over as slices of it.
	Buffer []byte

	// NoCache reads local files so that a load leaves no cached copy of them
	// behind, and the memory it takes is, but for the pages of the reads
	// under way, the Loader's own. Before each read of a chunk it asks the
	// kernel which of the chunk's pages are cached (cachestat(2), or before
	// Linux 6.5 mincore(2) on a mapping that is never touched; neither reads
	// anything). A chunk cached whole is copied from the cache, at the
	// memory's speed; any other is read from the disk with direct I/O
	// (Linux's O_DIRECT) where the file system allows it, else through the
	// cache with no readahead, each tensor placed in memory so that its
	// aligned middle can be, its unaligned head and tail read through the
	// cache. Every page a read found or left in the cache is then dropped
	// from it (posix_fadvise POSIX_FADV_DONTNEED), as the load goes on, and
	// when the load ends those of the tensors and the header once more:
	// the kernel keeps a large folio (several pages cached as one) that a
	// read covers only in part. Pages a process has mapped stay. A file
	// that was cached thus loads nearly as fast as without NoCache, and one
	// that was not at the disk's speed.
	//
	// Use it on unified-memory machines (Grace Blackwell, DGX Spark,
	// Jetson, Apple Silicon), where the page cache and the device's memory
	// share one pool, so that a file read through the cache, or mapped, is
	// held twice; and wherever a file read once should not push other data
	// out of the cache. Do not use it for a file about to be read again
	// soon: the next load reads it from the disk. Where the kernel would
	// not say which pages of a file are cached (it says so only to a
	// process that owns the file or may write it), every aligned chunk is
	// read with direct I/O. It applies to files on disk, opened with Open;
	// elsewhere than on Linux it does nothing. Sources given by an
	// io.ReaderAt are read as they are.
	NoCache bool
}

// Load returns an iterator over the tensors of src, handed over in the
// order their bytes arrive, which is roughly the order of the files. Each
// tensor's Data is a slice of the Loader's memory, valid until the loop's
// next iteration, when the Loader reuses it: copy what must outlive it.
// Breaking out of the loop, or cancelling ctx, stops the reads and
// releases everything; an error ends the loop after being yielded, with
// a zero Tensor.
//
//	for t, err := range loader.Load(ctx, ckpt) {
//		if err != nil {
//			return err
//		}
//		upload(t.Name, t.Data) // t.Data is reused once this returns
//	}
func (l *Loader) Load(ctx context.Context, src LoadSource) iter.Seq2[Tensor, error] {
	return func(yield func(Tensor, error) bool) {
		files, err := src.LoadFiles()
		if err != nil {
			yield(Tensor{}, err)
			return
		}
		ld, err := l.start(ctx, files)
		if err != nil {
			yield(Tensor{}, err)
			return
		}
		defer ld.stop()
		for {
			select {
			case <-ld.ctx.Done():
				if err := ld.firstErr(); err != nil {
					yield(Tensor{}, err)
				} else if ctx.Err() != nil {
					yield(Tensor{}, ctx.Err())
				}
				return
			case job, ok := <-ld.done:
				if !ok {
					if err := ld.firstErr(); err != nil {
						yield(Tensor{}, err)
					}
					return
				}
				t := Tensor{Name: job.info.Name, DType: job.info.DType, Shape: job.info.Shape, Data: job.dst}
				more := yield(t, nil)
				ld.arena.release(job.slot)
				if !more {
					return
				}
			}
		}
	}
}

// load is one Loader.Load under way.
type load struct {
	ctx    context.Context
	cancel context.CancelFunc
	files  []openedFile
	arena  *arena
	chunk  int
	work   chan chunkJob
	done   chan *tensorJob
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error
}

// openedFile is a LoadFile with what the load opened for it.
type openedFile struct {
	LoadFile
	buffered io.ReaderAt      // Data, or the local file opened again
	direct   *os.File         // the local file opened for direct I/O, or nil
	base     int64            // the data section's offset in buffered and direct
	fadvise  *os.File         // the file whose cached pages to drop, or nil
	probe    *pagecache.Probe // tells which pages of the file are cached, or nil
	closers  []*os.File
}

// tensorJob is a tensor being read.
type tensorJob struct {
	file    *openedFile
	info    TensorInfo
	dst     []byte
	slot    int
	pending int // chunks not yet read
}

// chunkJob is one read: bytes [b, e) of a tensor's data.
type chunkJob struct {
	t    *tensorJob
	b, e int
}

// start opens the files and starts the goroutines of a load.
func (l *Loader) start(ctx context.Context, files []LoadFile) (*load, error) {
	chunk := l.ChunkSize
	if chunk <= 0 {
		chunk = defaultChunkSize
	}
	chunk = (chunk + pagecache.BlockSize - 1) / pagecache.BlockSize * pagecache.BlockSize
	workers := l.Concurrency
	if workers <= 0 {
		workers = defaultConcurrency()
	}
	var largest, total uint64
	for _, f := range files {
		for _, t := range f.Tensors {
			b, e := t.DataOffsets[0], t.DataOffsets[1]
			if e < b || e > 1<<62 {
				// Only a LoadFile of the caller's can hold such offsets.
				return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: %s: offsets [%d, %d)", ErrInvalidOffset, f.Name, b, e)}
			}
			largest = max(largest, e-b)
			total = min(total+e-b+pagecache.BlockSize, 1<<63) // no overflow: each term is below 2^62
		}
	}
	need := largest + pagecache.BlockSize
	var mem []byte
	if l.Buffer != nil {
		if uint64(len(l.Buffer)) < need {
			return nil, fmt.Errorf("%sthe Loader's Buffer of %d bytes cannot hold the largest tensor, of %d bytes, and 4096 more: %w", prefix, len(l.Buffer), largest, io.ErrShortBuffer)
		}
		mem = l.Buffer
	} else {
		limit := uint64(256 << 20)
		if l.MemoryLimit > 0 {
			limit = uint64(l.MemoryLimit)
		}
		limit = min(max(limit, need), total)
		if limit > maxInt {
			return nil, errTooLarge(int64(min(limit, 1<<63-1)))
		}
		mem = make([]byte, limit)
		pagecache.AdviseHugePages(mem)
	}
	ld := &load{arena: newArena(mem), chunk: chunk, work: make(chan chunkJob, workers), done: make(chan *tensorJob, workers)}
	ld.ctx, ld.cancel = context.WithCancel(ctx)
	for _, f := range files {
		of, err := openLoadFile(f, l.NoCache)
		ld.files = append(ld.files, of)
		if err != nil {
			ld.closeFiles()
			ld.cancel()
			return nil, err
		}
	}
	for range workers {
		ld.wg.Add(1)
		go ld.worker()
	}
	ld.wg.Add(1)
	go ld.schedule()
	go func() {
		ld.wg.Wait()
		close(ld.done)
	}()
	return ld, nil
}

// openLoadFile opens what a load needs to read f.
func openLoadFile(f LoadFile, noCache bool) (openedFile, error) {
	of := openedFile{LoadFile: f, buffered: f.Data}
	if f.local == nil {
		return of, nil
	}
	// Read the file with pread rather than through its mapping: no page
	// faults, and the page cache can be bypassed or dropped.
	// If the path no longer leads to the file Open mapped, read the
	// mapping.
	file, err := openRegular(f.local.path)
	if err != nil {
		return of, nil
	}
	of.closers = append(of.closers, file)
	info, err := file.Stat()
	if err != nil || !os.SameFile(info, f.local.info) || info.Size() != f.local.info.Size() {
		return of, nil
	}
	of.buffered, of.base = file, f.local.dataOffset
	if noCache {
		of.fadvise = file
		// What is read through the cache is dropped from it once read;
		// readahead would leave pages no read asked for.
		pagecache.NoReadahead(file)
		if d, err := pagecache.OpenDirect(f.local.path); err == nil {
			of.closers = append(of.closers, d)
			if dinfo, err := d.Stat(); err == nil && os.SameFile(dinfo, info) {
				of.direct = d
				of.probe = newProbe(file, f.local.path, info)
			}
		}
	}
	return of, nil
}

// newProbe returns a pagecache.Probe of f, the file at path, or nil where
// the kernel would not tell which of its pages are cached.
func newProbe(f *os.File, path string, info os.FileInfo) *pagecache.Probe {
	if testForceMincore {
		return pagecache.NewMincoreProbe(f, path, info)
	}
	return pagecache.NewProbe(f, path, info)
}

// closeFiles closes what the load opened.
func (ld *load) closeFiles() {
	for _, f := range ld.files {
		for _, c := range f.closers {
			c.Close()
		}
		if f.probe != nil {
			f.probe.Close()
		}
	}
}

// stop ends the load: it stops the goroutines, waits for them and closes
// the files.
func (ld *load) stop() {
	ld.cancel()
	ld.arena.close()
	for range ld.done {
		// Tensors read but not handed over: drop them.
	}
	ld.dropCached()
	ld.closeFiles()
}

// dropCached drops from the page cache, with NoCache, the pages of each
// run of adjacent tensors in a file (the header with the first): each read
// dropped its pages, but the kernel keeps a large folio (several pages
// cached as one) that a range covers only in part, such as one across two
// chunks, which only a range covering both drops.
func (ld *load) dropCached() {
	for _, f := range ld.files {
		if f.fadvise == nil || len(f.Tensors) == 0 {
			continue
		}
		spans := make([][2]uint64, 0, len(f.Tensors))
		for _, t := range f.Tensors {
			spans = append(spans, t.DataOffsets)
		}
		slices.SortFunc(spans, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
		b, e := spans[0][0], spans[0][1]
		drop := func() {
			start := f.base + int64(b) // offsets checked in start: below 2^62
			if b == 0 {
				start = 0
			}
			pagecache.Drop(f.fadvise, start, f.base+int64(e)-start)
		}
		for _, s := range spans[1:] {
			if s[0] > e {
				drop()
				b = s[0]
			}
			e = max(e, s[1])
		}
		drop()
	}
}

// fail records the load's first error and stops it.
func (ld *load) fail(err error) {
	ld.mu.Lock()
	if ld.err == nil {
		ld.err = err
	}
	ld.mu.Unlock()
	ld.cancel()
}

func (ld *load) firstErr() error {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.err
}

// schedule places each tensor in memory, in order, and queues its chunks.
func (ld *load) schedule() {
	defer ld.wg.Done()
	defer close(ld.work)
	for i := range ld.files {
		f := &ld.files[i]
		for _, info := range f.Tensors {
			size := int(info.DataOffsets[1] - info.DataOffsets[0]) // fits: the arena holds it
			// Place the tensor so that its address and its offset in the
			// file agree modulo pagecache.BlockSize, for direct I/O.
			fileOff := f.base + int64(info.DataOffsets[0])
			dst, slot, ok := ld.arena.alloc(size, int(fileOff%pagecache.BlockSize))
			if !ok {
				return // stopped
			}
			t := &tensorJob{file: f, info: info, dst: dst, slot: slot}
			chunks := ld.split(t, fileOff)
			t.pending = len(chunks)
			if len(chunks) == 0 {
				select {
				case ld.done <- t:
				case <-ld.ctx.Done():
					return
				}
				continue
			}
			for _, c := range chunks {
				select {
				case ld.work <- c:
				case <-ld.ctx.Done():
					return
				}
			}
		}
	}
}

// split cuts a tensor into reads: for direct I/O its unaligned head and
// tail apart from aligned chunks, else chunks of ld.chunk bytes.
func (ld *load) split(t *tensorJob, fileOff int64) []chunkJob {
	size := len(t.dst)
	var out []chunkJob
	add := func(b, e int) {
		for b < e {
			n := min(e-b, ld.chunk)
			out = append(out, chunkJob{t: t, b: b, e: b + n})
			b += n
		}
	}
	if t.file.direct == nil || size == 0 {
		add(0, size)
		return out
	}
	head := int((pagecache.BlockSize - fileOff%pagecache.BlockSize) % pagecache.BlockSize)
	if head >= size {
		add(0, size)
		return out
	}
	tail := size - int((fileOff+int64(size))%pagecache.BlockSize)
	if head > 0 {
		out = append(out, chunkJob{t: t, b: 0, e: head})
	}
	add(head, tail)
	if tail < size {
		out = append(out, chunkJob{t: t, b: tail, e: size})
	}
	return out
}

// worker reads chunks until there are none left, and hands over each
// tensor whose last chunk it read.
func (ld *load) worker() {
	defer ld.wg.Done()
	for c := range ld.work {
		if ld.ctx.Err() != nil {
			continue // drain
		}
		if err := ld.read(c); err != nil {
			ld.fail(&TensorError{Name: c.t.info.Name, Err: fmt.Errorf("%s: %w", c.t.file.Name, err)})
			continue
		}
		ld.mu.Lock()
		c.t.pending--
		last := c.t.pending == 0
		ld.mu.Unlock()
		if last {
			select {
			case ld.done <- c.t:
			case <-ld.ctx.Done():
			}
		}
	}
}

// read reads one chunk.
func (ld *load) read(c chunkJob) error {
	f := c.t.file
	p := c.t.dst[c.b:c.e]
	off := f.base + int64(c.t.info.DataOffsets[0]) + int64(c.b)
	how := readBuffered
	if f.direct != nil && pagecache.Aligned(p, off) {
		// A chunk cached whole is copied from the cache, any other read
		// from the disk.
		all, some := false, false
		if f.probe != nil {
			all, some = f.probe.Cached(off, int64(len(p)))
		}
		if all {
			how = readCached
		} else if err := readChunkAt(f.direct, p, off); err == nil {
			// Direct I/O leaves the pages that were cached in the cache.
			if some || f.probe == nil {
				pagecache.Drop(f.fadvise, off, int64(len(p)))
			}
			if testHookRead != nil {
				testHookRead(readDirect, off, len(p))
			}
			return nil
		}
		// The file system refused direct I/O here: read through the cache.
	}
	if err := readChunkAt(f.buffered, p, off); err != nil {
		return err
	}
	if f.fadvise != nil {
		pagecache.Drop(f.fadvise, off, int64(len(p)))
	}
	if testHookRead != nil {
		testHookRead(how, off, len(p))
	}
	return nil
}

// How a chunk was read, for testHookRead.
const (
	readBuffered = iota // through the cache, or from the caller's source
	readCached          // with NoCache, through the cache, which held it whole
	readDirect          // with NoCache, with direct I/O
)

// testHookRead, when set by a test, is called with how each chunk was read,
// its offset in the file and its size.
var testHookRead func(how int, off int64, n int)

// testForceMincore, when set by a test, makes a load ask which pages are
// cached with mincore(2) even where the kernel has cachestat(2).
var testForceMincore bool

// readChunkAt fills p from r at off, as readFullAt does, with an error
// that does not start with the package's prefix, for a TensorError.
func readChunkAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d: got %d: %w", len(p), off, n, err)
}

// arena hands out regions of one buffer as a ring: in order of
// allocation, released in any order, and reused once every older region is
// released.
type arena struct {
	mem    []byte
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	// regions allocated and not yet reclaimed, oldest first, as a queue:
	// regions[head:] are live.
	regions []region
	first   int // the slot number of regions[0]
	start   int // where the oldest live region starts; == end when none
	end     int // where the next region may start
	wrapped bool
}

type region struct {
	b, e     int
	released bool
}

func newArena(mem []byte) *arena {
	a := &arena{mem: mem}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// alloc returns size bytes of the arena whose address is phase modulo
// pagecache.BlockSize, and their slot, waiting for room; ok is false once the arena
// is closed.
func (a *arena) alloc(size, phase int) (p []byte, slot int, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for !a.closed {
		if p, slot, ok := a.tryAlloc(size, phase); ok {
			return p, slot, true
		}
		a.cond.Wait()
	}
	return nil, 0, false
}

// tryAlloc is alloc without waiting: ok is false if there is no room.
func (a *arena) tryAlloc(size, phase int) (p []byte, slot int, ok bool) {
	base := pagecache.Phase(a.mem)
	// at returns the first position from pos whose address is phase
	// modulo pagecache.BlockSize.
	at := func(pos int) int {
		return pos + ((phase-base-pos)%pagecache.BlockSize+2*pagecache.BlockSize)%pagecache.BlockSize
	}
	live := len(a.regions) > 0
	if !live {
		a.start, a.end, a.wrapped = 0, 0, false
	}
	if !a.wrapped {
		// Free: [end, len) and [0, start).
		if b := at(a.end); b+size <= len(a.mem) {
			return a.take(b, b+size)
		}
		if b := at(0); b+size <= a.start {
			a.wrapped = true
			return a.take(b, b+size)
		}
	} else if b := at(a.end); b+size <= a.start {
		// Free: [end, start).
		return a.take(b, b+size)
	}
	return nil, 0, false
}

// take records the region [b, e) as allocated.
func (a *arena) take(b, e int) ([]byte, int, bool) {
	if len(a.regions) == 0 {
		a.start = b
	}
	a.regions = append(a.regions, region{b: b, e: e})
	a.end = e
	return a.mem[b:e:e], a.first + len(a.regions) - 1, true
}

// release marks a slot free, and reclaims the oldest regions that are.
func (a *arena) release(slot int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.regions[slot-a.first].released = true
	n := 0
	for n < len(a.regions) && a.regions[n].released {
		n++
	}
	if n == 0 {
		return
	}
	a.first += n
	a.regions = a.regions[n:]
	if len(a.regions) > 0 {
		next := a.regions[0].b
		if next < a.start {
			a.wrapped = false // the oldest live region is past the wrap
		}
		a.start = next
	}
	a.cond.Broadcast()
}

// close wakes and stops every alloc.
func (a *arena) close() {
	a.mu.Lock()
	a.closed = true
	a.cond.Broadcast()
	a.mu.Unlock()
}
