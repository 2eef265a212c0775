//go:build !slow

package safetensors

// slowTests is false without the build tag slow: tests that take long run
// at a smaller size, or not at all.
const slowTests = false
