//go:build !amd64 || purego

package checkpoint

// useDequantAVX2 is false: the pure-Go loops do all (tests compare them
// with the AVX2 kernels where these run).
var useDequantAVX2 = false

// mxfp4TileFast is the AVX2 kernel's entry (dequant_amd64.go), which
// other architectures and the purego build tag do without.
func mxfp4TileFast(out []byte, size, line int, blocks []byte, bstride int, scales []byte, sstride int, scratch *[512]byte) bool {
	return false
}

// fp8LookupFast is the AVX2 lookup's entry (dequant_amd64.go), which other
// architectures and the purego build tag do without: it writes nothing.
func fp8LookupFast(dst, src []byte, lut *[256]uint32, size int) int { return 0 }

// mxLookupFast, mx6LookupFast, nibblesFast, nibbleGroupsFast and
// bf16TableFast are the AVX2 kernels' entries (dequant_amd64.go), which
// other architectures and the purego build tag do without: they do
// nothing.
func mxLookupFast(dst, src, scales []byte, tabs []uint32, size int) bool { return false }

func mx6LookupFast(dst, src, scales []byte, tabs []uint32, size int) bool { return false }

func nibblesFast(dst, src []byte, lut *[16]uint32, size int) int { return 0 }

func bf16TableFast(tab []uint32, codes []float32, s, z float32, shift uint) bool { return false }

func nibbleGroupsFast(dst, src, scales []byte, group uint64, luts *[256 * 64]byte, size int) int {
	return 0
}
