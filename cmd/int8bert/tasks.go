package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/int8bert/int8bert/models/encoder"
)

// readLines reads the non-empty lines of r.
func readLines(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// runTask implements classify, embed and qa: texts from the arguments or,
// without any, one per line on stdin; one JSON object per line out.
func runTask(ctx context.Context, task string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(task, flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder or Hugging Face model id")
	threads := fs.Int("threads", 1, "threads per linear layer")
	maxLen := fs.Int("max-length", 0, "longest encoding in tokens (default: the model's, at most 512)")
	batch := fs.Int("batch", 32, "texts per forward pass")
	pooling := fs.String("pooling", "mean", "embed: mean or cls")
	normalize := fs.Bool("normalize", true, "embed: L2-normalise the vectors")
	question := fs.String("question", "", "qa: the question (the context comes from the arguments or stdin)")
	nbest := fs.Int("n-best", 1, "qa: answers to return")
	maxAnswer := fs.Int("max-answer-length", 30, "qa: longest answer in tokens")
	stride := fs.Int("doc-stride", 128, "qa: tokens shared by consecutive windows of a long context")
	precision := fs.String("precision", "", "fp32, int8-static or int8-dynamic (default: as the model folder holds it; an FP32 model is quantized at load)")
	qf := addQuantFlags(fs)
	cf := addClassifyFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	copts, err := cf.options()
	if err != nil {
		return fmt.Errorf("%s: %w", task, err)
	}
	if *model == "" {
		return fmt.Errorf("%s: --model is required", task)
	}
	prec, err := parsePrecisionFlag(*precision)
	if err != nil {
		return fmt.Errorf("%s: %w", task, err)
	}
	if *batch < 1 {
		return fmt.Errorf("%s: --batch must be >= 1", task)
	}
	texts := fs.Args()
	if len(texts) == 0 {
		if texts, err = readLines(stdin); err != nil {
			return fmt.Errorf("%s: reading stdin: %w", task, err)
		}
	}
	if len(texts) == 0 {
		return fmt.Errorf("%s: no input text (give texts as arguments or one per line on stdin)", task)
	}
	p, sel, err := qf.load(ctx, *model, prec, *threads, *maxLen, stderr)
	if err != nil {
		return fmt.Errorf("%s: %w", task, err)
	}
	defer sel.Close()
	defer p.Close()
	enc := json.NewEncoder(stdout)
	switch task {
	case "qa":
		if *question == "" {
			return fmt.Errorf("qa: --question is required")
		}
		for _, c := range texts {
			ans, err := p.Answer(ctx, *question, c, encoder.QAOptions{NBest: *nbest, MaxAnswerLength: *maxAnswer, DocStride: *stride})
			if err != nil {
				return fmt.Errorf("qa: %w", err)
			}
			if err := enc.Encode(map[string]any{"question": *question, "answers": ans}); err != nil {
				return err
			}
		}
		return nil
	}
	pool := encoder.PoolMean
	switch *pooling {
	case "mean":
	case "cls":
		pool = encoder.PoolCLS
	default:
		return fmt.Errorf("embed: --pooling %q (mean or cls)", *pooling)
	}
	for i := 0; i < len(texts); i += *batch {
		chunk := texts[i:min(i+*batch, len(texts))]
		if task == "classify" {
			res, err := p.Classify(ctx, chunk, copts)
			if err != nil {
				return fmt.Errorf("classify: %w", err)
			}
			for k, r := range res {
				if err := enc.Encode(cf.record(chunk[k], r)); err != nil {
					return err
				}
			}
			continue
		}
		vecs, err := p.Embed(ctx, chunk, encoder.EmbedOptions{Pool: pool, Normalize: *normalize})
		if err != nil {
			return fmt.Errorf("embed: %w", err)
		}
		for k, v := range vecs {
			if err := enc.Encode(map[string]any{"text": chunk[k], "embedding": v}); err != nil {
				return err
			}
		}
	}
	return nil
}
