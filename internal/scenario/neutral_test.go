// neutral_test.go tests the agent-neutral rewrite of a recording.

package scenario

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify the neutral rewrite: the permission answered by kind, the tool
// call and the agent's request pinned by kind and method, the wording and
// capabilities free, updates after the last pinned line kept by kind.
func TestNeutralTranscript(t *testing.T) {
	in := `> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
< {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentInfo":{"name":"acpbridge"}}}
> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}
< {"jsonrpc":"2.0","id":1,"result":{"sessionId":"$SESSION","modes":{}}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}
> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"write it"}]}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Writing."}}}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"tool_call","toolCallId":"$CALL_1","title":"Write greet.sh","kind":"edit","status":"pending"}}}
< {"jsonrpc":"2.0","id":"$REQ_1","method":"session/request_permission","params":{"sessionId":"$SESSION","toolCall":{"toolCallId":"$CALL_1"},"options":[{"optionId":"allow","kind":"allow_once","name":"Allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}}
> {"jsonrpc":"2.0","id":"$REQ_1","result":{"outcome":{"outcome":"selected","optionId":"allow"}}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"tool_call_update","toolCallId":"$CALL_1","status":"completed"}}}
< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"session_info_update","title":"t"}}}
close
`
	want := `> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":0,"jsonrpc":"2.0","result":"$ANY"}
> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":1,"jsonrpc":"2.0","result":{"$REST":true,"sessionId":"$SESSION"}}
> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"write it"}]}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"jsonrpc":"2.0","method":"session/update","params":{"$REST":true,"sessionId":"$SESSION","update":{"$REST":true,"kind":"edit","sessionUpdate":"tool_call"}}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":"$REQ_1","jsonrpc":"2.0","method":"session/request_permission","params":{"$REST":true,"sessionId":"$SESSION"}}
> {"id":"$REQ_1","jsonrpc":"2.0","result":{"outcome":{"optionKind":"allow_once","outcome":"selected"}}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":2,"jsonrpc":"2.0","result":{"$REST":true,"stopReason":"end_turn"}}
< {"jsonrpc":"2.0","method":"session/update","params":{"$REST":true,"sessionId":"$SESSION","update":{"$REST":true,"sessionUpdate":"session_info_update"}}}
close
`
	assert.Equal(t, want, neutralTranscript(in))
}

// Verify that the fixture's entries after a tool call lose their expect
// (the tool's result is each agent's wording) and the others keep theirs.
func TestNeutralFixture(t *testing.T) {
	in := `# recorded
{"expect":"write it","chunks":[{"toolCall":{"id":"w","name":"write_file","input":{}}}]}
{"expect":"Wrote 18 bytes to {cwd}/greet.sh.","chunks":[{"text":"Done."}]}
{"expect":"again","chunks":[{"text":"Hi."}]}
`
	want := `# recorded
{"expect":"write it","chunks":[{"toolCall":{"id":"w","name":"write_file","input":{}}}]}
{"chunks":[{"text":"Done."}]}
{"expect":"again","chunks":[{"text":"Hi."}]}
`
	assert.Equal(t, want, neutralFixture(in))
}

// Verify that requests pipelined in one write go one at a time in a neutral
// transcript (an agent that runs them at once answers in any order), and
// that a notification written during a turn still goes during it.
func TestNeutralTranscript_pipelinedOneAtATime(t *testing.T) {
	in := `> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}
> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD"}}
< {"jsonrpc":"2.0","id":0,"result":{}}
< {"jsonrpc":"2.0","id":1,"result":{"sessionId":"$SESSION"}}
> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[]}}
< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"$SESSION","update":{"sessionUpdate":"agent_message_chunk"}}}
> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"$SESSION"}}
< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}
`
	want := `> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":0,"jsonrpc":"2.0","result":"$ANY"}
> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD"}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":1,"jsonrpc":"2.0","result":{"$REST":true,"sessionId":"$SESSION"}}
> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[]}}
> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"$SESSION"}}
<* {"jsonrpc":"2.0","method":"session/update","params":"$ANY"}
< {"id":2,"jsonrpc":"2.0","result":{"$REST":true,"stopReason":"cancelled"}}
`
	assert.Equal(t, want, neutralTranscript(in))
}

// Verify that a cancel written right after the prompt (Stop pressed before
// the model's first token) stays before the prompt's cancelled answer: held
// behind it, the replay would wait for the answer the cancel brings.
func TestNeutralTranscript_cancelBeforeFirstToken(t *testing.T) {
	in := []string{
		`> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"go"}]}}`,
		`> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"$SESSION"}}`,
		`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`,
	}
	assert.Equal(t, in, oneAtATime(in))
	piped := []string{in[0], `> {"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"$SESSION","prompt":[{"type":"text","text":"next"}]}}`, in[1], in[2]}
	assert.Equal(t, []string{piped[0], piped[3], piped[1], piped[2]}, oneAtATime(piped), "a cancel behind a held request stays behind it")
}
