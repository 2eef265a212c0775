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
// every element whose position in each dimension is one of pos[d], in
// row-major order, gathered bit by bit (element e of a tensor is bits
// [e*bits, (e+1)*bits) of its bytes, least significant bit first). It is
// the independent reference for Slice, for every dtype.
func naiveSlice(shape []uint64, bits int, data []byte, pos [][]uint64) []byte {
	var out []byte
	var nbits int
	idx := make([]int, len(shape))
	for _, p := range pos {
		if len(p) == 0 {
			return []byte{}
		}
	}
	for {
		e := uint64(0)
		for d := range shape {
			e = e*shape[d] + pos[d][idx[d]]
		}
		for b := range uint64(bits) {
			bit := e*uint64(bits) + b
			if nbits%8 == 0 {
				out = append(out, 0)
			}
			out[len(out)-1] |= (data[bit/8] >> (bit % 8) & 1) << (nbits % 8)
			nbits++
		}
		d := len(shape) - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < len(pos[d]) {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			break
		}
	}
	return out
}

// TestSliceRandom checks random selections of every kind that the
// reference accepts against naiveSlice: bytes, shape, counts, and that the
// chunks are the tensor's own bytes; for F4 and F6, selections that do not
// fall on whole bytes are refused with ErrMisalignedSlice (which ones, the
// interop suite checks against the reference).
func TestSliceRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dtypes := []DType{U8, I16, F32, F64, C64, F4, F6_E2M3, F6_E3M2}
	misaligned, packed := 0, 0
	for iter := range 6000 {
		rank := r.IntN(5)
		shape := make([]uint64, rank)
		for i := range shape {
			shape[i] = uint64(1 + r.IntN(6))
		}
		d := dtypes[r.IntN(len(dtypes))]
		if d.Bits() < 8 {
			// A whole number of bytes: a last dimension of 2 (F4) or 4 (F6).
			if rank == 0 {
				continue
			}
			shape[rank-1] = uint64(8/gcd(8, d.Bits())) * uint64(1+r.IntN(3))
		}
		size, err := byteSize(d, shape)
		require.NoError(t, err)
		data := le8(int(size), byte(iter))
		tensor := Tensor{Name: "t", DType: d, Shape: shape, Data: data}

		n := r.IntN(rank + 1)
		ellipsis := -1
		if r.IntN(3) == 0 {
			ellipsis = r.IntN(n + 1)
		}
		// Selectors for dimensions [0, a) and [rank-(n-a), rank), the
		// Ellipsis between them; without one, for [0, n).
		a := n
		if ellipsis >= 0 {
			a = ellipsis
		}
		pos := make([][]uint64, rank)
		var idx []Selector
		var wantShape []uint64
		for i := range rank {
			all := make([]uint64, shape[i])
			for j := range all {
				all[j] = uint64(j)
			}
			pos[i] = all
			if i == a && ellipsis >= 0 {
				idx = append(idx, Ellipsis())
			}
			if i >= a && i < rank-(n-a) || ellipsis < 0 && i >= n {
				wantShape = append(wantShape, shape[i])
				continue
			}
			switch r.IntN(5) {
			case 0:
				idx = append(idx, All())
				wantShape = append(wantShape, shape[i])
			case 1:
				p := uint64(r.IntN(int(shape[i])))
				idx = append(idx, At(p))
				pos[i] = []uint64{p}
			case 2:
				p := uint64(1 + r.IntN(int(shape[i])))
				idx = append(idx, AtFromEnd(p))
				pos[i] = []uint64{shape[i] - p}
			default:
				start := uint64(r.IntN(int(shape[i])))
				stop := start + uint64(r.IntN(int(shape[i]-start)+1))
				step := uint64(1 + r.IntN(4))
				if r.IntN(3) == 0 {
					step = 1 + r.Uint64N(1<<63)
				}
				idx = append(idx, RangeStep(start, stop, step))
				pos[i] = nil
				for p := start; p < stop; p += step {
					pos[i] = append(pos[i], p)
					if p+step < p {
						break
					}
				}
				wantShape = append(wantShape, uint64(len(pos[i])))
			}
		}
		if ellipsis >= 0 && a == rank {
			idx = append(idx, Ellipsis())
		}
		desc := fmt.Sprintf("shape %v %v idx %v", shape, d, idx)
		s, err := tensor.Slice(idx...)
		if d.Bits() < 8 {
			packed++
			if err != nil {
				require.ErrorIs(t, err, ErrMisalignedSlice, desc)
				misaligned++
				continue
			}
		}
		require.NoError(t, err, desc)
		want := naiveSlice(shape, d.Bits(), data, pos)
		got := s.AppendTo([]byte{})
		require.Equal(t, want, got, desc)
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
		info, err := TensorInfo{Name: "t", DType: d, Shape: shape, DataOffsets: [2]uint64{8, 8 + size}}.Slice(idx...)
		require.NoError(t, err, desc)
		assert.Equal(t, TensorInfo{Name: "t", DType: d, Shape: wantShape, DataOffsets: [2]uint64{0, uint64(len(want))}}, info, desc)
		// Every chunk is a piece of the tensor's own bytes.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
		for chunk := range s.Chunks() {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(chunk)))
			assert.True(t, p >= start && p+uintptr(len(chunk)) <= start+uintptr(len(data)), desc)
			assert.NotEmpty(t, chunk, desc)
		}
		assert.Equal(t, Tensor{Name: "t", DType: d, Shape: wantShape, Data: got}, withEmpty(s.Tensor()), desc)
	}
	assert.Greater(t, misaligned, 100, "misaligned packed selections")
	assert.Greater(t, packed-misaligned, 100, "aligned packed selections")
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// withEmpty gives a tensor empty rather than nil Data.
func withEmpty(t Tensor) Tensor {
	if t.Data == nil {
		t.Data = []byte{}
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

// TestSliceVerdicts holds selections whose verdicts safetensors 0.8 gave
// (safe_open(..., framework="numpy").get_slice(name)[...] on tensors of
// these shapes, the Python index in each comment): the shape it returned,
// or its refusal. The interop suite compares thousands of random ones.
func TestSliceVerdicts(t *testing.T) {
	const ok, invalid, misaligned = 0, 1, 2
	for _, tc := range []struct {
		dtype DType
		shape []uint64
		idx   []Selector
		want  int
		shp   []uint64 // when ok
	}{
		{F32, []uint64{4, 6}, []Selector{RangeStep(0, 4, 2)}, ok, []uint64{2, 6}},                               // [0:4:2]
		{F32, []uint64{4, 6}, []Selector{At(1), RangeStep(0, 6, 3)}, ok, []uint64{2}},                           // [1, ::3]
		{F32, []uint64{4, 6}, []Selector{All(), AtFromEnd(1)}, ok, []uint64{4}},                                 // [:, -1]
		{F32, []uint64{4, 6}, []Selector{Ellipsis(), At(1)}, ok, []uint64{4}},                                   // [..., 1]
		{F32, []uint64{4, 6}, []Selector{Ellipsis()}, ok, []uint64{4, 6}},                                       // [...]
		{F32, []uint64{4, 6}, []Selector{At(1), Ellipsis()}, ok, []uint64{6}},                                   // [1, ...]
		{F32, []uint64{4, 6}, []Selector{At(1), Ellipsis(), At(2)}, ok, []uint64{}},                             // [1, ..., 2]
		{F32, []uint64{4, 6}, []Selector{Ellipsis(), AtFromEnd(1), AtFromEnd(1)}, ok, []uint64{}},               // [..., -1, -1]
		{F32, []uint64{4, 6}, []Selector{AtFromEnd(4)}, ok, []uint64{6}},                                        // [-4]
		{F32, []uint64{4, 6}, []Selector{Range(0, 0)}, ok, []uint64{0, 6}},                                      // [0:0]
		{F32, []uint64{4, 6}, []Selector{RangeStep(0, 4, 5)}, ok, []uint64{1, 6}},                               // [0:4:5]
		{F32, []uint64{4, 6}, []Selector{RangeStep(1, 4, 100), RangeStep(5, 6, 7)}, ok, []uint64{1, 1}},         // [1:4:100, 5:6:7]
		{F32, []uint64{4, 6}, []Selector{RangeStep(0, 4, 1<<62)}, ok, []uint64{1, 6}},                           // [::2**62]
		{F32, []uint64{4, 6}, []Selector{All(), RangeStep(2, 2, 2)}, ok, []uint64{4, 0}},                        // [:, 2:2:2]
		{F32, []uint64{4, 6}, []Selector{Range(2, 2), Range(1, 3)}, ok, []uint64{0, 2}},                         // [2:2, 1:3]
		{F32, []uint64{4, 6}, []Selector{Ellipsis(), Ellipsis()}, invalid, nil},                                 // [..., ...]
		{F32, []uint64{4, 6}, []Selector{RangeStep(0, 4, 0)}, invalid, nil},                                     // [::0]
		{F32, []uint64{4, 6}, []Selector{AtFromEnd(5)}, invalid, nil},                                           // [-5]
		{F32, []uint64{4, 6}, []Selector{At(4)}, invalid, nil},                                                  // [4]
		{F32, []uint64{4, 6}, []Selector{Range(2, 10)}, invalid, nil},                                           // [2:10]
		{F32, []uint64{4, 6}, []Selector{Range(10, 20)}, invalid, nil},                                          // [10:20]
		{F32, []uint64{4, 6}, []Selector{Range(3, 1)}, invalid, nil},                                            // [3:1]
		{F32, []uint64{4, 6}, []Selector{Range(4, 4)}, invalid, nil},                                            // [4:4]
		{F32, []uint64{4, 6}, []Selector{At(0), At(0), At(1)}, invalid, nil},                                    // [0, 0, 1]
		{F32, []uint64{4, 6}, []Selector{At(0), At(0), AtFromEnd(1)}, invalid, nil},                             // [0, 0, -1]
		{F32, []uint64{4, 6}, []Selector{Ellipsis(), At(0), At(0), At(0)}, invalid, nil},                        // [..., 0, 0, 0]
		{F32, []uint64{4, 6}, []Selector{At(0), AtFromEnd(7)}, invalid, nil},                                    // [0, -7]
		{F32, []uint64{0, 3}, nil, ok, []uint64{0, 3}},                                                          // [()]
		{F32, []uint64{0, 3}, []Selector{Ellipsis()}, invalid, nil},                                             // [...]
		{F32, []uint64{0, 3}, []Selector{All()}, invalid, nil},                                                  // [:]
		{F32, []uint64{0, 3}, []Selector{Range(0, 0)}, invalid, nil},                                            // [0:0]
		{F32, []uint64{3, 0}, []Selector{At(1)}, ok, []uint64{0}},                                               // [1]
		{F32, []uint64{3, 0}, []Selector{AtFromEnd(1)}, ok, []uint64{0}},                                        // [-1]
		{F32, []uint64{3, 0}, []Selector{Range(1, 3)}, ok, []uint64{2, 0}},                                      // [1:3]
		{F32, []uint64{3, 0}, []Selector{At(1), Ellipsis()}, invalid, nil},                                      // [1, ...]
		{I16, []uint64{2, 3, 4}, []Selector{Range(0, 2), Range(0, 0), Range(1, 2)}, ok, []uint64{2, 0, 1}},      // [0:2, 0:0, 1:2]
		{I16, []uint64{2, 3, 4}, []Selector{At(0), RangeStep(1, 3, 2), RangeStep(0, 4, 3)}, ok, []uint64{1, 2}}, // [0, 1:3:2, ::3]
		{I16, []uint64{2, 3, 4}, []Selector{Ellipsis(), RangeStep(1, 3, 2)}, ok, []uint64{2, 3, 1}},             // [..., 1:3:2]
		{F32, []uint64{}, nil, ok, []uint64{}},                                                                  // [()]
		{F32, []uint64{}, []Selector{Ellipsis()}, ok, []uint64{}},                                               // [...]
		{F32, []uint64{}, []Selector{At(0)}, invalid, nil},                                                      // [0]
		{F32, []uint64{}, []Selector{All()}, invalid, nil},                                                      // [:]
		{F4, []uint64{4, 6}, []Selector{At(1)}, ok, []uint64{6}},                                                // [1]
		{F4, []uint64{4, 6}, []Selector{All(), Range(0, 2)}, ok, []uint64{4, 2}},                                // [:, 0:2]
		{F4, []uint64{4, 6}, []Selector{RangeStep(0, 4, 3)}, ok, []uint64{2, 6}},                                // [0:4:3]
		{F4, []uint64{4, 6}, []Selector{All(), Range(1, 3)}, misaligned, nil},                                   // [:, 1:3]
		{F4, []uint64{4, 6}, []Selector{All(), At(1)}, misaligned, nil},                                         // [:, 1]
		{F4, []uint64{4, 6}, []Selector{All(), RangeStep(0, 4, 2)}, misaligned, nil},                            // [:, 0:4:2]
		{F6_E2M3, []uint64{4, 4}, []Selector{RangeStep(0, 4, 2)}, ok, []uint64{2, 4}},                           // [0:4:2]
		{F6_E2M3, []uint64{4, 4}, []Selector{All(), Range(0, 2)}, misaligned, nil},                              // [:, 0:2]
		{F6_E2M3, []uint64{4, 4}, []Selector{All(), RangeStep(0, 6, 2)}, invalid, nil},                          // [:, 0:6:2]
	} {
		size, err := byteSize(tc.dtype, tc.shape)
		require.NoError(t, err)
		tensor := Tensor{Name: "m", DType: tc.dtype, Shape: tc.shape, Data: le8(int(size), 1)}
		desc := fmt.Sprintf("%v %v %v", tc.dtype, tc.shape, tc.idx)
		s, err := tensor.Slice(tc.idx...)
		info, ierr := TensorInfo{Name: "m", DType: tc.dtype, Shape: tc.shape, DataOffsets: [2]uint64{0, size}}.Slice(tc.idx...)
		switch tc.want {
		case ok:
			require.NoError(t, err, desc)
			require.NoError(t, ierr, desc)
			assert.Equal(t, tc.shp, s.Shape, desc)
			assert.Equal(t, tc.shp, info.Shape, desc)
		case invalid:
			require.ErrorIs(t, err, ErrInvalidSlice, desc)
			require.ErrorIs(t, ierr, ErrInvalidSlice, desc)
			assert.Contains(t, err.Error(), `tensor "m"`, desc)
		case misaligned:
			require.ErrorIs(t, err, ErrMisalignedSlice, desc)
			require.ErrorIs(t, ierr, ErrMisalignedSlice, desc)
		}
	}
}

// TestSliceErrors checks what the errors say: the tensor, the dimension
// and the numbers.
func TestSliceErrors(t *testing.T) {
	tensor := Tensor{Name: "m", DType: F32, Shape: []uint64{2, 3}, Data: le8(24, 1)}
	for _, tt := range []struct {
		idx    []Selector
		detail string
	}{
		{[]Selector{All(), All(), All()}, "3 selectors for 2 dimensions (shape [2 3])"},
		{[]Selector{At(2)}, "index 2 of dimension 0 is out of range [0, 2)"},
		{[]Selector{All(), AtFromEnd(4)}, "index -4 of dimension 1 is out of range for its size 3"},
		{[]Selector{All(), Range(1, 4)}, "range 1:4 of dimension 1 is out of range for its size 3"},
		{[]Selector{All(), RangeStep(1, 4, 2)}, "range 1:4:2 of dimension 1 is out of range for its size 3"},
		{[]Selector{Range(1, 0)}, "range 1:0 of dimension 0 starts after it stops"},
		{[]Selector{All(), RangeStep(0, 3, 0)}, "selector 0:3:0 of dimension 1: the step must be a positive integer, got 0"},
		{[]Selector{Ellipsis(), At(0), Ellipsis()}, "Ellipsis at selectors 0 and 2: only one is allowed"},
	} {
		_, err := tensor.Slice(tt.idx...)
		require.ErrorIs(t, err, ErrInvalidSlice, tt.detail)
		assert.Contains(t, err.Error(), tt.detail)
		assert.Contains(t, err.Error(), `tensor "m"`)
	}
	_, err := Tensor{Name: "z", DType: F32, Shape: []uint64{0}, Data: nil}.Slice(All())
	require.ErrorIs(t, err, ErrInvalidSlice)
	assert.Contains(t, err.Error(), ": of dimension 0 of size 0: there is no position to start from")
	_, err = Tensor{DType: F32, Shape: []uint64{3}, Data: le8(8, 1)}.Slice()
	assert.ErrorIs(t, err, ErrSizeMismatch)
	_, err = TensorInfo{DType: F32, Shape: []uint64{3}, DataOffsets: [2]uint64{4, 8}}.Slice()
	assert.ErrorIs(t, err, ErrSizeMismatch)

	// Packed F4: two elements a byte.
	f4 := Tensor{Name: "q", DType: F4, Shape: []uint64{4, 4}, Data: le8(8, 1)}
	s, err := f4.Slice(At(1))
	require.NoError(t, err)
	assert.Equal(t, f4.Data[2:4], s.AppendTo(nil))
	_, err = f4.Slice(All(), Range(1, 2))
	assert.ErrorIs(t, err, ErrMisalignedSlice)
	assert.Contains(t, err.Error(), "selector 1:2 of dimension 1: F4 elements selected so do not start and end on byte boundaries")
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
