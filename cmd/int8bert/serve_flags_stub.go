// TEMPORARY: replaced by serve.go. Delete this file when "int8bert serve"
// (cmd/int8bert/serve.go, which defines serveFlagSet) is merged; it exists
// only so that kubernetes_test.go can check docker/kubernetes.yaml's args
// against serve's flags before serve is on main. The names are the ones the
// serve issue fixes; the defaults here are placeholders.

package main

import (
	"flag"
	"time"
)

// serveFlagSet returns the flags of "int8bert serve" (TEMPORARY stub).
func serveFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Func("model", "[NAME=]DIR-or-hub-id (repeatable; the first is the default model)", func(string) error { return nil })
	fs.String("precision", "", "fp32, int8-static or int8-dynamic (default: as the folder is stored)")
	fs.String("calib", "", "calibration texts for int8-static at load")
	fs.String("addr", ":8080", "HOST:PORT to listen on")
	fs.Int("instances", 0, "model instances (default: physical cores / threads-per-instance)")
	fs.Int("threads-per-instance", 1, "threads per instance")
	fs.Bool("pin", false, "pin instances to disjoint cores")
	fs.Int("max-batch-tokens", 0, "")
	fs.Int("max-batch-requests", 0, "")
	fs.Int("max-client-batch-size", 0, "")
	fs.Int("max-concurrent-requests", 0, "")
	fs.Duration("batch-window", 0, "")
	fs.Duration("read-timeout", 0, "")
	fs.Duration("write-timeout", 0, "")
	fs.Duration("idle-timeout", 0, "")
	fs.Duration("shutdown-timeout", 30*time.Second, "")
	return fs
}
