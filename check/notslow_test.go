//go:build !slow

package check

// slowTests is set by -tags slow: the exhaustive checks run too.
const slowTests = false
