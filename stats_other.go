//go:build !amd64 || purego

package safetensors

// f32Moments is momentsGo for float32 values; stats_amd64.go has an
// assembly loop.
func f32Moments(l *lanes, v []float32, k float64, lo, hi float32) (float32, float32) {
	return momentsGo(l, v, k, lo, hi)
}
