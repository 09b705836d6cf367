package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"time"
)

// parseFlags parses args into fs and refuses a flag of fs given after the
// positional arguments (the flag package would take it, silently, as one
// more text): "classify --model M text --threads 2" is an error with a
// hint. Arguments after "--" are taken as they are, so that a text may
// start with "-".
func parseFlags(fs *flag.FlagSet, args []string) error {
	if seenFlags != nil {
		seenFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var bad error
	fs.Visit(func(f *flag.Flag) {
		if bad == nil {
			bad = checkNumber(fs.Name(), f)
		}
	})
	if bad != nil {
		return bad
	}
	rest := fs.Args()
	if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
		return nil
	}
	for i, a := range rest {
		if a == "--" {
			break
		}
		if name, ok := flagName(a); ok && fs.Lookup(name) != nil && i > 0 {
			return fmt.Errorf("%s: the flag %s comes after %q, where it would be read as a text: flags go before the texts (put -- before texts that start with -)",
				fs.Name(), a, rest[0])
		}
	}
	return nil
}

// negativeMeans are the numeric flags whose negative value means
// something (each one's help says what); every other numeric flag
// refuses one, and every float flag refuses NaN and the infinities.
var negativeMeans = map[string]bool{
	"max-queued-passes": true, // serve: no bound
	"batch-window":      true, // serve: never wait
	"drain-delay":       true, // serve: no drain delay
	"key-budget":        true, // tune: no bound
	"fallback-sqnr":     true, // dB: a threshold below zero is a threshold
}

// checkNumber refuses a numeric flag's value outside every flag's domain
// (NaN, an infinity, a negative count or duration where a negative means
// nothing) when it is parsed, naming the command and the flag, before
// the command does anything; --threads gets its whole domain (1 to the
// CPUs). Other flags' own bounds (a percentile above 50, a length at
// most the model's) are checked by their command.
func checkNumber(cmd string, f *flag.Flag) error {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return nil
	}
	if n, ok := g.Get().(int); ok && f.Name == "threads" {
		return checkThreads(cmd, n) // its whole domain, 1 to the CPUs
	}
	var neg bool
	switch v := g.Get().(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: --%s %v is not a finite number; give a value its help allows: %s (default %s)", cmd, f.Name, f.Value, f.Usage, f.DefValue)
		}
		neg = v < 0
	case int:
		neg = v < 0
	case int64:
		neg = v < 0
	case time.Duration:
		neg = v < 0
	default:
		return nil
	}
	if neg && !negativeMeans[f.Name] {
		return fmt.Errorf("%s: --%s %v is negative, which means nothing for it; give a value its help allows: %s (default %s)", cmd, f.Name, f.Value, f.Usage, f.DefValue)
	}
	return nil
}

// seenFlags, when set (by a test), sees every flag set a command parses.
var seenFlags func(*flag.FlagSet)

// flagName is the flag an argument like "-x", "--x" or "--x=v" names.
func flagName(a string) (string, bool) {
	if len(a) < 2 || a[0] != '-' {
		return "", false
	}
	name := strings.TrimPrefix(a[1:], "-")
	name, _, _ = strings.Cut(name, "=")
	return name, name != "" && name[0] != '-'
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkThreads checks a --threads value: 1 to the number of CPUs the
// process may use (more threads than CPUs only slow a GEMM down,
// docs/DESIGN.md section 7.2).
func checkThreads(cmd string, n int) error {
	if most := runtime.NumCPU(); n < 1 || n > most {
		return fmt.Errorf("%s: --threads %d: want 1 to %d (the CPUs this process may use)", cmd, n, most)
	}
	return nil
}

// checkMaxLength checks a --max-length value of a command that loads a
// model: left out, the model's longest sequence (at most 512); given, a
// positive number of tokens (the model checks the upper bound, its
// longest sequence).
func checkMaxLength(fs *flag.FlagSet, n int) error {
	if isSet(fs, "max-length") && n < 1 {
		return fmt.Errorf("%s: --max-length %d: want a positive number of tokens, up to the model's longest sequence (leave it out for that, at most 512)",
			fs.Name(), n)
	}
	return nil
}

// newLogger is the commands' logger: text lines on stderr, without the
// time, for the library's notes and warnings (models.Options.Logger, the
// selector's Warn).
func newLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// newJSONLogger is --json-output's logger: one JSON object a line, with
// the time, as TEI's JSON logs.
func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil))
}
