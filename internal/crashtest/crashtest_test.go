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
	if os.Getenv("CRASHTEST_SLOW") != "" {
		// The measured runs of TestKillFollowsFasterRuns: the machine
		// was loaded when they ran.
		time.Sleep(time.Second)
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

// TestKillFollowsFasterRuns: the measured runs take over a second (the
// machine was loaded), the later ones about 60 ms. Drawn over the
// measured span, about one delay in twenty would land before the end
// and the series would give up after 34 runs; a run that finishes first
// shortens the span, so the series gets its kills.
func TestKillFollowsFasterRuns(t *testing.T) {
	base := t.TempDir()
	res := Kill(t, Options{
		Op: "count", Test: "TestCrashChild", Kills: 8, Seed: 3,
		Env: func(i int) []string {
			env := []string{"CRASHTEST_DIR=" + filepath.Join(base, strconv.Itoa(i))}
			if i < 0 {
				env = append(env, "CRASHTEST_SLOW=1")
			}
			return env
		},
		Before: func(i int) { _ = os.MkdirAll(filepath.Join(base, strconv.Itoa(i)), 0o755) },
		After:  func(int, bool, string) {},
	})
	t.Log(res)
	if res.Kills != 8 {
		t.Errorf("kills %d, want 8", res.Kills)
	}
	if res.Span >= time.Second {
		t.Errorf("span %v: the faster runs did not shorten it", res.Span)
	}
}
