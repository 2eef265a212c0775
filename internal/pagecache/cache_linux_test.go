//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pagecache

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probes returns each way a Probe may ask the kernel: cachestat where it
// has it, and mincore.
var probes = map[string]func(*os.File, string, os.FileInfo) *Probe{
	"cachestat": NewProbe,
	"mincore":   NewMincoreProbe,
}

// openFile opens the file at path for the test.
func openFile(t *testing.T, path string) (*os.File, os.FileInfo) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	info, err := f.Stat()
	require.NoError(t, err)
	return f, info
}

// TestProbe drops a file from the page cache, reads part of it back with
// no readahead, and asks each kind of Probe what is cached: the part read,
// and nothing else; then Drop drops it again.
func TestProbe(t *testing.T) {
	page := int64(os.Getpagesize())
	path, _ := writeFile(t, int(16*page+100))
	for name, newProbe := range probes {
		t.Run(name, func(t *testing.T) {
			f, info := openFile(t, path)
			size := info.Size()
			p := newProbe(f, path, info)
			if p == nil {
				t.Skip("no way here to tell which pages of a file are cached")
			}
			defer p.Close()
			if name == "mincore" {
				assert.True(t, p.Mapped(), "mincore asks of a mapping")
			}

			require.NoError(t, f.Sync())
			Drop(f, 0, size)
			if _, some := p.Cached(0, size); some {
				t.Skip("the file system keeps the file in the page cache")
			}

			// Pages 4 to 7, read through the cache with no readahead.
			NoReadahead(f)
			_, err := f.ReadAt(make([]byte, 4*page), 4*page)
			require.NoError(t, err)
			all, some := p.Cached(4*page, 4*page)
			if !all {
				t.Skip("the kernel evicts the file's pages as fast as the test reads them")
			}
			assert.True(t, some)
			all, some = p.Cached(4*page+1, 10) // inside a cached page
			assert.True(t, all)
			assert.True(t, some)
			all, some = p.Cached(3*page, 2*page) // one page cached, one not
			assert.False(t, all)
			assert.True(t, some)
			all, some = p.Cached(8*page, size-8*page)
			assert.False(t, all)
			assert.False(t, some, "pages after those read: a readahead")
			all, some = p.Cached(0, 4*page)
			assert.False(t, all)
			assert.False(t, some, "pages before those read")

			// Ranges outside the file, or empty, count as none cached.
			for _, r := range [][2]int64{{4 * page, 0}, {-1, page}, {4 * page, -5}} {
				all, some = p.Cached(r[0], r[1])
				assert.False(t, all || some, "[%d, +%d)", r[0], r[1])
			}
			if p.Mapped() {
				all, some = p.Cached(4*page, size)
				assert.False(t, all || some, "a range past the end of the mapping")
			}

			// Drop takes whole pages, even of a range that covers a part.
			Drop(f, 4*page+1, 4*page-2)
			_, some = p.Cached(0, size)
			assert.False(t, some, "pages left in the cache")
		})
	}
}

// TestProbeClose: a mincore Probe unmaps the file when closed, once.
func TestProbeClose(t *testing.T) {
	path, _ := writeFile(t, 3*os.Getpagesize())
	f, info := openFile(t, path)
	p := NewMincoreProbe(f, path, info)
	if p == nil {
		t.Skip("mincore would not tell here which pages of the file are cached")
	}
	require.True(t, p.Mapped())
	p.Close()
	assert.False(t, p.Mapped())
	p.Close()
}

// TestProbeEmpty: no Probe of an empty file, which has no page to map.
func TestProbeEmpty(t *testing.T) {
	path, _ := writeFile(t, 0)
	f, info := openFile(t, path)
	for name, newProbe := range probes {
		assert.Nil(t, newProbe(f, path, info), name)
	}
}

// TestProbesAgree: where the kernel has cachestat, a Probe that asks with
// it and one that asks with mincore give the same answers, of a file
// partly cached, for ranges of every kind.
func TestProbesAgree(t *testing.T) {
	page := int64(os.Getpagesize())
	path, _ := writeFile(t, int(16*page+100))
	f, info := openFile(t, path)
	size := info.Size()
	byCachestat, byMincore := NewProbe(f, path, info), NewMincoreProbe(f, path, info)
	if byCachestat == nil || byMincore == nil || byCachestat.Mapped() {
		t.Skip("the kernel would not tell with cachestat and mincore here")
	}
	defer byMincore.Close()
	require.NoError(t, f.Sync())
	Drop(f, 0, size)
	NoReadahead(f)
	_, err := f.ReadAt(make([]byte, 4*page), 4*page)
	require.NoError(t, err)
	for range 3 { // the kernel may evict a page between the two questions
		type answer struct{ all, some bool }
		var differ []string
		for _, r := range [][2]int64{{0, size}, {0, 4 * page}, {3 * page, 2 * page}, {4 * page, 4 * page}, {4*page + 1, 10}, {7 * page, page + 1}, {8 * page, size - 8*page}} {
			var a, b answer
			a.all, a.some = byCachestat.Cached(r[0], r[1])
			b.all, b.some = byMincore.Cached(r[0], r[1])
			if a != b {
				differ = append(differ, fmt.Sprintf("[%d, +%d): cachestat %+v, mincore %+v", r[0], r[1], a, b))
			}
		}
		if len(differ) == 0 {
			return
		}
		t.Log(differ)
	}
	t.Error("cachestat and mincore disagree in every round")
}
