package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models/encoder"
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
}

func addQuantFlags(fs *flag.FlagSet) *quantFlags {
	return &quantFlags{
		calib:        fs.String("calib", "", "calibration texts: one per line (of a tab-separated file, the first column); required for int8-static on an FP32 model"),
		calibSize:    fs.Int("calib-size", 512, "use at most this many calibration texts"),
		alpha:        fs.String("alpha", "0.5", "SmoothQuant migration strength in [0,1], or auto (per-layer search)"),
		rangeKind:    fs.String("range", "max", "static activation range: max or percentile"),
		percentile:   fs.Float64("percentile", smoothquant.DefaultPercentile, "percentile of --range percentile"),
		fallbackSQNR: fs.Float64("fallback-sqnr", 0, "keep in FP32 every linear whose SQNR (dB) stays below this (0: never)"),
	}
}

// options turns the flags into quantization options.
func (q *quantFlags) options(stderr io.Writer, threads int) (encoder.QuantizeOptions, error) {
	a, auto, err := smoothquant.ParseAlpha(*q.alpha)
	if err != nil {
		return encoder.QuantizeOptions{}, err
	}
	o := encoder.QuantizeOptions{Options: smoothquant.Options{Alpha: a, Auto: auto, Range: *q.rangeKind,
		FallbackSQNR: *q.fallbackSQNR, Threads: threads}}
	if *q.rangeKind == smoothquant.RangePercentile {
		o.Percentile = *q.percentile
	}
	o.Progress = progressPrinter(stderr)
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

// load opens --model at precision prec (PrecisionAsStored: as the folder
// holds it), quantizing an FP32 model when an INT8 precision is asked for.
func (q *quantFlags) load(ctx context.Context, model string, prec encoder.Precision, threads int, stderr io.Writer) (*encoder.Pipeline, *selector.Selector, error) {
	p, sel, err := loadPipeline(ctx, model, threads)
	if err != nil {
		return nil, nil, err
	}
	qp, err := q.convert(ctx, p, prec, model, threads, stderr)
	if err != nil {
		p.Close()
		sel.Close()
		return nil, nil, err
	}
	if qp != p {
		// Nothing runs the FP32 model once quantized.
		p.Close()
	}
	return qp, sel, nil
}

// convert returns p at precision prec: p itself, or its quantization. p
// stays the caller's to close either way (the quantized pipeline does not
// need it).
func (q *quantFlags) convert(ctx context.Context, p *encoder.Pipeline, prec encoder.Precision, model string, threads int, stderr io.Writer) (*encoder.Pipeline, error) {
	stored := p.Model.Encoder.Precision()
	if prec == encoder.PrecisionAsStored || prec == stored {
		return p, nil
	}
	if stored.Int8() {
		return nil, fmt.Errorf("%s is an %s model and cannot run as %s (quantize the FP32 model instead)", model, stored, prec)
	}
	texts, err := q.texts()
	if err != nil {
		return nil, err
	}
	if prec == encoder.PrecisionInt8Static && len(texts) == 0 {
		return nil, fmt.Errorf("int8-static on an FP32 model needs calibration texts: give --calib FILE")
	}
	o, err := q.options(stderr, threads)
	if err != nil {
		return nil, err
	}
	o.Source = model
	qp, err := p.Quantize(ctx, texts, prec, o)
	if err != nil {
		return nil, err
	}
	return qp, nil
}

// parsePrecisionFlag reads a --precision value ("" is as stored).
func parsePrecisionFlag(s string) (encoder.Precision, error) {
	if s == "" {
		return encoder.PrecisionAsStored, nil
	}
	return encoder.ParsePrecision(s)
}

func runQuantize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "FP32 model folder or Hugging Face model id")
	mode := fs.String("mode", "static", "static (calibrated per-tensor activation scales) or dynamic (per-token scales at run time)")
	out := fs.String("o", "", "output folder (the INT8 artifact, config.json and the tokenizer)")
	threads := fs.Int("threads", 1, "threads for calibration and the alpha search")
	asJSON := fs.Bool("json", false, "print the recipe as JSON")
	qf := addQuantFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return fmt.Errorf("quantize: --model and -o are required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("quantize: unexpected arguments %q", fs.Args())
	}
	m, err := smoothquant.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	prec := encoder.PrecisionInt8Dynamic
	if m == smoothquant.Static {
		prec = encoder.PrecisionInt8Static
	}
	if *qf.calib == "" && prec == encoder.PrecisionInt8Static {
		return fmt.Errorf("quantize: --mode static needs --calib FILE")
	}
	if dir, err := encoder.ResolveModel(ctx, *model, ""); err == nil {
		a, errA := os.Stat(dir)
		b, errB := os.Stat(*out)
		if errA == nil && errB == nil && os.SameFile(a, b) {
			return fmt.Errorf("quantize: -o %s is the FP32 model's own folder: it would open as INT8 from then on; choose another folder", *out)
		}
	}
	p, sel, err := loadPipeline(ctx, *model, *threads)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	defer sel.Close()
	defer p.Close()
	if p.Model.Encoder.Precision().Int8() {
		return fmt.Errorf("quantize: %s is already an INT8 model", *model)
	}
	q, err := qf.convert(ctx, p, prec, *model, *threads, stderr)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	defer q.Close()
	if err := q.Save(*out); err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	r := q.Model.Encoder.Recipe()
	if *asJSON {
		return writeJSON(stdout, map[string]any{"out": *out, "recipe": jsonSafeRecipe(r)})
	}
	fmt.Fprintf(stdout, "wrote %s/%s: %s, alpha %s, %d calibration texts (%d tokens)\n", *out, encoder.ArtifactFile, r.Mode, r.Alpha, r.CalibTexts, r.CalibRows)
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
