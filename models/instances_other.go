//go:build !linux

package models

import "errors"

var errNoPin = errors.New("pinning threads to CPUs is implemented on Linux only")

func allowedCPUs() ([]int, error) { return nil, errNoPin }

func pinThread([]int) error { return errNoPin }

func physicalCores() int { return 0 }
