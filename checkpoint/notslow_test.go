//go:build !slow

package checkpoint

// slowTests is false without the build tag slow: the crash sweep and the
// disk-full sweep then try fewer kill points and free-space levels.
const slowTests = false
