// Package load fills memory from a model's files the way an inference
// server fills a device: a [Loader] reads the tensors of a checkpoint, a
// file, or any source described by safetensors.DataSection values, with
// several goroutines in large chunks, into a bounded amount of memory that
// it reuses, and hands each tensor over as soon as all its bytes have
// arrived: at the speed of the disk, the page cache or the network.
//
// It can read local files without leaving them in the page cache (direct
// I/O and page-cache probes, on Linux), for machines whose devices share
// the host's memory. Cancelling a load's context aborts its reads in
// flight, remote ones included: a source that is a
// safetensors.ReaderAtContext, as the remote package's files are, is read
// under the load's context.
//
// To read one file whole into memory of its own, in one call, use
// safetensors.Load; a whole model, the checkpoint package's Load.
package load

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"iter"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/pagecache"
	"github.com/safetensors-go/safetensors/internal/regular"
)

// defaultChunkSize is how many bytes one read asks for, by default: large
// enough that a read's cost is its copy, small enough to spread one large
// tensor over several goroutines.
const defaultChunkSize = 16 << 20

// defaultConcurrency is how many reads run at once by default: one a
// processor, and at least four, so that a disk or a network has requests
// in flight while the processors copy.
func defaultConcurrency() int { return max(4, runtime.GOMAXPROCS(0)) }

// A Source is what a Loader reads: a *safetensors.Reader, a
// *checkpoint.Checkpoint (of one file or of many), or any value that
// describes the data sections of its files, such as objects in a store of
// the caller's.
type Source interface {
	// DataSections describes the files to read, and in each the tensors to
	// load. It is called once by each Loader.Load, when the loop starts.
	DataSections() ([]safetensors.DataSection, error)
}

var _ Source = (*safetensors.Reader)(nil)

// maxInt is the largest int, as a uint64.
const maxInt = uint64(^uint(0) >> 1)

// A Loader reads tensors from files, checkpoints or any random-access
// source with several goroutines in large chunks, into a bounded amount of
// memory that it reuses, and hands each tensor over as soon as all its
// bytes have arrived: the way an inference server fills a device from a
// checkpoint, at the speed of the disk, the page cache or the network.
//
// To read one file whole into memory of its own, in one call, use
// safetensors.Load.
//
// The zero Loader is ready to use. A Loader may be used for several loads,
// one after the other, or at once if it has no Buffer (each load then has
// memory of its own). The memory of a load that ended is kept for the next
// load, of any Loader, until the garbage collector reclaims it: memory
// used before costs no page faults. On 64-bit Linux that memory is an
// anonymous mapping outside the Go heap (not counted by runtime.MemStats
// nor GOMEMLIMIT), whose pages the kernel zeroes as the reads first fill
// them, in parallel, rather than Go's allocator zeroing the whole of it
// before the first read; once reclaimed, its pages go back to the system
// and its address space is kept for the next load. Its fields must not
// change while a load is under way.
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
	// 0 means 256 MiB, or for a load with HashFiles or DigestTensors enough
	// for the tensors of each file hashed side by side (two where its
	// pieces are read in parallel: one hashed while the next is read), or
	// for a tensor of each processor computing digests, and one more: from
	// 256 MiB to 1 GiB.
	// It is raised to what the largest tensor needs (its size and 4 KiB),
	// and lowered to what all the tensors need.
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
	// read with direct I/O. It applies to files on disk that
	// safetensors.Open mapped (a DataSection with a Path); elsewhere than
	// on Linux it does nothing. Sources given by an io.ReaderAt are read
	// as they are.
	NoCache bool
}

// Load returns an iterator over the tensors of src, handed over in the
// order their bytes arrive, which is roughly the order of the files.
// Nothing is read until the iterator is ranged over, as below: a call
// whose result is dropped loads nothing. Each
// tensor's Data is a slice of the Loader's memory, valid until the loop's
// next iteration, when the Loader reuses it: copy what must outlive it.
// Breaking out of the loop, or cancelling ctx, stops the reads (those in
// flight through a ReaderAtContext, such as HTTP requests, are aborted)
// and releases everything before the loop ends; an error ends the loop
// after being yielded, with a zero Tensor. A cancelled ctx yields an
// error wrapping ctx.Err().
//
// The options HashFiles and DigestTensors make the load hash what it reads
// as it reads it: each file's SHA-256, each tensor's digest.
//
//	for t, err := range loader.Load(ctx, ckpt) {
//		if err != nil {
//			return err
//		}
//		upload(t.Name, t.Data) // t.Data is reused once this returns
//	}
func (l *Loader) Load(ctx context.Context, src Source, opts ...Option) iter.Seq2[safetensors.Tensor, error] {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return func(yield func(safetensors.Tensor, error) bool) {
		files, err := src.DataSections()
		if err != nil {
			yield(safetensors.Tensor{}, err)
			return
		}
		ld, err := l.start(ctx, files, o)
		if err != nil {
			yield(safetensors.Tensor{}, err)
			return
		}
		defer ld.stop()
		for {
			select {
			case <-ld.ctx.Done():
				if err := ld.firstErr(); err != nil {
					yield(safetensors.Tensor{}, err)
				} else if ctx.Err() != nil {
					yield(safetensors.Tensor{}, ctx.Err())
				}
				return
			case job, ok := <-ld.done:
				if !ok {
					if err := ld.firstErr(); err != nil {
						yield(safetensors.Tensor{}, err)
					}
					return
				}
				t := safetensors.Tensor{Name: job.info.Name, DType: job.info.DType, Shape: job.info.Shape, Data: job.dst}
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
	own    *memory // the load's own memory, if it has no Buffer
	chunk  int
	work   chan chunkJob
	done   chan *tensorJob
	wg     sync.WaitGroup
	opts   options

	mu  sync.Mutex
	err error
}

// openedFile is a data section with what the load opened for it.
type openedFile struct {
	safetensors.DataSection
	buffered io.ReaderAt      // Data, or the local file opened again
	direct   *os.File         // the local file opened for direct I/O, or nil
	base     int64            // the data section's offset in buffered and direct
	fadvise  *os.File         // the file whose cached pages to drop, or nil
	probe    *pagecache.Probe // tells which pages of the file are cached, or nil
	closers  []*os.File
	hash     *fileHash // the file's SHA-256 under way, for HashFiles; or nil
	// sequential is true for a local file read through the page cache whose
	// SHA-256 is computed (HashFiles), of a load of more files than half the
	// processors: one goroutine takes its chunks in order, and reads each in
	// pieces of sequentialChunk, hashing each piece as soon as it is read.
	sequential bool
}

// sequentialChunk is the size of the reads of a file read in order and
// hashed as it is read: small enough that a piece, and the cached pages
// it was copied from, are still in the processor's cache when it is
// hashed, where that cache is 512 KiB (on 2 processors of 2 MiB each,
// loading 8 files of 128 MiB with HashFiles took 1.03-1.08x the time of
// hashing them alone with pieces of 1 MiB, 1.00-1.03x with 128 KiB);
// large enough that a read's cost is its copy. Tests make it small.
var sequentialChunk = 128 << 10

// sequentialQueue is how many chunks of a file read in order may wait for
// its goroutine, at least: the queue holds as many chunks as the load's
// memory does (and this many for small tensors), so that the one
// scheduler is never blocked on a file whose queue is full while the
// other files' goroutines run out of chunks (with 32 pieces of 1 MiB, 2
// files of tensors of 128 MiB were hashed one at a time).
const sequentialQueue = 32

// hashedMemoryLimit is the most that the default MemoryLimit is raised to
// for HashFiles and DigestTensors, so that each file hashed side by side,
// or each digest, has its tensors in memory: 1 GiB.
const hashedMemoryLimit = 1 << 30

// memoryLimit returns the memory of a load of a Loader whose MemoryLimit
// is set, whose largest tensor needs need bytes and all of them total,
// which holds side tensors at once for HashFiles or DigestTensors (the
// tensors of the files hashed side by side, or the tensors digested at
// once), or none (0): set, or 256 MiB; for HashFiles and DigestTensors by
// default, raised so that there is room for side tensors and one more to
// read while the oldest waits for the caller (else they take turns), up to
// hashedMemoryLimit; raised to need, and lowered to total.
func memoryLimit(set int64, need, total uint64, side int) uint64 {
	limit := uint64(256 << 20)
	if set > 0 {
		limit = uint64(set)
	} else if side > 0 {
		if n := uint64(side) + 1; need <= hashedMemoryLimit/n {
			limit = max(limit, n*need)
		} else {
			limit = max(limit, hashedMemoryLimit)
		}
	}
	return min(max(limit, need), total)
}

// tensorJob is a tensor being read.
type tensorJob struct {
	file    *openedFile
	info    safetensors.TensorInfo
	dst     []byte
	slot    int
	pending int // chunks not yet read
	waits   int // what the hand-over waits for: its reads, and its file's hash
}

// chunkJob is one read: bytes [b, e) of a tensor's data. For HashFiles it
// is also a piece of its file's hash, number seq, to hash from the data
// section's offset hb on; a gap between tensors, [hb, he), is a piece
// with no tensor, which the hash reads itself. The last piece of a file
// is a gap, of no bytes where the tensors reach its end.
type chunkJob struct {
	t    *tensorJob
	b, e int

	f      *openedFile
	seq    int
	hb, he uint64
	last   bool
	hashed bool // read and hashed at once, in pieces (sequential)
}

// start opens the files and starts the goroutines of a load.
func (l *Loader) start(ctx context.Context, files []safetensors.DataSection, opts options) (*load, error) {
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
	tensors := 0
	for _, f := range files {
		tensors += len(f.Tensors)
		for _, t := range f.Tensors {
			b, e := t.DataOffsets[0], t.DataOffsets[1]
			if e < b || e > 1<<62 {
				// Only a data section of the caller's can hold such offsets.
				return nil, &safetensors.TensorError{Name: t.Name, Err: fmt.Errorf("%w: %s: offsets [%d, %d)", safetensors.ErrInvalidOffset, f.Name, b, e)}
			}
			largest = max(largest, e-b)
			total = min(total+e-b+pagecache.BlockSize, 1<<63) // no overflow: each term is below 2^62
		}
	}
	if opts.files != nil {
		var err error
		if files, err = hashOrder(files); err != nil {
			return nil, err
		}
	}
	need := largest + pagecache.BlockSize
	var mem []byte
	var own *memory
	if l.Buffer != nil {
		if uint64(len(l.Buffer)) < need {
			return nil, fmt.Errorf("load: the Loader's Buffer of %d bytes cannot hold the largest tensor, of %d bytes, and 4096 more: %w", len(l.Buffer), largest, io.ErrShortBuffer)
		}
		mem = l.Buffer
	} else {
		limit := memoryLimit(l.MemoryLimit, need, total, heldTensors(len(files), tensors, opts))
		if limit > maxInt {
			return nil, fmt.Errorf("load: the largest tensor, of %d bytes, does not fit in this platform's memory", largest)
		}
		own = takeMemory(int(limit))
		mem = own.b[:limit]
	}
	ld := &load{arena: newArena(mem), own: own, chunk: chunk, work: make(chan chunkJob, workers), done: make(chan *tensorJob, workers), opts: opts}
	ld.ctx, ld.cancel = context.WithCancel(ctx)
	for _, f := range files {
		of, err := openLoadFile(f, l.NoCache)
		if opts.files != nil {
			of.hash = &fileHash{h: sha256.New(), dataLen: uint64(f.Size) - uint64(len(f.HeaderBytes)), pending: map[int]chunkJob{}}
			of.hash.h.Write(f.HeaderBytes)
			_, local := of.buffered.(*os.File)
			of.sequential = local && of.direct == nil && !piecesInParallel(len(files))
		}
		ld.files = append(ld.files, of)
		if err != nil {
			ld.closeFiles()
			ld.cancel()
			return nil, err
		}
	}
	for range workers {
		ld.wg.Add(1)
		go ld.worker(ld.work)
	}
	ld.wg.Add(1)
	go ld.schedule()
	go func() {
		ld.wg.Wait()
		close(ld.done)
	}()
	return ld, nil
}

// heldTensors returns how many tensors a load of files files and tensors
// tensors holds at once for HashFiles or DigestTensors, or 0: a tensor for
// each file hashed side by side, one a processor, and two for a file whose
// pieces are read in parallel (one hashed while the next is read, else its
// hash waits for each tensor's reads); a tensor for each processor
// computing digests.
func heldTensors(files, tensors int, opts options) int {
	held := 0
	if opts.files != nil {
		held = min(files, runtime.GOMAXPROCS(0))
		if piecesInParallel(files) {
			held *= 2
		}
	}
	if opts.tensors != nil {
		held = max(held, min(tensors, runtime.GOMAXPROCS(0)))
	}
	return held
}

// piecesInParallel reports whether a load with HashFiles of n files reads
// the pieces of each file in parallel, for its hash to take in order as
// they arrive: with at most half as many files as processors, so that the
// other processors read while those hash. With more, each hashed by one
// processor, a local file is best read and hashed by the same goroutine.
func piecesInParallel(n int) bool { return 2*n <= runtime.GOMAXPROCS(0) }

// openLoadFile opens what a load needs to read f.
func openLoadFile(f safetensors.DataSection, noCache bool) (openedFile, error) {
	of := openedFile{DataSection: f, buffered: f.Data}
	if f.Path == "" || f.Info == nil {
		return of, nil
	}
	// Read the file with pread rather than through its mapping: no page
	// faults, and the page cache can be bypassed or dropped.
	// If the path no longer leads to the file Open mapped, read the
	// mapping.
	file, err := regular.Open(regular.OpenFile, f.Path)
	if err != nil {
		return of, nil
	}
	of.closers = append(of.closers, file)
	info, err := file.Stat()
	if err != nil || !os.SameFile(info, f.Info) || info.Size() != f.Info.Size() {
		return of, nil
	}
	of.buffered, of.base = file, f.Offset
	if noCache {
		of.fadvise = file
		// What is read through the cache is dropped from it once read;
		// readahead would leave pages no read asked for.
		pagecache.NoReadahead(file)
		if d, err := pagecache.OpenDirect(f.Path); err == nil {
			of.closers = append(of.closers, d)
			if dinfo, err := d.Stat(); err == nil && os.SameFile(dinfo, info) {
				of.direct = d
				of.probe = newProbe(file, f.Path, info)
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
	if ld.own != nil {
		// Every goroutine of the load has ended (done is closed after
		// them): none writes to the memory any more.
		putMemory(ld.own)
	}
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

// schedule places each tensor in memory, in order, and queues its chunks:
// the files one after the other, or for HashFiles one a processor side by
// side, so that each file's hash, which takes its pieces in order, has a
// processor of its own; then each next tensor is of the file with the
// fewest bytes queued.
func (ld *load) schedule() {
	defer ld.wg.Done()
	defer close(ld.work)
	side := 1
	if ld.opts.files != nil {
		side = runtime.GOMAXPROCS(0)
	}
	type cursor struct {
		f       *openedFile
		i       int    // the next tensor
		seq     int    // the next piece of the file's hash
		covered uint64 // where the pieces queued end, in the data section
		queued  uint64 // the bytes queued
		work    chan chunkJob
	}
	var active []*cursor
	defer func() {
		for _, c := range active {
			if c.work != ld.work {
				close(c.work)
			}
		}
	}()
	next := 0
	// The goroutines of files read in order (sequential) at work, and
	// their ends: a file's goroutine starts once fewer than side are at
	// work, not once the files before it are queued whole, so that no
	// more of them run at once than there are processors (with more, a
	// goroutine back from a read waits for a processor, and the piece it
	// read leaves its processor's cache before it is hashed).
	reading, ended := 0, make(chan struct{}, len(ld.files))
	for {
		for drained := false; !drained; {
			select {
			case <-ended:
				reading--
			default:
				drained = true
			}
		}
		for len(active) < side && reading < side && next < len(ld.files) {
			c := &cursor{f: &ld.files[next], work: ld.work}
			if c.f.sequential {
				// One goroutine reads the file in order and hashes each
				// piece as soon as it is read, while the piece is in the
				// processor's cache.
				c.work = make(chan chunkJob, max(sequentialQueue, len(ld.arena.mem)/ld.chunk+1))
				ld.wg.Add(1)
				reading++
				go func() {
					ld.worker(c.work)
					ended <- struct{}{}
				}()
			}
			active = append(active, c)
			next++
		}
		if len(active) == 0 {
			if next == len(ld.files) {
				return
			}
			// Every file at work is queued whole: wait for one to end.
			select {
			case <-ended:
				reading--
			case <-ld.ctx.Done():
				return
			}
			continue
		}
		k := 0
		for j, c := range active {
			if c.queued < active[k].queued {
				k = j
			}
		}
		c := active[k]
		f := c.f
		if c.i == len(f.Tensors) {
			// The rest of the file, if any, closes its hash.
			if f.hash != nil && !ld.queue(c.work, chunkJob{f: f, seq: c.seq, hb: c.covered, he: max(c.covered, f.hash.dataLen), last: true}) {
				return
			}
			if c.work != ld.work {
				close(c.work)
			}
			active = slices.Delete(active, k, k+1)
			continue
		}
		info := f.Tensors[c.i]
		c.i++
		if f.hash != nil && info.DataOffsets[0] > c.covered {
			// Bytes that no tensor loaded covers.
			if !ld.queue(c.work, chunkJob{f: f, seq: c.seq, hb: c.covered, he: info.DataOffsets[0]}) {
				return
			}
			c.seq++
			c.queued += info.DataOffsets[0] - c.covered
			c.covered = info.DataOffsets[0]
		}
		size := int(info.DataOffsets[1] - info.DataOffsets[0]) // fits: the arena holds it
		// Place the tensor so that its address and its offset in the
		// file agree modulo pagecache.BlockSize, for direct I/O.
		fileOff := f.base + int64(info.DataOffsets[0])
		dst, slot, ok := ld.arena.alloc(size, int(fileOff%pagecache.BlockSize))
		if !ok {
			return // stopped
		}
		t := &tensorJob{file: f, info: info, dst: dst, slot: slot, waits: 1}
		chunks := ld.split(t, fileOff)
		t.pending = len(chunks)
		c.queued += uint64(size)
		if len(chunks) == 0 {
			if ld.opts.tensors != nil {
				ld.digest(t)
			}
			select {
			case ld.done <- t:
			case <-ld.ctx.Done():
				return
			}
			continue
		}
		if f.hash != nil {
			t.waits++ // and for the file's hash to pass its end
		}
		for _, ch := range chunks {
			ch.f = f
			if f.hash != nil {
				b, e := info.DataOffsets[0]+uint64(ch.b), info.DataOffsets[0]+uint64(ch.e)
				ch.seq, ch.hb, ch.he = c.seq, min(max(c.covered, b), e), e
				c.seq++
				c.covered = max(c.covered, e)
			}
			if !ld.queue(c.work, ch) {
				return
			}
		}
	}
}

// queue queues a chunk on work, and reports false if the load stopped
// first.
func (ld *load) queue(work chan<- chunkJob, c chunkJob) bool {
	select {
	case work <- c:
		return true
	case <-ld.ctx.Done():
		return false
	}
}

// split cuts a tensor into reads: for direct I/O its unaligned head and
// tail apart from aligned chunks, else chunks of ld.chunk bytes.
func (ld *load) split(t *tensorJob, fileOff int64) []chunkJob {
	size := len(t.dst)
	var out []chunkJob
	chunk := ld.chunk
	add := func(b, e int) {
		for b < e {
			n := min(e-b, chunk)
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

// worker reads chunks until there are none left, hashes them for
// HashFiles and DigestTensors, and hands over each tensor whose last chunk
// it read, or hashed.
func (ld *load) worker(work <-chan chunkJob) {
	defer ld.wg.Done()
	for c := range work {
		if ld.ctx.Err() != nil {
			continue // drain
		}
		ld.process(c)
	}
}

// process reads a chunk, hashes it, and hands its tensor over if it was
// the last.
func (ld *load) process(c chunkJob) {
	if c.t != nil {
		read := ld.read
		if c.f.sequential {
			read, c.hashed = ld.readHashing, true
		}
		if err := read(c); err != nil {
			if ld.ctx.Err() == nil { // else stopped: the read was aborted, not failed
				ld.fail(&safetensors.TensorError{Name: c.t.info.Name, Err: fmt.Errorf("%s: %w", c.t.file.Name, err)})
			}
			return
		}
	}
	if c.f.hash != nil {
		ld.arrived(c)
	}
	if c.t == nil {
		return
	}
	ld.mu.Lock()
	c.t.pending--
	last := c.t.pending == 0
	ld.mu.Unlock()
	if last {
		if ld.opts.tensors != nil {
			ld.digest(c.t)
		}
		ld.step(c.t)
	}
}

// readHashing reads chunk c of a file read in order (sequential) in pieces
// of sequentialChunk, and adds each to the file's hash as soon as it is
// read, while it is in the processor's cache. The file's goroutine takes
// its chunks in order: each is next in its hash.
func (ld *load) readHashing(c chunkJob) error {
	for b := c.b; b < c.e; {
		p := c
		p.b, p.e = b, min(b+sequentialChunk, c.e)
		if err := ld.read(p); err != nil {
			return err
		}
		start := c.t.info.DataOffsets[0]
		if p.hb = max(c.hb, start+uint64(p.b)); p.hb < start+uint64(p.e) {
			if err := ld.hashPiece(p); err != nil {
				return err
			}
		}
		b = p.e
	}
	return nil
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
		} else if err := readChunkAt(nil, f.direct, p, off); err == nil {
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
	if err := readChunkAt(ld.ctx, f.buffered, p, off); err != nil {
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

// readChunkAt fills p from r at off: under ctx through r's ReadAtContext
// where it has one, so that the end of the load aborts a remote read in
// flight, else with ReadAt.
func readChunkAt(ctx context.Context, r io.ReaderAt, p []byte, off int64) error {
	var n int
	var err error
	if rc, ok := r.(safetensors.ReaderAtContext); ok && ctx != nil {
		n, err = rc.ReadAtContext(ctx, p, off)
	} else {
		n, err = r.ReadAt(p, off)
	}
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
