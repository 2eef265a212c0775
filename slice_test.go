package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSliceReference is the reference's test_slicing: attn.0, F32 of shape
// [1, 2, 3] holding 0 to 5, sliced (.., ..1).
func TestSliceReference(t *testing.T) {
	var data []byte
	for i := range 6 {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)))
	}
	tensor := Tensor{Name: "attn.0", DType: F32, Shape: []uint64{1, 2, 3}, Data: data}
	s, err := tensor.Slice(All(), Range(0, 1))
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 1, 3}, s.Shape)
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64}, s.AppendTo(nil))
}

// naiveSlice selects the elements one by one, the way the definition reads:
// every element whose position in each dimension is selected, in row-major
// order. It is the independent reference for Slice.
func naiveSlice(shape []uint64, elem int, data []byte, lo, hi []uint64) []byte {
	var out []byte
	pos := make([]uint64, len(shape))
	total := uint64(1)
	for _, d := range shape {
		total *= d
	}
	for flat := uint64(0); flat < total; flat++ {
		rest := flat
		for i := len(shape) - 1; i >= 0; i-- {
			pos[i] = rest % shape[i]
			rest /= shape[i]
		}
		in := true
		for i := range shape {
			in = in && pos[i] >= lo[i] && pos[i] < hi[i]
		}
		if in {
			out = append(out, data[flat*uint64(elem):(flat+1)*uint64(elem)]...)
		}
	}
	return out
}

func TestSliceRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		rank := r.IntN(5)
		shape := make([]uint64, rank)
		for i := range shape {
			shape[i] = uint64(r.IntN(5))
		}
		d := []DType{U8, I16, F32, F64}[r.IntN(4)]
		size, err := byteSize(d, shape)
		require.NoError(t, err)
		data := le8(int(size), byte(iter))
		tensor := Tensor{Name: "t", DType: d, Shape: shape, Data: data}

		var idx []Selector
		lo, hi := make([]uint64, rank), make([]uint64, rank)
		var wantShape []uint64
		n := r.IntN(rank + 1)
		for i := range rank {
			lo[i], hi[i] = 0, shape[i]
			if i >= n {
				wantShape = append(wantShape, shape[i])
				continue
			}
			switch {
			case r.IntN(3) == 0:
				idx = append(idx, All())
				wantShape = append(wantShape, shape[i])
			case r.IntN(2) == 0 && shape[i] > 0:
				p := uint64(r.IntN(int(shape[i])))
				idx = append(idx, At(p))
				lo[i], hi[i] = p, p+1
			default:
				a := uint64(r.IntN(int(shape[i]) + 1))
				b := a + uint64(r.IntN(int(shape[i]-a)+1))
				idx = append(idx, Range(a, b))
				lo[i], hi[i] = a, b
				wantShape = append(wantShape, b-a)
			}
		}
		desc := fmt.Sprintf("shape %v %v idx %v", shape, d, idx)
		s, err := tensor.Slice(idx...)
		require.NoError(t, err, desc)
		want := naiveSlice(shape, d.Bits()/8, data, lo, hi)
		got := s.AppendTo(nil)
		assert.Equal(t, len(want), len(got), desc)
		assert.Equal(t, want, got, desc)
		assert.Equal(t, uint64(len(want)), s.DataLen(), desc)
		elems := uint64(1)
		for _, d := range wantShape {
			elems *= d
		}
		assert.Equal(t, elems, s.NumElements(), desc)
		if wantShape == nil {
			wantShape = []uint64{}
		}
		assert.Equal(t, wantShape, s.Shape, desc)
		// Every chunk is a piece of the tensor's own bytes.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
		for chunk := range s.Chunks() {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(chunk)))
			assert.True(t, p >= start && p+uintptr(len(chunk)) <= start+uintptr(len(data)), desc)
			assert.NotEmpty(t, chunk, desc)
		}
		assert.Equal(t, Tensor{Name: "t", DType: d, Shape: wantShape, Data: got}, withEmpty(s.Tensor()), desc)
	}
}

func withEmpty(t Tensor) Tensor {
	if len(t.Data) == 0 {
		t.Data = nil
	}
	return t
}

// TestSliceChunks checks that the chunks are as long as the selection allows.
func TestSliceChunks(t *testing.T) {
	tensor := Tensor{Name: "m", DType: F32, Shape: []uint64{4, 5, 6}, Data: le8(4*5*6*4, 1)}
	count := func(idx ...Selector) int {
		s, err := tensor.Slice(idx...)
		require.NoError(t, err)
		n := 0
		for range s.Chunks() {
			n++
		}
		return n
	}
	assert.Equal(t, 1, count())
	assert.Equal(t, 1, count(Range(1, 3)), "whole rows are one run")
	assert.Equal(t, 1, count(At(2), Range(1, 4)))
	assert.Equal(t, 4, count(All(), At(1)))
	assert.Equal(t, 4*5, count(All(), All(), Range(0, 2)))
	assert.Equal(t, 0, count(Range(2, 2)))

	// Stopping early.
	s, _ := tensor.Slice(All(), All(), At(0))
	n := 0
	for range s.Chunks() {
		n++
		if n == 3 {
			break
		}
	}
	assert.Equal(t, 3, n)
}

func TestSliceErrors(t *testing.T) {
	tensor := Tensor{Name: "m", DType: F32, Shape: []uint64{2, 3}, Data: le8(24, 1)}
	for _, tt := range []struct {
		idx    []Selector
		detail string
	}{
		{[]Selector{All(), All(), All()}, "3 selectors for 2 dimensions"},
		{[]Selector{At(2)}, "index 2 of dimension 0 is out of range [0, 2)"},
		{[]Selector{All(), Range(1, 4)}, "range [1, 4) of dimension 1 is out of range [0, 3]"},
		{[]Selector{Range(2, 1)}, "starts after it stops"},
	} {
		_, err := tensor.Slice(tt.idx...)
		require.ErrorIs(t, err, ErrInvalidSlice, tt.detail)
		assert.Contains(t, err.Error(), tt.detail)
		assert.Contains(t, err.Error(), `tensor "m"`)
	}
	_, err := Tensor{Name: "s", DType: F32, Shape: []uint64{}, Data: le8(4, 1)}.Slice(At(0))
	assert.ErrorIs(t, err, ErrInvalidSlice, "a scalar has no dimension")
	_, err = Tensor{DType: F32, Shape: []uint64{3}, Data: le8(8, 1)}.Slice()
	assert.ErrorIs(t, err, ErrSizeMismatch)

	// Packed F4: two elements a byte.
	f4 := Tensor{Name: "q", DType: F4, Shape: []uint64{4, 4}, Data: le8(8, 1)}
	s, err := f4.Slice(At(1))
	require.NoError(t, err)
	assert.Equal(t, f4.Data[2:4], s.AppendTo(nil))
	_, err = f4.Slice(All(), Range(1, 2))
	assert.ErrorIs(t, err, ErrMisalignedSlice)
	f4odd := Tensor{Name: "q", DType: F4, Shape: []uint64{2, 3}, Data: le8(3, 1)}
	_, err = f4odd.Slice(At(1))
	assert.ErrorIs(t, err, ErrMisalignedSlice)
	s, err = f4odd.Slice(Range(0, 2))
	require.NoError(t, err)
	assert.Equal(t, f4odd.Data, s.AppendTo(nil))
}

// TestSliceFloat32s decodes selections of a BF16 matrix, row by row and
// column by column, and checks that a selection of a dtype with no float32
// values leaves the buffer as it was.
func TestSliceFloat32s(t *testing.T) {
	// A 3x4 BF16 matrix holding 0 to 11: BF16 holds small integers exactly.
	vals := make([]float32, 12)
	for i := range vals {
		vals[i] = float32(i)
	}
	m, err := TensorFromFloat32s("m", BF16, []uint64{3, 4}, vals, RoundNearestEven)
	require.NoError(t, err)

	row, err := m.Slice(At(1))
	require.NoError(t, err)
	got, err := row.Float32s()
	require.NoError(t, err)
	assert.Equal(t, []float32{4, 5, 6, 7}, got)

	cols, err := m.Slice(All(), Range(1, 3))
	require.NoError(t, err)
	buf := append(make([]float32, 0, 16), -1)
	got, err = cols.AppendFloat32s(buf)
	require.NoError(t, err)
	assert.Equal(t, []float32{-1, 1, 2, 5, 6, 9, 10}, got)
	assert.Same(t, &buf[:1][0], &got[0], "no allocation when dst has the capacity")
	whole, err := cols.Tensor().Float32s()
	require.NoError(t, err)
	assert.Equal(t, whole, got[1:], "the same values as the gathered tensor's")

	empty, err := m.Slice(Range(2, 2))
	require.NoError(t, err)
	got, err = empty.Float32s()
	require.NoError(t, err)
	assert.Empty(t, got)

	packed := Tensor{Name: "p", DType: F4, Shape: []uint64{2, 2}, Data: []byte{0x21, 0x43}}
	ps, err := packed.Slice(At(0))
	require.NoError(t, err)
	got, err = ps.AppendFloat32s(buf)
	assert.ErrorIs(t, err, ErrDTypeMismatch)
	assert.Equal(t, buf, got, "dst as it was")
	var te *TensorError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "p", te.Name)
}

// TestNumElements checks the element counts of tensors, header entries and
// selections, for packed dtypes, sizes whose bit count overflows 64 bits,
// and entries that describe no tensor.
func TestNumElements(t *testing.T) {
	for _, tc := range []struct {
		dtype DType
		shape []uint64
		bytes int
	}{
		{F32, []uint64{2, 3}, 24},
		{F32, []uint64{}, 4},
		{F32, []uint64{5, 0}, 0},
		{F4, []uint64{6}, 3},
		{F6_E2M3, []uint64{4}, 3},
		{BOOL, []uint64{7}, 7},
		{C64, []uint64{3}, 24},
	} {
		want := uint64(1)
		for _, d := range tc.shape {
			want *= d
		}
		tensor := Tensor{Name: "t", DType: tc.dtype, Shape: tc.shape, Data: make([]byte, tc.bytes)}
		assert.Equal(t, want, tensor.NumElements(), "%v %v", tc.dtype, tc.shape)
		info := TensorInfo{Name: "t", DType: tc.dtype, Shape: tc.shape, DataOffsets: [2]uint64{100, 100 + uint64(tc.bytes)}}
		assert.Equal(t, want, info.NumElements(), "%v %v", tc.dtype, tc.shape)
		s, err := tensor.Slice()
		require.NoError(t, err)
		assert.Equal(t, want, s.NumElements(), "%v %v", tc.dtype, tc.shape)
	}

	// 2^64-1 bytes of F64: size*8 overflows, the count does not.
	huge := TensorInfo{DType: F64, DataOffsets: [2]uint64{0, math.MaxUint64}}
	assert.Equal(t, uint64(1)<<61-1, huge.NumElements())
	huge.DType, huge.DataOffsets[1] = F6_E3M2, 3<<60 // 4 elements in 3 bytes
	assert.Equal(t, uint64(1)<<62, huge.NumElements())
	huge.DataOffsets[1] = 1 << 61 // 2^64 bits: the most a valid header allows
	huge.DType = F4
	assert.Equal(t, uint64(1)<<62, huge.NumElements())
	huge.DataOffsets[1] = 1 << 63
	assert.Equal(t, uint64(math.MaxUint64), huge.NumElements(), "2^64 elements: no valid header has them; the count saturates")
	assert.Zero(t, TensorInfo{DType: F32, DataOffsets: [2]uint64{8, 4}}.NumElements(), "reversed offsets")
	assert.Zero(t, TensorInfo{DType: DType(200), DataOffsets: [2]uint64{0, 8}}.NumElements(), "unknown dtype")
	assert.Zero(t, Tensor{DType: DType(200), Data: make([]byte, 8)}.NumElements(), "unknown dtype")

	// A real file: every entry's count is its shape's product, and they add
	// up to the parameters the command reports for it.
	r, err := Open("testdata/tiny-llama.safetensors")
	require.NoError(t, err)
	defer r.Close()
	var total uint64
	for _, info := range r.Header().Tensors {
		want := uint64(1)
		for _, d := range info.Shape {
			want *= d
		}
		assert.Equal(t, want, info.NumElements(), info.Name)
		tensor, err := r.Tensor(info.Name)
		require.NoError(t, err)
		assert.Equal(t, want, tensor.NumElements(), info.Name)
		total += info.NumElements()
	}
	assert.Equal(t, uint64(250432), total)
}
