// Package threadcpu reads the calling OS thread's CPU time: on a shared
// machine it leaves out the time other processes held the core. A caller
// locks its goroutine to its thread (runtime.LockOSThread) around what it
// measures, or the reading mixes threads. The selector times the
// background tuner's units with it (docs/DESIGN.md section 4.12), bench
// its passes' CPU time.
package threadcpu
