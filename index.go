package safetensors

import "hash/maphash"

// nameIndex finds a tensor by name: an open-addressing hash table, at most
// three quarters full, whose slots hold the index of a tensor and 32 bits of
// its name's hash, so that a probe compares names only when the hashes agree.
// It is smaller and faster to build than a map[string]int, and read-only once
// built, so any number of goroutines may use it. The hash is seeded at
// random, so crafted names cannot make the probes long.
type nameIndex struct {
	slots []uint64 // hash<<32 | index+1, or 0 for an empty slot
	seed  maphash.Seed
}

// buildIndex indexes tensors by name. When a name occurs more than once, the
// index keeps the last, and dups lists the indices of the others.
func buildIndex(tensors []TensorInfo) (x nameIndex, dups []int) {
	n := 8
	for 3*n < 4*len(tensors) {
		n *= 2
	}
	x = nameIndex{slots: make([]uint64, n), seed: maphash.MakeSeed()}
	mask := uint64(n - 1)
	for i := range tensors {
		name := tensors[i].Name
		h := maphash.String(x.seed, name)
		tag := h &^ (1<<32 - 1)
		for k := h & mask; ; k = (k + 1) & mask {
			s := x.slots[k]
			if s == 0 {
				x.slots[k] = tag | uint64(i+1)
				break
			}
			if s&^(1<<32-1) == tag {
				if j := int(uint32(s)) - 1; tensors[j].Name == name {
					dups = append(dups, j)
					x.slots[k] = tag | uint64(i+1)
					break
				}
			}
		}
	}
	return x, dups
}

// find returns the index of the named tensor, or -1.
func (x *nameIndex) find(tensors []TensorInfo, name string) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	h := maphash.String(x.seed, name)
	tag := h &^ (1<<32 - 1)
	for k := h & mask; ; k = (k + 1) & mask {
		s := x.slots[k]
		if s == 0 {
			return -1
		}
		if s&^(1<<32-1) == tag {
			if j := int(uint32(s)) - 1; tensors[j].Name == name {
				return j
			}
		}
	}
}
