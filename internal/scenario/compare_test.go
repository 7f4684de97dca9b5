// compare_test.go tests what comparing agents rests on: --agent's command
// lines, answering permissions by kind, and the differences between runs.

package scenario

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAgent_quotedAsAShellWould(t *testing.T) {
	a, err := parseAgent(`other=node "/opt/my agents/agent.js" --flag 'two words' $FLAGS`, "/bin/acpbridge")
	require.NoError(t, err)
	assert.Equal(t, "other", a.name)
	assert.Equal(t, []string{"node", "/opt/my agents/agent.js", "--flag", "two words", "$FLAGS"}, a.command)
	assert.False(t, a.acpbridge)
	assert.Equal(t, []string{"--flag", "two words", "-x", "--y"}, withFlags(a.command[2:], []string{"-x", "--y"}), "$FLAGS stands for the file's flags")
	assert.Equal(t, []string{"a", "-x"}, withFlags([]string{"a"}, []string{"-x"}), "without $FLAGS, after the words")

	a, err = parseAgent(`/usr/local/bin/acpbridge --fanout`, "/bin/acpbridge")
	require.NoError(t, err)
	assert.Equal(t, "acpbridge", a.name)
	assert.True(t, a.acpbridge, "acpbridge takes the file's flags")

	_, err = parseAgent(`node "unterminated`, "")
	assert.Error(t, err)
	_, err = parseAgent(`  `, "")
	assert.ErrorContains(t, err, "names no command")
	assert.Equal(t, []string{"a", "a#2", "b"}, uniqueNames([]agentSpec{{name: "a"}, {name: "a"}, {name: "b"}}))
}

func TestAgentFlags(t *testing.T) {
	sc, err := Parse("s.txtar", []byte("-- flags --\n--model replay:$DIR/m.jsonl\n-- flags/other --\n--verbose\n-- transcript --\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"--model", "replay:$DIR/m.jsonl"}, agentSpec{name: "acpbridge", acpbridge: true}.flags(sc))
	assert.Equal(t, []string{"--verbose"}, agentSpec{name: "other"}.flags(sc), "its own section")
	assert.Nil(t, agentSpec{name: "third", command: []string{"x"}}.flags(sc), "another agent gets none unless asked")
	assert.Equal(t, sc.Flags, agentSpec{name: "third", command: []string{"x", "$FLAGS"}}.flags(sc))
}

func TestByKind(t *testing.T) {
	r := &run{options: map[string][]permissionOption{"7": {{OptionID: "yes", Kind: "allow_once"}, {OptionID: "no", Kind: "reject_once"}}}}
	out, err := r.byKind(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionKind":"reject_once"}}}`)
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"no"}}}`, out)
	_, err = r.byKind(`{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionKind":"allow_always"}}}`)
	assert.ErrorContains(t, err, `offers no option of kind "allow_always"; it offers yes (kind allow_once), no (kind reject_once)`)
	_, err = r.byKind(`{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"selected","optionKind":"allow_once"}}}`)
	assert.ErrorContains(t, err, "sent no permission request with id 8")
	same := `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"yes"}}}`
	out, err = r.byKind(same)
	require.NoError(t, err)
	assert.Equal(t, same, out, "a line with an optionId is sent as it is")
}

func TestDifferences_alignedAndChunksJoined(t *testing.T) {
	env := Env{Dir: "/d", Cwd: "/d/cwd", State: "/d/state"}
	a := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s-1"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel"}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"lo"}}}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"session_info_update","title":"t"}}}`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`),
	}
	b := [][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"other-9"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"other-9","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello"}}}}`),
		[]byte(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`),
	}
	diffs := differences("A", view(a, env), "B", view(b, env), 20)
	assert.Equal(t, []string{
		`A's line 3: only A sent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"session_info_update","title":"t"}}}`,
		`line 4 / 3 (the response 2) at .result.stopReason: "end_turn" / "cancelled"`,
	}, diffs, "session ids as variables, chunks joined, the extra line aligned")
}
