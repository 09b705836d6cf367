package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// openModel opens model (a folder or a Hugging Face model id) through
// models.Load with o on a new selector (with the default tuning cache),
// which the caller closes after the pipeline; on failure it is closed.
// The selector's notes go to o.Logger.
func openModel(ctx context.Context, model string, o models.Options) (*models.Pipeline, *selector.Selector, error) {
	sel, err := newSelector(o.Logger)
	if err != nil {
		return nil, nil, err
	}
	o.Selector = sel
	p, err := models.Load(ctx, model, o)
	if err != nil {
		sel.Close()
		return nil, nil, err
	}
	return p, sel, nil
}

// newSelector is a selector with the default tuning cache whose notes go
// to log (nil: discarded).
func newSelector(log *slog.Logger) (*selector.Selector, error) {
	o := selector.Options{Warn: func(msg string) {
		if log != nil {
			log.Warn(msg, "component", "selector")
		}
	}}
	if p := terminalTuneProgress.Load(); p != nil {
		o.OnTune = p.event
	}
	return selector.New(o)
}

// newServeSelector is serve's selector: as newSelector, but a shape not
// yet tuned runs a default kernel at once and is tuned in the background
// (selector.TuneBackground), so that no request waits for tuning;
// INT8BERT_TUNING=sync keeps tuning on the request path.
func newServeSelector(log *slog.Logger) (*selector.Selector, error) {
	mode := selector.TuneBackground
	if strings.TrimSpace(os.Getenv(selector.EnvTuning)) == "sync" {
		mode = selector.TuneSync
	}
	return selector.New(selector.Options{Tuning: mode, Warn: func(msg string) {
		if log != nil {
			log.Warn(msg, "component", "selector")
		}
	}})
}

// forwardInputs is the --inputs file: [batch][seq] arrays.
type forwardInputs struct {
	InputIDs      [][]int32 `json:"input_ids"`
	AttentionMask [][]int32 `json:"attention_mask"`
	TokenTypeIDs  [][]int32 `json:"token_type_ids"`
}

func (f *forwardInputs) batch() (*models.Inputs, error) {
	if len(f.InputIDs) == 0 || len(f.InputIDs[0]) == 0 {
		return nil, fmt.Errorf("inputs: input_ids is empty")
	}
	in := &models.Inputs{Batch: len(f.InputIDs), Seq: len(f.InputIDs[0])}
	for b, row := range f.InputIDs {
		if len(row) != in.Seq {
			return nil, fmt.Errorf("inputs: input_ids row %d has %d tokens, row 0 has %d (pad the batch)", b, len(row), in.Seq)
		}
		in.IDs = append(in.IDs, row...)
		if f.AttentionMask == nil {
			for range row {
				in.Mask = append(in.Mask, 1)
			}
		} else {
			if b >= len(f.AttentionMask) || len(f.AttentionMask[b]) != in.Seq {
				return nil, fmt.Errorf("inputs: attention_mask does not match input_ids at row %d", b)
			}
			in.Mask = append(in.Mask, f.AttentionMask[b]...)
		}
		if f.TokenTypeIDs != nil {
			if b >= len(f.TokenTypeIDs) || len(f.TokenTypeIDs[b]) != in.Seq {
				return nil, fmt.Errorf("inputs: token_type_ids does not match input_ids at row %d", b)
			}
			in.TypeIDs = append(in.TypeIDs, f.TokenTypeIDs[b]...)
		}
	}
	return in, nil
}

// reshape turns a flat [rows*cols] slice into [rows][cols].
func reshape(x []float32, rows int) [][]float32 {
	if x == nil {
		return nil
	}
	cols := len(x) / rows
	out := make([][]float32, rows)
	for i := range out {
		out[i] = x[i*cols : (i+1)*cols]
	}
	return out
}

func runForward(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder (config.json and weights)")
	inputs := fs.String("inputs", "", "JSON file with input_ids, attention_mask, token_type_ids as [batch][seq]")
	outPath := fs.String("out", "", "write the outputs here (default: stdout)")
	threads := fs.Int("threads", 1, "threads per linear layer")
	precision := fs.String("precision", "", "fp32, bf16, int8-static or int8-dynamic (default: as the model folder holds it; an FP32 model is rounded to bf16 or quantized at load: int8-static needs --calib and a tokenizer in the folder; bf16 needs AVX512-BF16)")
	qf := addQuantFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("forward: unexpected arguments %q", fs.Args())
	}
	if *model == "" || *inputs == "" {
		return fmt.Errorf("forward: --model and --inputs are required")
	}
	if err := checkThreads("forward", *threads); err != nil {
		return err
	}
	prec, err := parsePrecisionFlag(*precision)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	raw, err := os.ReadFile(*inputs)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	var fi forwardInputs
	if err := json.Unmarshal(raw, &fi); err != nil {
		return fmt.Errorf("forward: %s: %w", *inputs, err)
	}
	in, err := fi.batch()
	if err != nil {
		return fmt.Errorf("forward: %s: %w", *inputs, err)
	}
	// An INT8 precision on an FP32 model quantizes it at load: --calib
	// texts need the folder's tokenizer.
	p, sel, err := qf.load(ctx, *model, prec, *threads, 0, stderr)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	defer sel.Close()
	defer p.Close()
	m := p
	out, err := m.Forward(ctx, in, false)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	res := map[string]any{}
	if m.Task() == models.TaskBase {
		hs := make([][][]float32, in.Batch)
		for b := range hs {
			hs[b] = reshape(out.Last[b*in.Seq*out.Hidden:(b+1)*in.Seq*out.Hidden], in.Seq)
		}
		res["last_hidden_state"] = hs
	}
	if out.PoolerOutput != nil && m.Task() == models.TaskBase {
		res["pooler_output"] = reshape(out.PoolerOutput, in.Batch)
	}
	if out.Logits != nil {
		res["logits"] = reshape(out.Logits, in.Batch)
	}
	if out.StartLogits != nil {
		res["start_logits"] = reshape(out.StartLogits, in.Batch)
		res["end_logits"] = reshape(out.EndLogits, in.Batch)
	}
	w := stdout
	if *outPath != "" {
		f, err := os.Create(*outPath)
		if err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		defer f.Close()
		w = f
	}
	return json.NewEncoder(w).Encode(res)
}
