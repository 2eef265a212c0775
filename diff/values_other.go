//go:build !amd64 || purego

package diff

// compareFloat32s is compareValues for float32 values on both sides.
func compareFloat32s(a, b []float32, tol tolerance, t *tally) {
	compareValues(a, b, tol, t)
}
