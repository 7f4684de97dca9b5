// stats.go holds the intervals a comparison's summaries carry: a seeded
// bootstrap of the median (its 95% interval) that resamples runs, and a
// Wilson interval for a pass count. The seed is fixed and recorded, so
// that the same runs give the same intervals.
//
// The unit of resampling is the run (a round's run of one agent): with
// --threads a run holds several sessions, which share its agent process
// and its minute of the machine and so are not independent; resampling
// them one by one would give intervals far too narrow. Each bootstrap
// draws runs with replacement and pools their sessions (a clustered
// bootstrap); without --threads a run is one value and this is the plain
// percentile bootstrap. It is kept over order-statistic intervals
// (benchstat's) because those assume independent values, which sessions
// of one run are not, and because the ratio's interval must resample the
// two agents' runs of a round together.

package report

import (
	"math"
	"math/rand/v2"
	"slices"
)

// bootstrapSeed seeds every bootstrap; the JSON records it.
const bootstrapSeed = 20261204

// bootstrapRounds is how many resamples an interval is drawn from.
const bootstrapRounds = 2000

// medianCI95 is the 95% interval of the median of the values of runs (a
// run's values: one, or one per session) by a bootstrap that draws runs
// with replacement, with a fixed seed; both ends are the median itself
// for fewer than 2 runs with values.
func medianCI95(runs [][]float64) [2]float64 {
	runs = slices.DeleteFunc(slices.Clone(runs), func(vs []float64) bool { return len(vs) == 0 })
	if len(runs) < 2 {
		m := 0.0
		if len(runs) == 1 {
			m = median(runs[0])
		}
		return [2]float64{m, m}
	}
	rng := rand.New(rand.NewPCG(bootstrapSeed, uint64(len(runs))))
	medians := make([]float64, bootstrapRounds)
	var sample []float64
	for i := range medians {
		sample = sample[:0]
		for range runs {
			sample = append(sample, runs[rng.IntN(len(runs))]...)
		}
		medians[i] = median(sample)
	}
	slices.Sort(medians)
	return [2]float64{quantile(medians, 0.025), quantile(medians, 0.975)}
}

// median is the median of vs, which it sorts.
func median(vs []float64) float64 {
	slices.Sort(vs)
	return quantile(vs, 0.5)
}

// meanSD is the mean and sample standard deviation of vs.
func meanSD(vs []float64) (mean, sd float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	for _, v := range vs {
		mean += v
	}
	mean /= float64(len(vs))
	if len(vs) < 2 {
		return mean, 0
	}
	for _, v := range vs {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(vs)-1))
}

// wilson95 is the 95% Wilson score interval of a pass rate: passed of n.
func wilson95(passed, n int) [2]float64 {
	if n == 0 {
		return [2]float64{0, 1}
	}
	const z = 1.959964
	p, fn := float64(passed)/float64(n), float64(n)
	centre := (p + z*z/(2*fn)) / (1 + z*z/fn)
	half := z / (1 + z*z/fn) * math.Sqrt(p*(1-p)/fn+z*z/(4*fn*fn))
	return [2]float64{max(0, centre-half), min(1, centre+half)}
}

// ratio is a figure's ratio to the baseline agent's: the ratio of their
// medians, over the rounds both gave it, and its 95% interval from a
// paired bootstrap over those rounds (the runs of a round ran one after
// another, so a slower minute of the machine falls on both).
type ratio struct {
	Median float64    `json:"median"`
	CI95   [2]float64 `json:"ci95"`
	Rounds int        `json:"rounds"` // the rounds both agents gave the figure in
}

// pairedRatio is the ratio of the median of xs's values to that of base's,
// both by round (a round's values: one, or one per session; none where
// the run gave none), over the rounds both gave values in; its interval
// draws those rounds with replacement, each side's values pooled. nil with
// fewer than 2 such rounds or a zero baseline median.
func pairedRatio(xs, base [][]float64) *ratio {
	var a, b [][]float64
	for i := range min(len(xs), len(base)) {
		if len(xs[i]) > 0 && len(base[i]) > 0 {
			a, b = append(a, xs[i]), append(b, base[i])
		}
	}
	of := func(a, b [][]float64) (float64, bool) {
		mb := median(slices.Concat(b...))
		return median(slices.Concat(a...)) / mb, mb != 0
	}
	if len(a) < 2 {
		return nil
	}
	r, ok := of(a, b)
	if !ok {
		return nil
	}
	rng := rand.New(rand.NewPCG(bootstrapSeed, uint64(len(a))))
	ratios := make([]float64, 0, bootstrapRounds)
	ra, rb := make([][]float64, len(a)), make([][]float64, len(a))
	for range bootstrapRounds {
		for j := range ra {
			k := rng.IntN(len(a))
			ra[j], rb[j] = a[k], b[k]
		}
		if v, ok := of(ra, rb); ok {
			ratios = append(ratios, v)
		}
	}
	slices.Sort(ratios)
	return &ratio{Median: r, CI95: [2]float64{quantile(ratios, 0.025), quantile(ratios, 0.975)}, Rounds: len(a)}
}

// outliers are the indices (from 1) of the values of vs (in run order,
// NaN for none) outside three interquartile ranges of the quartiles.
func outliers(vs []float64) []int {
	var known []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			known = append(known, v)
		}
	}
	if len(known) < 5 {
		return nil
	}
	slices.Sort(known)
	q1, q3 := quantile(known, 0.25), quantile(known, 0.75)
	var out []int
	for i, v := range vs {
		if !math.IsNaN(v) && (v < q1-3*(q3-q1) || v > q3+3*(q3-q1)) {
			out = append(out, i+1)
		}
	}
	return out
}
