package load

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/safetensors-go/safetensors"
)

// TestFreedMappingReused: where a load's memory is a mapping, the garbage
// collector's reclaiming it gives its pages back (its bytes read zero from
// then on) and keeps its address space for the next load that it can
// hold, which takes it rather than map more.
func TestFreedMappingReused(t *testing.T) {
	const size = 4<<20 + 12345 // a size of no other test's
	probe := mapMemory(4095)   // smaller than any load's

	if probe == nil {
		t.Skip("a load's memory is of the Go heap here")
	}
	freeMapping(probe) // the free list starts with one: a test of its own
	m := takeMemory(size)
	require.GreaterOrEqual(t, len(m.b), size)
	b := m.b
	for i := range b {
		b[i] = byte(i | 1)
	}
	base := unsafe.SliceData(b)
	putMemory(m)
	m = nil
	deadline := time.Now().Add(10 * time.Second)
	for !freed(base) {
		if time.Now().After(deadline) {
			t.Fatal("the garbage collector did not reclaim a load's memory in 10 s")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.True(t, bytes.Equal(b, make([]byte, len(b))), "the bytes of a freed mapping are not zero: its pages were kept")
	again := takeMemory(len(b))
	assert.Equal(t, base, unsafe.SliceData(again.b), "a load took new memory beside a free mapping that holds it")
	small := takeMemory(1024)
	assert.Equal(t, unsafe.SliceData(probe), unsafe.SliceData(small.b), "a load did not take the smallest free mapping that holds it")
	putMemory(again)
	runtime.KeepAlive(small)
}

// freed reports whether the mapping at base is in the free list.
func freed(base *byte) bool {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	for _, f := range spare.free {
		if unsafe.SliceData(f) == base {
			return true
		}
	}
	return false
}

// TestLoaderUnderCollection: loads with the garbage collector running
// throughout hand over every tensor's bytes: the memory a load holds is
// never reclaimed under it.
func TestLoaderUnderCollection(t *testing.T) {
	var tensors []safetensors.Tensor
	for i := range 8 {
		data := make([]byte, 256<<10)
		for j := range data {
			data[j] = byte(j*13 + i*7)
		}
		tensors = append(tensors, safetensors.Tensor{Name: string(rune('a' + i)), DType: safetensors.U8, Shape: []uint64{uint64(len(data))}, Data: data})
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, safetensors.WriteFile(path, tensors, nil))
	r, err := safetensors.Open(path)
	require.NoError(t, err)
	defer r.Close()
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	defer func() { close(stop); <-collected }()
	for range 20 {
		n := 0
		for tensor, err := range (&Loader{MemoryLimit: 512 << 10}).Load(context.Background(), r) {
			require.NoError(t, err)
			i := int(tensor.Name[0] - 'a')
			require.True(t, bytes.Equal(tensors[i].Data, tensor.Data), "tensor %s: other bytes", tensor.Name)
			n++
		}
		require.Equal(t, len(tensors), n)
	}
}
