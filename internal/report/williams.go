// williams.go holds the order agents take turns in a comparison: a
// Williams design, so that each agent runs in each place and follows
// each other agent equally often, and a slower minute of the machine or
// one agent's leftovers fall on all of them alike.

package report

import (
	"fmt"
	"slices"
)

// agentOrder is how the counted runs are ordered, as the JSON says.
const agentOrder = "interleaved: each round runs every agent once, in the order of a Williams design (over n rounds, 2n for an odd n, each agent runs in each place and follows each other agent equally often)"

// RoundOrder is the order agents run in counted round k of n agents: row k
// of a Williams design. Its first row is 0, 1, n-1, 2, n-2, …; row k adds
// k to every place (mod n); for an odd n the rows of every other cycle of
// n rounds are reversed. Over a whole cycle each agent runs in each place
// equally often and follows each other agent equally often, so that no
// agent always inherits the same predecessor's cache, heat or leftovers.
func RoundOrder(k, n int) []int {
	first := make([]int, n)
	lo, hi := 1, n-1
	for p := 1; p < n; p++ {
		if p%2 == 1 {
			first[p], lo = lo, lo+1
		} else {
			first[p], hi = hi, hi-1
		}
	}
	order := make([]int, n)
	for p := range n {
		order[p] = (first[p] + k) % n
	}
	if n%2 == 1 && (k/n)%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// cycle is how many rounds a Williams design of n agents takes to balance.
func cycle(n int) int {
	if n%2 == 1 {
		return 2 * n
	}
	return n
}

func cycleWords(n int) string {
	if n <= 1 {
		return "every round"
	}
	return fmt.Sprintf("each cycle of %d rounds", cycle(n))
}
