// Package crashtest kills a child process at random moments of an
// operation and hands each aftermath to a check (docs/DESIGN.md section
// 6.1). It is a test-support package: only _test.go files import it, and
// it imports no int8bert package.
//
// A test that uses it has two halves in one test binary. The parent
// (Kill) starts the binary again as a child, running one test function
// with EnvChild set; the child (Child, Ready) prepares, says Ready on
// its stdout, runs the operation and exits. The parent first runs the
// child once to the end to measure the operation, then draws each kill
// delay uniformly over 1.1 times that duration (Ready to Done) (seeded and logged), sends
// SIGKILL, and calls the check on what the child left.
package crashtest

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// EnvChild names the environment variable that makes a test binary a
// crash child: its value is the operation to run.
const EnvChild = "INT8BERT_CRASH_CHILD"

// readyLine and phaseLine are what a child writes on its stdout.
const (
	readyLine = "crashtest: ready"
	phaseLine = "crashtest: phase "
	doneLine  = "crashtest: done"
)

// Child returns the operation this process runs as a crash child, or ""
// in an ordinary test run.
func Child() string { return os.Getenv(EnvChild) }

// Ready tells the parent that the child's preparation is over and the
// operation starts now: the kill delays count from here.
func Ready() { fmt.Println(readyLine) }

// Phase tells the parent which part of the operation runs now; the
// parent tallies the phase each kill landed in.
func Phase(name string) { fmt.Println(phaseLine + name) }

// Done tells the parent the operation finished.
func Done() { fmt.Println(doneLine) }

// Options describe one kill series.
type Options struct {
	// Op is the operation (EnvChild's value); Test the child's test
	// function, run as -test.run=^Test$.
	Op, Test string
	// Kills is how many runs must end in a kill; Seed draws the delays.
	Kills int
	Seed  uint64
	// Env returns the extra environment of run i (its folders).
	Env func(i int) []string
	// Before prepares the state of run i; After checks it, killed saying
	// whether the child was killed (rather than finishing first) and
	// phase the last phase it announced.
	Before func(i int)
	After  func(i int, killed bool, phase string)
}

// Supported reports whether kills can run here, and why not: Linux only
// (SIGKILL and the child's file semantics are what the tests check).
func Supported() (bool, string) {
	if runtime.GOOS != "linux" {
		return false, "crash tests run on Linux only (SIGKILL of a child test binary), not " + runtime.GOOS
	}
	return true, ""
}

// child is one started child.
type child struct {
	cmd   *exec.Cmd
	ready chan time.Time
	done  chan time.Time
	phase chan string
	end   chan struct{}
	last  string
	out   strings.Builder
}

func start(t *testing.T, o Options, i int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+o.Test+"$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), EnvChild+"="+o.Op)
	if o.Env != nil {
		cmd.Env = append(cmd.Env, o.Env(i)...)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, ready: make(chan time.Time, 1), done: make(chan time.Time, 1), end: make(chan struct{})}
	cmd.Stderr = &c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	phases := make(chan string, 64)
	c.phase = phases
	go func() {
		defer close(c.end)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			switch {
			case l == readyLine:
				c.ready <- time.Now()
			case strings.HasPrefix(l, phaseLine):
				phases <- strings.TrimPrefix(l, phaseLine)
			case l == doneLine:
				c.done <- time.Now()
				phases <- "done"
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return c
}

// lastPhase drains the phases the child announced.
func (c *child) lastPhase() string {
	for {
		select {
		case p := <-c.phase:
			c.last = p
		default:
			return c.last
		}
	}
}

// wait waits for the child's exit (after its output is read).
func (c *child) wait(t *testing.T, killed bool) {
	t.Helper()
	<-c.end
	err := c.cmd.Wait()
	if !killed && err != nil {
		t.Fatalf("crash child exited with %v; its stderr:\n%s", err, c.out.String())
	}
}

// waitReady returns when the child is ready, or fails the test.
func (c *child) waitReady(t *testing.T) time.Time {
	t.Helper()
	select {
	case r := <-c.ready:
		return r
	case <-c.end:
		_ = c.cmd.Wait()
		t.Fatalf("crash child ended before it was ready: %s", c.out.String())
	case <-time.After(2 * time.Minute):
		_ = c.cmd.Process.Kill()
		t.Fatalf("crash child not ready after 2 minutes")
	}
	return time.Time{}
}

// Result counts a series' runs.
type Result struct {
	Kills, Finished int
	// Phases counts the kills by the phase they landed in.
	Phases map[string]int
	// Span is the measured duration of the operation, from Ready to
	// Done: the child's exit after Done (the test binary's teardown,
	// slow under the race detector) is not part of it, or most kills
	// would land after the operation. It is the shortest of the
	// measured runs and of the runs that finished before their kill.
	Span time.Duration
}

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d kills, %d runs finished first; operation %v; kills by phase:", r.Kills, r.Finished, r.Span.Round(time.Microsecond))
	for p, n := range r.Phases {
		fmt.Fprintf(&b, " %s=%d", p, n)
	}
	return b.String()
}

// Kill runs the series: two measured runs to the end (runs -1 and -2,
// checked as not killed), then runs killed after a random delay until o.Kills runs
// were killed (at most 3*o.Kills+10 runs). A run that finishes before its
// kill and took less than the measured span becomes the span: the
// operation's time follows the machine's load, and delays drawn over a
// span measured under load would mostly land after the operation.
func Kill(t *testing.T, o Options) Result {
	t.Helper()
	if ok, why := Supported(); !ok {
		t.Skip(why)
	}
	res := Result{Phases: map[string]int{}}
	// The measured runs: the shorter of two.
	for i := range 2 {
		o.Before(-1 - i)
		c := start(t, o, -1-i)
		t0 := c.waitReady(t)
		c.wait(t, false)
		var d time.Duration
		select {
		case t1 := <-c.done:
			d = t1.Sub(t0)
		default:
			t.Fatalf("%s: the measured run %d exited without saying Done; its stderr:\n%s", o.Op, -1-i, c.out.String())
		}
		if i == 0 || d < res.Span {
			res.Span = d
		}
		o.After(-1-i, false, c.lastPhase())
	}
	span := res.Span * 11 / 10
	rng := rand.New(rand.NewPCG(o.Seed, 0x6372617368))
	t.Logf("%s: seed %d, operation %v, kill delays uniform in [0, %v)", o.Op, o.Seed, res.Span, span)
	for i := 0; res.Kills < o.Kills; i++ {
		if i >= 3*o.Kills+10 {
			t.Fatalf("%s: only %d of %d runs were killed before they finished", o.Op, res.Kills, i)
		}
		d := time.Duration(rng.Int64N(int64(span) + 1))
		o.Before(i)
		c := start(t, o, i)
		r := c.waitReady(t)
		time.Sleep(time.Until(r.Add(d)))
		killed := false
		select {
		case <-c.end:
		default:
			killed = c.cmd.Process.Kill() == nil
		}
		c.wait(t, killed)
		// A child that finished just before the signal was not killed.
		if killed && c.cmd.ProcessState != nil && c.cmd.ProcessState.Success() {
			killed = false
		}
		phase := c.lastPhase()
		if killed {
			res.Kills++
			res.Phases[phase]++
		} else {
			res.Finished++
			// A run that finished inside the span shows the operation is
			// now faster than it was measured (the machine's load fell):
			// the later delays are drawn over its duration, or most runs
			// would end before their kill.
			select {
			case t1 := <-c.done:
				if d := t1.Sub(r); d > 0 && d < res.Span {
					res.Span, span = d, d*11/10
					t.Logf("%s: run %d took %v: kill delays now uniform in [0, %v)", o.Op, i, d, span)
				}
			default:
			}
		}
		o.After(i, killed, phase)
	}
	return res
}
