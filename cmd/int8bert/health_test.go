package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runHealthCapture runs "int8bert health" with its unhealthy verdict
// recorded instead of ending the test binary.
func runHealthCapture(t *testing.T, args ...string) (unhealthy bool, stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = runHealth(context.Background(), args, &out, &errb, func() { unhealthy = true })
	return unhealthy, out.String(), errb.String(), err
}

func hostPort(t *testing.T, url string) string {
	t.Helper()
	return strings.TrimPrefix(url, "http://")
}

func TestHealthOK(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	unhealthy, stdout, _, err := runHealthCapture(t, "--addr", hostPort(t, srv.URL))
	require.NoError(t, err)
	assert.False(t, unhealthy)
	assert.Contains(t, stdout, "/health")

	// A bare :PORT (serve's --addr form) probes the loopback address.
	_, port, err := net.SplitHostPort(hostPort(t, srv.URL))
	require.NoError(t, err)
	unhealthy, _, _, err = runHealthCapture(t, "--addr", ":"+port)
	require.NoError(t, err)
	assert.False(t, unhealthy)
}

func TestHealthNotReady(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "loading model sst2", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	unhealthy, _, stderr, err := runHealthCapture(t, "--addr", hostPort(t, srv.URL))
	require.Error(t, err)
	assert.True(t, unhealthy)
	assert.Contains(t, stderr, "503")
	assert.Contains(t, stderr, "loading model sst2")
}

func TestHealthNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	unhealthy, _, stderr, err := runHealthCapture(t, "--addr", addr)
	require.Error(t, err)
	assert.True(t, unhealthy)
	assert.Contains(t, stderr, addr)
}

func TestHealthTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	unhealthy, _, stderr, err := runHealthCapture(t, "--addr", srv.URL, "--timeout", "100ms")
	require.Error(t, err)
	assert.True(t, unhealthy)
	assert.Contains(t, stderr, "no answer within 100ms")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestHealthBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--addr", "no-port"},
		{"--timeout", "0s"},
		{"extra"},
	} {
		unhealthy, _, _, err := runHealthCapture(t, args...)
		assert.Error(t, err, "%q", args)
		assert.False(t, unhealthy, "%q: a usage error is not a health verdict", args)
	}
}

// TestHealthSeveral: with comma-separated addresses (the image's
// HEALTHCHECK: its command's :8080 and TEI's port 80), one answering 200
// is healthy; none is unhealthy, naming each.
func TestHealthSeveral(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	unhealthy, stdout, _, err := runHealthCapture(t, "--addr", dead+","+hostPort(t, srv.URL))
	require.NoError(t, err)
	assert.False(t, unhealthy)
	assert.Contains(t, stdout, hostPort(t, srv.URL))
	srv.Close()
	unhealthy, _, stderr, err := runHealthCapture(t, "--addr", dead+","+hostPort(t, srv.URL))
	require.Error(t, err)
	assert.True(t, unhealthy)
	assert.Contains(t, stderr, dead)
	assert.Contains(t, stderr, hostPort(t, srv.URL))
}
