package dataset

import "hash/maphash"

// newKVShard returns an empty shard of samples of the columns, sorted by
// name.
func newKVShard(cols []Column) kvShard {
	s := kvShard{table: keyTable{seed: maphash.MakeSeed()}}
	for _, c := range cols {
		s.size += int(c.sampleBytes())
		s.colShapes = appendShape(s.colShapes, c.Shape)
	}
	return s
}

// appendShape appends a tensor's rank and dimensions to an entry of
// kvShard.shapes. The dimensions are at most math.MaxInt32, as the
// connector's shapes are int; the rank is bounded by the header's size.
func appendShape(dst []uint32, shape []uint64) []uint32 {
	dst = append(dst, uint32(len(shape)))
	for _, d := range shape {
		dst = append(dst, uint32(d))
	}
	return dst
}

// kvShard is the current shard of KeyValue mode: each sample's key and
// tensors, in two arenas of bytes, and a table that finds a sample by key.
// Nothing in it holds a pointer but the slices themselves, so that the
// garbage collector does not walk a shard of a million samples; a sample
// costs its key, its tensors and 8 bytes, and 5 to 11 bytes of the table,
// and, once a sample's shapes differ from its columns' (see varies), 4
// bytes for each column and each dimension.
type kvShard struct {
	keys  []byte // the samples' keys, one after the other
	ends  []int  // sample i's key is keys[ends[i-1]:ends[i]]
	arena []byte // the samples' tensors, one sample after the other, each column in order
	size  int    // a sample's bytes with the columns' shapes: until varies, sample i is at arena[i*size:]
	// varies is whether a sample of the shard has a shape other than its
	// column's (a column without a shape takes any); shapes then holds,
	// for every sample, each column's rank and dimensions (appendShape),
	// in the order of the columns, and colShapes is that entry for a
	// sample with the columns' own shapes.
	varies    bool
	shapes    []uint32
	colShapes []uint32
	// dead[i] is whether sample i was replaced by a later one with the
	// same key; nil until a sample is.
	dead   []bool
	table  keyTable
	hdrEst int // an estimate of the header's size

	// rows counts the samples given to the shard, replaced ones included;
	// estimate is their size as the connector estimates it.
	rows     int
	estimate int64
	removed  int // samples replaced by a later one with the same key
}

// len returns the number of samples in the shard, replaced ones included.
func (s *kvShard) len() int { return len(s.ends) }

// off returns the offset in the arena of sample i's first column, while
// every sample has the columns' shapes (see layout otherwise).
func (s *kvShard) off(i int) int { return i * s.size }

// layout returns, when the shard varies, the shape and the offset in the
// arena of each tensor of the live samples, in order, each sample's
// columns in the order of cols. The shapes share one backing array.
func (s *kvShard) layout(cols []Column, live []int, nlive int) (shapes [][]uint64, offs []int) {
	shapes = make([][]uint64, 0, nlive*len(cols))
	offs = make([]int, 0, nlive*len(cols))
	dims := make([]uint64, 0, len(s.shapes))
	next := 0 // the next live sample, an index into live
	off, p := 0, 0
	for i := range s.len() {
		isLive := next < nlive && liveSample(live, next) == i
		if isLive {
			next++
		}
		for _, c := range cols {
			rank := int(s.shapes[p])
			p++
			n := c.DType.Bits() / 8
			start := len(dims)
			for _, d := range s.shapes[p : p+rank] {
				n *= int(d) // within the sample's size, checked when it came
				if isLive {
					dims = append(dims, uint64(d))
				}
			}
			p += rank
			if isLive {
				shapes = append(shapes, dims[start:len(dims):len(dims)])
				offs = append(offs, off)
			}
			off += n
		}
	}
	return shapes, offs
}

// key returns the key of sample i, in the shard's memory.
func (s *kvShard) key(i int) []byte {
	start := 0
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.keys[start:s.ends[i]]
}

// isDead reports whether sample i was replaced.
func (s *kvShard) isDead(i int) bool { return s.dead != nil && s.dead[i] }

// remove marks sample i as replaced: a sample with its key follows, and
// the table then finds that one.
func (s *kvShard) remove(i int) {
	if s.dead == nil {
		s.dead = make([]bool, len(s.ends), cap(s.ends))
	}
	s.dead[i] = true // its slot stays, and find skips it
	s.removed++
}

// live returns the indices of the samples not replaced, in order, or nil
// when none was: then sample i is the i-th live one (see liveSample).
func (s *kvShard) live() []int {
	if s.removed == 0 {
		return nil
	}
	out := make([]int, 0, len(s.ends)-s.removed)
	for i, dead := range s.dead {
		if !dead {
			out = append(out, i)
		}
	}
	return out
}

// liveSample returns the i-th live sample given live from kvShard.live.
func liveSample(live []int, i int) int {
	if live == nil {
		return i
	}
	return live[i]
}

// find returns the index of the live sample with the given key, or -1,
// and the key's hash for add.
func (s *kvShard) find(key string) (int, uint64) {
	h := s.table.hash(key)
	return s.table.find(s, key, h), h
}

// add adds a sample, whose key, of hash h, has no live sample in the
// shard, and its tensors' values, in the order of the columns; shapes is
// the sample's entry of kvShard.shapes, or nil when its tensors have their
// columns' shapes.
func (s *kvShard) add(key string, h uint64, values [][]byte, shapes []uint32) {
	if shapes != nil && !s.varies {
		// The samples so far have the columns' shapes.
		s.varies = true
		for range s.len() {
			s.shapes = append(s.shapes, s.colShapes...)
		}
	}
	if s.varies {
		if shapes == nil {
			shapes = s.colShapes
		}
		s.shapes = append(s.shapes, shapes...)
	}
	s.keys = append(s.keys, key...)
	s.ends = append(s.ends, len(s.keys))
	if s.dead != nil {
		s.dead = append(s.dead, false)
	}
	for _, v := range values {
		s.arena = append(s.arena, v...)
	}
	s.table.insert(s, h, len(s.ends)-1)
}

func (s *kvShard) reset() {
	s.keys, s.arena, s.ends, s.dead, s.hdrEst = s.keys[:0], s.arena[:0], s.ends[:0], nil, 0
	s.varies, s.shapes = false, s.shapes[:0]
	s.rows, s.estimate, s.removed = 0, 0, 0
	clear(s.table.slots)
	s.table.used = 0
}

// A table's slot holds index+1 of a sample in its low slotIndexBits bits,
// 0 for an empty slot, and the high bits of the key's hash above, so that
// a probe compares keys only when those match. A shard holds fewer
// samples than fit: each counts at least 200 bytes toward the target
// size, at most 1000 MiB.
const (
	slotIndexBits = 24
	slotIndexMask = 1<<slotIndexBits - 1
	_             = uint(slotIndexMask - (1000<<20)/200 - 1) // the bound above fits
)

// keyTable is an open-addressing hash table of sample indices, at most
// three quarters full, seeded at random so that crafted keys cannot make
// the probes long.
type keyTable struct {
	slots []uint32
	used  int
	seed  maphash.Seed
}

// hash returns the hash of key, once the table has a seed.
func (t *keyTable) hash(key string) uint64 { return maphash.String(t.seed, key) }

// tag returns the bits of a slot that hold the hash h.
func tag(h uint64) uint32 { return uint32(h>>(64-(32-slotIndexBits))) << slotIndexBits }

// find returns the index of the live sample with the key, whose hash is h,
// or -1.
func (t *keyTable) find(s *kvShard, key string, h uint64) int {
	if len(t.slots) == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	tg := tag(h)
	for k := h & mask; ; k = (k + 1) & mask {
		slot := t.slots[k]
		if slot == 0 {
			return -1
		}
		if slot&^slotIndexMask != tg {
			continue
		}
		j := int(slot&slotIndexMask) - 1
		if !s.isDead(j) && string(s.key(j)) == key {
			return j
		}
	}
}

// insert adds sample i, whose key has hash h.
func (t *keyTable) insert(s *kvShard, h uint64, i int) {
	if 4*(t.used+1) > 3*len(t.slots) {
		t.grow(s)
	}
	t.put(h, i)
	t.used++
}

// put puts sample i, whose key has hash h, in a free slot.
func (t *keyTable) put(h uint64, i int) {
	mask := uint64(len(t.slots) - 1)
	k := h & mask
	for t.slots[k] != 0 {
		k = (k + 1) & mask
	}
	t.slots[k] = tag(h) | uint32(i+1)
}

// grow doubles the table, and puts the shard's live samples in it again.
func (t *keyTable) grow(s *kvShard) {
	t.slots = make([]uint32, max(1024, 2*len(t.slots)))
	for i := range t.used {
		if !s.isDead(i) {
			t.put(maphash.Bytes(t.seed, s.key(i)), i)
		}
	}
}
