// stats_test.go checks the comparison's intervals.

package report

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify the bootstrap interval of a median: the same every time (seeded),
// around the median, a point for one value; and mean and sd.
func TestMedianCI95(t *testing.T) {
	vs := ones(10, 11, 12, 13, 14, 15, 16, 17, 18, 97)
	ci := medianCI95(vs)
	assert.Equal(t, ci, medianCI95(vs), "seeded: repeatable")
	assert.LessOrEqual(t, ci[0], 14.5)
	assert.GreaterOrEqual(t, ci[1], 14.5)
	assert.Less(t, ci[1], 97.0, "one outlier does not carry the median's interval")
	assert.Equal(t, [2]float64{7, 7}, medianCI95(ones(7)))
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

// Verify the ratio to a baseline: paired by round, seeded, and nil where
// it cannot be said; and the outlier flag.
func TestPairedRatioAndOutliers(t *testing.T) {
	base := []float64{10, 11, 10, 12, 11}
	twice := []float64{20, 22, 20, 24, 22}
	r := pairedRatio(ones(twice...), ones(base...))
	require.NotNil(t, r)
	assert.InDelta(t, 2.0, r.Median, 1e-9)
	assert.InDelta(t, 2.0, r.CI95[0], 0.1)
	assert.InDelta(t, 2.0, r.CI95[1], 0.1)
	assert.Equal(t, 5, r.Rounds)
	assert.Equal(t, r, pairedRatio(ones(twice...), ones(base...)), "seeded")
	assert.Nil(t, pairedRatio(ones(1), ones(1)), "one pair says nothing")
	assert.Nil(t, pairedRatio(ones(1, 2), ones(0, 0)), "a zero baseline")
	assert.InDelta(t, 2.0, pairedRatio([][]float64{{20}, nil, {22}}, ones(10, 5, 11)).Median, 1e-9, "a round one side lacks is left out")
	assert.Equal(t, []int{6}, outliers([]float64{6, 6.5, 7, 6.2, 6.8, 97}))
	assert.Nil(t, outliers([]float64{1, 2, 3}), "too few runs to say")
}

// Verify that a ratio is what report.md says it is: the ratio of the two
// medians (here 30 / 10 = 3), not the median of the per-round ratios
// (here 1.5).
func TestPairedRatio_isTheRatioOfMedians(t *testing.T) {
	xs := []float64{15, 30, 60}
	base := []float64{10, 20, 5} // per round: 1.5, 1.5, 12
	r := pairedRatio(ones(xs...), ones(base...))
	require.NotNil(t, r)
	assert.InDelta(t, 3.0, r.Median, 1e-9)
	assert.Contains(t, figureDefinitions, "a ratio is the ratio of the median to the baseline agent's median", "report.md says so")
}

// Verify that a figure a run did not give is missing, never 0: a turn with
// no update has no first update, and a prompt answered with an error has
// no answer time.
func TestFigures_missingIsMissing(t *testing.T) {
	fs := figuresOf(1)
	get := func(key string, r Run) (float64, bool) {
		for _, f := range fs {
			if f.Key == key {
				return f.of(r)
			}
		}
		t.Fatalf("no figure %s", key)
		return 0, false
	}
	quiet := Run{Turns: []Turn{{FirstOutput: -1, Answer: 5 * time.Millisecond}}}
	_, ok := get("first_output_ms", quiet)
	assert.False(t, ok, "a turn with no update")
	v, ok := get("answer_ms", quiet)
	assert.True(t, ok)
	assert.InDelta(t, 5.0, v, 1e-9)
	failed := Run{Turns: []Turn{{FirstOutput: time.Millisecond, Answer: 2 * time.Millisecond, Failed: true}}}
	_, ok = get("answer_ms", failed)
	assert.False(t, ok, "an error answer is no answer time")
}

// ones is runs of one value each: a comparison without --threads.
func ones(vs ...float64) [][]float64 {
	runs := make([][]float64, len(vs))
	for i, v := range vs {
		runs[i] = []float64{v}
	}
	return runs
}

// Verify that under --threads the interval resamples runs, not sessions:
// ten runs of five sessions each, whose sessions agree within a run and
// whose runs differ (a machine's slower minute, the agent's process), give
// an interval as wide as the runs' spread; taken as 50 independent
// sessions they would give one far narrower. n counts both.
func TestMedianCI95_clusteredByRun(t *testing.T) {
	var runs [][]float64
	var flat [][]float64
	for k := range 10 {
		base := 1000 + 400*float64(k%5) // runs differ by up to 1,600 ms
		var run []float64
		for s := range 5 {
			run = append(run, base+float64(s)) // sessions within a run agree
			flat = append(flat, []float64{base + float64(s)})
		}
		runs = append(runs, run)
	}
	clustered, naive := medianCI95(runs), medianCI95(flat)
	assert.Greater(t, clustered[1]-clustered[0], 1.5*(naive[1]-naive[0]), "runs resampled: %v; sessions as if independent: %v", clustered, naive)

	f := figure{Key: "answer_ms", of: func(r Run) (float64, bool) { return float64(r.Initialize), true }}
	var results []Run
	for k := range 10 {
		for s := range 5 {
			results = append(results, Run{Round: k + 1, Session: s + 1, Initialize: time.Duration(1000 + 400*(k%5) + s)})
		}
	}
	sum := summarize(f, results)
	assert.Equal(t, 50, sum.N, "values: sessions")
	assert.Equal(t, 10, sum.Runs, "runs")
	assert.Equal(t, clustered, sum.CI95, "the summary's interval resamples runs")
}
