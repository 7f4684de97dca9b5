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
