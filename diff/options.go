package diff

import (
	"fmt"
	"math"

	"github.com/safetensors-go/safetensors"
)

// An Option changes how a comparison is made. Pass options to [Compare]
// and [Paths].
type Option func(*settings) error

// settings holds the settings of Options.
type settings struct {
	workers    int // 0: GOMAXPROCS
	atol, rtol float64
	equalNaN   bool
	progress   func(done, total uint64)
}

func newSettings(opts []Option) (*settings, error) {
	c := new(settings)
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Workers returns an option that sets how many goroutines compare tensors
// at once, each a piece of a tensor at a time: n must be 1 or more
// (GOMAXPROCS by default); otherwise Compare and Paths return an error
// wrapping safetensors.ErrInvalidOption.
func Workers(n int) Option {
	return func(c *settings) error {
		if n < 1 {
			return fmt.Errorf("%w: Workers(%d): want 1 or more", safetensors.ErrInvalidOption, n)
		}
		c.workers = n
		return nil
	}
}

// Tolerance returns an option that makes values that differ by little
// count as close, as numpy.allclose(a, b, rtol, atol) does, B being the
// reference (numpy's second argument): a value a of A and the value b at
// the same place in B are close when
//
//	|a - b| <= atol + rtol*|b|
//
// computed in float64, or when a == b (so infinities of the same sign are
// close, and -0 and 0 are equal); a NaN is close to nothing, not even a NaN,
// unless [EqualNaN] is given, and an infinity only to itself. atol and rtol
// must be finite and 0 or more, or Compare and Paths return an error
// wrapping safetensors.ErrInvalidOption. Without the option both are 0:
// values must be equal.
func Tolerance(atol, rtol float64) Option {
	return func(c *settings) error {
		for _, v := range []float64{atol, rtol} {
			if !(v >= 0) || math.IsInf(v, 1) {
				return fmt.Errorf("%w: Tolerance(%v, %v): want finite values of 0 or more", safetensors.ErrInvalidOption, atol, rtol)
			}
		}
		c.atol, c.rtol = atol, rtol
		return nil
	}
}

// EqualNaN returns an option that makes a NaN equal to a NaN, whatever
// their bits, as numpy.allclose(..., equal_nan=True) does. Without it, a
// NaN in A is not close to the NaN at the same place in B, as
// numpy.allclose's default has it (a tensor whose bytes are identical is
// Identical all the same).
func EqualNaN() Option {
	return func(c *settings) error {
		c.equalNaN = true
		return nil
	}
}

// Progress returns an option that makes Compare and Paths call f as they
// go, with the bytes of tensor data of both sides dealt with so far and in
// all (the tensors in both whose shapes agree, read from A and from B), as
// checkpoint.Progress reports a conversion: once a piece of a tensor is
// compared, from one goroutine at a time, done increasing from call to
// call and equal to total at the last. (Without EqualNaN, the pieces of A
// whose bytes are the same in B are read again, uncounted, for their
// NaNs, in a tensor whose other pieces differ.) A slow f slows the
// comparison.
func Progress(f func(done, total uint64)) Option {
	return func(c *settings) error {
		c.progress = f
		return nil
	}
}
