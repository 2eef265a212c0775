//go:build !slow

package quant

// slowTests is true with the build tag slow: the exhaustive tests then
// cover every scale.
const slowTests = false
