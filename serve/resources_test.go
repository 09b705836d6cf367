package serve

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/int8bert/int8bert/internal/cgroup"
	"github.com/int8bert/int8bert/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryPassTokens(t *testing.T) {
	for _, c := range []struct {
		name                string
		soft, weights       int64
		inst                int
		perToken            int64
		budget, floor, want int
		ok                  bool
	}{
		{"no limit", 0, 1 << 30, 8, 50_000, 2048, 512, 2048, true},
		{"fits", 8 << 30, 1 << 30, 8, 50_000, 2048, 512, 2048, true},
		// (2 GiB - 1 GiB) / 2 / (8 x 50,000) = 1342 tokens.
		{"lowered", 2 << 30, 1 << 30, 8, 50_000, 2048, 512, 1342, true},
		{"floor", 1 << 30, 1<<30 - 1<<20, 8, 50_000, 2048, 512, 512, false},
		{"weights over the limit", 1 << 30, 2 << 30, 1, 50_000, 2048, 512, 512, false},
		{"floor above the budget", 1 << 20, 0, 1, 50_000, 256, 512, 256, false},
	} {
		n, ok := memoryPassTokens(c.soft, c.weights, c.inst, c.perToken, c.budget, c.floor)
		assert.Equal(t, c.want, n, c.name)
		assert.Equal(t, c.ok, ok, c.name)
	}
}

// resourcesServer starts a server of the shipped model on fake container
// resources, with the instance count left to them.
func resourcesServer(t *testing.T, res cgroup.Resources) (*Server, infoBody) {
	t.Helper()
	s, err := New(context.Background(), Config{Models: []ModelSpec{{Name: "sst2", Source: shipped}}, Load: loadOptions(t), Resources: res})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	code, b, _ := get(t, ts, "GET", "/info")
	require.Equal(t, 200, code, "%s", b)
	return s, decode[infoBody](t, b)
}

// TestResourcesDefaults: the instances and tokenization workers come from
// the container's CPUs, /info says where they came from, and a soft
// memory limit lowers the pass budget to what fits.
func TestResourcesDefaults(t *testing.T) {
	res := cgroup.Derive(cgroup.Limits{Version: 2, CPUQuota: 100000, CPUPeriod: 100000, CPUFrom: "cgroup v2 cpu.max"},
		nil, cgroup.Host{NumCPU: 64, GOMAXPROCS: 2})
	require.Equal(t, 1, res.CPUs)
	s, info := resourcesServer(t, res)
	assert.Equal(t, 1, s.Instances(), "a quota of one CPU: one instance")
	assert.Equal(t, 1, info.Instances)
	assert.Equal(t, 1, info.TokenizationWorkers)
	assert.Equal(t, res, info.Resources)
	assert.Equal(t, 2048, info.PassTokens)
	assert.Contains(t, info.PassTokensFrom, "--max-batch-tokens")

	var raw map[string]any
	b, err := json.Marshal(info)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.Equal(t, "cgroup v2 cpu.max 100000 100000", raw["resources"].(map[string]any)["cpus_from"])

	// A soft limit that leaves room for 1,000 tokens of scratch beside
	// the weights.
	weights := info.Models[0].Resident.Total
	p, err := models.Load(context.Background(), shipped, models.Options{})
	require.NoError(t, err)
	perToken := p.ScratchBytes(1)
	p.Close()
	res.SoftLimit, res.SoftLimitFrom = weights+int64(1000/memoryShare)*perToken, cgroup.SoftFromLimit
	s, info = resourcesServer(t, res)
	assert.InDelta(t, 1000, info.PassTokens, 20)
	assert.Contains(t, info.PassTokensFrom, "lowered from 2048")
	assert.Equal(t, info.PassTokens, s.models[0].p.MaxBatchTokens())

	// Too small for a pass of the longest input: that, with a warning.
	res.SoftLimit = 1 << 20
	_, info = resourcesServer(t, res)
	assert.Equal(t, 512, info.PassTokens)
}
