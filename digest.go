package safetensors

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
)

// TensorDigestTag is the first field that a tensor digest hashes: it keeps
// the digest of a tensor apart from the SHA-256 of anything else, and names
// the version of the definition.
const TensorDigestTag = "safetensors-tensor-digest/v1"

// A TensorDigest is the digest of a tensor that does not depend on the
// file that holds it: a function of its name, dtype, shape and bytes only,
// so that the same tensors in one file or in shards, in any order, at any
// offsets, with any metadata, give the same digests. It is the SHA-256 of
//
//	field(TensorDigestTag) field(name) field(dtype) u64(rank) u64(dim)... data
//
// where u64(n) is n as a little-endian uint64 (8 bytes), field(s) is
// u64(len(s)) followed by the bytes of s, name is the tensor's name as
// UTF-8 (as the header spells it, after JSON unescaping), dtype its dtype
// as the header spells it ("F32", "BF16", ...), rank the number of its
// dimensions (0 for a scalar), each dim one dimension, outermost first,
// and data the tensor's bytes as the file holds them (little-endian,
// row-major). Every field before data has its length, so data needs none.
// docs/format.md gives the definition with an example.
type TensorDigest [sha256.Size]byte

// String returns the digest as 64 lowercase hexadecimal digits.
func (d TensorDigest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText returns the digest as String does.
func (d TensorDigest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses 64 hexadecimal digits, as ParseTensorDigest does.
func (d *TensorDigest) UnmarshalText(text []byte) error {
	v, err := ParseTensorDigest(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseTensorDigest parses a digest written as String writes it (either
// case of the hexadecimal digits).
func ParseTensorDigest(s string) (TensorDigest, error) {
	var d TensorDigest
	if len(s) != 2*len(d) {
		return d, fmt.Errorf("%sa tensor digest is %d hexadecimal digits, not %d: %.80q", prefix, 2*len(d), len(s), s)
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("%sa tensor digest is %d hexadecimal digits: %q: %w", prefix, 2*len(d), s, err)
	}
	return d, nil
}

// Digest returns the tensor's TensorDigest.
func (t Tensor) Digest() TensorDigest {
	h := NewTensorHash(t.Name, t.DType, t.Shape)
	h.Write(t.Data)
	return h.Digest()
}

// A TensorHash computes a TensorDigest from a tensor's bytes written to
// it in order, in as many writes as suit: for a tensor too large to hold
// in memory whole, or read in pieces. It is a hash.Hash whose Reset
// starts the same tensor again; Sum appends the digest.
type TensorHash struct {
	h      hash.Hash
	prefix []byte // what is hashed before the data
}

var _ hash.Hash = (*TensorHash)(nil)

// NewTensorHash returns a TensorHash of the tensor of the given name,
// dtype and shape, to which its bytes are then written.
func NewTensorHash(name string, dtype DType, shape []uint64) *TensorHash {
	n := 8 + len(TensorDigestTag) + 8 + len(name) + 8 + len(dtype.String()) + 8 + 8*len(shape)
	p := make([]byte, 0, n)
	field := func(s string) {
		p = binary.LittleEndian.AppendUint64(p, uint64(len(s)))
		p = append(p, s...)
	}
	field(TensorDigestTag)
	field(name)
	field(dtype.String())
	p = binary.LittleEndian.AppendUint64(p, uint64(len(shape)))
	for _, d := range shape {
		p = binary.LittleEndian.AppendUint64(p, d)
	}
	t := &TensorHash{h: sha256.New(), prefix: p}
	t.h.Write(p)
	return t
}

// Write adds p, the next bytes of the tensor, to the hash. It never
// returns an error.
func (t *TensorHash) Write(p []byte) (int, error) { return t.h.Write(p) }

// Sum appends the digest of the bytes written so far to b.
func (t *TensorHash) Sum(b []byte) []byte { return t.h.Sum(b) }

// Digest returns the digest of the bytes written so far: the tensor's
// TensorDigest once all of them are.
func (t *TensorHash) Digest() TensorDigest {
	var d TensorDigest
	t.h.Sum(d[:0])
	return d
}

// Reset forgets the bytes written, to hash the same tensor again.
func (t *TensorHash) Reset() {
	t.h.Reset()
	t.h.Write(t.prefix)
}

// Size returns the size of a digest, 32 bytes.
func (t *TensorHash) Size() int { return sha256.Size }

// BlockSize returns SHA-256's block size, 64 bytes.
func (t *TensorHash) BlockSize() int { return sha256.BlockSize }
