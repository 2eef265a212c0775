//go:build slow

package checkpoint

// slowTests is true with the build tag slow: the crash sweep and the
// disk-full sweep then try every kill point and every free-space level.
const slowTests = true
