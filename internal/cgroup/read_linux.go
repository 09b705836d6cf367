//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Read finds the cgroup limits of the process whose /proc/self lies below
// root ("/" for this process; a fake tree in tests): its cgroup paths from
// root/proc/self/cgroup, the hierarchies' mount points from
// root/proc/self/mountinfo (taken below root too), and in them the CPU
// quota, the cpuset and the memory limit (cgroup v2: cpu.max,
// cpuset.cpus.effective, memory.max; v1: cpu.cfs_quota_us and
// cpu.cfs_period_us, cpuset.cpus, memory.limit_in_bytes). A controller in
// a v1 hierarchy is read there, else in the unified (v2) one. The quota
// and memory limit are the tightest of the cgroup and its ancestors up to
// the mount (a container usually sees only its own); a missing file is no
// limit. No /proc/self/cgroup is no cgroup: zero Limits, no error. A file
// that cannot be parsed is an error wrapping ErrMalformed, with what was
// read before it.
func Read(root string) (Limits, error) {
	var l Limits
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("cgroup: %w", err)
	}
	v2, v1, err := parseProcCgroup(string(b))
	if err != nil {
		return l, err
	}
	mb, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return l, fmt.Errorf("cgroup: the mounts of /proc/self/cgroup's hierarchies: %w", err)
	}
	mounts, err := parseMountinfo(string(mb))
	if err != nil {
		return l, err
	}
	// dir finds the directory of controller c's cgroup: v1 first.
	dir := func(c string) (d, top string, version int) {
		if p, ok := v1[c]; ok {
			for _, m := range mounts {
				if m.fstype == "cgroup" && m.controllers[c] {
					d, top = m.dir(root, p)
					return d, top, 1
				}
			}
		}
		if v2 != "" {
			for _, m := range mounts {
				if m.fstype == "cgroup2" {
					d, top = m.dir(root, v2)
					return d, top, 2
				}
			}
		}
		return "", "", 0
	}

	if d, top, v := dir("cpu"); v != 0 {
		l.Version = v
		err := walkUp(d, top, func(at, rel string) error {
			q, p, ok, err := readQuota(at, v)
			if err != nil || !ok {
				return err
			}
			if l.CPUQuota == 0 || float64(q)/float64(p) < float64(l.CPUQuota)/float64(l.CPUPeriod) {
				l.CPUQuota, l.CPUPeriod = q, p
				l.CPUFrom = from(v, map[int]string{1: "cpu.cfs_quota_us", 2: "cpu.max"}[v], rel)
			}
			return nil
		})
		if err != nil {
			return l, err
		}
	}
	if d, _, v := dir("cpuset"); v != 0 {
		name := map[int]string{1: "cpuset.cpus", 2: "cpuset.cpus.effective"}[v]
		b, err := os.ReadFile(filepath.Join(d, name))
		switch {
		case err == nil:
			list := strings.TrimSpace(string(b))
			n, err := countCPUs(list)
			if err != nil {
				return l, fmt.Errorf("cgroup: %s: %w", filepath.Join(d, name), err)
			}
			if n > 0 {
				l.Cpuset, l.CpusetList, l.CpusetFrom = n, list, from(v, name, "")
			}
		case !errors.Is(err, fs.ErrNotExist):
			return l, fmt.Errorf("cgroup: %w", err)
		}
	}
	if d, top, v := dir("memory"); v != 0 {
		if l.Version == 0 {
			l.Version = v
		}
		name := map[int]string{1: "memory.limit_in_bytes", 2: "memory.max"}[v]
		err := walkUp(d, top, func(at, rel string) error {
			n, err := readMemory(filepath.Join(at, name))
			if err == nil && n > 0 && (l.Memory == 0 || n < l.Memory) {
				l.Memory, l.MemoryFrom = n, from(v, name, rel)
			}
			return err
		})
		if err != nil {
			return l, err
		}
	}
	return l, nil
}

// from names a limit's file: "cgroup v2 cpu.max", with " of /rel" for an
// ancestor's.
func from(version int, name, rel string) string {
	s := fmt.Sprintf("cgroup v%d %s", version, name)
	if rel != "" {
		s += " of " + rel
	}
	return s
}

// walkUp calls f on d and each of its parents up to top (inclusive); rel
// is "" for d itself, else the ancestor's path below top ("/" for top).
func walkUp(d, top string, f func(at, rel string) error) error {
	for at := d; ; at = filepath.Dir(at) {
		rel := ""
		if at != d {
			rel = "/" + strings.TrimPrefix(strings.TrimPrefix(at, top), "/")
		}
		if err := f(at, rel); err != nil {
			return err
		}
		if at == top || !strings.HasPrefix(at, top) || at == filepath.Dir(at) {
			return nil
		}
	}
}

// readQuota reads the CPU quota in d: ok false when there is none (or no
// such file).
func readQuota(d string, version int) (quota, period int64, ok bool, err error) {
	if version == 2 {
		name := filepath.Join(d, "cpu.max")
		b, err := os.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("cgroup: %w", err)
		}
		s := strings.TrimSpace(string(b))
		f := strings.Fields(s)
		bad := fmt.Errorf("cgroup: %s: %q: want \"QUOTA PERIOD\" or \"max PERIOD\" (microseconds, positive): %w", name, s, ErrMalformed)
		if len(f) == 0 || len(f) > 2 {
			return 0, 0, false, bad
		}
		period = 100000 // the kernel's default when the file gives none
		if len(f) == 2 {
			if period, err = strconv.ParseInt(f[1], 10, 64); err != nil || period <= 0 {
				return 0, 0, false, bad
			}
		}
		if f[0] == "max" {
			return 0, 0, false, nil
		}
		if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil || quota <= 0 {
			return 0, 0, false, bad
		}
		return quota, period, true, nil
	}
	read := func(name string) (int64, bool, error) {
		p := filepath.Join(d, name)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("cgroup: %w", err)
		}
		s := strings.TrimSpace(string(b))
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v == 0 || v < -1 {
			return 0, false, fmt.Errorf("cgroup: %s: %q: want a positive number of microseconds (-1: no quota): %w", p, s, ErrMalformed)
		}
		return v, true, nil
	}
	quota, ok, err = read("cpu.cfs_quota_us")
	if err != nil || !ok || quota == -1 {
		return 0, 0, false, err
	}
	period, ok, err = read("cpu.cfs_period_us")
	if err != nil {
		return 0, 0, false, err
	}
	if !ok || period <= 0 {
		return 0, 0, false, fmt.Errorf("cgroup: %s: a quota of %d without a positive cpu.cfs_period_us: %w", d, quota, ErrMalformed)
	}
	return quota, period, true, nil
}

// noMemoryLimit is where a v1 memory.limit_in_bytes means none: the
// kernel reports the largest int64 rounded down to a page
// (9223372036854771712) when no limit is set.
const noMemoryLimit = 1 << 62

// readMemory reads a memory limit file: 0 for none ("max", v1's huge
// value, no file).
func readMemory(name string) (int64, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cgroup: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cgroup: %s: %q: want a number of bytes or \"max\": %w", name, s, ErrMalformed)
	}
	if n >= noMemoryLimit {
		return 0, nil
	}
	return n, nil
}

// parseProcCgroup reads /proc/self/cgroup: "0::/path" of the unified (v2)
// hierarchy, "ID:ctrl,ctrl:/path" of each v1 one.
func parseProcCgroup(s string) (v2 string, v1 map[string]string, err error) {
	v1 = map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			return "", nil, fmt.Errorf("cgroup: /proc/self/cgroup line %d: %q: want \"ID:CONTROLLERS:/PATH\": %w", i+1, line, ErrMalformed)
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c != "" {
				v1[c] = f[2]
			}
		}
	}
	return v2, v1, nil
}

// mount is one cgroup hierarchy's line of /proc/self/mountinfo.
type mount struct {
	root, point string // the hierarchy's directory mounted, and where
	fstype      string // "cgroup" (v1) or "cgroup2"
	controllers map[string]bool
}

// dir is the directory of cgroup path p (as /proc/self/cgroup says it)
// below root, and the mount point below root it lies in.
func (m mount) dir(root, p string) (d, top string) {
	top = filepath.Join(root, m.point)
	rel := p
	if m.root != "/" {
		// A container's mount shows its own cgroup as the root: the path
		// below it is what follows the mount's root, and a path outside
		// it (a cgroup namespace's view) is the mount itself.
		if r, ok := strings.CutPrefix(p, m.root); ok && (r == "" || strings.HasPrefix(r, "/")) {
			rel = r
		} else {
			rel = "/"
		}
	}
	return filepath.Join(top, path.Clean("/"+rel)), top
}

// parseMountinfo keeps the cgroup and cgroup2 mounts of
// /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS...] -
// FSTYPE SOURCE SUPEROPTS".
func parseMountinfo(s string) ([]mount, error) {
	var out []mount
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for j := 6; j < len(f); j++ {
			if f[j] == "-" {
				sep = j
				break
			}
		}
		if len(f) < 7 || sep < 0 || sep+3 > len(f) {
			return nil, fmt.Errorf("cgroup: /proc/self/mountinfo line %d: %q: want \"ID PARENT MAJ:MIN ROOT POINT OPTIONS ... - TYPE SOURCE OPTIONS\": %w",
				i+1, line, ErrMalformed)
		}
		fstype := f[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4]), fstype: fstype, controllers: map[string]bool{}}
		if sep+3 < len(f) {
			for _, o := range strings.Split(f[sep+3], ",") {
				m.controllers[o] = true
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash ("\040").
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// countCPUs counts a CPU list ("0-3,8,10-11"); "" is none.
func countCPUs(list string) (int, error) {
	if list == "" {
		return 0, nil
	}
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return 0, fmt.Errorf("%q: want a CPU list such as 0-3,8: %w", list, ErrMalformed)
		}
		n += b - a + 1
	}
	return n, nil
}
