// Package plural writes counts of things in English: "1 tensor", "2
// tensors".
package plural

import "strconv"

// Of returns n and the noun, in the plural unless n is 1: Of(1, "tensor")
// is "1 tensor", Of(2, "tensor") "2 tensors". The plural is the noun with
// an "s", or with "es" after s, x, z, ch and sh: every noun the module
// counts.
func Of[N ~int | ~int64 | ~uint64](n N, noun string) string {
	s := strconv.FormatInt(int64(n), 10)
	if n > 0 && uint64(n) > 1<<63-1 {
		s = strconv.FormatUint(uint64(n), 10)
	}
	if n == 1 {
		return s + " " + noun
	}
	return s + " " + Noun(noun)
}

// Noun returns the plural of noun.
func Noun(noun string) string {
	for _, end := range []string{"s", "x", "z", "ch", "sh"} {
		if len(noun) >= len(end) && noun[len(noun)-len(end):] == end {
			return noun + "es"
		}
	}
	return noun + "s"
}
