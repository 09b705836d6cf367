package main

import (
	"errors"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// listenPrivileged listens on addr with CAP_NET_BIND_SERVICE made
// effective on this goroutine's thread for the bind (capabilities are
// per thread), then dropped from the effective set again.
func listenPrivileged(addr string) (net.Listener, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return nil, err
	}
	const bit = uint32(1) << unix.CAP_NET_BIND_SERVICE
	if data[0].Permitted&bit == 0 {
		return nil, errors.New("CAP_NET_BIND_SERVICE is not in the permitted set")
	}
	was := data[0].Effective
	data[0].Effective |= bit
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	data[0].Effective = was
	unix.Capset(&hdr, &data[0])
	return l, err
}
