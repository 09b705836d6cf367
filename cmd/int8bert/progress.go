package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// progressPrinter reports done/total of a stage: rewritten in place on a
// terminal, else one line when a stage ends.
func progressPrinter(w io.Writer) func(stage string, done, total int) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
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
