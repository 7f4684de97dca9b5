// refresh_test.go checks that a server flooding tools/list_changed costs
// one refresh in flight, not one a notification.

package mcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify that 10,000 tool-list changes (the SDK's server sends them as its
// tools change; a hostile one could send each as a notification, which
// the hub then sees 10,000 times) are followed by a handful of tools/list
// calls, and that the hub ends with the server's last list.
func TestHub_listChangedFloodCoalesces(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "flood", Version: "1"}, nil)
	var lists atomic.Int64
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	type in struct{}
	noop := func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "flood"}, func(ctx context.Context, req *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, any, error) {
		for range 10_000 {
			mcp.AddTool(s, &mcp.Tool{Name: "blink"}, noop)
			s.RemoveTools("blink")
		}
		mcp.AddTool(s, &mcp.Tool{Name: "last"}, noop)
		return &mcp.CallToolResult{}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()

	h := Start(context.Background(), []ServerSpec{{Type: "http", Name: "flood", URL: hs.URL}}, Options{Version: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Stderr: io.Discard})
	defer h.Close()
	tool, err := h.Lookup("mcp__flood__flood")
	require.NoError(t, err)
	tool.Call(context.Background(), []byte(`{}`))
	h.mu.Lock()
	srv := h.servers[0]
	h.mu.Unlock()
	for range 10_000 { // as a notification each
		h.refreshSoon(srv)
	}
	_, err = h.Lookup("mcp__flood__last") // refreshes once more if it is not listed yet
	require.NoError(t, err, "the hub has the server's last list")
	assert.Less(t, lists.Load(), int64(200), "tools/list calls for 20,000 list changes")
}

// Verify that the SDK's refusal of an over-long stdio message names the
// limit.
func TestNamedLimit(t *testing.T) {
	err := namedLimit(errors.New("reading: inbound JSON-RPC frame exceeded the configured maximum line length"))
	assert.Contains(t, err.Error(), "at most 16 MiB")
	assert.Equal(t, "other", namedLimit(errors.New("other")).Error())
}

// floodConn yields n notifications/tools/list_changed, then one response.
type floodConn struct {
	mcp.Connection
	n int
}

func (c *floodConn) Read(context.Context) (jsonrpc.Message, error) {
	if c.n > 0 {
		c.n--
		return &jsonrpc.Request{Method: "notifications/tools/list_changed"}, nil
	}
	return &jsonrpc.Response{ID: mustID(7)}, nil
}

func mustID(n int64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		panic(err)
	}
	return id
}

// Verify what the process holds for a flood of 50,000
// notifications/tools/list_changed: none reaches the SDK (which spends a
// goroutine on each notification it dispatches), each asks for a refresh,
// and the connection's next message is read through them.
func TestCoalescingConn_floodHoldsNothing(t *testing.T) {
	changed := 0
	conn := coalescingConn{&floodConn{n: 50_000}, func() { changed++ }}
	msg, err := conn.Read(context.Background())
	require.NoError(t, err)
	res, ok := msg.(*jsonrpc.Response)
	require.True(t, ok, "the first message the SDK sees is the response, not a notification: %T", msg)
	assert.Equal(t, mustID(7), res.ID)
	assert.Equal(t, 50_000, changed, "every notification asked for a refresh")
}
