package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/int8bert/int8bert/models"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/int8bert/int8bert/bench"
)

// demoSentences are classified at every precision.
var demoSentences = []string{
	"a charming and often affecting journey .",
	"the plot is nothing but boilerplate clichés from start to finish .",
	"it 's a masterpiece of pacing , wit and warmth .",
	"an ugly , pointless and very long movie .",
}

// runDemo is the project's main job: quantize a small real SST-2 model that
// ships with the project (or a Hugging Face model given by id) with
// SmoothQuant in both modes and compare FP32, INT8-static and INT8-dynamic:
// predictions, SST-2 dev accuracy, and speed.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "assets/sst2-xlmr-mini", "sequence classifier: a folder or a Hugging Face model id")
	data := fs.String("data", "assets/sst2/dev.tsv", "SST-2 dev TSV for the accuracy")
	threads := fs.Int("threads", 1, "threads per linear layer")
	seq := fs.Int("seq", 128, "tokens per sequence in the speed test")
	minTime := fs.Duration("min-time", time.Second, "least time spent timing each precision")
	qf := addQuantFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo: unexpected arguments %q", fs.Args())
	}
	if err := checkThreads("demo", *threads); err != nil {
		return err
	}
	if *qf.calib == "" {
		*qf.calib = "assets/sst2/calib.tsv"
	}
	// The defaults are the files that ship in assets/: paths relative to
	// the repository root, never Hugging Face model ids.
	for _, f := range []struct {
		flag, path string
	}{{"model", *model}, {"calib", *qf.calib}} {
		if isSet(fs, f.flag) {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("demo: no such file or folder %s (the demo's --%s, shipped in the repository's assets/): run the demo from the repository root, or give --%s",
				f.path, f.flag, f.flag)
		}
	}
	if *threads == 1 {
		if unpin, _, err := pinThread(); err == nil {
			defer unpin()
		}
	}
	t0 := time.Now()
	fp32, sel, err := qf.load(ctx, *model, models.PrecisionAsStored, *threads, 0, stderr)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer sel.Close()
	defer fp32.Close()
	m := fp32
	cfg := m.Config()
	fmt.Fprintf(stdout, "model %s: %s, %d layers, hidden %d, %d heads, FFN %d, vocabulary %d (loaded in %v)\n",
		*model, m.Describe(), cfg.Layers, cfg.Hidden, cfg.Heads, cfg.Intermediate, cfg.Vocab, time.Since(t0).Round(time.Millisecond))
	if m.Task() != models.TaskSequenceClassification {
		return fmt.Errorf("demo: %s is %s; the demo needs a sequence classifier", *model, m.Describe())
	}
	if m.Precision().Int8() {
		return fmt.Errorf("demo: %s is already an INT8 model; the demo quantizes an FP32 one", *model)
	}
	texts, err := qf.texts()
	if err != nil {
		return fmt.Errorf("demo: calibration texts: %w", err)
	}
	fmt.Fprintf(stdout, "calibrating on %d sentences of %s, SmoothQuant alpha %s\n", len(texts), *qf.calib, *qf.alpha)
	pipes := []*models.Pipeline{fp32}
	for _, prec := range []models.Precision{models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
		t := time.Now()
		qo, err := qf.options(io.Discard, *threads)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		qo.Source = *model
		q, err := fp32.Quantize(ctx, texts, prec, qo)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer q.Close()
		pipes = append(pipes, q)
		fmt.Fprintf(stdout, "  %s: calibrated and quantized in %v (the first run also tunes the kernels for new shapes; cached)\n", prec, time.Since(t).Round(time.Millisecond))
	}

	fmt.Fprintln(stdout, "\npredictions (label, probability):")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sentence\tfp32\tint8-static\tint8-dynamic")
	var rows [][]string
	for _, p := range pipes {
		res, err := p.Classify(ctx, demoSentences, models.ClassifyOptions{})
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		for i, r := range res {
			if len(rows) <= i {
				rows = append(rows, []string{demoSentences[i]})
			}
			rows[i] = append(rows[i], fmt.Sprintf("%s %.3f", r.Label, r.Score))
		}
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(m.Labels()) == 2 {
		ev, err := newEvaluator("sst2", *data, 0)
		if err != nil {
			fmt.Fprintf(stdout, "\nSST-2 accuracy skipped: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "\nSST-2 dev accuracy (%s, %d sentences):\n", *data, ev.n())
			tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "precision\taccuracy\tagreement with fp32")
			var ref []string
			for i, p := range pipes {
				preds, r, err := ev.run(ctx, p, 32, func(int, int) {})
				if err != nil {
					return fmt.Errorf("demo: %w", err)
				}
				if i == 0 {
					ref = preds
				}
				same := 0
				for j := range preds {
					if preds[j] == ref[j] {
						same++
					}
				}
				fmt.Fprintf(tw, "%s\t%.4f\t%.4f\n", p.Precision(), *r.Accuracy, float64(same)/float64(len(ref)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}

	dir, err := (&models.Options{Logger: newLogger(stderr), AllowSymlinksOutside: *qf.allowSymlinks}).Resolve(ctx, *model)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	seqLen := min(*seq, cfg.MaxSeq())
	fmt.Fprintf(stdout, "\nspeed (seq %d, batch 1, %d thread(s), median of timed passes):\n", seqLen, *threads)
	rep, err := bench.Model(ctx, bench.ModelOptions{Arch: dir, Seq: seqLen, Batch: 1, Threads: *threads, MinTime: *minTime,
		Selector: sel})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "precision\tseq/s\tms/seq\tlinear ms\tspeed-up vs fp32\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.2f\t%.2fx\t\n", r.Precision, r.SeqPerS, r.MsPerBatch, r.LinearMs, r.SpeedupVsFP32)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printInt8Tier(stdout, rep.Int8, rep.Int8Kernels, peakRatio(rep.Results)); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nlarger models: int8bert bench model --arch bert-large --seq 256 (random weights of the real shapes)")
	return nil
}
