package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/int8bert/int8bert/selector"
)

// progressPrinter reports done/total of a stage: rewritten in place on a
// terminal, else one line when a stage ends.
func progressPrinter(w io.Writer) func(stage string, done, total int) {
	tty := isTerminal(w)
	return func(stage string, done, total int) {
		switch {
		case tty && done < total:
			fmt.Fprintf(w, "\r%s: %d/%d", stage, done, total)
		case tty:
			fmt.Fprintf(w, "\r%s: %d/%d\n", stage, done, total)
		case done == total:
			fmt.Fprintf(w, "%s: %d/%d done\n", stage, done, total)
		}
	}
}

// writeJSON prints v as indented JSON, the -json output of every command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tuneProgress shows, on a terminal, that a command is tuning kernels
// for new shapes (docs/DESIGN.md section 4.8): once a run of tunings (keys
// less than a second apart) has lasted half a second, a line a second
// with the keys done and the time so far, so that a first call's tuning
// is never a silent stall. It is a selector.Options.OnTune; whole lines
// only, so the command's own output never lands mid-line.
type tuneProgress struct {
	w   io.Writer
	now func() time.Time

	mu        sync.Mutex
	inflight  int
	done      int       // tunings ended in this run
	start     time.Time // of this run
	last      time.Time // the last event
	lastPrint time.Time
}

// A run of tunings goes unannounced for tuneProgressDelay; it ends after
// tuneProgressGap without a tuning; a line is printed at most every
// tuneProgressEvery.
const (
	tuneProgressDelay = 500 * time.Millisecond
	tuneProgressGap   = time.Second
	tuneProgressEvery = time.Second
)

func (p *tuneProgress) event(ev selector.TuneEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.inflight == 0 && now.Sub(p.last) >= tuneProgressGap {
		p.start, p.done, p.lastPrint = now, 0, time.Time{}
	}
	p.last = now
	if !ev.Done {
		p.inflight++
		return
	}
	p.inflight--
	p.done++
	if now.Sub(p.start) >= tuneProgressDelay && now.Sub(p.lastPrint) >= tuneProgressEvery {
		bg := ""
		if ev.Background != "" {
			bg = "; in the background at " + ev.Background
		}
		fmt.Fprintf(p.w, "tuning kernels for new shapes: %d done, %.1f s (last: %v%s)\n", p.done, now.Sub(p.start).Seconds(), ev.Key, bg)
		p.lastPrint = now
	}
}

// terminalTuneProgress is the CLI's tuning display on stderr, nil when
// stderr is not a terminal (a file, a pipe, a test's buffer): set by run
// for the command it runs.
var terminalTuneProgress atomic.Pointer[tuneProgress]

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
