package safetensors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sliceTestFile writes a file of tensors for ReadSlice: a large F32 matrix
// whose column selections are runs close together and whose row steps are
// runs far apart, and small tensors of other dtypes and ranks.
func sliceTestFile(t testing.TB) (path string, data []byte, tensors []Tensor) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	add := func(name string, dtype DType, shape ...uint64) {
		size, err := byteSize(dtype, shape)
		require.NoError(t, err)
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		tensors = append(tensors, Tensor{Name: name, DType: dtype, Shape: shape, Data: b})
	}
	add("big", F32, 512, 1024) // rows of 4 KiB, 2 MiB
	add("wide", U8, 3, 300000) // rows further apart than the gap
	add("cube", BF16, 4, 6, 8)
	add("f4", F4, 6, 8)
	add("scalar", F64)
	add("empty", I32, 3, 0)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, tensors, nil))
	path = filepath.Join(t.TempDir(), "slices.safetensors")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path, buf.Bytes(), tensors
}

// sliceReaders opens the file every way there is.
func sliceReaders(t testing.TB, path string, data []byte) map[string]*Reader {
	t.Helper()
	out := map[string]*Reader{}
	var err error
	out["Open"], err = Open(path)
	require.NoError(t, err)
	out["ReadAll"], err = Open(path, ReadAll())
	require.NoError(t, err)
	out["NewReader"], err = NewReader(data)
	require.NoError(t, err)
	out["NewReaderAt/bytes"], err = NewReaderAt(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	out["NewReaderAt/file"], err = NewReaderAt(f, int64(len(data)))
	require.NoError(t, err)
	for _, r := range out {
		t.Cleanup(func() { r.Close() })
	}
	return out
}

// TestReadSlice reads random selections of every tensor with ReadSlice from
// every kind of Reader, and compares with Tensor.Slice of the tensor in
// memory; and the whole tensors without selectors.
func TestReadSlice(t *testing.T) {
	path, data, tensors := sliceTestFile(t)
	readers := sliceReaders(t, path, data)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 250 {
		tensor := tensors[rng.IntN(len(tensors))]
		var idx []Selector
		for i := range rng.IntN(len(tensor.Shape) + 1) {
			n := tensor.Shape[i]
			if n == 0 {
				break
			}
			switch rng.IntN(4) {
			case 0:
				idx = append(idx, At(rng.Uint64N(n)))
			case 1:
				idx = append(idx, All())
			default:
				a := rng.Uint64N(n)
				idx = append(idx, RangeStep(a, a+rng.Uint64N(n-a+1), 1+rng.Uint64N(max(n/4, 1))))
			}
		}
		want, err := tensor.Slice(idx...)
		desc := fmt.Sprintf("%d: %s %v", iter, tensor.Name, idx)
		for kind, r := range readers {
			dst := make([]byte, want.DataLen()+3)
			for i := range dst {
				dst[i] = 0xee
			}
			n, rerr := r.ReadSlice(ctx, tensor.Name, dst, idx...)
			if err != nil {
				require.ErrorIs(t, rerr, ErrMisalignedSlice, desc)
				assert.Equal(t, err.Error(), rerr.Error(), desc)
				continue
			}
			require.NoError(t, rerr, "%s %s", kind, desc)
			require.Equal(t, int(want.DataLen()), n, "%s %s", kind, desc)
			require.Equal(t, want.AppendTo([]byte{}), dst[:n], "%s %s", kind, desc)
			assert.Equal(t, []byte{0xee, 0xee, 0xee}, dst[n:], "%s %s: nothing written past the selection", kind, desc)
		}
	}
	for _, tensor := range tensors {
		for kind, r := range readers {
			dst := make([]byte, len(tensor.Data))
			n, err := r.ReadSlice(ctx, tensor.Name, dst)
			require.NoError(t, err, kind)
			assert.Equal(t, tensor.Data, dst[:n], "%s %s", kind, tensor.Name)
		}
	}
}

// TestReadSliceReads checks that reads through an io.ReaderAt are as few as
// the rules say: one for a contiguous selection, one a MiB for runs close
// together, one a run for runs far apart.
func TestReadSliceReads(t *testing.T) {
	_, data, _ := sliceTestFile(t)
	c := &countingReaderAt{r: bytes.NewReader(data)}
	r, err := NewReaderAt(c, int64(len(data)))
	require.NoError(t, err)
	ctx := context.Background()
	dst := make([]byte, 4<<20)
	for _, tc := range []struct {
		name  string
		idx   []Selector
		reads int
	}{
		{"big", nil, 1},
		{"big", []Selector{Range(10, 300)}, 1},
		// 512 runs of 2 KiB, 4 KiB apart: 256 of them fit in 1 MiB.
		{"big", []Selector{All(), Range(0, 512)}, 2},
		{"big", []Selector{RangeStep(0, 512, 2)}, 2},     // rows 8 KiB apart
		{"wide", []Selector{All(), Range(0, 10)}, 3},     // rows 300 KB apart
		{"big", []Selector{RangeStep(0, 512, 64)}, 8},    // 8 rows, 256 KiB apart
		{"big", []Selector{Range(0, 1), Range(0, 0)}, 0}, // empty
	} {
		c.calls.Store(0)
		_, err := r.ReadSlice(ctx, tc.name, dst, tc.idx...)
		require.NoError(t, err)
		assert.Equal(t, int64(tc.reads), c.calls.Load(), "%s %v", tc.name, tc.idx)
	}
}

// TestReadSliceErrors: a short buffer, an unknown name, a bad selection, a
// cancelled context, a failing source and a closed Reader.
func TestReadSliceErrors(t *testing.T) {
	path, data, _ := sliceTestFile(t)
	ctx := context.Background()
	for kind, r := range sliceReaders(t, path, data) {
		dst := make([]byte, 100)
		_, err := r.ReadSlice(ctx, "cube", dst[:95], At(0))
		require.ErrorIs(t, err, io.ErrShortBuffer, kind)
		assert.Contains(t, err.Error(), `tensor "cube"`)
		assert.Contains(t, err.Error(), "the selection is 96 bytes, dst holds 95", kind)
		_, err = r.ReadSlice(ctx, "nope", dst)
		assert.ErrorIs(t, err, ErrTensorNotFound, kind)
		_, err = r.ReadSlice(ctx, "cube", dst, At(4))
		assert.ErrorIs(t, err, ErrInvalidSlice, kind)
		_, err = r.ReadSlice(ctx, "f4", dst, All(), At(1))
		assert.ErrorIs(t, err, ErrMisalignedSlice, kind)
		cctx, cancel := context.WithCancelCause(ctx)
		cause := errors.New("shutting down")
		cancel(cause)
		_, err = r.ReadSlice(cctx, "cube", dst, At(1), At(1))
		assert.ErrorIs(t, err, cause, kind)
		require.NoError(t, r.Close())
		_, err = r.ReadSlice(ctx, "cube", dst, At(1), At(1))
		assert.ErrorIs(t, err, ErrClosed, kind)
	}

	// A source that fails partway: the error names the tensor and wraps the
	// source's.
	broken := errors.New("disk on fire")
	r, err := NewReaderAt(&failAfter{r: bytes.NewReader(data), after: 1, err: broken}, int64(len(data)))
	require.NoError(t, err)
	_, err = r.ReadSlice(ctx, "wide", make([]byte, 30), All(), Range(0, 10))
	require.ErrorIs(t, err, broken)
	assert.Contains(t, err.Error(), `tensor "wide"`)
}

// failAfter fails every read after the first after.
type failAfter struct {
	r     io.ReaderAt
	after int
	err   error
}

func (f *failAfter) ReadAt(p []byte, off int64) (int, error) {
	if f.after <= 0 {
		return 0, f.err
	}
	f.after--
	return f.r.ReadAt(p, off)
}

// TestReadSliceAllocs: once warm, ReadSlice allocates nothing, from every
// kind of Reader, for a whole tensor, a contiguous selection, runs read
// together through the pooled buffer and runs read one by one.
func TestReadSliceAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("coverage and the race detector allocate")
	}
	path, data, _ := sliceTestFile(t)
	ctx := context.Background()
	dst := make([]byte, 4<<20)
	for kind, r := range sliceReaders(t, path, data) {
		for _, tc := range []struct {
			name string
			idx  []Selector
		}{
			{"big", nil},
			{"big", []Selector{Range(3, 40)}},
			{"big", []Selector{Ellipsis(), RangeStep(1, 1000, 3)}},
			{"wide", []Selector{All(), Range(5, 10)}},
			{"cube", []Selector{AtFromEnd(1), All(), RangeStep(0, 8, 2)}},
		} {
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := r.ReadSlice(ctx, tc.name, dst, tc.idx...); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs, "%s: %s %v", kind, tc.name, tc.idx)
		}
	}
}

// TestReadSliceConcurrent reads selections from several goroutines at once
// through each kind of Reader: each gets its own bytes, the pooled buffers
// are not shared (run with -race).
func TestReadSliceConcurrent(t *testing.T) {
	path, data, tensors := sliceTestFile(t)
	big := tensors[0]
	ctx := context.Background()
	for kind, r := range sliceReaders(t, path, data) {
		errs := make(chan error, 8)
		for g := range 8 {
			go func() {
				sel := []Selector{All(), Range(uint64(g), uint64(g)+100)}
				want, err := big.Slice(sel...)
				if err != nil {
					errs <- err
					return
				}
				dst := make([]byte, want.DataLen())
				for range 5 {
					n, err := r.ReadSlice(ctx, big.Name, dst, sel...)
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(want.AppendTo(nil), dst[:n]) {
						errs <- fmt.Errorf("%s: goroutine %d read other bytes", kind, g)
						return
					}
				}
				errs <- nil
			}()
		}
		for range 8 {
			require.NoError(t, <-errs, kind)
		}
	}
}
