//go:build !amd64

package bench

// narrowCeilings has no assembly ceiling to give here.
func narrowCeilings() []func(dst []uint16, src []float32) { return nil }
