package main

import (
	"flag"
	"fmt"
	"github.com/int8bert/int8bert/models"
	"strconv"
	"strings"
)

// classifyFlags are classify's scoring flags, which mirror
// models.ClassifyOptions (Hugging Face's function_to_apply and top_k).
type classifyFlags struct {
	logits   *bool
	function *string
	topK     *string
}

func addClassifyFlags(fs *flag.FlagSet) *classifyFlags {
	return &classifyFlags{
		logits: fs.Bool("logits", false, "classify: also print the head's raw logits"),
		function: fs.String("function-to-apply", "default",
			"classify: default (the model's: sigmoid for one label or multi-label, else softmax), sigmoid, softmax or none (raw logits)"),
		topK: fs.String("top-k", "0", `classify: 0 prints the best label; N >= 1 adds "top", the N best labels; "all" every label, best first. fill-mask: candidates per mask (0: 5, "all": the whole vocabulary)`),
	}
}

// options reads the flags' values; a bad one is an error wrapping
// models.ErrInput.
func (c *classifyFlags) options() (models.ClassifyOptions, error) {
	fn, err := models.ParseClassificationFunction(*c.function)
	if err != nil {
		return models.ClassifyOptions{}, fmt.Errorf("--function-to-apply: %w", err)
	}
	o := models.ClassifyOptions{FunctionToApply: fn}
	switch s := strings.TrimSpace(*c.topK); {
	case strings.EqualFold(s, "all"):
		o.TopK = models.TopKAll
	default:
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 {
			return o, fmt.Errorf("--top-k %q: want 0, a positive number of labels or \"all\": %w", *c.topK, models.ErrInput)
		}
		o.TopK = min(k, models.TopKAll)
	}
	return o, nil
}

// record is classify's output line for one text: the best label
// and its score, every label's score by index, the top_k best labels
// with --top-k and the raw logits with --logits.
func (c *classifyFlags) record(text string, r models.Classification) map[string]any {
	m := map[string]any{"text": text, "label": r.Label, "score": r.Score, "scores": r.Scores}
	if r.Top != nil {
		m["top"] = r.Top
	}
	if *c.logits {
		m["logits"] = r.Logits
	}
	return m
}
