package models

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/tokenizer"
)

// ClassificationFunction is what turns a classifier's logits into scores,
// as function_to_apply of Hugging Face's text-classification pipeline.
type ClassificationFunction int

// The functions a classifier's scores come from.
const (
	// FunctionDefault is the model's own (Pipeline.DefaultFunction):
	// sigmoid for a multi-label head or a head with one label (regression
	// included), softmax otherwise, as the Hugging Face pipeline does.
	FunctionDefault ClassificationFunction = iota
	// FunctionSigmoid scores every label on its own: 1 / (1 + exp(-logit)).
	FunctionSigmoid
	// FunctionSoftmax scores the labels as one distribution.
	FunctionSoftmax
	// FunctionNone scores with the raw logits (a regression head's value).
	FunctionNone
)

// functionNames are the names ParseClassificationFunction takes, in
// ClassificationFunction order.
var functionNames = []string{"default", "sigmoid", "softmax", "none"}

// String is the function's name as the Hugging Face pipeline spells it
// ("default", "sigmoid", "softmax", "none").
func (f ClassificationFunction) String() string {
	if f < 0 || int(f) >= len(functionNames) {
		return fmt.Sprintf("ClassificationFunction(%d)", int(f))
	}
	return functionNames[f]
}

// valid reports an error wrapping ErrInput for a value that is none of
// the functions.
func (f ClassificationFunction) valid() error {
	if f < 0 || int(f) >= len(functionNames) {
		return fmt.Errorf("models: classify: function_to_apply %d is not one of %s: %w", int(f), strings.Join(functionNames, ", "), ErrInput)
	}
	return nil
}

// ParseClassificationFunction reads a function's name, in any case, as
// the Hugging Face pipeline's function_to_apply takes it: "sigmoid",
// "softmax", "none", or "default" (or "") for the model's own. Any other
// name is an error wrapping ErrInput.
func ParseClassificationFunction(s string) (ClassificationFunction, error) {
	if s == "" {
		return FunctionDefault, nil
	}
	for i, n := range functionNames {
		if strings.EqualFold(s, n) {
			return ClassificationFunction(i), nil
		}
	}
	return 0, fmt.Errorf("models: classify: function_to_apply %q is not one of %s: %w", s, strings.Join(functionNames, ", "), ErrInput)
}

// MarshalText writes the function's name.
func (f ClassificationFunction) MarshalText() ([]byte, error) {
	if err := f.valid(); err != nil {
		return nil, err
	}
	return []byte(f.String()), nil
}

// UnmarshalText reads a name as ParseClassificationFunction does.
func (f *ClassificationFunction) UnmarshalText(b []byte) error {
	v, err := ParseClassificationFunction(string(b))
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// TopKAll asks Classify for every label, best first (the Hugging Face
// pipeline's top_k=None); any TopK at least the number of labels does the
// same.
const TopKAll = math.MaxInt32

// ClassifyOptions control Classify and ClassifyPairs as function_to_apply
// and top_k control Hugging Face's text-classification pipeline; the zero
// value is the pipeline's defaults.
type ClassifyOptions struct {
	// FunctionToApply turns the logits into scores (FunctionDefault: the
	// model's own, see Pipeline.DefaultFunction).
	FunctionToApply ClassificationFunction
	// TopK is how many labels Classification.Top holds, best first. 0 (the
	// default) is the pipeline called without top_k: only the best label,
	// in Label and Score, and Top nil. k > 0 is top_k=k: the k best (every
	// label when k is at least their number, TopKAll). Negative is an
	// error wrapping ErrInput.
	TopK int
	// Prompt is prefixed to every text of Classify before it is tokenized
	// (EncodeOptions.Prompt); ClassifyPairs refuses one, as TEI refuses a
	// prompt with pairs. Direction is the side texts longer than MaxLength
	// lose tokens from (TruncateRight, the default, keeps their start).
	// Both are about tokenizing texts: Postprocess and
	// Batch.Classification, which score what is already tokenized, refuse
	// them (an error wrapping ErrInput).
	Prompt    string
	Direction TruncationDirection
}

// validate checks o's values: errors wrap ErrInput.
func (o ClassifyOptions) validate() error {
	if err := o.FunctionToApply.valid(); err != nil {
		return err
	}
	if err := o.Direction.valid(); err != nil {
		return err
	}
	if o.TopK < 0 {
		return fmt.Errorf("models: classify: top_k %d is negative (0 for the best label, k > 0 for the k best, TopKAll for every label): %w", o.TopK, ErrInput)
	}
	return nil
}

// scoring checks the options of scoring what is already tokenized
// (Postprocess, Batch.Classification): valid, without the options of
// tokenizing texts (Prompt, Direction).
func (o ClassifyOptions) scoring() error {
	if o.Prompt != "" || o.Direction != TruncateRight {
		return fmt.Errorf("models: classify: a prompt or a truncation direction applies to texts (Classify, or Encode before Run), not to tokenized inputs: %w", ErrInput)
	}
	return o.validate()
}

// LabelScore is one label's score.
type LabelScore struct {
	Label string  `json:"label"`
	Index int     `json:"index"`
	Score float32 `json:"score"`
}

// Classification is one text's prediction, as the Hugging Face
// text-classification pipeline gives it (see ClassifyOptions).
type Classification struct {
	// Label, Index and Score are the best label (the first of equal
	// scores) and its score: the pipeline's result without top_k.
	Label string  `json:"label"`
	Index int     `json:"index"`
	Score float32 `json:"score"`
	// Scores are every label's score by index, after Function.
	Scores []float32 `json:"scores"`
	// Logits are the head's raw outputs by label index.
	Logits []float32 `json:"logits"`
	// Top are the ClassifyOptions.TopK best labels, best first (the
	// pipeline's result with top_k); nil when TopK is 0.
	Top []LabelScore `json:"top,omitempty"`
	// Function is the function the scores come from (FunctionDefault
	// resolved to the model's own).
	Function ClassificationFunction `json:"function"`
}

// Classify predicts labels for each text (texts longer than MaxLength are
// truncated), scored as o says (the zero value: as Hugging Face's
// text-classification pipeline does by default, see ClassifyOptions and
// TaskModel.DefaultFunction). The model must have a sequence
// classification head; bad options are errors wrapping ErrInput.
func (p *Pipeline) Classify(ctx context.Context, texts []string, o ClassifyOptions) ([]Classification, error) {
	if err := p.refuseClosed("Classify"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if err := p.needClassifier(o); err != nil {
		return nil, err
	}
	encs, err := p.encodeTextsWith(ctx, "classify", texts, o.Prompt, o.Direction)
	if err != nil {
		return nil, err
	}
	return p.classify(ctx, encs, o)
}

// ClassifyPairs predicts labels for each pair of texts (premise and
// hypothesis, query and passage for a cross-encoder), truncated longest
// first to MaxLength, scored as Classify's.
func (p *Pipeline) ClassifyPairs(ctx context.Context, pairs []tokenizer.Pair, o ClassifyOptions) ([]Classification, error) {
	if err := p.refuseClosed("ClassifyPairs"); err != nil {
		return nil, err
	}
	if err := p.m.Enter(); err != nil {
		return nil, err
	}
	defer p.m.Leave()
	if err := p.needClassifier(o); err != nil {
		return nil, err
	}
	tok, err := p.tokenizer("classify pairs")
	if err != nil {
		return nil, err
	}
	if o.Prompt != "" {
		return nil, fmt.Errorf("models: classify pairs: a prompt cannot be set with pairs of texts: %w", ErrInput)
	}
	to, err := p.tokenizerOptions(EncodeOptions{Truncate: true, Direction: o.Direction})
	if err != nil {
		return nil, err
	}
	encs, err := encodeAll(ctx, len(pairs),
		func(lo, hi int) ([]tokenizer.Encoding, error) { return tok.EncodePairBatch(ctx, pairs[lo:hi], to) },
		func(i int) error { _, err := tok.EncodePair(pairs[i].A, pairs[i].B, to); return err })
	if err != nil {
		return nil, inputError(ctx, "classify pairs", err)
	}
	return p.classify(ctx, encs, o)
}

func (p *Pipeline) needClassifier(o ClassifyOptions) error {
	if p.m.Task != encoder.TaskSequenceClassification {
		return fmt.Errorf("models: classify: the model is %s, not a sequence classifier: %w", p.Describe(), ErrConfig)
	}
	return o.validate()
}

func (p *Pipeline) classify(ctx context.Context, encs []encoder.Tokens, o ClassifyOptions) ([]Classification, error) {
	out, err := p.logits(ctx, encs)
	if err != nil {
		return nil, err
	}
	n := len(p.m.Labels)
	res := make([]Classification, len(encs))
	for b := range res {
		res[b] = p.postprocess(out.Logits[b*n:(b+1)*n], o)
	}
	return res, nil
}

// logits runs seqs through the model and gathers their logits in the
// order of seqs ([len(seqs)][labels]); only Logits (and Batch, Hidden) of
// the result are set.
func (p *Pipeline) logits(ctx context.Context, seqs []encoder.Tokens) (*encoder.TaskOutput, error) {
	n := len(p.m.Labels)
	out := &encoder.TaskOutput{Output: &encoder.Output{Batch: len(seqs), Hidden: p.m.Encoder.Config().Hidden},
		Logits: make([]float32, len(seqs)*n)}
	err := p.stream(ctx, seqs, func(idx []int, _ *encoder.Inputs, o *encoder.TaskOutput) error {
		if len(o.Logits) != len(idx)*n {
			return fmt.Errorf("models: internal error: %d logits for %d sequences of %d labels", len(o.Logits), len(idx), n)
		}
		for r, i := range idx {
			copy(out.Logits[i*n:(i+1)*n], o.Logits[r*n:(r+1)*n])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DefaultFunction is the function FunctionDefault stands for on this
// model, as Hugging Face's pipeline picks it from config.json: sigmoid
// when problem_type is multi_label_classification or there is one label
// (a regression head or a cross-encoder: apply FunctionNone for the raw
// score), softmax when problem_type is single_label_classification or
// there are several labels, none otherwise.
func (p *Pipeline) DefaultFunction() ClassificationFunction {
	m := p.m
	switch {
	case m.ProblemType == encoder.ProblemMultiLabelClassification || len(m.Labels) == 1:
		return FunctionSigmoid
	case m.ProblemType == encoder.ProblemSingleLabelClassification || len(m.Labels) > 1:
		return FunctionSoftmax
	}
	return FunctionNone
}

// Postprocess turns one sequence's logits (one per label, as
// Output.Logits holds them) into a Classification as the Hugging Face
// text-classification pipeline's post-processing does: the function o
// says (the model's default resolved), the best label (the first of equal
// scores), and with o.TopK > 0 the TopK best labels, sorted by score,
// equal scores in label order. Bad options are errors wrapping ErrInput.
func (p *Pipeline) Postprocess(logits []float32, o ClassifyOptions) (Classification, error) {
	if err := p.refuseClosed("Postprocess"); err != nil {
		return Classification{}, err
	}
	if err := o.scoring(); err != nil {
		return Classification{}, err
	}
	m := p.m
	if m.Task != encoder.TaskSequenceClassification {
		return Classification{}, fmt.Errorf("models: classify: the model is %s%s, not a sequence classifier: %w", m.Family.Name, m.Task, ErrConfig)
	}
	if len(logits) != len(m.Labels) {
		return Classification{}, fmt.Errorf("models: classify: %d logits for %d labels: %w", len(logits), len(m.Labels), ErrInput)
	}
	return p.postprocess(logits, o), nil
}

// postprocess is Postprocess on valid options and logits.
func (p *Pipeline) postprocess(logits []float32, o ClassifyOptions) Classification {
	m := p.m
	fn := o.FunctionToApply
	if fn == FunctionDefault {
		fn = p.DefaultFunction()
	}
	logits = append([]float32(nil), logits...)
	var scores []float32
	switch fn {
	case FunctionSigmoid:
		scores = sigmoid(logits)
	case FunctionSoftmax:
		scores = softmax(logits)
	default:
		scores = append([]float32(nil), logits...)
	}
	best := 0
	for j := range scores {
		if scores[j] > scores[best] {
			best = j
		}
	}
	c := Classification{Label: m.Labels[best], Index: best, Score: scores[best], Scores: scores, Logits: logits, Function: fn}
	if o.TopK > 0 {
		top := make([]LabelScore, len(scores))
		for j, s := range scores {
			top[j] = LabelScore{Label: m.Labels[j], Index: j, Score: s}
		}
		sort.SliceStable(top, func(a, b int) bool { return top[a].Score > top[b].Score })
		c.Top = top[:min(o.TopK, len(top))]
	}
	return c
}

// sigmoid is 1 / (1 + exp(-x)) of every value.
func sigmoid(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(1 / (1 + math.Exp(-float64(v))))
	}
	return out
}

// softmax is exp(x - max) / sum over the values.
func softmax(x []float32) []float32 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	e := make([]float64, len(x))
	var s float64
	for i, v := range x {
		e[i] = math.Exp(float64(v) - m)
		s += e[i]
	}
	out := make([]float32, len(x))
	for i := range out {
		out[i] = float32(e[i] / s)
	}
	return out
}
