package crashtest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestCrashChild is the child of TestKill: it writes numbered files, one
// every millisecond, through a temporary file renamed into place.
func TestCrashChild(t *testing.T) {
	if Child() != "count" {
		t.Skip("the child of TestKill; runs only as its child process")
	}
	dir := os.Getenv("CRASHTEST_DIR")
	Ready()
	for n := 0; n < 50; n++ {
		Phase("write")
		p := filepath.Join(dir, "n")
		if err := os.WriteFile(p+".tmp", []byte(strconv.Itoa(n)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	Done()
}

// TestKill checks that the series kills its children at spread moments:
// the counter files they leave are not all the same, and a finished run
// leaves the last value.
func TestKill(t *testing.T) {
	base := t.TempDir()
	seen := map[string]bool{}
	res := Kill(t, Options{
		Op: "count", Test: "TestCrashChild", Kills: 8, Seed: 1,
		Env:    func(i int) []string { return []string{"CRASHTEST_DIR=" + filepath.Join(base, strconv.Itoa(i))} },
		Before: func(i int) { _ = os.MkdirAll(filepath.Join(base, strconv.Itoa(i)), 0o755) },
		After: func(i int, killed bool, phase string) {
			b, _ := os.ReadFile(filepath.Join(base, strconv.Itoa(i), "n"))
			if !killed && string(b) != "49" && i >= 0 {
				t.Errorf("run %d finished and left %q, want 49", i, b)
			}
			if killed {
				seen[string(b)] = true
			}
		},
	})
	t.Log(res)
	if res.Kills != 8 {
		t.Errorf("kills %d, want 8", res.Kills)
	}
	if len(seen) < 3 {
		t.Errorf("8 kills left only %d distinct states %v: the delays are not spread", len(seen), seen)
	}
}
