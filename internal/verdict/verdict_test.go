package verdict

import "testing"

func TestIntendedInf(t *testing.T) {
	for _, c := range []struct {
		name            string
		count, nan, inf uint64
		want            bool
	}{
		{"layers.0.feed_forward1.ffw_layer_1.input_max", 1, 0, 1, true},
		{"layers.0.ffw_layer_1.output_min", 4, 0, 4, true},
		{"model.clip", 2, 0, 2, true},
		{"x.max_value", 1, 0, 1, true},
		{"x.input_max", 2, 0, 1, false},      // one infinity among finite values
		{"x.input_max", 2, 1, 1, false},      // a NaN
		{"x.input_max", 1, 0, 0, false},      // finite
		{"x.weight", 1, 0, 1, false},         // not a bound
		{"x.maximum_weight", 1, 0, 1, false}, // "max" only as part of a word
		{"input_max", 0, 0, 0, false},
	} {
		if got := IntendedInf(c.name, c.count, c.nan, c.inf); got != c.want {
			t.Errorf("IntendedInf(%q, %d, %d, %d) = %v, want %v", c.name, c.count, c.nan, c.inf, got, c.want)
		}
	}
}
