package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// listenTCP listens on addr. A port below 1024 refused to a user other
// than root is tried again with CAP_NET_BIND_SERVICE raised from the
// process's permitted set (docker/Dockerfile gives the binary that
// capability as permitted only, so that a container that drops it still
// runs the binary); refused again, the error says what lets it bind.
func listenTCP(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err == nil || !errors.Is(err, syscall.EACCES) {
		return l, err
	}
	_, p, _ := net.SplitHostPort(addr)
	if port, perr := strconv.Atoi(p); perr != nil || port >= 1024 {
		return nil, err
	}
	l, err2 := listenPrivileged(addr)
	if err2 == nil {
		return l, nil
	}
	return nil, fmt.Errorf("%w: port %s is below 1024: run as root, give the container CAP_NET_BIND_SERVICE (int8bert's image gives the binary it, unless the container drops it or sets no-new-privileges), set the sysctl net.ipv4.ip_unprivileged_port_start=0, or listen on a port above 1023 (PORT, --port, --addr)", err, p)
}
