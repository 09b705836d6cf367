package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/int8bert/int8bert/bench"
	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/selector"
)

// tuneEpilogues are the epilogue kinds tuned per BERT linear: the raw s32
// GEMM, and the static (per-tensor scale) and dynamic (per-row scale)
// INT8 epilogues the encoder fuses into that layer.
func tuneEpilogues(shapeName string) []string {
	base := []string{"none/s32"}
	switch {
	case strings.HasSuffix(shapeName, "ffn1"):
		return append(base, "zp+scale+colscale+bias+gelu/u8", "zp+rowscale+colscale+bias+gelu/f32")
	case strings.HasSuffix(shapeName, "ffn2"), strings.HasSuffix(shapeName, "attn-out"):
		return append(base, "zp+scale+colscale+bias+residual/f32", "zp+rowscale+colscale+bias+residual/f32")
	}
	return append(base, "zp+scale+colscale+bias/f32", "zp+rowscale+colscale+bias/f32")
}

// tuneF32Epilogues are the FP32 epilogue kinds tuned per BERT linear: the
// plain GEMM and the bias (+GELU, +residual) the FP32 encoder fuses into
// that layer.
func tuneF32Epilogues(shapeName string) []string {
	base := []string{"none/f32"}
	switch {
	case strings.HasSuffix(shapeName, "ffn1"):
		return append(base, "bias+gelu/f32")
	case strings.HasSuffix(shapeName, "ffn2"), strings.HasSuffix(shapeName, "attn-out"):
		return append(base, "bias+residual/f32")
	}
	return append(base, "bias/f32")
}

// f32Kind turns a kind given with -epilogues into an FP32 one: "none"
// (none/s32) becomes none/f32; a kind with INT8 steps or another
// destination has no FP32 form (ok false).
func f32Kind(k selector.EpilogueKind) (selector.EpilogueKind, bool) {
	if k == (selector.EpilogueKind{Out: selector.S32}) {
		k.Out = selector.F32
	}
	_, err := selector.NewKey(selector.OpF32, 1, 1, 1, k, 1)
	return k, err == nil
}

// parseOps reads "u8s8,f32,f32-kernel".
func parseOps(s string) ([]string, error) {
	var ops []string
	for _, f := range strings.Split(s, ",") {
		switch op := strings.TrimSpace(f); op {
		case selector.OpU8S8, selector.OpF32, selector.OpBF16, selector.OpF32Kernel, selector.OpBF16Kernel:
			ops = append(ops, op)
		case selector.OpU8S8Kernel:
			return nil, fmt.Errorf("tune: -ops: %s (INT8 attention's products) is tuned through the model's warm-up: tune --model MODEL", op)
		default:
			return nil, fmt.Errorf("tune: -ops: unknown operation %q (have %s, %s, %s, %s, %s)", op, selector.OpU8S8, selector.OpF32, selector.OpBF16, selector.OpF32Kernel, selector.OpBF16Kernel)
		}
	}
	return ops, nil
}

// parseShapes reads "MxKxN,MxKxN" into shapes.
func parseShapes(s string) ([]bench.Shape, error) {
	var out []bench.Shape
	for _, f := range strings.Split(s, ",") {
		p := strings.Split(strings.TrimSpace(f), "x")
		if len(p) != 3 {
			return nil, fmt.Errorf("shape %q: want MxKxN", f)
		}
		var v [3]int
		for i, x := range p {
			n, err := strconv.Atoi(x)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("shape %q: %q is not a positive integer", f, x)
			}
			v[i] = n
		}
		out = append(out, bench.Shape{Name: f, M: v[0], K: v[1], N: v[2]})
	}
	return out, nil
}

func runTune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	threads := fs.Int("threads", 1, "threads per GEMM")
	cachePath := fs.String("cache", "", "tuning cache file (default $"+selector.EnvCache+" or the user cache dir; \"off\" for none)")
	reps := fs.Int("reps", 5, "timed repetitions per candidate (median)")
	repTime := fs.Duration("rep-time", 20*time.Millisecond, "most time of one repetition (a fast call is repeated within it)")
	keyBudget := fs.Duration("key-budget", selector.DefaultKeyBudget, "most time of one key's timed repetitions, every candidate together (negative: no bound)")
	epilogues := fs.String("epilogues", "", "comma-separated epilogue kinds, e.g. none/s32,zp+scale+colscale+bias+gelu/u8 (default: per layer and operation; f32 uses those with an FP32 form: none, bias, gelu, residual)")
	opsFlag := fs.String("ops", selector.OpU8S8+","+selector.OpF32, "comma-separated operations to tune: u8s8 (INT8 linears), f32 (FP32 linears), bf16 (BF16 linears), f32-kernel and bf16-kernel (FP32 and BF16 attention's products, MxKxN = seq x d x seq and seq x seq x d; no epilogue)")
	shapes := fs.String("shapes", "", "comma-separated MxKxN shapes (default: the BERT shapes at M=128 and M=256)")
	pin := fs.Bool("pin", true, "with one thread, pin it to one CPU")
	model := fs.String("model", "", "tune this model's own keys (a folder or a Hugging Face model id) through its warm-up, instead of the BERT shapes")
	maxBatch := fs.Int("max-batch", 1, "with --model: the most sequences of one forward pass")
	maxLength := fs.Int("max-length", 0, "with --model: the longest sequence in tokens (default: the model's, at most 512)")
	maxTokens := fs.Int("max-tokens", 0, "with --model: the most tokens (batch x length) of one forward pass (default: max-batch x max-length)")
	precision := fs.String("precision", "", "with --model: fp32, bf16 or int8-dynamic, the precision to tune the model's keys at (default: as the folder holds it; int8-static: quantize an artifact first and tune it)")
	record := fs.Bool("record", true, "with --model: write the tuning record ("+models.TuningRecordFile+") into the model folder (a local folder only)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tune: unexpected arguments %q", fs.Args())
	}
	if err := checkThreads("tune", *threads); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *model != "" {
		for _, f := range []string{"shapes", "ops", "epilogues"} {
			if set[f] {
				return fmt.Errorf("tune: --%s is for the BERT shapes; --model tunes the model's own keys", f)
			}
		}
		if *maxBatch < 1 || *maxLength < 0 || *maxTokens < 0 {
			return fmt.Errorf("tune: --max-batch must be >= 1 (got %d), --max-length and --max-tokens >= 0 (got %d, %d)", *maxBatch, *maxLength, *maxTokens)
		}
	} else {
		for _, f := range []string{"max-batch", "max-length", "max-tokens", "record", "precision"} {
			if set[f] {
				return fmt.Errorf("tune: --%s needs --model", f)
			}
		}
	}
	ops, err := parseOps(*opsFlag)
	if err != nil {
		return err
	}
	list := bench.BERTShapes
	if *shapes != "" {
		if list, err = parseShapes(*shapes); err != nil {
			return err
		}
	}
	var kinds []selector.EpilogueKind
	if *epilogues != "" {
		for _, e := range strings.Split(*epilogues, ",") {
			k, err := selector.ParseEpilogueKind(e)
			if err != nil {
				return fmt.Errorf("tune: %w", err)
			}
			kinds = append(kinds, k)
		}
	}
	defer measureSetup(stderr, *threads == 1 && *pin, false)()
	s, err := selector.New(selector.Options{
		CachePath: *cachePath, Reps: *reps, RepTime: *repTime, KeyBudget: *keyBudget,
		Warn: func(msg string) { fmt.Fprintln(stderr, "note:", msg) },
	})
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	defer s.Close()
	if s.Forced() != "" {
		fmt.Fprintf(stderr, "note: %s=%s forces a kernel ISA or kernel for %s; these choices are not saved\n", selector.EnvKernel, s.Forced(), strings.Join(s.ForcedOps(), ", "))
	}
	if *model != "" {
		wo := models.WarmupOptions{MaxBatch: *maxBatch, MaxLength: *maxLength, MaxTokens: *maxTokens}
		prec, err := parsePrecisionFlag(*precision)
		if err != nil {
			return fmt.Errorf("tune: %w", err)
		}
		if prec == models.PrecisionInt8Static {
			return fmt.Errorf("tune: --precision int8-static needs calibration: quantize the model (int8bert quantize --mode static) and tune the artifact")
		}
		return tuneModel(ctx, s, *model, prec, *threads, wo, *record, *asJSON, stdout, stderr)
	}
	var choices []selector.Choice
	type opKind struct {
		op   string
		kind selector.EpilogueKind
	}
	for _, sh := range list {
		var ks []opKind
		for _, op := range ops {
			if op == selector.OpF32Kernel || op == selector.OpBF16Kernel {
				ks = append(ks, opKind{op, selector.EpilogueKind{Out: selector.F32}})
				continue
			}
			if kinds != nil {
				for _, k := range kinds {
					if op == selector.OpF32 || op == selector.OpBF16 {
						var ok bool
						if k, ok = f32Kind(k); !ok {
							if !*asJSON {
								fmt.Fprintf(stderr, "note: %v has no FP32 form; not tuned for %s\n", k, op)
							}
							continue
						}
					}
					ks = append(ks, opKind{op, k})
				}
				continue
			}
			names := tuneEpilogues(sh.Name)
			if op == selector.OpF32 || op == selector.OpBF16 {
				names = tuneF32Epilogues(sh.Name)
			}
			for _, e := range names {
				k, err := selector.ParseEpilogueKind(e)
				if err != nil {
					return fmt.Errorf("tune: %w", err)
				}
				ks = append(ks, opKind{op, k})
			}
		}
		for _, ok := range ks {
			if err := ctx.Err(); err != nil {
				return err
			}
			key, err := selector.NewKey(ok.op, sh.M, sh.K, sh.N, ok.kind, *threads)
			switch ok.op {
			case selector.OpF32Kernel:
				key, err = selector.F32KernelKey(sh.M, sh.K, sh.N, *threads), nil
			case selector.OpBF16Kernel:
				key, err = selector.BF16KernelKey(sh.M, sh.K, sh.N, *threads), nil
			}
			if err != nil {
				return fmt.Errorf("tune: %v: %w", sh, err)
			}
			if !*asJSON {
				fmt.Fprintf(stderr, "tuning %v (%s)\n", key, sh.Name)
			}
			ch, err := s.Choose(key)
			if err != nil {
				return fmt.Errorf("tune: %v: %w", sh, err)
			}
			choices = append(choices, ch)
			if !*asJSON {
				fmt.Fprintln(stdout, ch)
			}
		}
	}
	if *asJSON {
		return writeTuneJSON(stdout, s, "", choices)
	}
	st := s.Stats()
	fmt.Fprintf(stdout, "%d keys: %d tuned, %d from the cache; cache: %s\n", len(choices), st.Tuned, st.FromCache, cacheName(s))
	return nil
}

// writeTuneJSON prints tune's JSON report: the selector's header, its
// cache, the tuning record written (if any) and every choice.
func writeTuneJSON(stdout io.Writer, s *selector.Selector, record string, choices []selector.Choice) error {
	type jsonChoice struct {
		selector.Choice
		FromCache bool `json:"from_cache"`
	}
	st := s.Stats()
	out := struct {
		Header  selector.Header `json:"header"`
		Cache   string          `json:"cache"`
		Record  string          `json:"record,omitempty"`
		Tuned   int             `json:"tuned"`
		Cached  int             `json:"from_cache"`
		Choices []jsonChoice    `json:"choices"`
	}{Header: s.Header(), Cache: s.CachePath(), Record: record, Tuned: st.Tuned, Cached: st.FromCache}
	for _, c := range choices {
		out.Choices = append(out.Choices, jsonChoice{c, c.FromCache})
	}
	return writeJSON(stdout, out)
}

// cacheName is the selector's cache file, or "off".
func cacheName(s *selector.Selector) string {
	if where := s.CachePath(); where != "" {
		return where
	}
	return "off"
}

// tuneModel warms the model up on s (every key of its forward passes
// within wo's bounds) and writes its tuning record into its folder when
// record is set and the model is a local folder.
func tuneModel(ctx context.Context, s *selector.Selector, model string, prec models.Precision, threads int, wo models.WarmupOptions, record, asJSON bool,
	stdout, stderr io.Writer) error {
	p, err := models.Load(ctx, model, models.Options{Selector: s, Threads: threads, Precision: prec})
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	defer p.Close()
	var choices []selector.Choice
	wo.Progress = func(done, total int, ch selector.Choice) {
		choices = append(choices, ch)
		if asJSON {
			return
		}
		src := "tuned"
		if ch.FromCache {
			src = "from the cache"
		}
		fmt.Fprintf(stderr, "[%d/%d] %s: %s (%s)\n", done, total, ch.Key, ch.Kernel, src)
	}
	if err := p.Warmup(ctx, wo); err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	recPath := ""
	if record {
		if st, err := os.Stat(model); err == nil && st.IsDir() {
			if err := p.SaveTuningRecord(model); err != nil {
				return fmt.Errorf("tune: %w (--record=false leaves the folder alone)", err)
			}
			recPath = filepath.Join(model, models.TuningRecordFile)
		} else if !asJSON {
			fmt.Fprintf(stderr, "note: %s is not a local folder; no tuning record written (the choices are in the cache)\n", model)
		}
	}
	if asJSON {
		return writeTuneJSON(stdout, s, recPath, choices)
	}
	st := s.Stats()
	if recPath == "" {
		recPath = "none"
	}
	fmt.Fprintf(stdout, "%d keys: %d tuned, %d from the cache or record; cache: %s; record: %s\n", len(choices), st.Tuned, st.FromCache, cacheName(s), recPath)
	return nil
}
