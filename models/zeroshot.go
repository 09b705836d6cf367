package models

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// DefaultHypothesisTemplate is the zero-shot pipeline's default template.
const DefaultHypothesisTemplate = "This example is {}."

// ZeroShotOptions control ZeroShot as the arguments of Hugging Face's
// zero-shot-classification pipeline do.
type ZeroShotOptions struct {
	// CandidateLabels are the classes to score (at least one);
	// ParseCandidateLabels reads the pipeline's comma-separated string.
	CandidateLabels []string
	// HypothesisTemplate turns a label into the hypothesis paired with
	// the text: its {} (or {0}) is replaced by the label, {{ and }} are
	// braces. "" is DefaultHypothesisTemplate.
	HypothesisTemplate string
	// MultiLabel scores each label on its own (softmax of its entailment
	// against its contradiction logit); otherwise the labels' entailment
	// logits are one softmax. One label is always scored on its own.
	MultiLabel bool
}

// ZeroShotResult is one text's result, as the pipeline gives it: the
// labels best first, and their scores.
type ZeroShotResult struct {
	Sequence string    `json:"sequence"`
	Labels   []string  `json:"labels"`
	Scores   []float32 `json:"scores"`
}

// ParseCandidateLabels splits a comma-separated list of labels, trimming
// spaces and dropping empty ones, as the pipeline reads a string of
// candidate labels.
func ParseCandidateLabels(s string) []string {
	var out []string
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// formatHypothesis is Python's template.format(label) for the templates
// the pipeline takes: {} or {0} is the label, {{ and }} are braces; any
// other field, or none, is an error wrapping ErrInput.
func formatHypothesis(template, label string) (string, error) {
	var b strings.Builder
	fields := 0
	for i := 0; i < len(template); i++ {
		c := template[i]
		switch {
		case c == '{' && strings.HasPrefix(template[i:], "{{"), c == '}' && strings.HasPrefix(template[i:], "}}"):
			b.WriteByte(c)
			i++
		case c == '{' && strings.HasPrefix(template[i:], "{}"):
			if fields > 0 {
				return "", fmt.Errorf("models: zero-shot: hypothesis template %q has more than one {} for the label: %w", template, ErrInput)
			}
			fields++
			b.WriteString(label)
			i++
		case c == '{' && strings.HasPrefix(template[i:], "{0}"):
			fields++
			b.WriteString(label)
			i += 2
		case c == '{' || c == '}':
			return "", fmt.Errorf("models: zero-shot: hypothesis template %q: only {} (or {0}) may stand for the label, and {{ }} for braces: %w", template, ErrInput)
		default:
			b.WriteByte(c)
		}
	}
	if fields == 0 {
		return "", fmt.Errorf("models: zero-shot: hypothesis template %q has no {} for the label (such as %q): %w", template, DefaultHypothesisTemplate, ErrInput)
	}
	return b.String(), nil
}

// EntailmentID is the index of the label that the zero-shot pipeline
// reads as entailment: the first whose name starts with "entail" in any
// case; -1 when there is none.
func (p *Pipeline) EntailmentID() int {
	for i, l := range p.m.Labels {
		if strings.HasPrefix(strings.ToLower(l), "entail") {
			return i
		}
	}
	return -1
}

// ZeroShot scores candidate labels for each text with an NLI sequence
// classifier, as Hugging Face's zero-shot-classification pipeline
// (transformers 4.31) does: each (text, hypothesis) pair is tokenized
// with only the text truncated, the entailment logit (the label found by
// EntailmentID; contradiction is label 0, or the last when entailment is
// 0) scores each label as o says, and the labels come back best first.
// A model that is not a sequence classifier, or whose labels name no
// entailment, is an error wrapping ErrConfig; no labels, a blank label
// or a template without {} are errors wrapping ErrInput.
func (p *Pipeline) ZeroShot(ctx context.Context, texts []string, o ZeroShotOptions) ([]ZeroShotResult, error) {
	if err := p.refuseClosed("ZeroShot"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if p.m.Task != encoder.TaskSequenceClassification {
		return nil, fmt.Errorf("models: zero-shot: the model is %s, not an NLI sequence classifier: %w", p.Describe(), ErrConfig)
	}
	ent := p.EntailmentID()
	if ent < 0 {
		return nil, fmt.Errorf("models: zero-shot: no label of the model (%s) starts with \"entail\", so it is not an NLI model the pipeline can read (id2label must name the entailment class): %w",
			strings.Join(p.m.Labels, ", "), ErrConfig)
	}
	contr := 0
	if ent == 0 {
		contr = len(p.m.Labels) - 1
	}
	labels := o.CandidateLabels
	if len(labels) == 0 {
		return nil, fmt.Errorf("models: zero-shot: no candidate labels (give at least one): %w", ErrInput)
	}
	template := o.HypothesisTemplate
	if template == "" {
		template = DefaultHypothesisTemplate
	}
	hyps := make([]string, len(labels))
	for i, l := range labels {
		if strings.TrimSpace(l) == "" {
			return nil, fmt.Errorf("models: zero-shot: candidate label %d is blank: %w", i, ErrInput)
		}
		h, err := formatHypothesis(template, l)
		if err != nil {
			return nil, err
		}
		hyps[i] = h
	}
	tok, err := p.tokenizer("zero-shot")
	if err != nil {
		return nil, err
	}
	to, err := p.tokenizerOptions(EncodeOptions{Truncate: true})
	if err != nil {
		return nil, err
	}
	to.Truncation = tokenizer.OnlyFirst // the hypothesis is kept whole
	pairs := make([]tokenizer.Pair, 0, len(texts)*len(labels))
	for _, t := range texts {
		for _, h := range hyps {
			pairs = append(pairs, tokenizer.Pair{A: t, B: h})
		}
	}
	encs, err := encodeAll(ctx, len(pairs),
		func(lo, hi int) ([]tokenizer.Encoding, error) { return tok.EncodePairBatch(ctx, pairs[lo:hi], to) },
		func(i int) error { _, err := tok.EncodePair(pairs[i].A, pairs[i].B, to); return err })
	if err != nil {
		return nil, inputError(ctx, "zero-shot", err)
	}
	out, err := p.logits(ctx, encs)
	if err != nil {
		return nil, err
	}
	n, k := len(p.m.Labels), len(labels)
	res := make([]ZeroShotResult, len(texts))
	for ti, text := range texts {
		lg := out.Logits[ti*k*n : (ti+1)*k*n]
		scores := make([]float64, k)
		if o.MultiLabel || k == 1 {
			for j := range scores {
				e, c := math.Exp(float64(lg[j*n+ent])), math.Exp(float64(lg[j*n+contr]))
				scores[j] = e / (e + c)
			}
		} else {
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(float64(lg[j*n+ent]))
				sum += scores[j]
			}
			for j := range scores {
				scores[j] /= sum
			}
		}
		// reversed(scores.argsort()): ascending (numpy's sort of so few
		// values keeps ties in order), then reversed.
		idx := make([]int, k)
		for j := range idx {
			idx[j] = j
		}
		sort.SliceStable(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
		slices.Reverse(idx)
		r := ZeroShotResult{Sequence: text, Labels: make([]string, k), Scores: make([]float32, k)}
		for j, i := range idx {
			r.Labels[j], r.Scores[j] = labels[i], float32(scores[i])
		}
		res[ti] = r
	}
	return res, nil
}
