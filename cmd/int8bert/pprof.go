package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// pprofMux serves net/http/pprof's handlers under /debug/pprof/ on a mux
// of its own (the package's init registers them on http.DefaultServeMux,
// which serve never uses).
func pprofMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

// listenPprof listens on addr for --debug-pprof, which must be a loopback
// address: profiles are not for the network.
func listenPprof(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%q is not a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}
