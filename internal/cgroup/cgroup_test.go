package cgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeriveCPUs(t *testing.T) {
	quota2 := Limits{Version: 2, CPUQuota: 200000, CPUPeriod: 100000, CPUFrom: "cgroup v2 cpu.max"}
	for _, c := range []struct {
		name string
		l    Limits
		h    Host
		want int
		from string
	}{
		{"no cgroup", Limits{}, Host{NumCPU: 64, GOMAXPROCS: 64}, 64, "affinity mask"},
		{"quota", quota2, Host{NumCPU: 64, GOMAXPROCS: 2}, 2, "cgroup v2 cpu.max 200000 100000"},
		{"quota above the mask", quota2, Host{NumCPU: 1, GOMAXPROCS: 1}, 1, "affinity mask"},
		{"fractional quota", Limits{CPUQuota: 250000, CPUPeriod: 100000, CPUFrom: "q"}, Host{NumCPU: 64, GOMAXPROCS: 3}, 3, "q 250000 100000"},
		// An explicit GOMAXPROCS wins, even above the quota.
		{"GOMAXPROCS env", quota2, Host{NumCPU: 64, GOMAXPROCS: 6, GOMAXPROCSEnv: "6"}, 6, "GOMAXPROCS=6 (environment)"},
		{"GOMAXPROCS env below", quota2, Host{NumCPU: 64, GOMAXPROCS: 1, GOMAXPROCSEnv: "1"}, 1, "GOMAXPROCS=1 (environment)"},
		// A bad GOMAXPROCS the runtime ignored: not the user's choice.
		{"GOMAXPROCS env bad", quota2, Host{NumCPU: 64, GOMAXPROCS: 2, GOMAXPROCSEnv: "lots"}, 2, "cgroup v2 cpu.max 200000 100000"},
		// GOMAXPROCS lowered in code (runtime.GOMAXPROCS(n)) bounds it.
		{"GOMAXPROCS lower", Limits{}, Host{NumCPU: 64, GOMAXPROCS: 4}, 4, "GOMAXPROCS"},
		{"cpuset", Limits{Cpuset: 3, CpusetList: "0-2", CpusetFrom: "cgroup v1 cpuset.cpus"}, Host{NumCPU: 8, GOMAXPROCS: 8}, 3, "cgroup v1 cpuset.cpus 0-2"},
		{"zero host", Limits{}, Host{}, 1, "affinity mask"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Derive(c.l, nil, c.h)
			assert.Equal(t, c.want, r.CPUs)
			assert.Equal(t, c.from, r.CPUsFrom)
		})
	}
}

func TestDeriveMemory(t *testing.T) {
	l := Limits{Version: 2, Memory: 4 << 30, MemoryFrom: "cgroup v2 memory.max"}
	r := Derive(l, nil, Host{NumCPU: 4, GOMAXPROCS: 4, SoftLimit: math.MaxInt64})
	assert.Equal(t, int64(4<<30), r.MemoryLimit)
	assert.Equal(t, int64(3865470566), r.SoftLimit)
	assert.Equal(t, SoftFromLimit, r.SoftLimitFrom)

	// GOMEMLIMIT from the user is kept, and Apply leaves it alone.
	r = Derive(l, nil, Host{NumCPU: 4, GOMAXPROCS: 4, GOMEMLIMITEnv: "1GiB", SoftLimit: 1 << 30})
	assert.Equal(t, int64(1<<30), r.SoftLimit)
	assert.Equal(t, SoftFromEnv, r.SoftLimitFrom)
	assert.Equal(t, "limit 4.0 GiB (cgroup v2 memory.max), GOMEMLIMIT 1.0 GiB from the environment", r.MemoryLine())
	before := debug.SetMemoryLimit(-1)
	assert.False(t, r.Apply())
	assert.Equal(t, before, debug.SetMemoryLimit(-1))
	r = Derive(l, nil, Host{NumCPU: 4, GOMAXPROCS: 4, GOMEMLIMITEnv: "off", SoftLimit: math.MaxInt64})
	assert.Zero(t, r.SoftLimit)
	assert.Equal(t, "limit 4.0 GiB (cgroup v2 memory.max), GOMEMLIMIT from the environment (no limit)", r.MemoryLine())

	// Apply sets the derived one.
	r = Derive(l, nil, Host{NumCPU: 4, GOMAXPROCS: 4, SoftLimit: math.MaxInt64})
	defer debug.SetMemoryLimit(before)
	require.True(t, r.Apply())
	assert.Equal(t, r.SoftLimit, debug.SetMemoryLimit(-1))
}

func TestDeriveNote(t *testing.T) {
	err := fmt.Errorf("cgroup: /sys/fs/cgroup/cpu.max: %q: %w", "x", ErrMalformed)
	r := Derive(Limits{CPUQuota: 100000, CPUPeriod: 100000, Memory: 1 << 30}, err, Host{NumCPU: 8, GOMAXPROCS: 8})
	assert.Equal(t, 8, r.CPUs)
	assert.Zero(t, r.MemoryLimit)
	assert.Equal(t, `cgroup limits not used, the host's apply: cgroup: /sys/fs/cgroup/cpu.max: "x": malformed cgroup file`, r.Note)
	assert.True(t, errors.Is(err, ErrMalformed))
}

func TestResourcesJSON(t *testing.T) {
	r := Derive(Limits{Version: 2, CPUQuota: 200000, CPUPeriod: 100000, CPUFrom: "cgroup v2 cpu.max", Memory: 1 << 30, MemoryFrom: "cgroup v2 memory.max"},
		nil, Host{NumCPU: 64, GOMAXPROCS: 2})
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"cpus":2,"cpus_from":"cgroup v2 cpu.max 200000 100000","host_cpus":64,"gomaxprocs":2,
		"memory_limit":1073741824,"memory_from":"cgroup v2 memory.max","gomemlimit":966367641,"gomemlimit_from":"90% of the memory limit"}`, string(b))
}

func TestCurrent(t *testing.T) {
	r := Current()
	assert.GreaterOrEqual(t, r.CPUs, 1)
	assert.Equal(t, r, Current(), "read once")
}
