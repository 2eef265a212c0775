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
