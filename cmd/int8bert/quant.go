package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// quantFlags are the flags of every command that may quantize a model at
// load: --calib and SmoothQuant's settings.
type quantFlags struct {
	calib        *string
	calibSize    *int
	alpha        *string
	rangeKind    *string
	percentile   *float64
	fallbackSQNR *float64
	// batchTokens is --max-batch-tokens where the command has it
	// (addBatchTokensFlag), else nil.
	batchTokens *int
	// allowSymlinks is --allow-symlinks-outside
	// (models.Options.AllowSymlinksOutside).
	allowSymlinks *bool
	// tempDir is where a quantization writes its artifact while making
	// it (models.QuantizeOptions.TempDir): quantize's output folder.
	tempDir string
}

// addBatchTokensFlag gives a command that runs texts through a pipeline
// its --max-batch-tokens, the library's micro-batch budget.
func (q *quantFlags) addBatchTokensFlag(fs *flag.FlagSet) {
	q.batchTokens = fs.Int("max-batch-tokens", 0, fmt.Sprintf(
		"tokens of one forward pass, padding included: the library groups a call's texts by length into passes of at most this many (default %d)",
		models.DefaultMaxBatchTokens))
}

func addQuantFlags(fs *flag.FlagSet) *quantFlags {
	q := &quantFlags{
		calib:        fs.String("calib", "", "calibration texts: one per line (of a tab-separated file, the first column); required for int8-static on an FP32 model"),
		calibSize:    fs.Int("calib-size", 512, "use at most this many calibration texts"),
		alpha:        new(string),
		rangeKind:    new(string),
		percentile:   new(float64),
		fallbackSQNR: fs.Float64("fallback-sqnr", 0, "keep in FP32 every linear whose SQNR (dB) stays below this (0: never)"),
		allowSymlinks: fs.Bool("allow-symlinks-outside", false,
			"read a model folder whose symlinks point outside it (refused by default; a hub cache snapshot's links to its blobs are inside)"),
	}
	// Checked as they are parsed, so that a bad value is refused on
	// every command, also where no INT8 precision uses it.
	*q.alpha, *q.rangeKind, *q.percentile = "0.5", smoothquant.RangeMax, smoothquant.DefaultPercentile
	fs.Var(checkedString{q.alpha, func(v string) error { _, _, err := smoothquant.ParseAlpha(v); return err }},
		"alpha", "SmoothQuant migration strength in [0,1], or auto (per-layer search)")
	fs.Var(checkedString{q.rangeKind, func(v string) error {
		if v != smoothquant.RangeMax && v != smoothquant.RangePercentile {
			return fmt.Errorf("want %s or %s", smoothquant.RangeMax, smoothquant.RangePercentile)
		}
		return nil
	}}, "range", "static activation range: max or percentile")
	fs.Var(checkedFloat{q.percentile, func(v float64) error {
		if !(v > 50 && v <= 100) {
			return fmt.Errorf("want more than 50 and at most 100")
		}
		return nil
	}}, "percentile", "percentile of --range percentile")
	return q
}

// checkedString is a string flag whose value check refuses when it is
// parsed.
type checkedString struct {
	p     *string
	check func(string) error
}

func (c checkedString) String() string {
	if c.p == nil {
		return ""
	}
	return *c.p
}
func (c checkedString) Get() any { return *c.p }
func (c checkedString) Set(v string) error {
	if err := c.check(v); err != nil {
		return err
	}
	*c.p = v
	return nil
}

// checkedFloat is a float flag whose value check refuses when it is
// parsed (after NaN and the infinities, which no float flag takes).
type checkedFloat struct {
	p     *float64
	check func(float64) error
}

func (c checkedFloat) String() string {
	if c.p == nil {
		return ""
	}
	return strconv.FormatFloat(*c.p, 'g', -1, 64)
}
func (c checkedFloat) Get() any { return *c.p }
func (c checkedFloat) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil:
		return errors.New("want a number")
	case math.IsNaN(f) || math.IsInf(f, 0):
		return errors.New("want a finite number")
	}
	if err := c.check(f); err != nil {
		return err
	}
	*c.p = f
	return nil
}

// options turns the flags into quantization options.
func (q *quantFlags) options(stderr io.Writer, threads int) (models.QuantizeOptions, error) {
	a, auto, err := smoothquant.ParseAlpha(*q.alpha)
	if err != nil {
		return models.QuantizeOptions{}, err
	}
	o := models.QuantizeOptions{Options: smoothquant.Options{Alpha: a, AlphaSet: true, Auto: auto, Range: *q.rangeKind,
		FallbackSQNR: *q.fallbackSQNR, Threads: threads}}
	if *q.rangeKind == smoothquant.RangePercentile {
		o.Percentile = *q.percentile
	}
	o.Progress = progressPrinter(stderr)
	o.TempDir = q.tempDir
	return o, nil
}

// texts reads the calibration texts ("" gives none).
func (q *quantFlags) texts() ([]string, error) {
	if *q.calib == "" {
		return nil, nil
	}
	t, err := bench.ReadTexts(*q.calib, *q.calibSize)
	if err != nil {
		return nil, err
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("%s holds no calibration text", *q.calib)
	}
	return t, nil
}

// modelOptions are the options of loading a model at precision prec
// (PrecisionAsStored: as its folder holds it) with these flags; the
// calibration texts are read for an INT8 precision only.
func (q *quantFlags) modelOptions(prec models.Precision, threads, maxLen int, stderr io.Writer) (models.Options, error) {
	o := models.Options{Threads: threads, MaxLength: maxLen, Precision: prec, Logger: newLogger(stderr),
		AllowSymlinksOutside: *q.allowSymlinks}
	if q.batchTokens != nil {
		o.MaxBatchTokens = *q.batchTokens
	}
	if !prec.Int8() {
		return o, nil
	}
	var err error
	if o.Quant, err = q.options(stderr, threads); err != nil {
		return o, err
	}
	if o.Calib, err = q.texts(); err != nil {
		return o, err
	}
	return o, nil
}

// load opens model through models.Load at precision prec with these flags
// (an FP32 model asked for at an INT8 precision is quantized at load), on
// a new selector that the caller closes after the pipeline.
func (q *quantFlags) load(ctx context.Context, model string, prec models.Precision, threads, maxLen int, stderr io.Writer) (*models.Pipeline, *selector.Selector, error) {
	o, err := q.modelOptions(prec, threads, maxLen, stderr)
	if err != nil {
		return nil, nil, err
	}
	p, sel, err := openModel(ctx, model, o)
	if err != nil && len(o.Calib) == 0 && errors.Is(err, smoothquant.ErrCalibration) {
		return nil, nil, fmt.Errorf("int8-static on an FP32 model needs calibration texts: give --calib FILE (%w)", err)
	}
	return p, sel, err
}

// parsePrecisionFlag reads a --precision value ("" is as stored).
func parsePrecisionFlag(s string) (models.Precision, error) {
	if s == "" {
		return models.PrecisionAsStored, nil
	}
	return models.ParsePrecision(s)
}

func runQuantize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "FP32 model folder or Hugging Face model id")
	mode := fs.String("mode", "static", "static (calibrated per-tensor activation scales) or dynamic (per-token scales at run time)")
	out := fs.String("o", "", "output folder (the INT8 artifact, config.json and the tokenizer)")
	threads := fs.Int("threads", 1, "threads for calibration and the alpha search")
	asJSON := fs.Bool("json", false, "print the recipe as JSON")
	tuneRecord := fs.Bool("tune-record", true, "tune the artifact's shapes for one sequence of every length up to the model's longest before saving, so that its tuning record (tuning.json) covers every length on this CPU")
	memProfile := fs.String("memprofile", "", "write a heap profile of the highest live heap to this file (go tool pprof); it collects at each new high, so measure the peak without it")
	qf := addQuantFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return fmt.Errorf("quantize: --model and -o are required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("quantize: unexpected arguments %q", fs.Args())
	}
	if err := checkThreads("quantize", *threads); err != nil {
		return err
	}
	m, err := smoothquant.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	prec := models.PrecisionInt8Dynamic
	if m == smoothquant.Static {
		prec = models.PrecisionInt8Static
	}
	if *qf.calib == "" && prec == models.PrecisionInt8Static {
		return fmt.Errorf("quantize: --mode static needs --calib FILE")
	}
	dir, err := (&models.Options{Logger: newLogger(stderr), AllowSymlinksOutside: *qf.allowSymlinks}).Resolve(ctx, *model)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	a, errA := os.Stat(dir)
	b, errB := os.Stat(*out)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return fmt.Errorf("quantize: -o %s is the FP32 model's own folder: it would open as INT8 from then on; choose another folder", *out)
	}
	if _, err := os.Stat(filepath.Join(dir, models.ArtifactFile)); err == nil {
		return fmt.Errorf("quantize: %s is already an INT8 model", *model)
	}
	// The artifact is made in the output folder (on the disk it is saved
	// to, not in a tmpfs /tmp that would hold it in memory).
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	qf.tempDir = *out
	mp := startPeakHeapProfile(*memProfile, stderr)
	defer func() {
		if err := mp.Stop(); err != nil {
			fmt.Fprintf(stderr, "quantize: --memprofile: %v\n", err)
		}
	}()
	q, sel, err := qf.load(ctx, *model, prec, *threads, 0, stderr)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	defer sel.Close()
	defer q.Close()
	if *tuneRecord && sel.Forced() != "" {
		fmt.Fprintf(stderr, "note: %s=%s forces kernels, whose choices are not saved: the tuning record is not extended to every length\n", selector.EnvKernel, sel.Forced())
	}
	if *tuneRecord && sel.Forced() == "" {
		// Row classes make every length up to the longest a few keys per
		// linear (docs/DESIGN.md section 4.4).
		bar := progressPrinter(stderr)
		wo := models.WarmupOptions{MaxBatch: 1, MaxLength: q.MaxLength(),
			Progress: func(done, total int, _ selector.Choice) { bar("tuning the artifact's shapes", done, total) }}
		if err := q.Warmup(ctx, wo); err != nil {
			return fmt.Errorf("quantize: tuning the artifact's shapes: %w", err)
		}
	}
	if err := q.Save(*out); err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	r := q.Recipe()
	if *asJSON {
		return writeJSON(stdout, map[string]any{"out": *out, "recipe": jsonSafeRecipe(r)})
	}
	fmt.Fprintf(stdout, "wrote %s/%s: %s, alpha %s, %d calibration texts (%d tokens)\n", *out, models.ArtifactFile, r.Mode, r.Alpha, r.CalibTexts, r.CalibRows)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "linear\talpha\tSQNR dB\tnote")
	for _, l := range r.Layers {
		note := ""
		if l.Fallback {
			note = "kept in FP32"
		}
		if l.Folded {
			note = "smoothing folded into V"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\n", l.Name, l.Alpha, sqnrText(l.SQNR), note)
	}
	return tw.Flush()
}

func sqnrText(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "exact"
	case v == 0 || math.IsNaN(v):
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// jsonSafeRecipe is the recipe as its own JSON encoding (which handles an
// infinite SQNR).
func jsonSafeRecipe(r *smoothquant.Recipe) json.RawMessage {
	s, err := r.Encode()
	if err != nil {
		return json.RawMessage(`null`)
	}
	return json.RawMessage(s)
}
