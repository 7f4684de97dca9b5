// image_test.go tests images in prompts: they reach the model as image_url
// parts, are persisted and replayed as they came, and bad or oversized
// ones are refused with -32602 naming the block.

package main

import (
	"acpbridge/internal/acp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyPNG is a 1x1 PNG, base64.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func imagePrompt(id int, sid, data string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"what is this?"},{"type":"image","mimeType":"image/png","data":%q}]}}`, id, sid, data)
}

// Verify that an image block reaches the model as an image_url part of the
// user message (a data: URL), that initialize advertises images, and that
// a load in another process replays the block as it came and sends the
// image with the next request.
func TestImage_toModelAndReplayed(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{file: "text.sse"}, fakeReply{file: "text.sse"})
	ta := startOpenAI(t, f)
	init := decodeResponse(t, ta.call(initLine))
	assert.Contains(t, string(init.Result), `"image":true`)
	r := decodeResponse(t, ta.call(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"$CWD","mcpServers":[]}}`))
	require.Nil(t, r.Error)
	var res struct{ SessionID string }
	require.NoError(t, json.Unmarshal(r.Result, &res))
	sid := res.SessionID
	ta.send(imagePrompt(2, sid, tinyPNG))
	_, r = ta.updatesUntil(2)
	require.Nil(t, r.Error)
	body, _ := json.Marshal(f.request(0).body["messages"])
	assert.Contains(t, string(body), `{"image_url":{"url":"data:image/png;base64,`+tinyPNG+`"},"type":"image_url"}`)
	assert.Contains(t, string(body), `"text":"what is this?\n\n[image image/png, 70 bytes]"`)
	ta.close()

	again := startAgentLike(t, ta, "--model", "openai:gpt-test", "--base-url", f.srv.URL+"/v1", "--models", "gpt-test")
	again.call(initLine)
	again.send(load(1, sid))
	ups, r := again.updatesUntil(1)
	require.Nil(t, r.Error)
	assert.Contains(t, strings.Join(ups, "\n"), `{"type":"image","mimeType":"image/png","data":"`+tinyPNG+`"}`, "the block replayed as it came")
	_, r = again.turnUpdates(2, sid, "and now?")
	require.Nil(t, r.Error)
	body, _ = json.Marshal(f.request(1).body["messages"])
	assert.Contains(t, string(body), `data:image/png;base64,`+tinyPNG, "the loaded conversation still has the image")
}

// Verify that an image over the per-image limit and one whose data is not
// base64 are refused with -32602 naming the block, and that the session
// serves on.
func TestImage_refused(t *testing.T) {
	t.Parallel()
	ta := startAgent(t, "--model", "replay:"+writeFixture(t, `{"expect":"[image image/png, 70 bytes]","chunks":[{"text":"A pixel."}]}`))
	sid := ta.newSession()
	big := base64.StdEncoding.EncodeToString(make([]byte, 25<<20))
	// Written as it is: the client side's schema check of a 33 MB line
	// would take most of the test's time under -race.
	_, err := ta.stdin.Write([]byte(imagePrompt(2, sid, big) + "\n"))
	require.NoError(t, err)
	r := decodeResponse(t, ta.await(`{"id":2}`))
	require.NotNil(t, r.Error, "a 25 MiB image")
	assert.Equal(t, -32602, r.Error.Code)
	assert.Contains(t, r.Error.Message, "prompt[1]")
	assert.Contains(t, r.Error.Message, "is a 25.0 MiB image; acpbridge sends images of at most 20 MiB")
	r = decodeResponse(t, ta.call(imagePrompt(3, sid, "not base64!")))
	require.NotNil(t, r.Error, "invalid base64")
	assert.Equal(t, -32602, r.Error.Code)
	assert.Contains(t, r.Error.Message, "prompt[1].data")
	assert.Contains(t, r.Error.Message, "not valid base64")
	ta.send(imagePrompt(4, sid, tinyPNG))
	_, r = ta.updatesUntil(4)
	require.Nil(t, r.Error, "the session serves on; the replay fixture's expect sees the placeholder")
}

// Verify that a model that rejects images (HTTP 400 about the image) is
// reported as such, with what to do.
func TestImage_modelRejects(t *testing.T) {
	f := newFakeOpenAI(t, fakeReply{status: 400, body: `{"error":{"message":"Invalid content type. image_url is only supported by certain models."}}`})
	ta := startOpenAI(t, f)
	sid := ta.newSession()
	ta.send(imagePrompt(2, sid, tinyPNG))
	_, r := ta.updatesUntil(2)
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Message, "the model rejected the prompt's image")
	assert.Contains(t, r.Error.Message, "choose a model that reads images")
}

// Verify the per-prompt limit: images each under 20 MiB that together pass
// 50 MiB are refused with -32602 naming the block that passes it.
func TestImage_promptLimit(t *testing.T) {
	t.Parallel()
	data := base64.StdEncoding.EncodeToString(make([]byte, 18<<20))
	block := acp.Window(`{"type":"image","mimeType":"image/png","data":"` + data + `"}`)
	_, err := parsePrompt([]acp.Window{acp.Window(`{"type":"text","text":"three"}`), block, block, block})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "prompt[3]")
	assert.Contains(t, err.Error(), "more than 50 MiB")
}

// Verify that the default line limit leaves room for a prompt at the
// prompt's own image limit (base64, and its framing): such a prompt is
// refused by that limit, -32602 naming the block, never by the line's
// -32600.
func TestImage_lineLimitAbovePromptLimit(t *testing.T) {
	assert.Greater(t, defaultMaxLineBytes, base64.StdEncoding.EncodedLen(promptImageMaxBytes)+1<<20)
}

// Verify that what a session holds of its images is bounded by the image
// budget, not by the images it has had: with a budget of 10,000 bytes,
// after five prompts of a 4,000-byte image the conversation holds the two
// newest, the most a request can carry (the old code held all five, and
// the process's memory grew by every image: 21 MiB a prompt of a 16 MiB
// image, at the real budget of 72 MiB); every request carries at most the
// budget.
func TestImage_memoryBoundedByTheBudget(t *testing.T) {
	sse, err := os.ReadFile("fixtures/openai/text.sse")
	require.NoError(t, err)
	var mu sync.Mutex
	var sizes []int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_API_KEY", testKey)
	ta := startAgent(t, "--model", "openai:gpt-test", "--base-url", srv.URL+"/v1", "--models", "gpt-test")
	ta.agent.cfg.imageBudget = 10_000 // before the first prompt reaches the loop
	sid := ta.newSession()
	data := base64.StdEncoding.EncodeToString(make([]byte, 3000))
	for i := 1; i <= 5; i++ {
		ta.send(imagePrompt(100+i, sid, data))
		_, r := ta.updatesUntil(100 + i)
		require.Nil(t, r.Error, "prompt %d", i)
	}
	var held []int // the conversation's user messages' image bytes, oldest first
	for _, m := range ta.agent.sess.conv.Msgs {
		if m.Role == "user" {
			n := 0
			for _, im := range m.Images {
				n += len(im.Data)
			}
			held = append(held, n)
		}
	}
	assert.Equal(t, []int{0, 0, 0, len(data), len(data)}, held, "the two newest images kept, the three older ones dropped")
	assert.Contains(t, ta.agent.sess.conv.Msgs[0].Text, "left out of this request", "an image dropped is named where it stood")
	mu.Lock()
	t.Logf("request sizes: %v", sizes)
	for i, n := range sizes {
		assert.Less(t, n, sizes[0]+10_000, "request %d carries at most the budget's images more than the first, which had one", i+1)
	}
	mu.Unlock()
}
