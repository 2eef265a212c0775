package plural

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	assert.Equal(t, "0 tensors", Of(0, "tensor"))
	assert.Equal(t, "1 tensor", Of(1, "tensor"))
	assert.Equal(t, "2 tensors", Of(2, "tensor"))
	assert.Equal(t, "1 NaN value", Of(uint64(1), "NaN value"))
	assert.Equal(t, "3 matches", Of(3, "match"))
	assert.Equal(t, "2 indexes", Of(int64(2), "index"))
	assert.Equal(t, "-1 tensors", Of(-1, "tensor"))
	assert.Equal(t, "18446744073709551615 values", Of(uint64(math.MaxUint64), "value"))
}
