package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/tokenizer"
)

// evalResult is one precision's score. Accuracy is a fraction (sst2,
// mnli); ExactMatch and F1 are percentages (squad, as the official
// script prints them).
type evalResult struct {
	Precision  string   `json:"precision"`
	Accuracy   *float64 `json:"accuracy,omitempty"`
	ExactMatch *float64 `json:"exact_match,omitempty"`
	F1         *float64 `json:"f1,omitempty"`
	// AgreementWithFP32 is the fraction of examples whose prediction
	// equals FP32's (null without an FP32 run).
	AgreementWithFP32 *float64 `json:"agreement_with_fp32"`
	N                 int      `json:"n"`
	predictions       []string
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder or Hugging Face model id (FP32, or an INT8 artifact)")
	task := fs.String("task", "sst2", "sst2 (GLUE TSV), mnli (GLUE TSV) or squad (SQuAD v1.1/v2.0 JSON)")
	data := fs.String("data", "", "the evaluation file")
	precs := fs.String("precision", "fp32,int8-static,int8-dynamic", "precisions to evaluate (an INT8 artifact: its own only)")
	threads := fs.Int("threads", 1, "threads per linear layer")
	batch := fs.Int("batch", 256, "examples per call of the library, with progress after each (the library splits a call into forward passes of at most --max-batch-tokens tokens)")
	maxLen := fs.Int("max-length", 0, "longest encoding in tokens (default: the model's, at most 512)")
	limit := fs.Int("limit", 0, "evaluate only the first N examples (0: all)")
	asJSON := fs.Bool("json", false, "print JSON")
	qf := addQuantFlags(fs)
	qf.addBatchTokensFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *data == "" {
		return fmt.Errorf("eval: --model and --data are required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("eval: unexpected arguments %q", fs.Args())
	}
	if *batch < 1 {
		return fmt.Errorf("eval: --batch must be >= 1")
	}
	if err := checkThreads("eval", *threads); err != nil {
		return err
	}
	if err := checkMaxLength(fs, *maxLen); err != nil {
		return err
	}
	list, err := models.ParsePrecisions(*precs)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	ev, err := newEvaluator(*task, *data, *limit)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	base, sel, err := qf.load(ctx, *model, models.PrecisionAsStored, *threads, *maxLen, stderr)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer sel.Close()
	defer base.Close()
	// Check every precision before evaluating any: an INT8 artifact runs as
	// itself only (and, without --precision, is evaluated so), int8-static
	// on an FP32 model needs --calib.
	stored := base.Precision()
	precSet := false
	fs.Visit(func(f *flag.Flag) { precSet = precSet || f.Name == "precision" })
	if stored.Int8() && !precSet {
		list = []models.Precision{stored}
	}
	for _, prec := range list {
		switch {
		case stored.Int8() && prec != stored:
			return fmt.Errorf("eval: %s is an %s model and cannot run as %s (quantize the FP32 model instead)", *model, stored, prec)
		case !stored.Int8() && prec == models.PrecisionInt8Static && *qf.calib == "":
			return fmt.Errorf("eval: int8-static on an FP32 model needs calibration texts: give --calib FILE, or leave int8-static out of --precision")
		}
	}
	var results []evalResult
	var fp32Pred []string
	for _, prec := range list {
		p := base
		if prec != stored {
			// An FP32 model quantized at load (the checks above hold).
			o, err := qf.modelOptions(prec, *threads, *maxLen, stderr)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			o.Selector = sel
			if p, err = models.Load(ctx, *model, o); err != nil {
				return fmt.Errorf("eval: %w", err)
			}
		}
		pr := progressPrinter(stderr)
		preds, r, err := ev.run(ctx, p, *batch, func(done, total int) { pr("evaluating "+prec.String(), done, total) })
		if p != base {
			p.Close()
		}
		if err != nil {
			return fmt.Errorf("eval: %s: %w", prec, err)
		}
		r.Precision = prec.String()
		if prec == models.PrecisionFP32 {
			fp32Pred = preds
		}
		results = append(results, r)
		results[len(results)-1].predictions = preds
	}
	for i := range results {
		if fp32Pred != nil {
			same := 0
			for j, p := range results[i].predictions {
				if p == fp32Pred[j] {
					same++
				}
			}
			a := float64(same) / float64(len(fp32Pred))
			results[i].AgreementWithFP32 = &a
		}
	}
	if *asJSON {
		out := struct {
			Task    string       `json:"task"`
			Results []evalResult `json:"results"`
		}{*task, results}
		return writeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "%s on %s (%d examples)\n", *task, *data, ev.n())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if *task == "squad" {
		fmt.Fprintln(tw, "precision\texact match\tF1\tagreement with fp32\t")
	} else {
		fmt.Fprintln(tw, "precision\taccuracy\tagreement with fp32\t")
	}
	for _, r := range results {
		agree := "-"
		if r.AgreementWithFP32 != nil {
			agree = fmt.Sprintf("%.4f", *r.AgreementWithFP32)
		}
		if *task == "squad" {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t\n", r.Precision, *r.ExactMatch, *r.F1, agree)
		} else {
			fmt.Fprintf(tw, "%s\t%.4f\t%s\t\n", r.Precision, *r.Accuracy, agree)
		}
	}
	return tw.Flush()
}

// evaluator scores one task's data on a pipeline.
type evaluator struct {
	task  string
	cls   []bench.Example
	squad []bench.SquadExample
}

func newEvaluator(task, path string, limit int) (*evaluator, error) {
	e := &evaluator{task: task}
	var err error
	switch task {
	case "sst2":
		e.cls, err = bench.ReadSST2(path)
	case "mnli":
		e.cls, err = bench.ReadMNLI(path)
	case "squad":
		e.squad, err = bench.ReadSQuAD(path)
	default:
		return nil, fmt.Errorf("--task %q: want sst2, mnli or squad", task)
	}
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		e.cls = e.cls[:min(limit, len(e.cls))]
		e.squad = e.squad[:min(limit, len(e.squad))]
	}
	for i, x := range e.cls {
		if x.Label == "" {
			return nil, fmt.Errorf("%s: example %d has no label (a GLUE test file?): accuracy needs labelled data", path, i+1)
		}
	}
	if e.n() == 0 {
		return nil, fmt.Errorf("%s holds no examples", path)
	}
	return e, nil
}

func (e *evaluator) n() int { return len(e.cls) + len(e.squad) }

// labelIndex maps a dataset label onto the model's class index: by the
// model's label names (id2label) when they name the classes, else as a
// number (SST-2's 0/1) or by GLUE's MNLI order.
func labelIndex(label string, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(n, label) {
			return i, nil
		}
	}
	if i, err := strconv.Atoi(label); err == nil && i >= 0 && i < len(names) {
		return i, nil
	}
	for i, n := range bench.MNLILabels {
		if n == label && i < len(names) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("label %q matches none of the model's labels %v", label, names)
}

// run predicts every example on p; predictions are returned as strings
// (class index or answer text) for the agreement.
func (e *evaluator) run(ctx context.Context, p *models.Pipeline, batch int, progress func(done, total int)) ([]string, evalResult, error) {
	var preds []string
	r := evalResult{N: e.n()}
	if e.task == "squad" {
		answers := map[string]string{}
		for i, x := range e.squad {
			ans, err := p.Answer(ctx, x.Question, x.Context, models.QAOptions{})
			if err != nil {
				return nil, r, fmt.Errorf("example %s: %w", x.ID, err)
			}
			a := ""
			if len(ans) > 0 {
				a = ans[0].Text
			}
			answers[x.ID] = a
			preds = append(preds, a)
			if (i+1)%16 == 0 || i+1 == len(e.squad) {
				progress(i+1, len(e.squad))
			}
		}
		s, err := bench.ScoreSQuAD(answers, e.squad)
		if err != nil {
			return nil, r, err
		}
		r.ExactMatch, r.F1 = &s.EM, &s.F1
		return preds, r, nil
	}
	correct := 0
	for i := 0; i < len(e.cls); i += batch {
		chunk := e.cls[i:min(i+batch, len(e.cls))]
		var res []models.Classification
		var err error
		if e.task == "mnli" {
			pairs := make([]tokenizer.Pair, len(chunk))
			for k, x := range chunk {
				pairs[k] = tokenizer.Pair{A: x.Text, B: x.Pair}
			}
			res, err = p.ClassifyPairs(ctx, pairs, models.ClassifyOptions{})
		} else {
			texts := make([]string, len(chunk))
			for k, x := range chunk {
				texts[k] = x.Text
			}
			res, err = p.Classify(ctx, texts, models.ClassifyOptions{})
		}
		if err != nil {
			return nil, r, err
		}
		for k, c := range res {
			want, err := labelIndex(chunk[k].Label, p.Labels())
			if err != nil {
				return nil, r, fmt.Errorf("example %d: %w", i+k+1, err)
			}
			if c.Index == want {
				correct++
			}
			preds = append(preds, strconv.Itoa(c.Index))
		}
		progress(min(i+batch, len(e.cls)), len(e.cls))
	}
	acc := float64(correct) / float64(len(e.cls))
	r.Accuracy = &acc
	return preds, r, nil
}
