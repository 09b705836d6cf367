package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// runBenchPaper is "int8bert bench paper": the paper's tables on this host
// (bench.Paper), then Table 15 with eval, written as report.md,
// report.json and charts into --out.
func runBenchPaper(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench paper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "paper-report", "folder of report.md, report.json and the charts (created)")
	modelList := fs.String("models", "", "ARCH[:SEQ],... of Tables 3 and 11-14 (architectures of bench model --arch, or model folders; default bert-large:256,distilbert:128,xlmr-base:128; --quick: bert-base:64,distilbert:64,xlmr-base:64)")
	batch := fs.Int("batch", 1, "sequences per pass")
	threads := fs.Int("threads", 1, "threads per linear (and cores of Table 4's all-core figures)")
	instances := fs.Int("instances", 1, "instances of each model run at once (bench model --instances)")
	precs := fs.String("precision", "", "precisions (default: fp32, bf16 where the CPU has it, int8-static, int8-dynamic)")
	minTime := fs.Duration("min-time", 0, "least time timing each precision of each model (default 2s; --quick 200ms)")
	reps := fs.Int("reps", 0, "least timed passes per precision (default 3; --quick 2)")
	peakTime := fs.Duration("peak-time", 0, "time of each peak measurement (default 300ms; --quick 100ms)")
	triadMiB := fs.Int("triad-mib", 0, "the triad's three arrays in MiB (default 192; --quick 48)")
	evalModels := fs.String("eval", "", "model folders of Table 15, comma-separated (e.g. the trained SST-2 models); none: Table 15 is not measured")
	evalTask := fs.String("eval-task", "sst2", "Table 15's task: sst2, mnli or squad (eval --task)")
	evalData := fs.String("eval-data", "", "Table 15's labelled data (eval --data)")
	evalLimit := fs.Int("eval-limit", 0, "evaluate only the first N examples (0: all; --quick: 128)")
	calib := fs.String("calib", "", "calibration texts for int8-static in Table 15, one per line or a GLUE TSV; the first 256 are used (--quick: 64) (default: train.tsv beside --eval-data, when it is there)")
	quick := fs.Bool("quick", false, "small models, short timings: the whole run in under two minutes")
	asJSON := fs.Bool("json", false, "also print the report's JSON on stdout")
	pin := fs.Bool("pin", true, "with one thread and one instance, pin the run to one CPU")
	benchstat := fs.String("benchstat", "", "also write every timed pass of every model in Go's benchmark format to this file (- for stdout), for golang.org/x/perf/cmd/benchstat before/after comparisons")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench paper: unexpected arguments %q", fs.Args())
	}
	if err := checkThreads("bench paper", *threads); err != nil {
		return err
	}
	if *batch < 1 || *instances < 1 || *reps < 0 || *minTime < 0 || *peakTime < 0 || *triadMiB < 0 || *evalLimit < 0 {
		return fmt.Errorf("bench paper: --batch and --instances must be positive, --reps, --min-time, --peak-time, --triad-mib and --eval-limit not negative")
	}
	if most := runtime.NumCPU(); *instances**threads > most {
		return fmt.Errorf("bench paper: --instances %d x --threads %d: at most %d CPUs in all (the CPUs this process may use)", *instances, *threads, most)
	}
	o := bench.PaperOptions{Batch: *batch, Threads: *threads, Instances: *instances, MinTime: *minTime, Reps: *reps, PeakTime: *peakTime,
		TriadBytes: int64(*triadMiB) << 20}
	if *quick {
		o.Models = []bench.PaperModel{{Arch: "bert-base", Seq: 64}, {Arch: "distilbert", Seq: 64}, {Arch: "xlmr-base", Seq: 64}}
		o.MinTime, o.Reps, o.PeakTime = cmpOr(o.MinTime, 200*time.Millisecond), cmpOr(o.Reps, 2), cmpOr(o.PeakTime, 100*time.Millisecond)
		o.TriadBytes = cmpOr(o.TriadBytes, 48<<20)
		o.GEMMReps, o.GEMMRepTime = 2, 5*time.Millisecond
		if *evalLimit == 0 {
			*evalLimit = 128
		}
	}
	if *modelList != "" {
		var err error
		if o.Models, err = parsePaperModels(*modelList); err != nil {
			return fmt.Errorf("bench paper: %w", err)
		}
	}
	if *precs != "" {
		list, err := models.ParsePrecisions(*precs)
		if err != nil {
			return fmt.Errorf("bench paper: %w", err)
		}
		o.Precisions = list
	} else {
		o.Precisions = bench.DefaultPaperPrecisions(cpu.X86)
	}
	var evals []string
	if *evalModels != "" {
		if *evalData == "" {
			return fmt.Errorf("bench paper: --eval needs --eval-data (the labelled data of --eval-task)")
		}
		for _, m := range strings.Split(*evalModels, ",") {
			if m = strings.TrimSpace(m); m != "" {
				evals = append(evals, m)
			}
		}
		// Read the data before the long measurements: a bad file fails now.
		if _, err := newEvaluator(*evalTask, *evalData, *evalLimit); err != nil {
			return fmt.Errorf("bench paper: --eval-data: %w", err)
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("bench paper: --out: %w", err)
	}
	sel, err := selector.DefaultSync()
	if err != nil {
		return fmt.Errorf("bench paper: %w", err)
	}
	o.Selector = sel

	start := time.Now()
	bar := newStepBar(stderr, start)
	o.Progress = bar.step
	first := true
	o.Estimate = func(rest time.Duration) {
		if first {
			bar.note(fmt.Sprintf("expected time of the rest of the run: about %s (per part: building, quantizing, tuning uncached shapes, passes from their FLOPs and this core's FP32 peak)", rest.Round(time.Second)))
			first = false
			return
		}
		bar.note(fmt.Sprintf("rest of the run: about %s (rescaled by the parts so far)", rest.Round(time.Second)))
	}
	if *quick {
		bar.note("--quick: small models and short timings (under two minutes); leave it out for the paper's models")
	} else {
		bar.note("full run: the paper's models; --quick runs in under two minutes")
	}
	undo := measureSetup(stderr, *threads == 1 && *instances == 1 && *pin, true)
	rep, err := bench.Paper(ctx, o)
	undo()
	if err != nil {
		bar.done()
		return fmt.Errorf("bench paper: %w", err)
	}
	if len(evals) > 0 {
		calibN := 256
		if *quick {
			calibN = 64
		}
		acc, notes, err := paperAccuracy(ctx, evals, *evalTask, *evalData, *evalLimit, *calib, calibN, o.Precisions, *threads, bar, stderr)
		if err != nil {
			bar.done()
			return fmt.Errorf("bench paper: Table 15: %w", err)
		}
		rep.Accuracy, rep.Notes = acc, append(rep.Notes, notes...)
	}
	bar.done()
	rep.Meta = paperMeta(o, sel, args, *quick, start)
	files, err := rep.WriteFiles(*out)
	if err != nil {
		return err
	}
	if err := writeBenchstat(*benchstat, stdout, rep.BenchLines()); err != nil {
		return fmt.Errorf("bench paper: %w", err)
	}
	if *asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		if err := rep.WriteMarkdown(stdout); err != nil {
			return err
		}
	}
	printEstimate(stderr, rep)
	fmt.Fprintf(stderr, "bench paper: %d files in %s (%s), %.0f s\n", len(files), *out, strings.Join(baseNames(files), ", "), time.Since(start).Seconds())
	return nil
}

// printEstimate prints each part's estimate against what it took, and
// the peak resident memory of the measurements.
func printEstimate(w io.Writer, rep *bench.PaperReport) {
	if len(rep.Parts) > 0 && len(rep.Actual) > 0 {
		var est, act float64
		for i, p := range rep.Parts {
			if i >= len(rep.Actual) {
				break
			}
			est, act = est+p.Time.Seconds(), act+rep.Actual[i]
			fmt.Fprintf(w, "bench paper: %-28s estimated %5.0f s, took %5.0f s\n", p.Name, p.Time.Seconds(), rep.Actual[i])
		}
		fmt.Fprintf(w, "bench paper: %-28s estimated %5.0f s, took %5.0f s (%+.0f%%)\n", "after the peaks, in all", est, act, 100*(est-act)/max(act, 1e-9))
	}
	if rep.PeakRSS > 0 {
		fmt.Fprintf(w, "bench paper: peak resident memory %.2f GB (VmHWM)\n", float64(rep.PeakRSS)/1e9)
	}
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

func baseNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Base(f)
	}
	return out
}

// parsePaperModels reads ARCH[:SEQ],... (SEQ 128 when left out).
func parsePaperModels(s string) ([]bench.PaperModel, error) {
	var out []bench.PaperModel
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		m := bench.PaperModel{Arch: f, Seq: 128}
		if i := strings.LastIndex(f, ":"); i > 0 {
			n, err := strconv.Atoi(f[i+1:])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--models %q: sequence length %q is not a positive number", f, f[i+1:])
			}
			m.Arch, m.Seq = f[:i], n
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--models %q names no model", s)
	}
	return out, nil
}

// paperAccuracy evaluates each model at each precision (Table 15), as
// eval does; int8-static is calibrated on the first calibN texts of
// calibFile or sentences of train.tsv beside data, and left out with a
// note when neither exists.
func paperAccuracy(ctx context.Context, dirs []string, task, data string, limit int, calibFile string, calibN int, precs []models.Precision,
	threads int, bar *stepBar, stderr io.Writer) ([]bench.AccuracyRow, []string, error) {
	var notes []string
	ev, err := newEvaluator(task, data, limit)
	if err != nil {
		return nil, nil, err
	}
	var calib []string
	if calibFile != "" {
		if calib, err = bench.ReadTexts(calibFile, calibN); err != nil {
			return nil, nil, err
		}
	} else if tr := filepath.Join(filepath.Dir(data), "train.tsv"); task == "sst2" && fileExists(tr) {
		ex, err := bench.ReadSST2(tr)
		if err != nil {
			return nil, nil, err
		}
		for _, x := range ex[:min(calibN, len(ex))] {
			calib = append(calib, x.Text)
		}
	}
	var rows []bench.AccuracyRow
	for i, dir := range dirs {
		var fp32Pred []string
		for _, p := range precs {
			if p == models.PrecisionInt8Static && len(calib) == 0 {
				notes = append(notes, fmt.Sprintf("Table 15: int8-static of %s left out: no calibration texts (--calib)", dir))
				continue
			}
			bar.sub(fmt.Sprintf("Table 15: %s (%d/%d) at %s", filepath.Base(dir), i+1, len(dirs), p))
			o := models.Options{Threads: threads, Precision: p, Logger: newLogger(stderr)}
			if p == models.PrecisionInt8Static {
				o.Calib = calib
			}
			pl, err := models.Load(ctx, dir, o)
			if err != nil {
				return nil, nil, fmt.Errorf("%s at %s: %w", dir, p, err)
			}
			preds, r, err := ev.run(ctx, pl, 64, func(done, total int) {})
			pl.Close()
			if err != nil {
				return nil, nil, fmt.Errorf("%s at %s: %w", dir, p, err)
			}
			row := bench.AccuracyRow{Model: filepath.Base(dir), Task: task, Precision: p.String(), N: r.N, Accuracy: r.Accuracy}
			if r.F1 != nil {
				f1, em := *r.F1/100, *r.ExactMatch/100
				row.F1, row.EM = &f1, &em
			}
			if p == models.PrecisionFP32 {
				fp32Pred = preds
			}
			if fp32Pred != nil {
				same := 0
				for j := range preds {
					if preds[j] == fp32Pred[j] {
						same++
					}
				}
				a := float64(same) / float64(len(preds))
				row.Agreement = &a
			}
			rows = append(rows, row)
		}
	}
	return rows, notes, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// paperMeta labels the report: the CPU, the date, the commit, the
// settings and the command that reproduces it.
func paperMeta(o bench.PaperOptions, sel *selector.Selector, args []string, quick bool, start time.Time) bench.PaperMeta {
	f := cpu.X86
	m := bench.PaperMeta{CPU: f.Brand, Features: f.String(), Cores: runtime.NumCPU(), Date: start, Commit: commitOf(), Go: runtime.Version(),
		OneDNN: sel.Header().OneDNN, Command: "int8bert bench paper " + strings.Join(quoteArgs(args), " "), Seconds: time.Since(start).Seconds()}
	if m.CPU == "" {
		m.CPU = f.Vendor
	}
	var precs []string
	for _, p := range o.Precisions {
		precs = append(precs, p.String())
	}
	m.Settings = map[string]string{"threads": strconv.Itoa(o.Threads), "batch": strconv.Itoa(o.Batch), "instances": strconv.Itoa(o.Instances),
		"precisions": strings.Join(precs, "+"), "OMP_WAIT_POLICY": cmpOr(os.Getenv("OMP_WAIT_POLICY"), "unset"), "quick": strconv.FormatBool(quick)}
	if v := os.Getenv(cpu.EnvDisable); v != "" {
		m.Settings[cpu.EnvDisable] = v
	}
	return m
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return out
}

// commitOf is the commit the binary was built from (its VCS stamp, with
// "+dirty" for uncommitted changes), or "unknown" (go run, a build
// outside git).
func commitOf() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// stepBar is bench paper's progress: a bar of the steps rewritten in
// place on a terminal, one line per step elsewhere.
type stepBar struct {
	w     io.Writer
	tty   bool
	start time.Time
	last  string
	open  bool
}

func newStepBar(w io.Writer, start time.Time) *stepBar {
	b := &stepBar{w: w, start: start}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

// step shows step of steps.
func (b *stepBar) step(step, steps int, what string) {
	const width = 24
	fill := width * (step - 1) / max(steps, 1)
	b.last = fmt.Sprintf("[%s%s] %d/%d %s (%s)", strings.Repeat("#", fill), strings.Repeat(".", width-fill), step, steps, what,
		time.Since(b.start).Round(time.Second))
	b.show(b.last)
}

// sub shows a stage after the steps (Table 15).
func (b *stepBar) sub(what string) {
	b.show(fmt.Sprintf("[%s] %s (%s)", strings.Repeat("#", 24), what, time.Since(b.start).Round(time.Second)))
}

func (b *stepBar) show(line string) {
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", line)
		b.open = true
		return
	}
	fmt.Fprintln(b.w, line)
}

// note prints a line of its own, keeping the bar.
func (b *stepBar) note(s string) {
	if b.tty && b.open {
		fmt.Fprint(b.w, "\r\033[K")
	}
	fmt.Fprintln(b.w, s)
	if b.tty && b.last != "" {
		fmt.Fprint(b.w, b.last)
	}
}

// done ends the bar's line.
func (b *stepBar) done() {
	if b.tty && b.open {
		fmt.Fprintln(b.w)
		b.open = false
	}
}
