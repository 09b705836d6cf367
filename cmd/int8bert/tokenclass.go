package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/int8bert/int8bert/models"
)

// taskFlags are the flags of ner and zero-shot, which mirror
// models.TokenClassifyOptions and models.ZeroShotOptions.
type taskFlags struct {
	aggregation *string
	ignore      *string
	stride      *int
	fs          *flag.FlagSet
	labels      *string
	template    *string
	multiLabel  *bool
}

func addTaskFlags(fs *flag.FlagSet) *taskFlags {
	return &taskFlags{
		aggregation: fs.String("aggregation-strategy", "none", "ner: none, simple, first, average or max (Hugging Face's aggregation_strategy)"),
		ignore:      fs.String("ignore-labels", "O", `ner: comma-separated labels left out of the result ("" keeps every label)`),
		stride:      fs.Int("stride", 0, "ner: when given, run texts longer than the maximum length in overflowing windows sharing this many tokens, the entities merged (Hugging Face's stride; needs an aggregation strategy other than none); not given, they are truncated"),
		fs:          fs,
		labels:      fs.String("labels", "", "zero-shot: the candidate labels, comma-separated"),
		template:    fs.String("hypothesis-template", models.DefaultHypothesisTemplate, "zero-shot: the hypothesis, {} standing for the label"),
		multiLabel:  fs.Bool("multi-label", false, "zero-shot: score each label on its own (entailment against contradiction)"),
	}
}

// do is the function of ner or zero-shot on a chunk of texts; a bad
// flag value is an error wrapping models.ErrInput.
func (f *taskFlags) do(ctx context.Context, p *models.Pipeline, task string) (func([]string) ([]map[string]any, error), error) {
	if task == "ner" {
		a, err := models.ParseAggregationStrategy(*f.aggregation)
		if err != nil {
			return nil, fmt.Errorf("--aggregation-strategy: %w", err)
		}
		o := models.TokenClassifyOptions{AggregationStrategy: a, IgnoreLabels: []string{}}
		if isSet(f.fs, "stride") {
			o.Stride = f.stride
		}
		for _, l := range strings.Split(*f.ignore, ",") {
			if l = strings.TrimSpace(l); l != "" {
				o.IgnoreLabels = append(o.IgnoreLabels, l)
			}
		}
		return func(chunk []string) ([]map[string]any, error) {
			res, err := p.TokenClassify(ctx, chunk, o)
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, len(res))
			for k, r := range res {
				out[k] = map[string]any{"text": chunk[k], "entities": r}
			}
			return out, nil
		}, nil
	}
	o := models.ZeroShotOptions{CandidateLabels: models.ParseCandidateLabels(*f.labels), HypothesisTemplate: *f.template, MultiLabel: *f.multiLabel}
	if len(o.CandidateLabels) == 0 {
		return nil, fmt.Errorf("--labels: give the candidate labels, comma-separated: %w", models.ErrInput)
	}
	return func(chunk []string) ([]map[string]any, error) {
		res, err := p.ZeroShot(ctx, chunk, o)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]any, len(res))
		for k, r := range res {
			out[k] = map[string]any{"sequence": r.Sequence, "labels": r.Labels, "scores": r.Scores}
		}
		return out, nil
	}, nil
}
