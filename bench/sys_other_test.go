//go:build !linux

package bench

import (
	"os"
	"testing"
)

// adviseHuge does nothing here: huge pages are asked for on Linux only.
func adviseHuge(b []byte) {}

// dropFileCache does nothing here; the benchmarks that need it run on
// Linux only.
func dropFileCache(f *os.File) {}

// cachedFraction is not measured here; the benchmarks that need it run on
// Linux only.
func cachedFraction(b *testing.B, f *os.File) float64 { return 0 }
