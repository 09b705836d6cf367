// Package cgroup reads the limits a container puts on this process (the
// CPU quota, the cpuset and the memory limit of its cgroup, v2 or v1) and
// derives from them the defaults a service should start with: the CPUs
// its instances fill and a soft memory limit for the Go runtime
// (docs/DESIGN.md section 9.10).
//
// Read parses a cgroup tree below a root directory given as a parameter
// ("/" for this process), so that tests run it on fake trees; it is Linux
// only, and elsewhere reports no cgroup. Derive turns what Read found and
// the process's own view (its affinity mask, GOMAXPROCS, the GOMAXPROCS and
// GOMEMLIMIT environment variables) into Resources, which say what was
// derived and from where; a cgroup file that cannot be parsed gives the
// host's defaults with a note, never a failure to start.
//
// Package cgroup must not import any other int8bert package.
package cgroup
