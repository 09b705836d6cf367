package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"unicode"
)

// BenchLine is one timed pass in Go's benchmark format: a name
// ("BenchmarkModel/arch=bert-base/.../dtype=fp32") and its time.
type BenchLine struct {
	Name    string
	NsPerOp float64
}

// benchValue makes v usable as one key=value part of a benchmark name:
// a folder's base name, with '/', whitespace and '=' replaced by '_', and
// "-" alone for an empty value.
func benchValue(v string) string {
	if strings.ContainsRune(v, filepath.Separator) {
		v = filepath.Base(filepath.Clean(v))
	}
	v = strings.Map(func(r rune) rune {
		if r == '/' || r == '=' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, v)
	if v == "" {
		return "-"
	}
	return v
}

// benchName is "Benchmark"+base followed by one /key=value per pair of kv.
func benchName(base string, kv ...string) string {
	var b strings.Builder
	b.WriteString("Benchmark" + base)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "/%s=%s", kv[i], benchValue(kv[i+1]))
	}
	return b.String()
}

// BenchLines are one line per timed pass of every precision of r
// (PassesMs): BenchmarkModel/arch=A/seq=S/batch=B/threads=T/dtype=P.
func (r *ModelReport) BenchLines() []BenchLine {
	var out []BenchLine
	for _, x := range r.Results {
		name := benchName("Model", "arch", r.Arch, "seq", fmt.Sprint(r.Seq), "batch", fmt.Sprint(r.Batch), "threads", fmt.Sprint(r.Threads), "dtype", x.Precision)
		for _, ms := range x.PassesMs {
			out = append(out, BenchLine{Name: name, NsPerOp: ms * 1e6})
		}
	}
	return out
}

// BenchLines are the passes of every model of r (ModelReport.BenchLines).
// The GEMMs of Tables 6-7 keep only their spread, not each repetition,
// and are not among them.
func (r *PaperReport) BenchLines() []BenchLine {
	var out []BenchLine
	for _, m := range r.Models {
		out = append(out, m.BenchLines()...)
	}
	return out
}

// WriteBenchstat writes lines in Go's benchmark format, which
// golang.org/x/perf/cmd/benchstat reads: the configuration lines goos,
// goarch and cpu (cpuName; left out when empty), then each line as
// "NAME 1 NS ns/op" (one pass is one iteration). Two such files, before
// and after a change, compare with `benchstat old.txt new.txt`.
func WriteBenchstat(w io.Writer, cpuName string, lines []BenchLine) error {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\n", runtime.GOOS, runtime.GOARCH)
	if c := strings.Join(strings.Fields(cpuName), " "); c != "" {
		fmt.Fprintf(&b, "cpu: %s\n", c)
	}
	b.WriteString("pkg: github.com/int8bert/int8bert/bench\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "%s \t1\t%.0f ns/op\n", l.Name, l.NsPerOp)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
