package dataset

import "hash/maphash"

// newKVShard returns an empty shard.
func newKVShard() kvShard { return kvShard{table: keyTable{seed: maphash.MakeSeed()}} }

// kvShard is the current shard of KeyValue mode: each sample's key and
// tensors, in two arenas of bytes, and a table that finds a sample by key.
// Nothing in it holds a pointer but the arenas themselves, so that the
// garbage collector does not walk a shard of a million samples.
type kvShard struct {
	keys    []byte // the samples' keys, one after the other
	arena   []byte // the samples' tensors: each sample's columns in order
	samples []kvSample
	table   keyTable
	hdrEst  int // an estimate of the header's size

	// rows counts the samples given to the shard, replaced ones included;
	// estimate is their size as the connector estimates it.
	rows     int
	estimate int64
	removed  int // samples replaced by a later one with the same key
}

type kvSample struct {
	keyEnd int  // the key is keys[previous sample's keyEnd:keyEnd]
	off    int  // of its first column's bytes in the arena
	dead   bool // replaced by a later sample with the same key
}

// key returns the key of sample i, in the shard's memory.
func (s *kvShard) key(i int) []byte {
	start := 0
	if i > 0 {
		start = s.samples[i-1].keyEnd
	}
	return s.keys[start:s.samples[i].keyEnd]
}

// remove marks sample i as replaced: a sample with its key follows, and
// the table then finds that one.
func (s *kvShard) remove(i int) {
	s.samples[i].dead = true // its slot stays, and find skips it
	s.removed++
}

// live returns the indices of the samples not replaced, in order.
func (s *kvShard) live() []int {
	out := make([]int, 0, len(s.samples)-s.removed)
	for i, smp := range s.samples {
		if !smp.dead {
			out = append(out, i)
		}
	}
	return out
}

// find returns the index of the live sample with the given key, or -1,
// and the key's hash for add.
func (s *kvShard) find(key string) (int, uint64) {
	h := s.table.hash(key)
	return s.table.find(s, key, h), h
}

// add adds a sample, whose key, of hash h, has no live sample in the
// shard, and its tensors' values.
func (s *kvShard) add(key string, h uint64, values [][]byte) {
	s.keys = append(s.keys, key...)
	s.samples = append(s.samples, kvSample{keyEnd: len(s.keys), off: len(s.arena)})
	for _, v := range values {
		s.arena = append(s.arena, v...)
	}
	s.table.insert(s, h, len(s.samples)-1)
}

func (s *kvShard) reset() {
	s.keys, s.arena, s.samples, s.hdrEst = s.keys[:0], s.arena[:0], s.samples[:0], 0
	s.rows, s.estimate, s.removed = 0, 0, 0
	clear(s.table.slots)
	s.table.used = 0
}

// keyTable is an open-addressing hash table of sample indices, at most
// three quarters full, seeded at random so that crafted keys cannot make
// the probes long.
type keyTable struct {
	// Each slot holds index+1 of a sample in its low 32 bits, 0 for an
	// empty slot, and the high 32 bits of the key's hash in its high bits,
	// so that a probe compares keys only when those match.
	slots []uint64
	used  int
	seed  maphash.Seed
}

// hash returns the hash of key, once the table has a seed.
func (t *keyTable) hash(key string) uint64 { return maphash.String(t.seed, key) }

// find returns the index of the live sample with the key, whose hash is h,
// or -1.
func (t *keyTable) find(s *kvShard, key string, h uint64) int {
	if len(t.slots) == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	tag := h &^ 0xffffffff
	for k := h & mask; ; k = (k + 1) & mask {
		slot := t.slots[k]
		if slot == 0 {
			return -1
		}
		if slot&^0xffffffff != tag {
			continue
		}
		j := int(slot&0xffffffff) - 1
		if !s.samples[j].dead && string(s.key(j)) == key {
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
	t.slots[k] = h&^0xffffffff | uint64(i+1)
}

// grow doubles the table, and puts the shard's live samples in it again.
func (t *keyTable) grow(s *kvShard) {
	t.slots = make([]uint64, max(1024, 2*len(t.slots)))
	for i := range t.used {
		if !s.samples[i].dead {
			t.put(maphash.Bytes(t.seed, s.key(i)), i)
		}
	}
}
