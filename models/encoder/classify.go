package encoder

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// ClassificationFunction is what turns a classifier's logits into scores,
// as function_to_apply of Hugging Face's text-classification pipeline.
type ClassificationFunction int

// The functions a classifier's scores come from.
const (
	// FunctionDefault is the model's own (TaskModel.DefaultFunction):
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
		return fmt.Errorf("encoder: classify: function_to_apply %d is not one of %s: %w", int(f), strings.Join(functionNames, ", "), ErrInput)
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
	return 0, fmt.Errorf("encoder: classify: function_to_apply %q is not one of %s: %w", s, strings.Join(functionNames, ", "), ErrInput)
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
	// model's own, see TaskModel.DefaultFunction).
	FunctionToApply ClassificationFunction
	// TopK is how many labels Classification.Top holds, best first. 0 (the
	// default) is the pipeline called without top_k: only the best label,
	// in Label and Score, and Top nil. k > 0 is top_k=k: the k best (every
	// label when k is at least their number, TopKAll). Negative is an
	// error wrapping ErrInput.
	TopK int
}

// validate checks o's values: errors wrap ErrInput.
func (o ClassifyOptions) validate() error {
	if err := o.FunctionToApply.valid(); err != nil {
		return err
	}
	if o.TopK < 0 {
		return fmt.Errorf("encoder: classify: top_k %d is negative (0 for the best label, k > 0 for the k best, TopKAll for every label): %w", o.TopK, ErrInput)
	}
	return nil
}

// LabelScore is one label's score.
type LabelScore struct {
	Label string  `json:"label"`
	Index int     `json:"index"`
	Score float32 `json:"score"`
}

// The problem_type values of config.json (Hugging Face's
// PretrainedConfig accepts these, or none).
const (
	ProblemRegression                = "regression"
	ProblemSingleLabelClassification = "single_label_classification"
	ProblemMultiLabelClassification  = "multi_label_classification"
)

// checkProblemType reports a problem_type Hugging Face does not accept
// as an error wrapping ErrConfig.
func checkProblemType(pt string) error {
	switch pt {
	case "", ProblemRegression, ProblemSingleLabelClassification, ProblemMultiLabelClassification:
		return nil
	}
	return fmt.Errorf("encoder: problem_type %q is not one of %s, %s, %s: %w",
		pt, ProblemRegression, ProblemSingleLabelClassification, ProblemMultiLabelClassification, ErrConfig)
}

// DefaultFunction is the function FunctionDefault stands for on this
// model, as Hugging Face's pipeline picks it from config.json: sigmoid
// when problem_type is multi_label_classification or there is one label
// (a regression head or a cross-encoder: apply FunctionNone for the raw
// score), softmax when problem_type is single_label_classification or
// there are several labels, none otherwise.
func (m *TaskModel) DefaultFunction() ClassificationFunction {
	switch {
	case m.ProblemType == ProblemMultiLabelClassification || len(m.Labels) == 1:
		return FunctionSigmoid
	case m.ProblemType == ProblemSingleLabelClassification || len(m.Labels) > 1:
		return FunctionSoftmax
	}
	return FunctionNone
}

// Postprocess turns one sequence's logits (one per label, as
// TaskOutput.Logits holds them) into a Classification as the Hugging Face
// text-classification pipeline's post-processing does: the function o
// says (the model's default resolved), the best label (the first of equal
// scores), and with o.TopK > 0 the TopK best labels, sorted by score,
// equal scores in label order. Bad options are errors wrapping ErrInput.
func (m *TaskModel) Postprocess(logits []float32, o ClassifyOptions) (Classification, error) {
	if err := o.validate(); err != nil {
		return Classification{}, err
	}
	if m.Task != TaskSequenceClassification {
		return Classification{}, fmt.Errorf("encoder: classify: the model is %s%s, not a sequence classifier: %w", m.Family.Name, m.Task, ErrConfig)
	}
	if len(logits) != len(m.Labels) {
		return Classification{}, fmt.Errorf("encoder: classify: %d logits for %d labels: %w", len(logits), len(m.Labels), ErrInput)
	}
	return m.postprocess(logits, o), nil
}

// postprocess is Postprocess on valid options and logits.
func (m *TaskModel) postprocess(logits []float32, o ClassifyOptions) Classification {
	fn := o.FunctionToApply
	if fn == FunctionDefault {
		fn = m.DefaultFunction()
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
