package encoder

import "fmt"

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
