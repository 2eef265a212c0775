//go:build !slow

package safetensors

// slowTests is set by the slow build tag; see slow_test.go.
const slowTests = false
