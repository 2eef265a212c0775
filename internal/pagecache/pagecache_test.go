package pagecache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aligned returns n bytes of memory whose address is a multiple of
// BlockSize.
func aligned(n int) []byte {
	b := make([]byte, n+BlockSize)
	skip := (BlockSize - Phase(b)) % BlockSize
	return b[skip : skip+n]
}

// TestAligned: a read is aligned only when its offset, its length and its
// memory's address all are.
func TestAligned(t *testing.T) {
	mem := aligned(3 * BlockSize)
	assert.Zero(t, Phase(mem))
	assert.Equal(t, 5, Phase(mem[5:]))
	assert.Equal(t, 1, Phase(mem[BlockSize+1:]))
	for _, c := range []struct {
		name string
		p    []byte
		off  int64
		want bool
	}{
		{"one block", mem[:BlockSize], 0, true},
		{"two blocks, at a block", mem[BlockSize:], 7 * BlockSize, true},
		{"empty", mem[:0], 0, true},
		{"offset inside a block", mem[:BlockSize], 512, false},
		{"negative offset inside a block", mem[:BlockSize], -1, false},
		{"length of a part of a block", mem[:BlockSize+1], 0, false},
		{"address inside a block", mem[1 : BlockSize+1], 0, false},
	} {
		assert.Equal(t, c.want, Aligned(c.p, c.off), c.name)
	}
}

// TestAdviseHugePages advises memory of every size around a huge page, at
// every phase: a hint that never fails, and never touches memory outside
// what it is given (which would fault, or be caught by the race
// detector's checks of slicing).
func TestAdviseHugePages(t *testing.T) {
	mem := make([]byte, 9<<20)
	for _, n := range []int{0, 1, 4095, 2 << 20, 4<<20 - 1, 4 << 20, 4<<20 + 1, 6<<20 + 4097, 8 << 20} {
		for _, skip := range []int{0, 1, 4096, 1 << 20} {
			AdviseHugePages(mem[skip : skip+n])
		}
	}
}

// TestAdviseWillNeed advises ranges of a mapping, empty ones and those
// that start inside a page among them.
func TestAdviseWillNeed(t *testing.T) {
	page := os.Getpagesize()
	m := aligned(4 * page) // memory aligned as a mapping is
	for _, r := range [][2]int{{0, 0}, {5, 3}, {0, len(m)}, {1, 2}, {page + 7, 3 * page}, {len(m) - 1, len(m)}} {
		assert.NoError(t, AdviseWillNeed(m, r[0], r[1]), "[%d, %d)", r[0], r[1])
	}
}

// writeFile writes n non-zero bytes to a new file and returns its path and
// its bytes.
func writeFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7+i>>12) | 1
	}
	path := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path, data
}

// TestOpenDirect reads a file with direct I/O where the file system allows
// it: an aligned read gives the file's bytes.
func TestOpenDirect(t *testing.T) {
	path, data := writeFile(t, 5*BlockSize+100)
	f, err := OpenDirect(path)
	if err != nil {
		t.Skipf("no direct I/O here: %v", err)
	}
	defer f.Close()
	p := aligned(2 * BlockSize)
	require.True(t, Aligned(p, BlockSize))
	n, err := f.ReadAt(p, BlockSize)
	require.NoError(t, err)
	assert.Equal(t, len(p), n)
	assert.Equal(t, data[BlockSize:3*BlockSize], p)
}
