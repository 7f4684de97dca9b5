// names_test.go checks the names MCP tools are offered under.

package mcp

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Verify the names models see: sanitised, within 64 characters, unique.
func TestMCP_toolNames(t *testing.T) {
	assert.Equal(t, "mcp__my_server__read_it", toolName("mcp__"+sanitize("my server", 24)+"__", "read.it"))
	long := toolName("mcp__srv__", strings.Repeat("x", 100))
	assert.Len(t, long, nameLimit)
	assert.NotEqual(t, long, toolName("mcp__srv__", strings.Repeat("x", 99)+"y"))
}
