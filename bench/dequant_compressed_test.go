//go:build linux

package bench

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/safetensors-go/safetensors"
)

// ctFormat is a compressed-tensors weight layout of the benchmark: the
// format, the config group's weight arguments, and the tensors of a
// weight of rows rows of 4096 values.
type ctFormat struct {
	name, format, weights string
	tensors               func(w string, rows uint64) []safetensors.TensorSpec
}

// ctFormats are the layouts BenchmarkDequantizeCompressed dequantizes:
// one of each format, with the strategies published models use.
var ctFormats = []ctFormat{
	{"int8-channel", "int-quantized", `{"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w, DType: safetensors.I8, Shape: []uint64{rows, 4096}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 1}}}
		}},
	{"int4-group128", "pack-quantized", `{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.I32, Shape: []uint64{rows, 512}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 32}},
				{Name: w + "_shape", DType: safetensors.I64, Shape: []uint64{2}}}
		}},
	{"int4-group128-asym", "pack-quantized", `{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": false}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.I32, Shape: []uint64{rows, 512}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 32}},
				{Name: w + "_zero_point", DType: safetensors.I32, Shape: []uint64{(rows*4 + 31) / 32, 32}},
				{Name: w + "_shape", DType: safetensors.I64, Shape: []uint64{2}}}
		}},
	{"fp8-channel", "float-quantized", `{"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w, DType: safetensors.F8_E4M3, Shape: []uint64{rows, 4096}},
				{Name: w + "_scale", DType: safetensors.BF16, Shape: []uint64{rows, 1}}}
		}},
	{"nvfp4", "nvfp4-pack-quantized", `{"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.U8, Shape: []uint64{rows, 2048}},
				{Name: w + "_scale", DType: safetensors.F8_E4M3, Shape: []uint64{rows, 256}},
				{Name: w + "_global_scale", DType: safetensors.F32, Shape: []uint64{1}}}
		}},
	{"mxfp4", "mxfp4-pack-quantized", `{"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.U8, Shape: []uint64{rows, 2048}},
				{Name: w + "_scale", DType: safetensors.U8, Shape: []uint64{rows, 128}}}
		}},
	{"mxfp6", "mxfp6-pack-quantized", `{"num_bits": 6, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w + "_packed", DType: safetensors.U8, Shape: []uint64{rows, 3072}},
				{Name: w + "_scale", DType: safetensors.U8, Shape: []uint64{rows, 128}}}
		}},
	{"mxfp8", "mxfp8-quantized", `{"num_bits": 8, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true}`,
		func(w string, rows uint64) []safetensors.TensorSpec {
			return []safetensors.TensorSpec{{Name: w, DType: safetensors.F8_E4M3, Shape: []uint64{rows, 4096}},
				{Name: w + "_scale", DType: safetensors.U8, Shape: []uint64{rows, 128}}}
		}},
}

// ctModel returns the folder of a compressed-tensors model of the layout
// f whose weights' values take about size bytes: 16 weights of 4096
// columns, written once per process and read before it is returned.
func ctModel(b *testing.B, f ctFormat, size int64) (dir string, values uint64) {
	b.Helper()
	dir = filepath.Join(benchDir(b), fmt.Sprintf("ct-%s-%d", f.name, size))
	path := filepath.Join(dir, "model.safetensors")
	const n = 16
	rowBytes := f.tensors("w", 1)[0].DType.Bits() / 8 * int(f.tensors("w", 1)[0].Shape[1])
	rows := uint64(size / n / int64(rowBytes))
	values = n * rows * 4096
	modelsMu.Lock()
	done := models[path]
	modelsMu.Unlock()
	if done {
		warm(b, path)
		return dir, values
	}
	// One format's model at a time: with its output and the ceiling's
	// (four times the model, for 4-bit formats), all of them would not
	// fit on a small disk.
	modelsMu.Lock()
	for p := range models {
		if other := filepath.Dir(p); strings.HasPrefix(filepath.Base(other), "ct-") {
			os.RemoveAll(other)
			delete(models, p)
		}
	}
	modelsMu.Unlock()
	var specs []safetensors.TensorSpec
	for i := range n {
		specs = append(specs, f.tensors(fmt.Sprintf("model.layers.%d.mlp.up_proj.weight", i), rows)...)
	}
	config := fmt.Sprintf(`{"model_type": "llama", "quantization_config": {"quant_method": "compressed-tensors", "format": %q,
  "config_groups": {"group_0": {"targets": ["Linear"], "format": %q, "weights": %s}}}}`, f.format, f.format, f.weights)
	// Values of every code; scales of about 0.01 (BF16 0x3c23, F8_E4M3
	// 0x30 over a global scale of 1), E8M0 exponents of about 2^0.
	writeModel(b, dir, config, specs, func(t safetensors.TensorInfo, data []byte) {
		for i := range data {
			switch {
			case t.DType == safetensors.BF16:
				data[i] = [2]byte{0x23, 0x3c}[i%2]
			case t.DType == safetensors.F8_E4M3 && t.Shape[1] != 4096:
				data[i] = 0x30
			case t.DType == safetensors.U8 && t.Shape[1] == 128:
				data[i] = byte(0x7a + i%10)
			case t.DType == safetensors.F8_E4M3:
				data[i] = byte(i*7) &^ 0x80 % 0x7e
			default:
				data[i] = byte(i*7 + i>>8)
			}
		}
		switch {
		case t.DType == safetensors.I64:
			binary.LittleEndian.PutUint64(data, rows)
			binary.LittleEndian.PutUint64(data[8:], 4096)
		case t.DType == safetensors.F32:
			binary.LittleEndian.PutUint32(data, 0x3f800000)
		}
	})
	warm(b, path)
	return dir, values
}

// BenchmarkDequantizeCompressed runs checkpoint.Convert with Dequantize
// to BF16, what `safetensors convert --dequantize --dtype BF16` runs, on a
// compressed-tensors model of each format (ctFormats) whose values take
// modelSize() bytes, against the combined ceiling of its output's size
// (readWriteSide), as BenchmarkDequantizeModel does: "x" over both at
// once, "x-sum" over the pass over the file's bytes, "x-write" over the
// writes alone.
func BenchmarkDequantizeCompressed(b *testing.B) {
	for _, f := range ctFormats {
		b.Run(f.name, func(b *testing.B) {
			size := modelSize()
			dir, values := ctModel(b, f, size)
			raceDequantize(b, dir, int64(2*values)) // BF16
		})
	}
}
