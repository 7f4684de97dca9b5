// stats_test.go checks the comparison's intervals.

package scenario

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify the bootstrap interval of a median: the same every time (seeded),
// around the median, a point for one value; and mean and sd.
func TestMedianCI95(t *testing.T) {
	vs := []float64{10, 11, 12, 13, 14, 15, 16, 17, 18, 97}
	ci := medianCI95(vs)
	assert.Equal(t, ci, medianCI95(vs), "seeded: repeatable")
	assert.LessOrEqual(t, ci[0], 14.5)
	assert.GreaterOrEqual(t, ci[1], 14.5)
	assert.Less(t, ci[1], 97.0, "one outlier does not carry the median's interval")
	assert.Equal(t, [2]float64{7, 7}, medianCI95([]float64{7}))
	mean, sd := meanSD([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	assert.Equal(t, 5.0, mean)
	assert.InDelta(t, 2.138, sd, 0.001)
}

// Verify the Wilson interval against its known values.
func TestWilson95(t *testing.T) {
	for _, c := range []struct {
		passed, n int
		lo, hi    float64
	}{{10, 10, 0.722, 1}, {0, 10, 0, 0.278}, {5, 10, 0.237, 0.763}, {0, 0, 0, 1}} {
		ci := wilson95(c.passed, c.n)
		assert.InDelta(t, c.lo, ci[0], 0.001, "%d/%d", c.passed, c.n)
		assert.InDelta(t, c.hi, ci[1], 0.001, "%d/%d", c.passed, c.n)
	}
}
