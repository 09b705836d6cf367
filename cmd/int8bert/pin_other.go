//go:build !linux

package main

import "errors"

func pinToOneCPU() (int, func(), error) {
	return -1, nil, errors.New("pinning is only implemented on Linux")
}
