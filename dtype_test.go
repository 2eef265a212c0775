package safetensors

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refDTypes is the reference's dtype table, in its declaration order, with
// bit widths (see testdata/conformance/README.md).
var refDTypes = []struct {
	name string
	bits int
}{
	{"BOOL", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8}, {"I8", 8},
	{"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
	{"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32}, {"U32", 32}, {"F32", 32},
	{"C64", 64}, {"F64", 64}, {"I64", 64}, {"U64", 64},
}

func TestDTypes(t *testing.T) {
	require.Len(t, refDTypes, 22)
	var prev DType
	for _, ref := range refDTypes {
		d, err := ParseDType(ref.name)
		require.NoError(t, err, ref.name)
		assert.Equal(t, ref.name, d.String())
		assert.Equal(t, ref.bits, d.Bits(), ref.name)
		assert.Greater(t, d, prev, "%s: constants follow the reference's order", ref.name)
		prev = d

		text, err := d.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, ref.name, string(text))
		var back DType
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, d, back)
	}
	assert.Equal(t, U64, lastDType)
}

func TestDTypeInvalid(t *testing.T) {
	for _, s := range []string{"", "f32", "F32 ", "float32", "F8_E4M3FN", "U4", "Q4_0", "bool", "DType(0)"} {
		_, err := ParseDType(s)
		assert.ErrorIs(t, err, ErrUnknownDType, "%q", s)
		var d DType
		assert.ErrorIs(t, d.UnmarshalText([]byte(s)), ErrUnknownDType)
		assert.Equal(t, DType(0), d)
	}
	for _, d := range []DType{0, lastDType + 1, 255} {
		assert.Equal(t, 0, d.Bits())
		assert.Contains(t, d.String(), "DType(")
		_, err := d.MarshalText()
		assert.ErrorIs(t, err, ErrUnknownDType)
	}
}

// TestDTypeJSON checks that DType works in JSON through its text methods.
func TestDTypeJSON(t *testing.T) {
	b, err := json.Marshal(map[string]DType{"a": BF16, "b": F8_E4M3FNUZ})
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":"BF16","b":"F8_E4M3FNUZ"}`, string(b))
	var m map[string]DType
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, map[string]DType{"a": BF16, "b": F8_E4M3FNUZ}, m)
	assert.Error(t, json.Unmarshal([]byte(`{"a":"f16"}`), &m))
}

// TestDTypeIsFloat checks IsFloat and HasNaN against the values the
// dtypes decode to: a dtype whose Stats counts a NaN or an infinity in some
// element is one for which HasNaN is true, and every dtype for which it is
// true has a NaN that Stats counts. The 8- and 16-bit types are tried with
// every code.
func TestDTypeIsFloat(t *testing.T) {
	floats := map[DType]bool{
		F4: true, F6_E2M3: true, F6_E3M2: true, F8_E5M2: true, F8_E4M3: true, F8_E8M0: true,
		F8_E4M3FNUZ: true, F8_E5M2FNUZ: true, F16: true, BF16: true, F32: true, F64: true,
	}
	// Codes that are NaN in the wider types, which are not tried in full.
	nan32 := []byte{0x01, 0x00, 0xc0, 0x7f}
	nan64 := []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}
	for _, ref := range refDTypes {
		d, _ := ParseDType(ref.name)
		assert.Equal(t, floats[d], d.IsFloat(), "%v.IsFloat", d)
		var data []byte
		switch d.Bits() {
		case 8:
			for c := range 256 {
				data = append(data, byte(c))
			}
		case 16:
			for c := range 1 << 16 {
				data = append(data, byte(c), byte(c>>8))
			}
		case 32:
			data = nan32
		case 64:
			data = nan64
		}
		s, err := Tensor{Name: ref.name, DType: d, Data: data}.Stats()
		if !d.HasNaN() {
			if err == nil {
				assert.Zero(t, s.NaN+s.Inf, "%v has no NaN nor Inf, yet Stats counts some", d)
			}
			continue
		}
		require.NoError(t, err, "%v: Stats decodes every dtype that HasNaN", d)
		assert.NotZero(t, s.NaN, "%v has NaN", d)
		assert.True(t, d.IsFloat(), "%v", d)
	}
	for _, d := range []DType{0, lastDType + 1} {
		assert.False(t, d.IsFloat())
		assert.False(t, d.HasNaN())
	}
}
