//go:build slow

package safetensors

// slowTests is true with the build tag slow: tests that take long then run
// at their full size.
const slowTests = true
