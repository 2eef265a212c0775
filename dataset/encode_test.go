package dataset

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/safetensors-go/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refSparkF16 is the connector's F16 rule, written from what it does to
// values rather than from its bit operations: every NaN is 0x7e00 with the
// sign; a magnitude of 65536 or more (infinity included) is infinity; one
// below 2^-14 is a signed zero; the rest keep their binary exponent and
// the first 10 bits of their mantissa, truncated, computed in float64
// arithmetic.
func refSparkF16(b uint32) uint16 {
	f := math.Float32frombits(b)
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	a := math.Abs(float64(f))
	switch {
	case math.IsNaN(a):
		return sign | 0x7e00
	case a >= 65536:
		return sign | 0x7c00
	case a < 0x1p-14:
		return sign
	}
	_, k := math.Frexp(a) // a = m·2^k, m in [0.5, 1)
	e := k - 1
	frac := math.Floor((math.Ldexp(a, -e) - 1) * 1024)
	return sign | uint16(e+15)<<10 | uint16(frac)
}

// refSparkBF16 is the connector's BF16 rule from what it does to values: a
// NaN keeps its sign and payload and becomes quiet, as the float → double →
// float round trip makes it (0x7f800001 gives 0x7fc0); a number is
// truncated toward zero to 8 significant bits (or, below 2^-126, to a
// multiple of 2^-133), computed in float64 arithmetic.
func refSparkBF16(b uint32) uint16 {
	f := math.Float32frombits(b)
	if math.IsNaN(float64(f)) {
		return uint16(b>>16) | 0x0040
	}
	a := math.Abs(float64(f))
	var t float64
	switch {
	case math.IsInf(a, 0) || a == 0:
		t = a
	case a < 0x1p-126:
		t = math.Floor(math.Ldexp(a, 133))
		t = math.Ldexp(t, -133)
	default:
		_, k := math.Frexp(a)
		e := k - 1
		t = math.Ldexp(math.Floor(math.Ldexp(a, 7-e)), e-7)
	}
	if math.Signbit(float64(f)) {
		t = -t
	}
	return uint16(math.Float32bits(float32(t)) >> 16)
}

// checkEncodings compares the package's encodings with the references for
// the float32 bit patterns lo to hi, and returns the first difference.
func checkEncodings(lo, hi uint64) (bad uint32, ok bool) {
	for x := lo; x < hi; x++ {
		b := uint32(x)
		if sparkF16(b) != refSparkF16(b) || sparkBF16(b) != refSparkBF16(b) {
			return b, false
		}
	}
	return 0, true
}

// TestSparkEncodingSample checks the encodings against the references on
// every pattern of the upper 16 bits with several lower halves, the
// boundaries, and a million random patterns. TestSparkEncodingAll, with
// the slow build tag, checks all 2^32.
func TestSparkEncodingSample(t *testing.T) {
	var inputs []uint32
	for hi := range uint32(1 << 16) {
		for _, lo := range []uint32{0, 1, 0x1fff, 0x2000, 0x7fff, 0x8000, 0xe000, 0xffff} {
			inputs = append(inputs, hi<<16|lo)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		inputs = append(inputs, r.Uint32())
	}
	for _, b := range inputs {
		if sparkF16(b) != refSparkF16(b) || sparkBF16(b) != refSparkBF16(b) {
			require.Equal(t, refSparkF16(b), sparkF16(b), "F16 of %#08x", b)
			require.Equal(t, refSparkBF16(b), sparkBF16(b), "BF16 of %#08x", b)
		}
	}
	// What the connector's datasets show, by value.
	for _, tc := range []struct {
		f32      uint32
		f16, b16 uint16
	}{
		{math.Float32bits(1e-5), 0x0000, 0x3727},           // an F16 subnormal: zero
		{math.Float32bits(-1e-5), 0x8000, 0xb727},          // the sign kept
		{math.Float32bits(65504), 0x7bff, 0x477f},          // the largest F16
		{math.Float32bits(65520), 0x7bff, 0x477f},          // truncated, not rounded to infinity
		{math.Float32bits(70000), 0x7c00, 0x4788},          // infinity
		{0x7fc00000, 0x7e00, 0x7fc0},                       // the quiet NaN
		{0x7f800001, 0x7e00, 0x7fc0},                       // a signalling NaN, quieted
		{0xffa00000, 0xfe00, 0xffe0},                       // negative, signalling
		{0x7f812345, 0x7e00, 0x7fc1},                       // payload kept in BF16
		{math.Float32bits(1e-40), 0x0000, 0x0001},          // a float32 subnormal
		{math.Float32bits(float32(1) / 3), 0x3555, 0x3eaa}, // truncated
	} {
		assert.Equal(t, tc.f16, sparkF16(tc.f32), "F16 of %#08x", tc.f32)
		assert.Equal(t, tc.b16, sparkBF16(tc.f32), "BF16 of %#08x", tc.f32)
	}
}

// TestSparkFloatDatasets writes the float32 inputs that the connector was
// given for the floats_* datasets with WriteFloat32s and WriteKVFloat32s,
// and compares every sample's bytes with what the connector wrote.
func TestSparkFloatDatasets(t *testing.T) {
	for _, name := range []string{"floats_f16_batch", "floats_f16_kv", "floats_bf16_batch", "floats_bf16_kv"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join("..", "testdata", "spark", name)
			var truth sparkTruth
			var exp struct {
				Mode    string         `json:"mode"`
				Options map[string]any `json:"options"`
				Rows    []struct {
					Key string `json:"key"`
					V   struct {
						Bits []uint32 `json:"float32_bits"`
					} `json:"v"`
				} `json:"rows"`
			}
			readJSON(t, base+".truth.json", &truth)
			readJSON(t, base+".expect.json", &exp)
			dtype, err := safetensors.ParseDType(exp.Options["dtype"].(string))
			require.NoError(t, err)
			col := []Column{{Name: "v", DType: dtype, Shape: []uint64{6}}}
			mode, opts := KeyValue, []Option(nil)
			if exp.Mode == "batch" {
				mode, opts = Batch, []Option{BatchSize(4)}
			}
			dir := t.TempDir()
			w, err := Create(dir, mode, col, opts...)
			require.NoError(t, err)
			for _, row := range exp.Rows {
				vals := make([]float32, len(row.V.Bits))
				for i, b := range row.V.Bits {
					vals[i] = math.Float32frombits(b)
				}
				if exp.Mode == "batch" {
					require.NoError(t, w.WriteFloat32s(vals))
				} else {
					require.NoError(t, w.WriteKVFloat32s(row.Key, vals))
				}
			}
			require.NoError(t, w.Close())
			d, err := Open(dir)
			require.NoError(t, err)
			defer d.Close()
			got := make(map[string]string) // key → SHA-256 (batch: the position)
			i := 0
			for smp, err := range d.Samples(context.Background()) {
				require.NoError(t, err)
				k := smp.Key
				if exp.Mode == "batch" {
					k = strconv.Itoa(i)
				}
				got[k] = sha(smp.Tensors[0].Data)
				i++
			}
			require.Len(t, got, len(truth.Samples))
			for i, s := range truth.Samples {
				k := s.Key
				if exp.Mode == "batch" {
					k = strconv.Itoa(i)
				}
				var digest string
				require.NoError(t, json.Unmarshal(s.Cols["v"][2], &digest))
				assert.Equal(t, digest, got[k], "sample %d (%s)", i, s.Key)
			}
			// The references agree with the connector's bytes too.
			for i, row := range exp.Rows {
				var enc []byte
				for _, b := range row.V.Bits {
					v := refSparkBF16(b)
					if dtype == safetensors.F16 {
						v = refSparkF16(b)
					}
					enc = binary.LittleEndian.AppendUint16(enc, v)
				}
				var digest string
				require.NoError(t, json.Unmarshal(truth.Samples[i].Cols["v"][2], &digest))
				if exp.Mode == "kv" {
					assert.Equal(t, got[row.Key], sha(enc))
				} else {
					assert.Equal(t, digest, sha(enc), "row %d", i)
				}
			}
		})
	}
}
