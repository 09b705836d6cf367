//go:build !linux

package main

import (
	"errors"
	"net"
)

// listenPrivileged: only Linux has capabilities to raise.
func listenPrivileged(addr string) (net.Listener, error) {
	return nil, errors.New("no capabilities to raise on this OS")
}
