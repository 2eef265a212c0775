package safetensors

import (
	"hash/maphash"
	"math/bits"
)

// nameTable finds a tensor by name: an open-addressing hash table, at most
// three quarters full, whose 32-bit slots hold the index of a tensor and, in
// the bits the index leaves free, part of its name's hash, so that a probe
// compares names only when those agree. It is smaller and faster to build
// than a map[string]int, and read-only once built, so any number of
// goroutines may use it. The hash is seeded at random, so crafted names
// cannot make the probes long.
type nameTable struct {
	slots   []uint32 // tag<<idxBits | index+1, or 0 for an empty slot
	idxBits uint     // the low bits of a slot that hold the index
	seed    maphash.Seed
}

// buildNameTable indexes tensors by name. When a name occurs more than once, the
// index keeps the last, and dups lists the indices of the others.
func buildNameTable(tensors []TensorInfo) (x nameTable, dups []int) {
	n := 8
	for 3*n < 4*len(tensors) {
		n *= 2
	}
	// A header of at most MaxHeaderSize bytes holds fewer than 2^23 tensors,
	// so at least 9 bits are left for the tag.
	x = nameTable{slots: make([]uint32, n), idxBits: uint(bits.Len(uint(len(tensors)))), seed: maphash.MakeSeed()}
	mask := uint64(n - 1)
	for i := range tensors {
		name := tensors[i].Name
		h := maphash.String(x.seed, name)
		tag := x.tag(h)
		for k := h & mask; ; k = (k + 1) & mask {
			s := x.slots[k]
			if s == 0 {
				x.slots[k] = tag | uint32(i+1)
				break
			}
			if s&^(1<<x.idxBits-1) == tag {
				if j := int(s&(1<<x.idxBits-1)) - 1; tensors[j].Name == name {
					dups = append(dups, j)
					x.slots[k] = tag | uint32(i+1)
					break
				}
			}
		}
	}
	return x, dups
}

// tag returns the bits of hash h that a slot keeps, in their place.
func (x *nameTable) tag(h uint64) uint32 {
	return uint32(h>>32) &^ (1<<x.idxBits - 1)
}

// find returns the index of the named tensor, or -1.
func (x *nameTable) find(tensors []TensorInfo, name string) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	h := maphash.String(x.seed, name)
	tag := x.tag(h)
	for k := h & mask; ; k = (k + 1) & mask {
		s := x.slots[k]
		if s == 0 {
			return -1
		}
		if s&^(1<<x.idxBits-1) == tag {
			if j := int(s&(1<<x.idxBits-1)) - 1; tensors[j].Name == name {
				return j
			}
		}
	}
}
