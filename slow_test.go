//go:build slow

package safetensors

// slowTests is set by the slow build tag: the sweeps then try every kill
// point and free-space level even under -short.
const slowTests = true
