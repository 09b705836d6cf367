package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// ErrMalformed is wrapped by Read's error when a cgroup file (or
// /proc/self/cgroup, /proc/self/mountinfo) says something it cannot parse.
var ErrMalformed = errors.New("malformed cgroup file")

// Limits are what a process's cgroups limit, as Read finds them. A zero
// field means no limit of that kind was found.
type Limits struct {
	// Version is the cgroup version of the hierarchy the CPU limits came
	// from (else the memory limit's): 1 or 2; 0 when the process is in no
	// cgroup this package can read.
	Version int
	// CPUQuota and CPUPeriod are the CPU bandwidth limit in microseconds:
	// at most CPUQuota of CPU time per CPUPeriod (cgroup v2 cpu.max, v1
	// cpu.cfs_quota_us and cpu.cfs_period_us); CPUQuota 0 means none. Of
	// the process's cgroup and its ancestors up to the mount, the tightest.
	CPUQuota, CPUPeriod int64
	// CPUFrom names the file the quota came from, e.g. "cgroup v2
	// cpu.max" ("cgroup v2 cpu.max of /parent" for an ancestor's).
	CPUFrom string
	// Cpuset is the number of CPUs of the cgroup's cpuset (v2
	// cpuset.cpus.effective, v1 cpuset.cpus); 0 means none was read.
	// CpusetList is the file's list ("0-3,8") and CpusetFrom its name.
	Cpuset                 int
	CpusetList, CpusetFrom string
	// Memory is the memory limit in bytes (v2 memory.max, v1
	// memory.limit_in_bytes; the tightest of the cgroup and its ancestors);
	// 0 means none ("max", or v1's page-rounded largest value).
	// MemoryFrom names the file.
	Memory     int64
	MemoryFrom string
}

// CPUs is the CPU quota rounded up to whole CPUs: ceil(CPUQuota /
// CPUPeriod), 0 when there is no quota.
func (l Limits) CPUs() int {
	if l.CPUQuota <= 0 || l.CPUPeriod <= 0 {
		return 0
	}
	return int((l.CPUQuota + l.CPUPeriod - 1) / l.CPUPeriod)
}

// Host is the process's own view that Derive combines with the cgroup's
// limits.
type Host struct {
	// NumCPU is the CPUs of the affinity mask (runtime.NumCPU()).
	NumCPU int
	// GOMAXPROCS is runtime.GOMAXPROCS(0).
	GOMAXPROCS int
	// GOMAXPROCSEnv and GOMEMLIMITEnv are the environment variables of
	// those names ("" when unset).
	GOMAXPROCSEnv, GOMEMLIMITEnv string
	// SoftLimit is the runtime's memory limit now
	// (debug.SetMemoryLimit(-1)): what a GOMEMLIMIT in the environment set.
	SoftLimit int64
}

// HostNow is this process's Host.
func HostNow() Host {
	return Host{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GOMAXPROCSEnv: os.Getenv("GOMAXPROCS"), GOMEMLIMITEnv: os.Getenv("GOMEMLIMIT"),
		SoftLimit: debug.SetMemoryLimit(-1)}
}

// SoftLimitShare is the fraction of the cgroup's memory limit that
// Derive gives the Go runtime as its soft memory limit when GOMEMLIMIT is
// not set: the rest is headroom for what the runtime does not count
// (thread stacks, the mapped weights' file pages, oneDNN's allocations)
// before the kernel's OOM killer acts at the hard limit.
const SoftLimitShare = 0.9

// Resources are the defaults derived from the cgroup and the host, and
// where each came from: what `int8bert info` prints and serve's /info
// reports under "resources".
type Resources struct {
	// CPUs is the CPUs the process may keep busy: the least of the
	// affinity mask, the cpuset, the quota rounded up, and GOMAXPROCS; an
	// explicit GOMAXPROCS in the environment wins. At least 1.
	CPUs int `json:"cpus"`
	// CPUsFrom says which limit gave CPUs, e.g. "cgroup v2 cpu.max 200000
	// 100000".
	CPUsFrom string `json:"cpus_from"`
	// HostCPUs is the affinity mask's CPUs (runtime.NumCPU()).
	HostCPUs int `json:"host_cpus"`
	// GOMAXPROCS is the Go runtime's (which Go 1.25 and later also size
	// from the cgroup's quota: rounded up, at least 2).
	GOMAXPROCS int `json:"gomaxprocs"`
	// MemoryLimit is the cgroup's memory limit in bytes (0: none) and
	// MemoryFrom the file it came from.
	MemoryLimit int64  `json:"memory_limit,omitempty"`
	MemoryFrom  string `json:"memory_from,omitempty"`
	// SoftLimit is the Go runtime's soft memory limit in bytes when one
	// applies (0: none): GOMEMLIMIT from the environment, else
	// SoftLimitShare of MemoryLimit; SoftLimitFrom says which.
	SoftLimit     int64  `json:"gomemlimit,omitempty"`
	SoftLimitFrom string `json:"gomemlimit_from,omitempty"`
	// Note says why the cgroup was not used (a file that could not be
	// parsed): the host's defaults apply then.
	Note string `json:"note,omitempty"`
}

// The values of Resources.SoftLimitFrom.
const (
	SoftFromEnv   = "GOMEMLIMIT (environment)"
	SoftFromLimit = "90% of the memory limit"
)

// Derive combines the cgroup's limits (and the error Read gave: the host's
// defaults then, with a note) with the host's view.
func Derive(l Limits, readErr error, h Host) Resources {
	h.NumCPU = max(h.NumCPU, 1)
	if h.GOMAXPROCS <= 0 {
		h.GOMAXPROCS = h.NumCPU
	}
	r := Resources{CPUs: h.NumCPU, CPUsFrom: "affinity mask", HostCPUs: h.NumCPU, GOMAXPROCS: h.GOMAXPROCS}
	if readErr != nil {
		r.Note = fmt.Sprintf("cgroup limits not used, the host's apply: %v", readErr)
		l = Limits{}
	}
	if l.Cpuset > 0 && l.Cpuset < r.CPUs {
		r.CPUs, r.CPUsFrom = l.Cpuset, fmt.Sprintf("%s %s", l.CpusetFrom, l.CpusetList)
	}
	if q := l.CPUs(); q > 0 && q < r.CPUs {
		r.CPUs, r.CPUsFrom = q, fmt.Sprintf("%s %d %d", l.CPUFrom, l.CPUQuota, l.CPUPeriod)
	}
	if v, err := strconv.Atoi(strings.TrimSpace(h.GOMAXPROCSEnv)); err == nil && v > 0 {
		// The user's choice wins, above the cgroup's too.
		r.CPUs, r.CPUsFrom = h.GOMAXPROCS, fmt.Sprintf("GOMAXPROCS=%d (environment)", v)
	} else if h.GOMAXPROCS < r.CPUs {
		r.CPUs, r.CPUsFrom = h.GOMAXPROCS, "GOMAXPROCS"
	}
	r.CPUs = max(r.CPUs, 1)
	r.MemoryLimit, r.MemoryFrom = l.Memory, l.MemoryFrom
	switch {
	case h.GOMEMLIMITEnv != "":
		if h.SoftLimit > 0 && h.SoftLimit < math.MaxInt64 {
			r.SoftLimit = h.SoftLimit
		}
		r.SoftLimitFrom = SoftFromEnv
	case l.Memory > 0:
		r.SoftLimit, r.SoftLimitFrom = int64(float64(l.Memory)*SoftLimitShare), SoftFromLimit
	}
	return r
}

// Apply sets the Go runtime's soft memory limit (debug.SetMemoryLimit)
// when r derived one from the cgroup's memory limit, never over a
// GOMEMLIMIT from the environment. It reports whether it set one.
func (r Resources) Apply() bool {
	if r.SoftLimitFrom != SoftFromLimit || r.SoftLimit <= 0 {
		return false
	}
	debug.SetMemoryLimit(r.SoftLimit)
	return true
}

// CPULine says what CPUs were derived and from where, e.g. "2 (cgroup v2
// cpu.max 200000 100000; host 64; GOMAXPROCS 2)".
func (r Resources) CPULine() string {
	return fmt.Sprintf("%d (%s; host %d; GOMAXPROCS %d)", r.CPUs, r.CPUsFrom, r.HostCPUs, r.GOMAXPROCS)
}

// MemoryLine says what memory limit was found and what soft limit applies,
// e.g. "limit 4.0 GiB (cgroup v2 memory.max), GOMEMLIMIT 3.6 GiB set from
// it".
func (r Resources) MemoryLine() string {
	var b strings.Builder
	if r.MemoryLimit > 0 {
		fmt.Fprintf(&b, "limit %s (%s)", GiB(r.MemoryLimit), r.MemoryFrom)
	} else {
		b.WriteString("no limit")
	}
	switch r.SoftLimitFrom {
	case SoftFromLimit:
		fmt.Fprintf(&b, ", GOMEMLIMIT %s set from it (%.0f%%)", GiB(r.SoftLimit), 100*SoftLimitShare)
	case SoftFromEnv:
		if r.SoftLimit > 0 {
			fmt.Fprintf(&b, ", GOMEMLIMIT %s from the environment", GiB(r.SoftLimit))
		} else {
			b.WriteString(", GOMEMLIMIT from the environment (no limit)")
		}
	}
	return b.String()
}

// GiB formats n bytes in GiB with one decimal ("3.6 GiB"), in MiB below
// one GiB.
func GiB(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// Current is this process's Resources, read once (from the cgroup of "/"
// and HostNow) at the first call. It does not apply the soft limit.
var Current = sync.OnceValue(func() Resources {
	l, err := Read("/")
	return Derive(l, err, HostNow())
})
