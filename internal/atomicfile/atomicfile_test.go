package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSweep(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * Stale)
	write := func(name string, mod time.Time) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	write(".model.safetensors.123", old)        // a dead writer's: removed
	write(".model.safetensors.456", old)        // the same
	write(".model.safetensors.789", time.Now()) // a live writer's: kept
	write(".model.safetensors.", old)           // exactly the prefix: no temporary name, kept
	write("model.safetensors", old)             // the target: kept
	write(".other.safetensors.1", old)          // another target's: kept
	if err := os.Mkdir(filepath.Join(dir, ".model.safetensors.dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(dir, ".model.safetensors.link")); err != nil {
		t.Fatal(err)
	}
	if n := Sweep(dir, ".model.safetensors.", Stale); n != 2 {
		t.Errorf("Sweep removed %d files, want 2", n)
	}
	left := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left[e.Name()] = true
	}
	for _, want := range []string{".model.safetensors.789", ".model.safetensors.", "model.safetensors", ".other.safetensors.1",
		".model.safetensors.dir", ".model.safetensors.link"} {
		if !left[want] {
			t.Errorf("%s was removed", want)
		}
	}
	for _, gone := range []string{".model.safetensors.123", ".model.safetensors.456"} {
		if left[gone] {
			t.Errorf("%s was kept", gone)
		}
	}
	if n := Sweep(filepath.Join(dir, "missing"), "x", 0); n != 0 {
		t.Errorf("a missing folder swept %d", n)
	}
	if n := Sweep(dir, "", 0); n != 0 {
		t.Errorf("an empty prefix swept %d", n)
	}
}
