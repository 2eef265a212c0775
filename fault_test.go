//go:build unix

package safetensors

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// truncatedReader writes a file of tensors of several dtypes, each larger
// than a page, opens it, and truncates it to its header while the Reader
// holds it mapped.
func truncatedReader(t *testing.T) (*Reader, string) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	var tensors []Tensor
	for _, d := range []DType{F32, F64, F16, BF16, I32, U8} {
		n := 3 * os.Getpagesize() / (d.Bits() / 8)
		data := make([]byte, n*d.Bits()/8)
		for i := range data {
			data[i] = byte(i % 61)
		}
		tensors = append(tensors, Tensor{Name: d.String(), DType: d, Shape: []uint64{uint64(n)}, Data: data})
	}
	require.NoError(t, WriteFile(path, tensors, nil))
	r, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.NoError(t, os.Truncate(path, int64(r.Header().DataOffset())))
	return r, path
}

// TestTruncatedWhileMapped calls every function of the package that reads
// a mapped tensor's bytes after the file was truncated: each returns an
// error wrapping ErrFileChanged that names the file and the tensor, and the
// program goes on.
func TestTruncatedWhileMapped(t *testing.T) {
	r, path := truncatedReader(t)
	tensor := func(name string) Tensor {
		x, err := r.Tensor(name)
		require.NoError(t, err)
		return x
	}
	check := func(t *testing.T, err error, name string) {
		t.Helper()
		require.ErrorIs(t, err, ErrFileChanged)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), `"`+name+`"`)
		var te *TensorError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, name, te.Name)
	}
	before := debug.SetPanicOnFault(false)
	for _, name := range []string{"F32", "F64", "F16", "BF16", "I32", "U8"} {
		t.Run("Stats_"+name, func(t *testing.T) {
			_, err := tensor(name).Stats()
			check(t, err, name)
		})
		t.Run("Float32s_"+name, func(t *testing.T) {
			v, err := tensor(name).Float32s()
			check(t, err, name)
			assert.Nil(t, v)
			dst := []float32{1, 2}
			got, err := tensor(name).AppendFloat32s(dst)
			check(t, err, name)
			assert.Equal(t, dst, got, "dst as it was")
		})
	}
	t.Run("Values", func(t *testing.T) {
		_, err := Values[float32](tensor("F32"), nil)
		check(t, err, "F32")
		_, err = Values[float64](tensor("F64"), nil)
		check(t, err, "F64")
		_, err = Values[uint8](tensor("U8"), nil)
		check(t, err, "U8")
		_, err = Values[int32](tensor("I32"), nil)
		check(t, err, "I32")
	})
	t.Run("Write", func(t *testing.T) {
		ts, err := r.Tensors()
		require.NoError(t, err)
		err = Write(io.Discard, ts, nil)
		require.ErrorIs(t, err, ErrFileChanged)
		out := filepath.Join(t.TempDir(), "copy.safetensors")
		err = WriteFile(out, ts[len(ts)-1:], nil)
		require.ErrorIs(t, err, ErrFileChanged)
		assert.Contains(t, err.Error(), path)
		_, statErr := os.Stat(out)
		assert.True(t, os.IsNotExist(statErr))
	})
	assert.False(t, debug.SetPanicOnFault(before), "the goroutine's setting is restored")
}

// TestFaultNotOurs checks that a panic that is not a fault in a mapping of
// Open goes on as a panic.
func TestFaultNotOurs(t *testing.T) {
	assert.PanicsWithValue(t, "boom", func() {
		old := guardFaults()
		defer func() { recoverFault(old, recover(), "x") }()
		panic("boom")
	})
	assert.Panics(t, func() {
		old := guardFaults()
		defer func() { recoverFault(old, recover(), "x") }()
		var p *Tensor
		_ = p.Name
	})
}

// TestFaultAddressElsewhere checks the guard where the system reports a
// fault at an address outside the mapping, as qemu-user's s390x emulation
// does: the mapped file that shrank is the one named, and with none shrunk
// the fault is not ours.
func TestFaultAddressElsewhere(t *testing.T) {
	elsewhere := uintptr(unsafe.Pointer(new([64]byte)))
	r, path := truncatedReader(t)
	msg, ok := faultMessage(elsewhere)
	require.True(t, ok, "a truncated mapped file explains the fault")
	assert.Contains(t, msg, path)
	assert.Contains(t, msg, fmt.Sprintf("past offset %d", r.Header().DataOffset()))
	_, ok = faultMessage(8)
	assert.False(t, ok, "a nil pointer's fault is not a truncation")

	require.NoError(t, r.Close())
	other := filepath.Join(t.TempDir(), "other.safetensors")
	require.NoError(t, WriteFile(other, []Tensor{{Name: "x", DType: U8, Shape: []uint64{1}, Data: []byte{1}}}, nil))
	r2, err := Open(other)
	require.NoError(t, err)
	defer r2.Close()
	_, ok = faultMessage(elsewhere)
	assert.False(t, ok, "no mapped file shrank")
}
