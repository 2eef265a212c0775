//go:build !amd64 || purego

package safetensors

// Without assembly, the bulk conversions are the pure-Go loops.
var (
	f16ToF32s       = f16ToF32sGo
	bf16ToF32s      = bf16ToF32sGo
	f32ToF16s       = f32ToF16sGo
	f32ToBF16s      = f32ToBF16sGo
	f16BytesToF32s  = f16BytesToF32sGo
	bf16BytesToF32s = bf16BytesToF32sGo
	f32sToF16Bytes  = f32sToF16BytesGo
	f32sToBF16Bytes = f32sToBF16BytesGo
)
