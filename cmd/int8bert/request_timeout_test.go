package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestTimeoutFlag: --request-timeout reaches serve.Config (0, no
// bound, by default); it has no variable, as the other timeouts.
func TestRequestTimeoutFlag(t *testing.T) {
	_, c, err := teiConfig([]string{"--model-id", sst2Mini}, map[string]string{"REQUEST_TIMEOUT": "5s"}, true)
	require.NoError(t, err)
	assert.Zero(t, c.RequestTimeout)
	_, c, err = teiConfig([]string{"--model-id", sst2Mini, "--request-timeout", "2.5s"}, nil, true)
	require.NoError(t, err)
	assert.Equal(t, 2500*time.Millisecond, c.RequestTimeout)
}
