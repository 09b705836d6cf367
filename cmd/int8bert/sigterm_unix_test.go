//go:build unix

package main

import (
	"os"
	"syscall"
)

// sendSIGTERM signals this process as an orchestrator stops a container.
func sendSIGTERM() error { return syscall.Kill(os.Getpid(), syscall.SIGTERM) }

const canSIGTERM = true
