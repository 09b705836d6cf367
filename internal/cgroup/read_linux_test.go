//go:build linux

package cgroup

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// v2Mount and v1Mounts are /proc/self/mountinfo lines as a container sees
// them (the v1 ones as Docker mounts them, with the container's cgroup as
// the hierarchy's root).
const (
	rootMount = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
	v2Mount   = rootMount + "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
	v1Mounts  = rootMount +
		"40 22 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n" +
		"41 22 0:31 /docker/abc /sys/fs/cgroup/cpuset ro,nosuid - cgroup cgroup rw,cpuset\n" +
		"42 22 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:9 - cgroup cgroup rw,memory\n" +
		"43 22 0:33 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	v1Cgroup = "12:cpu,cpuacct:/docker/abc\n5:cpuset:/docker/abc\n9:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n"
)

// tree writes files (path below the root: content) into a fresh root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		p = filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	}
	return root
}

func TestReadV2Quota(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":                        "0::/\n",
		"proc/self/mountinfo":                     v2Mount,
		"sys/fs/cgroup/cpu.max":                   "200000 100000\n",
		"sys/fs/cgroup/cpuset.cpus.effective":     "0-63\n",
		"sys/fs/cgroup/memory.max":                "4294967296\n",
		"sys/fs/cgroup/unrelated/cpu.max":         "100 100000\n",
		"sys/fs/cgroup/cpuset.cpus":               "junk that is not read",
		"sys/fs/cgroup/memory.limit_in_bytes":     "junk",
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota": "junk",
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, Limits{Version: 2, CPUQuota: 200000, CPUPeriod: 100000, CPUFrom: "cgroup v2 cpu.max",
		Cpuset: 64, CpusetList: "0-63", CpusetFrom: "cgroup v2 cpuset.cpus.effective",
		Memory: 4 << 30, MemoryFrom: "cgroup v2 memory.max"}, l)
	assert.Equal(t, 2, l.CPUs())

	r := Derive(l, nil, Host{NumCPU: 64, GOMAXPROCS: 2})
	assert.Equal(t, 2, r.CPUs)
	assert.Equal(t, "2 (cgroup v2 cpu.max 200000 100000; host 64; GOMAXPROCS 2)", r.CPULine())
	assert.Equal(t, "limit 4.0 GiB (cgroup v2 memory.max), GOMEMLIMIT 3.6 GiB set from it (90%)", r.MemoryLine())
}

func TestReadV2Unlimited(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":    "0::/user.slice/session-1.scope\n",
		"proc/self/mountinfo": v2Mount,
		"sys/fs/cgroup/user.slice/session-1.scope/cpu.max":    "max 100000\n",
		"sys/fs/cgroup/user.slice/session-1.scope/memory.max": "max\n",
		"sys/fs/cgroup/user.slice/cpu.max":                    "max 100000\n",
		// No cpuset file at all: none.
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, Limits{Version: 2}, l)
	assert.Equal(t, 0, l.CPUs())
	r := Derive(l, nil, Host{NumCPU: 8, GOMAXPROCS: 8})
	assert.Equal(t, "8 (affinity mask; host 8; GOMAXPROCS 8)", r.CPULine())
	assert.Equal(t, "no limit", r.MemoryLine())
	assert.False(t, r.Apply(), "no soft limit to set")
}

func TestReadV1Quota(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":                            v1Cgroup,
		"proc/self/mountinfo":                         v1Mounts,
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "150000\n",
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
		"sys/fs/cgroup/cpuset/cpuset.cpus":            "0-7,16-23\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":  "536870912\n",
		// The unified hierarchy of a hybrid host is not where v1's
		// controllers are read.
		"sys/fs/cgroup/unified/docker/abc/cpu.max": "100000 100000\n",
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, Limits{Version: 1, CPUQuota: 150000, CPUPeriod: 100000, CPUFrom: "cgroup v1 cpu.cfs_quota_us",
		Cpuset: 16, CpusetList: "0-7,16-23", CpusetFrom: "cgroup v1 cpuset.cpus",
		Memory: 512 << 20, MemoryFrom: "cgroup v1 memory.limit_in_bytes"}, l)
	assert.Equal(t, 2, l.CPUs(), "1.5 CPUs round up")
	r := Derive(l, nil, Host{NumCPU: 32, GOMAXPROCS: 2})
	assert.Equal(t, "2 (cgroup v1 cpu.cfs_quota_us 150000 100000; host 32; GOMAXPROCS 2)", r.CPULine())
	assert.Equal(t, "limit 512.0 MiB (cgroup v1 memory.limit_in_bytes), GOMEMLIMIT 460.8 MiB set from it (90%)", r.MemoryLine())
}

func TestReadV1Unlimited(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":                            v1Cgroup,
		"proc/self/mountinfo":                         v1Mounts,
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "-1\n",
		"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":  "9223372036854771712\n",
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, Limits{Version: 1}, l)
}

// TestReadV1HostPaths: on a host (no container), the v1 hierarchies are
// mounted at their roots and the path is the whole cgroup path.
func TestReadV1HostPaths(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup": "4:memory:/user.slice\n3:cpu,cpuacct:/user.slice\n",
		"proc/self/mountinfo": rootMount +
			"40 22 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" +
			"42 22 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		"sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_quota_us":  "300000\n",
		"sys/fs/cgroup/cpu,cpuacct/user.slice/cpu.cfs_period_us": "100000\n",
		"sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes":  "1073741824\n",
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, 3, l.CPUs())
	assert.Equal(t, int64(1<<30), l.Memory)
	assert.Equal(t, 0, l.Cpuset, "no cpuset hierarchy")
}

// TestReadNested: the tightest of the cgroup and its ancestors up to the
// mount, named with the ancestor's path.
func TestReadNested(t *testing.T) {
	pod := "sys/fs/cgroup/kubepods/burstable/pod1"
	root := tree(t, map[string]string{
		"proc/self/cgroup":                         "0::/kubepods/burstable/pod1/ctr\n",
		"proc/self/mountinfo":                      v2Mount,
		pod + "/ctr/cpu.max":                       "max 100000\n",
		pod + "/cpu.max":                           "50000 100000\n",
		"sys/fs/cgroup/kubepods/cpu.max":           "800000 100000\n",
		pod + "/ctr/cpuset.cpus.effective":         "4-7\n",
		pod + "/ctr/memory.max":                    "8589934592\n",
		"sys/fs/cgroup/kubepods/memory.max":        "2147483648\n",
		"sys/fs/cgroup/kubepods/burstable/mem.max": "1",
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, Limits{Version: 2, CPUQuota: 50000, CPUPeriod: 100000, CPUFrom: "cgroup v2 cpu.max of /kubepods/burstable/pod1",
		Cpuset: 4, CpusetList: "4-7", CpusetFrom: "cgroup v2 cpuset.cpus.effective",
		Memory: 2 << 30, MemoryFrom: "cgroup v2 memory.max of /kubepods"}, l)
	assert.Equal(t, 1, l.CPUs(), "half a CPU rounds up to one")
	// Go's runtime rounds a quota under 2 up to 2: the derived count is
	// the lower.
	r := Derive(l, nil, Host{NumCPU: 4, GOMAXPROCS: 2})
	assert.Equal(t, 1, r.CPUs)
}

// TestReadCpusetNarrower: a cpuset of fewer CPUs than the quota gives
// them.
func TestReadCpusetNarrower(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":                    "0::/\n",
		"proc/self/mountinfo":                 v2Mount,
		"sys/fs/cgroup/cpu.max":               "400000 100000\n",
		"sys/fs/cgroup/cpuset.cpus.effective": "2-3\n",
	})
	l, err := Read(root)
	require.NoError(t, err)
	r := Derive(l, nil, Host{NumCPU: 16, GOMAXPROCS: 4})
	assert.Equal(t, 2, r.CPUs)
	assert.Equal(t, "2 (cgroup v2 cpuset.cpus.effective 2-3; host 16; GOMAXPROCS 4)", r.CPULine())
}

func TestReadEscapedMountPoint(t *testing.T) {
	root := tree(t, map[string]string{
		"proc/self/cgroup":            "0::/\n",
		"proc/self/mountinfo":         rootMount + `30 22 0:26 / /my\040cgroup rw - cgroup2 cgroup2 rw` + "\n",
		"my cgroup/cpu.max":           "300000 100000\n",
		"my cgroup/memory.max":        "max\n",
		"sys/fs/cgroup/cpu.max":       "100000 100000\n",
		"sys/fs/cgroup/cpuset.cpus.e": "x",
	})
	l, err := Read(root)
	require.NoError(t, err)
	assert.Equal(t, 3, l.CPUs())
}

func TestReadNoCgroup(t *testing.T) {
	l, err := Read(t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, Limits{}, l)
	// A cgroup file but no mountinfo is an error: the limits cannot be
	// found.
	_, err = Read(tree(t, map[string]string{"proc/self/cgroup": "0::/\n"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mountinfo")
	// No cgroup mount: no limits.
	l, err = Read(tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": rootMount}))
	require.NoError(t, err)
	assert.Equal(t, Limits{}, l)
}

// TestReadMalformed: each unparsable file is an error wrapping
// ErrMalformed that names the file and what was in it; Derive then gives
// the host's defaults with a note.
func TestReadMalformed(t *testing.T) {
	v2 := func(name, content string) map[string]string {
		return map[string]string{"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": v2Mount,
			"sys/fs/cgroup/" + name: content, "sys/fs/cgroup/memory.max": "1073741824\n"}
	}
	v1 := func(quota, period, limit string) map[string]string {
		return map[string]string{"proc/self/cgroup": v1Cgroup, "proc/self/mountinfo": v1Mounts,
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": quota, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": period,
			"sys/fs/cgroup/memory/memory.limit_in_bytes": limit}
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"cpu.max word", v2("cpu.max", "lots 100000\n"), `cpu.max: "lots 100000": want "QUOTA PERIOD"`},
		{"cpu.max zero period", v2("cpu.max", "100000 0\n"), `cpu.max: "100000 0"`},
		{"cpu.max three fields", v2("cpu.max", "1 2 3\n"), `cpu.max: "1 2 3"`},
		{"cpu.max empty", v2("cpu.max", ""), `cpu.max: ""`},
		{"cpu.max negative", v2("cpu.max", "-5 100000"), `cpu.max: "-5 100000"`},
		{"memory.max", v2("memory.max", "4G\n"), `memory.max: "4G": want a number of bytes or "max"`},
		{"cpuset", v2("cpuset.cpus.effective", "3-1\n"), `cpuset.cpus.effective: "3-1": want a CPU list`},
		{"cpuset word", v2("cpuset.cpus.effective", "all\n"), `"all"`},
		{"v1 quota", v1("1.5\n", "100000\n", "1\n"), `cpu.cfs_quota_us: "1.5": want a positive number of microseconds`},
		{"v1 period", v1("100000\n", "0\n", "1\n"), `cpu.cfs_period_us: "0"`},
		{"v1 quota without period", map[string]string{"proc/self/cgroup": v1Cgroup, "proc/self/mountinfo": v1Mounts,
			"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "100000"}, "without a positive cpu.cfs_period_us"},
		{"v1 limit", v1("-1\n", "100000\n", "-2\n"), `memory.limit_in_bytes: "-2"`},
		{"proc cgroup", map[string]string{"proc/self/cgroup": "garbage\n", "proc/self/mountinfo": v2Mount},
			`/proc/self/cgroup line 1: "garbage"`},
		{"mountinfo", map[string]string{"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": "30 22 0:26 / /sys/fs/cgroup\n"},
			`/proc/self/mountinfo line 1`},
		{"mountinfo no fstype", map[string]string{"proc/self/cgroup": "0::/\n", "proc/self/mountinfo": "30 22 0:26 / /x rw shared:1 -\n"},
			`/proc/self/mountinfo line 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(tree(t, c.files))
			require.ErrorIs(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), c.want)
			r := Derive(Limits{Version: 2, CPUQuota: 100000, CPUPeriod: 100000, Memory: 1 << 30}, err, Host{NumCPU: 8, GOMAXPROCS: 8})
			assert.Equal(t, 8, r.CPUs, "the host's CPUs")
			assert.Zero(t, r.MemoryLimit)
			assert.Zero(t, r.SoftLimit)
			assert.Contains(t, r.Note, c.want)
		})
	}
}

// TestReadThisProcess reads this machine's own cgroup: whatever it is,
// no error, and a derived count within the host's.
func TestReadThisProcess(t *testing.T) {
	l, err := Read("/")
	require.NoError(t, err)
	r := Derive(l, nil, HostNow())
	assert.GreaterOrEqual(t, r.CPUs, 1)
	assert.LessOrEqual(t, r.CPUs, r.HostCPUs)
	assert.LessOrEqual(t, r.CPUs, runtime.GOMAXPROCS(0))
	// Go's runtime sizes GOMAXPROCS from the same quota (its cgroup's
	// own, rounded up, at least 2), unless GOMAXPROCS is set.
	if q := l.CPUs(); q > 0 && os.Getenv("GOMAXPROCS") == "" && !strings.Contains(l.CPUFrom, " of ") {
		assert.Equal(t, min(runtime.NumCPU(), max(2, q)), runtime.GOMAXPROCS(0))
	}
	t.Logf("cpus: %s; memory: %s", r.CPULine(), r.MemoryLine())
}
