// report_test.go checks what a comparison's reader sees: the table's
// intervals and ratios, the charts, the per-turn counts, the folded
// differences, the token estimate and the versions found.

package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runOf is a run that answered initialize after init and its one turn with
// the given kinds sent.
func runOf(init time.Duration, sent map[string]int) Result {
	return Result{Initialize: init, NewSession: -1,
		Turns: []Turn{{FirstOutput: time.Millisecond, Answer: 2 * time.Millisecond, Sent: sent}}}
}

// Verify the table: a cell is the median and its 95% interval, each
// agent but the baseline has a ratio column (paired by round), memory is
// shown in MiB.
func TestFiguresTable_intervalsAndRatios(t *testing.T) {
	a := []Result{runOf(10*time.Millisecond, nil), runOf(11*time.Millisecond, nil), runOf(12*time.Millisecond, nil)}
	b := []Result{runOf(20*time.Millisecond, nil), runOf(22*time.Millisecond, nil), runOf(24*time.Millisecond, nil)}
	for i := range a {
		a[i].Stats.PeakPSS, b[i].Stats.PeakPSS = 10<<20, 5<<20
	}
	table := figuresTable("", []string{"a", "b"}, [][]Result{a, b}, 0, 1)
	assert.Contains(t, table, "| figure | a | b | b ÷ a |")
	assert.Contains(t, table, "| spawn → initialize answered (ms) | 11.0 [10.0–12.0] | 22.0 [20.0–24.0] | 2.00× |", "every round's ratio is 2")
	assert.Contains(t, table, "| peak PSS of the tree (MiB) | 10.0 | 5.0 | 0.50× |")
	assert.Contains(t, table, "ratios to a paired by round")

	// The baseline named second: the ratio column follows the first.
	table = figuresTable("", []string{"a", "b"}, [][]Result{a, b}, 1, 1)
	assert.Contains(t, table, "| figure | a | a ÷ b | b |")
	assert.Contains(t, table, "| 0.50× |")
}

// Verify a chart: a log axis said when the values span more than 20×, n
// and the scenario named, a dot per run, no whisker on a constant figure.
func TestBarChart(t *testing.T) {
	wide := barChart("start (ms)", "coding.txtar", []barSeries{
		{name: "fast", sum: summary{N: 3, Median: 2, CI95: [2]float64{1.5, 2.5}}, runs: []float64{1.5, 2, 2.5}},
		{name: "slow", sum: summary{N: 3, Median: 400, CI95: [2]float64{380, 420}}, runs: []float64{380, 400, 420}},
	})
	assert.Contains(t, wide, "log axis")
	assert.Contains(t, wide, "coding.txtar · n = 3 runs per agent")
	assert.Equal(t, 6, strings.Count(wide, "<circle"), "a dot per run")
	assert.Contains(t, wide, `>1000</text>`, "a tick at each power of ten")

	flat := barChart("processes", "coding.txtar", []barSeries{
		{name: "a", sum: summary{N: 3, Median: 1, CI95: [2]float64{1, 1}}, runs: []float64{1, 1, 1}},
		{name: "b", sum: summary{N: 3, Median: 2, CI95: [2]float64{2, 2}}, runs: []float64{2, 2, 2}},
	})
	assert.Contains(t, flat, "linear axis")
	assert.Equal(t, 6, strings.Count(flat, "<circle"))
	assert.Equal(t, 0, strings.Count(flat, `x1="`)-strings.Count(flat, `stroke="#ddd"`)-2, "no whisker: only gridlines and the two axes")

	ratios := ratioChart("coding.txtar", "a", []ratioRow{{figure: "CPU (ms)", agent: "b", r: &ratio{Median: 3, CI95: [2]float64{2, 4}}}})
	assert.Contains(t, ratios, "ratio to a")
	assert.Contains(t, ratios, "b: CPU (ms)")
	assert.Contains(t, ratios, ">1×</text>")
}

// Verify the per-turn counts of what each agent sent: the median over its
// runs, a kind one agent never sent counted 0 for it.
func TestSentTable(t *testing.T) {
	a := []Result{
		runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 3, "request session/request_permission": 1}),
		runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 5, "request session/request_permission": 1}),
	}
	b := []Result{runOf(time.Millisecond, map[string]int{"update agent_message_chunk": 1})}
	table := sentTable([]string{"a", "b"}, [][]Result{a, b})
	assert.Contains(t, table, "| turn | message | a | b |")
	assert.Contains(t, table, "| 1 | update agent_message_chunk | 4 | 1 |")
	assert.Contains(t, table, "| 1 | request session/request_permission | 1 | 0 |")
}

// Verify the kinds a turn counts.
func TestSentKind(t *testing.T) {
	m := func(s string) *string { return &s }
	assert.Equal(t, "update tool_call", sentKind(m("session/update"), false, "tool_call"))
	assert.Equal(t, "request fs/read_text_file", sentKind(m("fs/read_text_file"), true, ""))
	assert.Equal(t, "notification $/cancel_request", sentKind(m("$/cancel_request"), false, ""))
	assert.Equal(t, "", sentKind(nil, true, ""), "a response is not counted")
}

// Verify that a pair whose differences repeat an earlier pair's is
// folded into it, and a pair that differs otherwise is not.
func TestCompareAll_foldsRepeatedPairs(t *testing.T) {
	line := func(text string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`)
	}
	res := func(text string) Result { return Result{Received: [][]byte{line(text)}} }
	names := []string{"acpbridge", "fanout", "codex", "other"}
	diffs := compareAll(names, []Result{res("hi"), res("hi"), res("hello"), res("bye")}, 0, 0)
	byPair := map[string]pairDifferences{}
	for _, d := range diffs {
		byPair[d.A+"/"+d.B] = d
	}
	assert.Empty(t, byPair["acpbridge/fanout"].Lines)
	assert.Empty(t, byPair["acpbridge/fanout"].SameAs)
	assert.NotEmpty(t, byPair["acpbridge/codex"].Lines)
	assert.Equal(t, "acpbridge and codex", byPair["fanout/codex"].SameAs)
	assert.Empty(t, byPair["fanout/codex"].Lines)
	assert.Empty(t, byPair["codex/other"].SameAs, "different values are not folded")
	assert.Contains(t, showDifferences(diffs), "fanout and codex differ as acpbridge and codex do")
}

// Verify what a reader is told of an agent's versions: the name and
// version from its answer to initialize, and the ACP package of a Node
// script that names it (not of a wrapper that happens to lie beside one).
func TestVersions(t *testing.T) {
	assert.Equal(t, "codex-acp 0.16.0", agentInfo([][]byte{
		[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"codex-acp","version":"0.16.0"}}}`)}))
	assert.Equal(t, "", agentInfo([][]byte{[]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)}))

	dir := t.TempDir()
	sdk := filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")
	require.NoError(t, os.MkdirAll(sdk, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sdk, "package.json"), []byte(`{"name":"@agentclientprotocol/sdk","version":"0.9.1"}`), 0o644))
	script := filepath.Join(dir, "dist", "index.js")
	require.NoError(t, os.MkdirAll(filepath.Dir(script), 0o755))
	require.NoError(t, os.WriteFile(script, []byte("import * as acp from \"@agentclientprotocol/sdk\";\n"), 0o644))
	assert.Equal(t, "@agentclientprotocol/sdk 0.9.1", sdkOf(script), "a script that imports it")
	wrapper := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec codex-acp \"$@\"\n"), 0o755))
	assert.Equal(t, "", sdkOf(wrapper), "a wrapper beside the package, which names none, is credited with none")
	assert.Equal(t, "", sdkOf(""))
}
