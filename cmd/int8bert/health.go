package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// exitUnhealthy ends the process when "int8bert health" finds the server
// not ready: exit status 1, which a container runtime's HEALTHCHECK reads as
// unhealthy (2, the status of a usage error, is reserved there). It is
// runHealth's unhealthy in the command.
func exitUnhealthy() { os.Exit(1) }

// runHealth is "int8bert health [--addr HOST:PORT] [--timeout D]": a
// probe for a container's HEALTHCHECK (the runtime image has no curl). It
// GETs http://ADDR/health and exits 0 on 200; otherwise it prints why to
// stderr and calls unhealthy (exitUnhealthy in the command: exit status
// 1), then returns the error. An --addr without a host (":8080", as
// serve's --addr takes it) probes the loopback address.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer, unhealthy func()) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "the server's HOST:PORT (a bare :PORT means 127.0.0.1), or an http:// URL; several, comma-separated: healthy when one is")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if seenFlags != nil {
		seenFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("health: unexpected arguments %q", fs.Args())
	}
	if *timeout <= 0 {
		return fmt.Errorf("health: --timeout %v: want a positive duration", *timeout)
	}
	var urls []string
	for _, a := range strings.Split(*addr, ",") {
		url, err := healthURL(strings.TrimSpace(a))
		if err != nil {
			return err
		}
		urls = append(urls, url)
	}
	// Several addresses (the image's: its command's :8080 and TEI's port
	// 80): healthy when one answers 200.
	var errs []error
	for _, url := range urls {
		err := checkHealth(ctx, url, *timeout)
		if err == nil {
			fmt.Fprintln(stdout, "ok", url)
			return nil
		}
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	fmt.Fprintln(stderr, "int8bert health:", err)
	unhealthy()
	return err
}

// healthURL turns --addr into the URL of the health route.
func healthURL(addr string) (string, error) {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimSuffix(addr, "/") + "/health", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("health: --addr %q: want HOST:PORT, :PORT or an http:// URL", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/health", nil
}

// checkHealth GETs url and returns nil on 200, else an error that says what
// came back (the status and the start of the body) or why nothing did.
func checkHealth(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{
		// A proxy from the environment must not stand between a
		// container and its own server.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("GET %s: no answer within %v", url, timeout)
		}
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if msg == "" {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, msg)
	}
	return nil
}
