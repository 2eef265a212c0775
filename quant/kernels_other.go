//go:build !amd64 || purego

package quant

// useAVX2 is false where the AVX2 loops are not built.
const useAVX2 = false

// maxAbsBits is rowMaxAbs's loop: the largest float32 bits of x, sign
// cleared.
func maxAbsBits(x []float32) uint32 { return maxAbsBitsGo(x) }

// quantF32Div returns 0: without AVX2 the pure-Go loop quantizes the row.
func quantF32Div(q []byte, x []float32, scale float32) int { return 0 }

// quantRoundDiv returns 0: without AVX2 the pure-Go loops quantize the
// row.
func quantRoundDiv(q []byte, x []float32, scale float32, shift uint32) int { return 0 }

// roundAway is roundAwayRow.
func roundAway(q []int8, x []float32, factor float32) { roundAwayRow(q, x, factor) }
