//go:build !amd64 || purego

package checkpoint

// mxfp4TileFast is the AVX2 kernel's entry (dequant_amd64.go), which
// other architectures and the purego build tag do without.
func mxfp4TileFast(out []byte, size, line int, blocks []byte, bstride int, scales []byte, sstride int, scratch *[512]byte) bool {
	return false
}

// fp8LookupFast is the AVX2 lookup's entry (dequant_amd64.go), which other
// architectures and the purego build tag do without: it writes nothing.
func fp8LookupFast(dst, src []byte, lut *[256]uint32, size int) int { return 0 }
