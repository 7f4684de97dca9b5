// chart.go draws a comparison's charts as SVG: a figure per chart, per
// agent a dot per run beside the median and its interval, on a log axis
// where the values span more than 20×; and a chart of every agent's ratios
// to the baseline with their intervals. Every chart says its n.

package report

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// series is one agent's values of one figure, in the unit shown.
type series struct {
	name string
	sum  summary   // median and interval in the unit shown
	runs []float64 // each run's (or session's) value (NaN: none)
}

// axis maps values onto a chart's height: linear from 0, or logarithmic
// between two powers of ten.
type axis struct {
	log    bool
	lo, hi float64
	ticks  []float64
}

// newAxis is an axis for values: logarithmic when asked, or when the
// largest is more than 20× the smallest positive one.
func newAxis(values []float64, log bool) axis {
	lo, hi := math.Inf(1), 0.0
	for _, v := range values {
		if v > 0 && !math.IsNaN(v) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if hi == 0 {
		return axis{lo: 0, hi: 1, ticks: []float64{0, 1}}
	}
	if log || hi/lo > 20 {
		a := axis{log: true, lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi)))}
		if a.hi == a.lo {
			a.hi *= 10
		}
		for t := a.lo; t <= a.hi*1.0001; t *= 10 {
			a.ticks = append(a.ticks, t)
		}
		return a
	}
	step := niceStep(hi / 5)
	a := axis{hi: math.Ceil(hi/step) * step}
	for t := 0.0; t <= a.hi+step/2; t += step {
		a.ticks = append(a.ticks, t)
	}
	return a
}

// niceStep is the step of 1, 2 or 5 times a power of ten nearest above x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// at is where v falls on the axis, from 0 (its bottom) to 1 (its top).
func (a axis) at(v float64) float64 {
	if a.log {
		if v <= 0 {
			return 0
		}
		return min(1, max(0, math.Log10(v/a.lo)/math.Log10(a.hi/a.lo)))
	}
	return min(1, max(0, (v-a.lo)/(a.hi-a.lo)))
}

// dotChart is one figure's chart for scenario: per agent, a dot per run
// (or session), the median's 95% interval as a line with caps beside them
// (none on a constant figure) and the median as a bar across it, its value
// written to its right, within the agent's own column so that no two
// labels meet; n under each agent's name (runs, and sessions with
// --threads); the axis logarithmic where the values span more than 20×.
// No bars from a floor: on a log axis a bar's length is the floor's.
func dotChart(title, scenario string, agents []series) string {
	const width, height, top, bottom, left = 560, 300, 52, 70, 64
	var all []float64
	for _, s := range agents {
		if s.sum.N > 0 {
			all = append(all, s.sum.Median, s.sum.CI95[0], s.sum.CI95[1])
		}
		all = append(all, s.runs...)
	}
	ax := newAxis(all, false)
	plot := float64(height - top - bottom)
	y := func(v float64) float64 { return float64(height-bottom) - ax.at(v)*plot }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<text x="%d" y="18" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&sb, `<text x="%d" y="36" font-size="11" fill="#555">%s</text>`+"\n", left, html.EscapeString(scenario))
	for _, t := range ax.ticks {
		fmt.Fprintf(&sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(t), width-10, y(t))
		fmt.Fprintf(&sb, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y(t)+4, html.EscapeString(tick(t)))
	}
	fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, height-bottom)
	slot := float64(width-left-10) / float64(max(1, len(agents)))
	for i, s := range agents {
		x0 := float64(left) + slot*float64(i)
		dots, whisker := x0+slot*0.3, x0+slot*0.5 // the runs left of the interval, its label right of it
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+slot/2, height-bottom+16, html.EscapeString(s.name))
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#555">%s</text>`+"\n", x0+slot/2, height-bottom+30, html.EscapeString(s.sum.n()))
		if s.sum.N == 0 {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">no value</text>`+"\n", x0+slot/2, height-bottom-4)
			continue
		}
		for k, v := range s.runs {
			if !math.IsNaN(v) {
				dx := (float64(k%5) - 2) * slot / 40 // spread apart, the same every time
				fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="#7a9cc6" fill-opacity="0.8"/>`+"\n", dots+dx, y(v))
			}
		}
		if lo, hi := s.sum.CI95[0], s.sum.CI95[1]; hi > lo {
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>`+"\n", whisker, y(lo), whisker, y(hi))
			for _, v := range []float64{lo, hi} {
				fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", whisker-4, y(v), whisker+4, y(v))
			}
		}
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="14" height="3" fill="#1f3f66"/>`+"\n", whisker-7, y(s.sum.Median)-1.5)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", whisker+9, y(s.sum.Median)+4, html.EscapeString(tick(s.sum.Median)))
	}
	scale := "linear axis"
	if ax.log {
		scale = "log axis"
	}
	fmt.Fprintf(&sb, `<text x="%d" y="%d" font-size="10" fill="#555">dots: the runs; bar: the median, its value beside it; line: its 95%% interval; %s</text>`+"\n", left, height-8, scale)
	sb.WriteString("</svg>\n")
	return sb.String()
}

// n is how many values a summary is over, as a chart says it: "n = 10
// runs", or with sessions "n = 10 runs, 50 sessions".
func (s summary) n() string {
	if s.Runs > 0 && s.N != s.Runs {
		return fmt.Sprintf("n = %d runs, %d sessions", s.Runs, s.N)
	}
	return fmt.Sprintf("n = %d runs", s.N)
}

// tick is a value as an axis label: short, without trailing zeros.
func tick(v float64) string {
	switch {
	case v >= 1e6:
		return trimFloat(v/1e6) + "M"
	case v >= 1e4:
		return trimFloat(v/1e3) + "k"
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return trimFloat(v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

// ratioRow is one agent's ratio to the baseline of one figure.
type ratioRow struct {
	figure, agent string
	r             *ratio
}

// ratioChart is every agent's ratio to the baseline, a row per figure and
// agent: a dot at the ratio, a line over its 95% interval, on a log axis
// with 1 (the baseline) marked.
func ratioChart(scenario, baseline string, rows []ratioRow) string {
	const width, left, right, top, rowH = 640, 300, 20, 56, 18
	height := top + rowH*len(rows) + 40
	var all []float64
	for _, r := range rows {
		all = append(all, r.r.Median, r.r.CI95[0], r.r.CI95[1])
	}
	all = append(all, 1)
	ax := newAxis(all, true) // a ratio reads on a log axis
	x := func(v float64) float64 { return left + ax.at(v)*float64(width-left-right) }
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<text x="10" y="18" font-size="14">%s</text>`+"\n", html.EscapeString("ratio to "+baseline+" (below 1: less than "+baseline+")"))
	fmt.Fprintf(&sb, `<text x="10" y="36" font-size="11" fill="#555">%s · dot: the ratio of the medians; line: its 95%% interval; n: the rounds paired; log axis</text>`+"\n", html.EscapeString(scenario))
	bottom := top + rowH*len(rows)
	for _, t := range ax.ticks {
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(t), top-6, x(t), bottom)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%s×</text>`+"\n", x(t), bottom+16, html.EscapeString(tick(t)))
	}
	fmt.Fprintf(&sb, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", x(1), top-6, x(1), bottom)
	for i, r := range rows {
		cy := float64(top + rowH*i + rowH/2)
		fmt.Fprintf(&sb, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, cy+4, html.EscapeString(fmt.Sprintf("%s: %s (n = %d)", r.agent, r.figure, r.r.Rounds)))
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1f3f66"/>`+"\n", x(r.r.CI95[0]), cy, x(r.r.CI95[1]), cy)
		fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#1f3f66"/>`+"\n", x(r.r.Median), cy)
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
