// usage_test.go checks how a call's usage reports add up.

package model

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Verify a call's usage from its reports: running totals keep the latest,
// per-chunk deltas are added, counts are clamped and costs stay finite.
func TestUsage_then(t *testing.T) {
	calls := func(reports ...Usage) Usage {
		var u Usage
		for i, r := range reports {
			u = u.Then(r, i > 0)
		}
		return u
	}
	cost := func(c float64) *float64 { return &c }
	running := calls(Usage{InputTokens: 2000, OutputTokens: 1}, Usage{InputTokens: 2000, OutputTokens: 20}, Usage{InputTokens: 2000, OutputTokens: 40})
	assert.Equal(t, Usage{InputTokens: 2000, OutputTokens: 40}, running, "running totals: the latest")
	deltas := calls(Usage{InputTokens: 2000, OutputTokens: 1}, Usage{OutputTokens: 1}, Usage{OutputTokens: 1})
	assert.Equal(t, Usage{InputTokens: 2000, OutputTokens: 3}, deltas, "deltas: the sum")
	clamped := calls(Usage{InputTokens: -4993, OutputTokens: math.MaxInt64})
	assert.Equal(t, Usage{InputTokens: 0, OutputTokens: MaxTokens}, clamped)
	assert.Equal(t, Usage{InputTokens: MaxTokens, OutputTokens: MaxTokens}, calls(Usage{InputTokens: MaxTokens, OutputTokens: MaxTokens}, Usage{InputTokens: 1, OutputTokens: MaxTokens}), "sums clamped too")
	huge := calls(Usage{InputTokens: 1, Cost: cost(1e308)}, Usage{OutputTokens: 1, Cost: cost(1e308)})
	require.NotNil(t, huge.Cost)
	assert.Equal(t, 1e308, *huge.Cost, "a sum that is not finite keeps the cost before it")
	assert.Nil(t, calls(Usage{Cost: cost(math.Inf(1))}).Cost)
	assert.Nil(t, calls(Usage{Cost: cost(-1)}).Cost)
	assert.Equal(t, 0.5, *AddCost(cost(0.25), 0.25))
}

// Verify that a usage report's figures are read in any JSON form a server
// writes them, and that one the decoder cannot read is 0, not a failed
// answer.
func TestUsage_numbers(t *testing.T) {
	var c chatChunk
	require.NoError(t, json.Unmarshal([]byte(`{"usage":{"prompt_tokens":12.0,"completion_tokens":"3","cost":"0.5"}}`), &c))
	assert.Equal(t, int64(12), c.Usage.PromptTokens.count())
	assert.Equal(t, int64(3), c.Usage.CompletionTokens.count())
	assert.Equal(t, 0.5, float64(*c.Usage.Cost))
	require.NoError(t, json.Unmarshal([]byte(`{"usage":{"prompt_tokens":1.2e1,"completion_tokens":-7,"cost":{"usd":1}}}`), &c))
	assert.Equal(t, int64(12), c.Usage.PromptTokens.count())
	assert.Equal(t, int64(0), c.Usage.CompletionTokens.count(), "clamped")
	assert.Equal(t, 0.0, float64(*c.Usage.Cost), "unreadable: 0")
	require.NoError(t, json.Unmarshal([]byte(`{"usage":{"prompt_tokens":1e30}}`), &c))
	assert.Equal(t, int64(MaxTokens), c.Usage.PromptTokens.count())
}
