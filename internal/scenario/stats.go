// stats.go holds the intervals a comparison's summaries carry: a seeded
// bootstrap of the median (its 95% interval), and a Wilson interval for a
// pass count. The seed is fixed and recorded, so that the same runs give
// the same intervals.

package scenario

import (
	"math"
	"math/rand/v2"
	"slices"
)

// bootstrapSeed seeds every bootstrap; the JSON records it.
const bootstrapSeed = 20261204

// bootstrapRounds is how many resamples an interval is drawn from.
const bootstrapRounds = 2000

// medianCI95 is the 95% interval of the median of vs (sorted or not) by a
// percentile bootstrap with a fixed seed; both ends are the median itself
// for fewer than 2 values.
func medianCI95(vs []float64) [2]float64 {
	if len(vs) < 2 {
		m := 0.0
		if len(vs) == 1 {
			m = vs[0]
		}
		return [2]float64{m, m}
	}
	rng := rand.New(rand.NewPCG(bootstrapSeed, uint64(len(vs))))
	medians := make([]float64, bootstrapRounds)
	sample := make([]float64, len(vs))
	for i := range medians {
		for j := range sample {
			sample[j] = vs[rng.IntN(len(vs))]
		}
		slices.Sort(sample)
		medians[i] = quantile(sample, 0.5)
	}
	slices.Sort(medians)
	return [2]float64{quantile(medians, 0.025), quantile(medians, 0.975)}
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
}

// pairedRatio is the ratio of xs to base, paired by index (a missing
// value is NaN); nil with fewer than 2 pairs or a zero baseline median.
func pairedRatio(xs, base []float64) *ratio {
	var a, b []float64
	for i := range min(len(xs), len(base)) {
		if !math.IsNaN(xs[i]) && !math.IsNaN(base[i]) {
			a, b = append(a, xs[i]), append(b, base[i])
		}
	}
	of := func(a, b []float64) (float64, bool) {
		sa, sb := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
		mb := quantile(sb, 0.5)
		return quantile(sa, 0.5) / mb, mb != 0
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
	ra, rb := make([]float64, len(a)), make([]float64, len(a))
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
	return &ratio{Median: r, CI95: [2]float64{quantile(ratios, 0.025), quantile(ratios, 0.975)}}
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
