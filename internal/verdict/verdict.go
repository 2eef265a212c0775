// Package verdict holds the rules on a tensor's values that the check
// package and the command's validate --values share, so that they agree on
// every tensor.
package verdict

import "strings"

// IsBound reports whether a tensor's name says it holds a bound: its last
// component is min, max, clip, bound or limit, alone or joined by an
// underscore (Gemma's input_max and output_min).
func IsBound(name string) bool {
	last := strings.ToLower(name[strings.LastIndexByte(name, '.')+1:])
	for _, w := range []string{"min", "max", "clip", "bound", "limit"} {
		if last == w || strings.HasPrefix(last, w+"_") || strings.HasSuffix(last, "_"+w) {
			return true
		}
	}
	return false
}

// IntendedInf reports whether the infinities of a tensor of count values,
// nan of them NaN and inf of them infinite, are set on purpose: the tensor
// is named as a bound and holds nothing but infinities, as the clipping
// bounds of Gemma's clippable linear layers do at initialization (+Inf and
// -Inf: no clipping). One infinity among finite values is not, nor is any
// NaN.
func IntendedInf(name string, count, nan, inf uint64) bool {
	return nan == 0 && inf > 0 && inf == count && IsBound(name)
}
