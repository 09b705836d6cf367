package models

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// QAOptions control Answer.
type QAOptions struct {
	// NBest answers are returned, best first (0: the default, 1). A
	// negative value here or below is an error wrapping ErrInput.
	NBest int
	// MaxAnswerLength bounds an answer in tokens (default 30).
	MaxAnswerLength int
	// DocStride is how many tokens consecutive windows over a long context
	// share (default 128, at most a quarter of the window).
	DocStride int
}

// check refuses a negative count (ErrInput, naming the field, the value
// and the domain): zero is the default, as in every option struct.
func (o QAOptions) check() error {
	for _, f := range []struct {
		name string
		v    int
		def  string
	}{{"NBest", o.NBest, "1"}, {"MaxAnswerLength", o.MaxAnswerLength, "30 tokens"}, {"DocStride", o.DocStride, "128 tokens"}} {
		if f.v < 0 {
			return encoder.Errorf(ErrInput, "models: answer: %s %d is negative; give 0 (the default, %s) or a positive number", f.name, f.v, f.def)
		}
	}
	return nil
}

// Answer is a span of the context.
type Answer struct {
	Text string `json:"answer"`
	// Start and End are [start, end) in runes of the context.
	Start int `json:"start"`
	End   int `json:"end"`
	// Score is start_logit + end_logit.
	Score float32 `json:"score"`
}

// Answer finds the best spans of context that answer question. A context
// longer than one window is split into overlapping windows (DocStride
// tokens shared), and the best spans over all windows are returned. The
// model must have a question answering head.
func (p *Pipeline) Answer(ctx context.Context, question, contextText string, o QAOptions) ([]Answer, error) {
	if err := p.refuseClosed("Answer"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if p.m.Task != encoder.TaskQuestionAnswering {
		return nil, fmt.Errorf("models: answer: the model is %s, not question answering: %w", p.Describe(), ErrConfig)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.NBest == 0 {
		o.NBest = 1
	}
	if o.MaxAnswerLength == 0 {
		o.MaxAnswerLength = 30
	}
	switch limit := max(p.maxLength/4, 1); {
	case o.DocStride == 0:
		o.DocStride = min(128, limit)
	case o.DocStride > limit:
		// Hugging Face's pipeline refuses a stride the window cannot
		// hold too, rather than shortening it.
		return nil, encoder.Errorf(ErrInput, "models: answer: DocStride %d is more than a quarter of the model's %d-token window; give at most %d (0: the default, %d)",
			o.DocStride, p.maxLength, limit, min(128, limit))
	}
	tok, err := p.tokenizer("answer")
	if err != nil {
		return nil, err
	}
	first, err := tok.EncodePair(question, contextText, tokenizer.Options{
		MaxLength: p.maxLength, Truncation: tokenizer.OnlySecond, Stride: o.DocStride, Overflow: true})
	if err != nil {
		return nil, inputError(ctx, "answer", err)
	}
	windows := append([]tokenizer.Encoding{first}, first.Overflowing...)
	seqs := make([]encoder.Tokens, len(windows))
	for w := range windows {
		seqs[w] = compact(&windows[w])
	}
	// Each window's start and end logits, its own tokens only.
	starts, ends := make([][]float32, len(windows)), make([][]float32, len(windows))
	err = p.stream(ctx, seqs, func(idx []int, in *encoder.Inputs, out *encoder.TaskOutput) error {
		for r, w := range idx {
			base, _ := out.Rows(r)
			starts[w] = slices.Clone(out.StartLogits[base : base+windows[w].Len()])
			ends[w] = slices.Clone(out.EndLogits[base : base+windows[w].Len()])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	runes := []rune(contextText)
	type cand struct {
		start, end int
		score      float32
	}
	var cands []cand
	for w, e := range windows {
		for i := 0; i < e.Len(); i++ {
			if e.SequenceIDs[i] != 1 {
				continue
			}
			for j := i; j < e.Len() && j-i < o.MaxAnswerLength; j++ {
				if e.SequenceIDs[j] != 1 {
					break
				}
				s, en := e.Offsets[i][0], e.Offsets[j][1]
				if en <= s || en > len(runes) {
					continue
				}
				cands = append(cands, cand{s, en, starts[w][i] + ends[w][j]})
			}
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
	var res []Answer
	seen := map[[2]int]bool{}
	for _, c := range cands {
		if len(res) == o.NBest {
			break
		}
		if seen[[2]int{c.start, c.end}] {
			continue
		}
		seen[[2]int{c.start, c.end}] = true
		res = append(res, Answer{Text: string(runes[c.start:c.end]), Start: c.start, End: c.end, Score: c.score})
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("models: answer: the context has no tokens to answer from: %w", ErrInput)
	}
	return res, nil
}
