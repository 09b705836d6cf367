package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/int8bert/int8bert/models"
	"io"
	"strings"

	"github.com/int8bert/int8bert/tokenizer"
)

// readLines reads every line of r (a final \r removed), blank ones
// included, so that the output of classify, embed and qa lines up with
// their input.
func readLines(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		out = append(out, strings.TrimRight(sc.Text(), "\r"))
	}
	return out, sc.Err()
}

// lineError is the output object of an input line without a result: a
// blank line, or (with --lenient) a text the model refuses as bad input.
// line is the line of stdin, or the position among the arguments, from 1.
func lineError(line int, text, msg string) map[string]any {
	return map[string]any{"line": line, "text": text, "error": msg}
}

// lineResults runs do on the texts of a chunk that are not blank and
// returns one output object per text, in order: do's, or a lineError for a
// blank text and, with lenient, for a text do refuses as bad input
// (models.ErrInput); without lenient such a text is an error naming its
// line. first is the line of texts[0].
func lineResults(texts []string, first int, lenient bool, do func([]string) ([]map[string]any, error)) ([]map[string]any, error) {
	out := make([]map[string]any, len(texts))
	var idx []int
	var live []string
	for k, t := range texts {
		if strings.TrimSpace(t) == "" {
			out[k] = lineError(first+k, t, "blank line")
			continue
		}
		idx = append(idx, k)
		live = append(live, t)
	}
	if len(live) == 0 {
		return out, nil
	}
	res, err := do(live)
	if err == nil {
		for j, k := range idx {
			out[k] = res[j]
		}
		return out, nil
	}
	if !errors.Is(err, models.ErrInput) {
		return nil, err
	}
	// Some text is bad input: run them one at a time to find which.
	for j, k := range idx {
		r, err := do(live[j : j+1])
		switch {
		case err == nil:
			out[k] = r[0]
		case !errors.Is(err, models.ErrInput):
			return nil, err
		case lenient:
			out[k] = lineError(first+k, texts[k], err.Error())
		default:
			return nil, fmt.Errorf("line %d: %w (--lenient reports such lines and goes on)", first+k, err)
		}
	}
	return out, nil
}

// runTask implements classify, embed, qa, fill-mask, ner and zero-shot: texts from the arguments or,
// without any, one per line on stdin; one JSON object per input line out,
// in order (a blank or, with --lenient, bad line gets an object with its
// "line" and an "error").
func runTask(ctx context.Context, task string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(task, flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder or Hugging Face model id")
	threads := fs.Int("threads", 1, "threads per linear layer (1 to the number of CPUs)")
	maxLen := fs.Int("max-length", 0, "longest encoding in tokens, at most the model's (default: the model's, at most 512)")
	batch := fs.Int("batch", 256, "texts per call of the library, whose results are written before the next (the library splits a call into forward passes of at most --max-batch-tokens tokens)")
	pairs := fs.Bool("pairs", false, "classify: each text is a pair, its two texts separated by a tab (a cross-encoder or an NLI model: text_pair in Hugging Face's pipeline)")
	lenient := fs.Bool("lenient", false, "report a line the model refuses (such as invalid UTF-8) as an error object on its output line and go on (default: an error naming the line)")
	pooling := fs.String("pooling", "", "embed: cls, mean, last-token or splade, as TEI's --pooling (default: the model's own: its sentence-transformers pooling config, else cls); splade (a ForMaskedLM model) prints each text's non-zero SPLADE values as \"sparse\": [{index, value}]")
	targets := fs.String("targets", "", "fill-mask: comma-separated words to score instead of the whole vocabulary (a word outside it: its first token, with a warning on stderr)")
	normalize := fs.Bool("normalize", true, "embed: L2-normalise the vectors")
	question := fs.String("question", "", "qa: the question (the context comes from the arguments or stdin)")
	nbest := fs.Int("n-best", 1, "qa: answers to return")
	maxAnswer := fs.Int("max-answer-length", 30, "qa: longest answer in tokens")
	stride := fs.Int("doc-stride", 0, "qa: tokens shared by consecutive windows of a long context (0: 128, at most a quarter of the model's window; more is refused)")
	precision := fs.String("precision", "", "fp32, bf16, int8-static or int8-dynamic (default: as the model folder holds it; an FP32 model is rounded to bf16 or quantized at load; bf16 needs AVX512-BF16)")
	qf := addQuantFlags(fs)
	qf.addBatchTokensFlag(fs)
	cf := addClassifyFlags(fs)
	tf := addTaskFlags(fs)
	if err := parseFlags(fs, args); err != nil {
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
	if err := checkThreads(task, *threads); err != nil {
		return err
	}
	if err := checkMaxLength(fs, *maxLen); err != nil {
		return err
	}
	if *pairs && task != "classify" {
		return fmt.Errorf("%s: --pairs is for classify", task)
	}
	if task == "qa" && *question == "" {
		return fmt.Errorf("qa: --question is required")
	}
	pool, err := models.ParseTEIPooling(*pooling)
	if err != nil {
		return fmt.Errorf("embed: --pooling: %w", err)
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
	var do func(chunk []string) ([]map[string]any, error)
	switch task {
	case "ner", "zero-shot":
		if do, err = tf.do(ctx, p, task); err != nil {
			return fmt.Errorf("%s: %w", task, err)
		}
	case "qa":
		do = func(chunk []string) ([]map[string]any, error) {
			ans, err := p.Answer(ctx, *question, chunk[0], models.QAOptions{NBest: *nbest, MaxAnswerLength: *maxAnswer, DocStride: *stride})
			if err != nil {
				return nil, err
			}
			return []map[string]any{{"question": *question, "answers": ans}}, nil
		}
		*batch = 1 // one context per call
	case "fill-mask":
		fo := models.FillMaskOptions{TopK: copts.TopK}
		if *targets != "" {
			fo.Targets = strings.Split(*targets, ",")
			_, warns, err := p.ResolveTargets(fo.Targets)
			if err != nil {
				return fmt.Errorf("%s: --targets: %w", task, err)
			}
			for _, w := range warns {
				fmt.Fprintln(stderr, "fill-mask:", w)
			}
		}
		do = func(chunk []string) ([]map[string]any, error) {
			res, err := p.FillMask(ctx, chunk, fo)
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, len(res))
			for k, r := range res {
				out[k] = map[string]any{"text": chunk[k], "result": r.HF()}
			}
			return out, nil
		}
	case "classify":
		do = func(chunk []string) ([]map[string]any, error) {
			if *pairs {
				return classifyPairs(ctx, p, chunk, copts, cf)
			}
			res, err := p.Classify(ctx, chunk, copts)
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, len(res))
			for k, r := range res {
				out[k] = cf.record(chunk[k], r)
			}
			return out, nil
		}
	case "embed":
		if pool == models.PoolSplade {
			do = func(chunk []string) ([]map[string]any, error) {
				vecs, err := p.EmbedSparse(ctx, chunk, models.SparseOptions{})
				if err != nil {
					return nil, err
				}
				out := make([]map[string]any, len(vecs))
				for k, v := range vecs {
					out[k] = map[string]any{"text": chunk[k], "sparse": v}
				}
				return out, nil
			}
			break
		}
		fallthrough
	default:
		do = func(chunk []string) ([]map[string]any, error) {
			vecs, err := p.Embed(ctx, chunk, models.EmbedOptions{Pool: pool, Normalize: *normalize})
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, len(vecs))
			for k, v := range vecs {
				out[k] = map[string]any{"text": chunk[k], "embedding": v}
			}
			return out, nil
		}
	}
	for i := 0; i < len(texts); i += *batch {
		objs, err := lineResults(texts[i:min(i+*batch, len(texts))], i+1, *lenient, do)
		if err != nil {
			return fmt.Errorf("%s: %w", task, err)
		}
		for _, o := range objs {
			if err := enc.Encode(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// classifyPairs classifies lines of two texts separated by a tab; a line
// without a tab is bad input (models.ErrInput), so that lineResults
// names it.
func classifyPairs(ctx context.Context, p *models.Pipeline, lines []string, o models.ClassifyOptions, cf *classifyFlags) ([]map[string]any, error) {
	ps := make([]tokenizer.Pair, len(lines))
	for k, l := range lines {
		a, b, ok := strings.Cut(l, "\t")
		if !ok {
			return nil, fmt.Errorf("no tab between the two texts of a pair (--pairs): %w", models.ErrInput)
		}
		ps[k] = tokenizer.Pair{A: a, B: b}
	}
	res, err := p.ClassifyPairs(ctx, ps, o)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(res))
	for k, r := range res {
		out[k] = cf.record(ps[k].A, r)
		out[k]["text_pair"] = ps[k].B
	}
	return out, nil
}
