// Package atomicfile sweeps the temporary files that a writer killed
// between creating and renaming them leaves beside their target
// (docs/DESIGN.md section 6.1). The writers (the artifact's, checkpoint's
// safetensors, the tuning cache) each name their temporary files with a
// fixed prefix made from the target's name; before writing again they
// call Sweep with that prefix, which removes the ones old enough that no
// live writer can still own them. It imports no int8bert package.
package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Stale is the age past which a temporary file is taken as left by a
// dead writer: far longer than any write here takes (a BERT-large
// artifact is written in seconds), so a concurrent writer's file is
// never removed under it.
const Stale = time.Hour

// Sweep removes the regular files in dir whose names start with prefix
// and are longer than it (the random suffix os.CreateTemp adds), last
// modified more than age ago, and returns how many it removed. It never
// fails: a file it cannot stat or remove stays, and a folder it cannot
// read sweeps nothing. The target itself (named exactly prefix) is
// never touched, nor are symbolic links or folders.
func Sweep(dir, prefix string, age time.Duration) int {
	if prefix == "" {
		return 0
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	now := time.Now()
	n := 0
	for _, e := range entries {
		name := e.Name()
		if len(name) <= len(prefix) || !strings.HasPrefix(name, prefix) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < age {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			n++
		}
	}
	return n
}
