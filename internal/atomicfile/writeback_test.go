package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteback: a File starts the writeback of its temporary file each
// time the bytes written through it pass a multiple of WritebackBytes,
// whichever way they come (Write, WriteAt from several goroutines,
// ReadFrom), and not otherwise; what it writes is unchanged.
func TestWriteback(t *testing.T) {
	var mu sync.Mutex
	var kicks []int64 // the size of the temporary file at each start
	restore := SetHooks(Hooks{Writeback: func(f Temp) {
		info, err := f.(*os.File).Stat()
		require.NoError(t, err)
		mu.Lock()
		kicks = append(kicks, info.Size())
		mu.Unlock()
	}})
	defer restore()

	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	f, err := Create(path)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{7}, WritebackBytes/3+1) // not a divisor
	var want []byte
	for range 3 {
		_, err := f.Write(chunk)
		require.NoError(t, err)
		want = append(want, chunk...)
	}
	assert.Len(t, kicks, 1, "3 × (WritebackBytes/3 + 1) bytes pass it once")
	assert.Equal(t, int64(len(want)), kicks[0], "after the write that passed it")

	// ReadFrom: WritebackBytes more, seen when the call returns.
	_, err = f.ReadFrom(bytes.NewReader(bytes.Repeat([]byte{3}, WritebackBytes)))
	require.NoError(t, err)
	want = append(want, bytes.Repeat([]byte{3}, WritebackBytes)...)
	assert.Len(t, kicks, 2)

	// WriteAt from 4 goroutines at once, 2 × WritebackBytes more.
	base := int64(len(want))
	piece := bytes.Repeat([]byte{9}, WritebackBytes/2)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.WriteAt(piece, base+int64(i*len(piece)))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	for range 4 {
		want = append(want, piece...)
	}
	assert.Len(t, kicks, 4, "%d bytes in all", len(want))

	// Small writes below the next multiple: none.
	_, err = f.WriteAt([]byte("tail"), int64(len(want)))
	require.NoError(t, err)
	want = append(want, "tail"...)
	assert.Len(t, kicks, 4)
	require.NoError(t, f.Commit())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "the bytes written")
}
