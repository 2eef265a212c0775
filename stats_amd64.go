//go:build amd64 && !purego

package safetensors

import "unsafe"

// f32MomentsAVX2 adds the n float32 values at v (n a multiple of 8), less
// k, and their squares to the lanes at l, four values at a time in the
// lanes of a vector, as momentsGo adds them one lane at a time, and keeps
// the least and greatest of them in the eight lanes of r[0] and r[1].
//
//go:noescape
func f32MomentsAVX2(v unsafe.Pointer, n int, k float64, l *lanes, r *[2][8]float32)

// f32Moments is momentsGo for float32 values, through f32MomentsAVX2 where
// the assembly is in use (useAsm).
func f32Moments(l *lanes, v []float32, k float64, lo, hi float32) (float32, float32) {
	n := len(v) &^ 7
	if !useAsm || n == 0 {
		return momentsGo(l, v, k, lo, hi)
	}
	var r [2][8]float32
	for i := range 8 {
		r[0][i], r[1][i] = lo, hi
	}
	f32MomentsAVX2(unsafe.Pointer(&v[0]), n, k, l, &r)
	for i := range 8 {
		lo, hi = extend(lo, hi, r[0][i])
		lo, hi = extend(lo, hi, r[1][i])
	}
	// The rest starts at a multiple of 8: in lane 0.
	return momentsGo(l, v[n:], k, lo, hi)
}
