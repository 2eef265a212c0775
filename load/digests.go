package load

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"hash"
	"maps"
	"slices"
	"sync"

	"github.com/safetensors-go/safetensors"
	"github.com/safetensors-go/safetensors/internal/pagecache"
)

// An Option configures one Loader.Load.
type Option func(*options)

type options struct {
	files   *Digests // HashFiles's
	tensors *Digests // DigestTensors's
}

// HashFiles returns an option that makes a load compute, in its read pass,
// the SHA-256 of each file it reads, whole (the header, every tensor, and
// any bytes between or after them, in order), into d: a server that loads a
// model and checks it against published hashes (a Hugging Face cache's blob
// names, Git LFS pointers, the Hub's X-Linked-Etag) reads every byte once.
// Several files are read side by side, as many as there are processors, so
// that each has one to hash it; with at most half as many files as
// processors, the pieces of a file are read in parallel and hashed in order
// as they arrive, by one goroutine at a time, while the next are read; with
// more, each local file read through the page cache is read in order by a
// goroutine of its own, which hashes each piece of 128 KiB as soon as it
// has read it, while it is in the processor's cache (those goroutines are
// the load's own, beside the Loader's Concurrency). Each file hashed side
// by side needs a tensor of its own in memory, and one more where its
// pieces are read in parallel (its next tensor is read while one is
// hashed): the default MemoryLimit is raised for them (see
// Loader.MemoryLimit); a MemoryLimit set lower makes the files take turns.
// A load with HashFiles takes about the time of the slower of loading and
// hashing alone. Bytes of a file that no tensor loaded covers (tensors left
// out of a checkpoint's index) are read for the hash too.
//
// A tensor is handed over once its bytes are hashed; d holds a file's
// SHA-256 once the hash has passed its last byte, and every file's once
// the load's loop ends without an error. Each file's DataSection must
// give its HeaderBytes and Size, as safetensors.Reader.DataSections and
// the checkpoint package's do; a load of one that does not fails at its
// start.
func HashFiles(d *Digests) Option { return func(o *options) { o.files = d } }

// DigestTensors returns an option that makes a load compute, in its read
// pass, the safetensors.TensorDigest of each tensor it hands over, into d,
// before handing it over: the digest that does not depend on the file
// holding the tensor, to compare with a manifest. Tensors are hashed in
// parallel, each by the goroutine that read its last bytes.
func DigestTensors(d *Digests) Option { return func(o *options) { o.tensors = d } }

// Digests holds what a load with HashFiles or DigestTensors computed: the
// SHA-256 of each file, by its DataSection's Name, and the digest of each
// tensor, by its name. The zero Digests is ready to use; one may serve
// several loads, and be read while they run.
type Digests struct {
	mu      sync.Mutex
	files   map[string][sha256.Size]byte
	tensors map[string]safetensors.TensorDigest
}

// File returns the SHA-256 of the named file, and whether it is known.
func (d *Digests) File(name string) (sum [sha256.Size]byte, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sum, ok = d.files[name]
	return sum, ok
}

// Tensor returns the digest of the named tensor, and whether it is known.
func (d *Digests) Tensor(name string) (digest safetensors.TensorDigest, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	digest, ok = d.tensors[name]
	return digest, ok
}

// Files returns the SHA-256 of every file hashed, by name: a copy.
func (d *Digests) Files() map[string][sha256.Size]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][sha256.Size]byte, len(d.files))
	maps.Copy(out, d.files)
	return out
}

// Tensors returns the digest of every tensor hashed, by name: a copy.
func (d *Digests) Tensors() map[string]safetensors.TensorDigest {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]safetensors.TensorDigest, len(d.tensors))
	maps.Copy(out, d.tensors)
	return out
}

func (d *Digests) setFile(name string, sum [sha256.Size]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.files == nil {
		d.files = map[string][sha256.Size]byte{}
	}
	d.files[name] = sum
}

func (d *Digests) setTensor(name string, digest safetensors.TensorDigest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tensors == nil {
		d.tensors = map[string]safetensors.TensorDigest{}
	}
	d.tensors[name] = digest
}

// fileHash is the SHA-256 of one file under way: the pieces of the file,
// tensors' chunks and the gaps between them, are numbered in file order
// as they are scheduled, and hashed in that order as they arrive, by the
// goroutine whose piece let the hash move on.
type fileHash struct {
	h       hash.Hash
	dataLen uint64 // the data section's length: Size less the header's

	mu      sync.Mutex
	pending map[int]chunkJob // pieces arrived, by number, not yet hashed
	next    int              // the number of the next piece to hash
	busy    bool             // a goroutine is hashing
}

// arrived records that piece c of a file was read (a gap: scheduled), and
// hashes every piece that is next in order, unless another goroutine is
// doing so, which then hashes c too. A tensor whose last piece is hashed
// moves on towards its hand-over.
func (ld *load) arrived(c chunkJob) {
	fh := c.f.hash
	fh.mu.Lock()
	fh.pending[c.seq] = c
	if fh.busy {
		fh.mu.Unlock()
		return
	}
	fh.busy = true
	for {
		c, ok := fh.pending[fh.next]
		if !ok || ld.ctx.Err() != nil {
			fh.busy = false
			fh.mu.Unlock()
			return
		}
		delete(fh.pending, fh.next)
		fh.next++
		fh.mu.Unlock()
		// A chunk read and hashed at once (readHashing) was next in
		// order, as every piece of its file is, taken in order by one
		// goroutine.
		if !c.hashed {
			if err := ld.hashPiece(c); err != nil {
				ld.fail(err)
				return // the load stops: busy stays, nothing more is hashed
			}
		}
		if c.last {
			var sum [sha256.Size]byte
			fh.h.Sum(sum[:0])
			ld.opts.files.setFile(c.f.Name, sum)
		}
		if c.t != nil && c.e == len(c.t.dst) {
			ld.step(c.t) // the tensor is hashed through
		}
		fh.mu.Lock()
	}
}

// hashPiece adds piece c to its file's hash: the part of a tensor's chunk
// from hb on (an earlier tensor of a source of the caller's may overlap
// it), or a gap, read from the file.
func (ld *load) hashPiece(c chunkJob) error {
	f := c.f
	if c.t != nil {
		start := c.t.info.DataOffsets[0] + uint64(c.b)
		f.hash.h.Write(c.t.dst[c.b+int(c.hb-start) : c.e])
		return nil
	}
	if c.hb >= c.he {
		return nil
	}
	buf := make([]byte, min(c.he-c.hb, 1<<20))
	for off := c.hb; off < c.he; {
		p := buf[:min(uint64(len(buf)), c.he-off)]
		at := f.base + int64(off) // below 2^62: checked in start
		if err := readChunkAt(ld.ctx, f.buffered, p, at); err != nil {
			return fmt.Errorf("load: hashing %s: the bytes [%d, %d) of its data section that no tensor loaded covers: %w", f.Name, c.hb, c.he, err)
		}
		if f.fadvise != nil {
			pagecache.Drop(f.fadvise, at, int64(len(p)))
		}
		f.hash.h.Write(p)
		off += uint64(len(p))
	}
	return nil
}

// step records that one of the things a tensor waits for before its
// hand-over is done (its reads and digest; its file's hash passing its
// end), and hands it over after the last.
func (ld *load) step(t *tensorJob) {
	ld.mu.Lock()
	t.waits--
	done := t.waits == 0
	ld.mu.Unlock()
	if done {
		select {
		case ld.done <- t:
		case <-ld.ctx.Done():
		}
	}
}

// digest computes t's TensorDigest, all its bytes read, for DigestTensors.
func (ld *load) digest(t *tensorJob) {
	h := safetensors.NewTensorHash(t.info.Name, t.info.DType, t.info.Shape)
	h.Write(t.dst)
	ld.opts.tensors.setTensor(t.info.Name, h.Digest())
}

// hashOrder returns files, for HashFiles, with each file's tensors in the
// order of their offsets, which its hash takes them in, once it has
// checked that each file gives what its hash needs.
func hashOrder(files []safetensors.DataSection) ([]safetensors.DataSection, error) {
	out := slices.Clone(files)
	for i := range out {
		f := &out[i]
		if f.HeaderBytes == nil || f.Size < int64(len(f.HeaderBytes)) {
			return nil, fmt.Errorf("load: cannot hash %s: its DataSection gives no header bytes and size (HeaderBytes, Size)", f.Name)
		}
		dataLen := uint64(f.Size) - uint64(len(f.HeaderBytes))
		f.Tensors = slices.Clone(f.Tensors)
		slices.SortStableFunc(f.Tensors, func(a, b safetensors.TensorInfo) int {
			return cmp.Compare(a.DataOffsets[0], b.DataOffsets[0])
		})
		for _, t := range f.Tensors {
			if t.DataOffsets[1] > dataLen {
				return nil, &safetensors.TensorError{Name: t.Name, Err: fmt.Errorf("%w: %s: offsets [%d, %d) past the end of the data section, %d bytes", safetensors.ErrInvalidOffset, f.Name, t.DataOffsets[0], t.DataOffsets[1], dataLen)}
			}
		}
	}
	return out, nil
}
