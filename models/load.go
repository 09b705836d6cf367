package models

import (
	"context"
	"fmt"
	"strings"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/models/bert"
	"github.com/int8bert/int8bert/models/distilbert"
	"github.com/int8bert/int8bert/models/encoder"
	"github.com/int8bert/int8bert/models/xlmr"
)

// The types of a loaded model and its options, from package encoder.
type (
	// Options control Load: precision, calibration, quantization,
	// threads, max length, selector (see encoder.Options).
	Options = encoder.Options
	// Pipeline is a loaded model with its tokenizer: Classify,
	// ClassifyPairs, Embed, Answer, and Model.Forward on token ids.
	Pipeline = encoder.Pipeline
	// Precision is what a model runs at (PrecisionFP32, PrecisionBF16,
	// PrecisionInt8Static, PrecisionInt8Dynamic; PrecisionAsStored loads
	// the folder as it is).
	Precision = encoder.Precision
	// QuantizeOptions are SmoothQuant's settings of an at-load quantization.
	QuantizeOptions = encoder.QuantizeOptions
	// Task is what the loaded model's head computes.
	Task = encoder.Task
	// EmbedOptions control Pipeline.Embed (pooling, normalisation).
	EmbedOptions = encoder.EmbedOptions
	// Pooling is how Embed turns token states into one vector.
	Pooling = encoder.Pooling
	// QAOptions control Pipeline.Answer.
	QAOptions = encoder.QAOptions
	// ClassifyOptions control Pipeline.Classify and ClassifyPairs as
	// function_to_apply and top_k control Hugging Face's
	// text-classification pipeline; the zero value is its defaults.
	ClassifyOptions = encoder.ClassifyOptions
	// ClassificationFunction turns logits into scores (FunctionDefault,
	// FunctionSigmoid, FunctionSoftmax, FunctionNone).
	ClassificationFunction = encoder.ClassificationFunction
	// Classification is one text's prediction: the best label, every
	// label's score, the logits and the top_k best labels.
	Classification = encoder.Classification
	// LabelScore is one label's score.
	LabelScore = encoder.LabelScore
	// Inputs is a padded batch of token ids (Model.Forward,
	// Options.CalibInputs).
	Inputs = encoder.Inputs
	// WarmupOptions bound Pipeline.Warmup: the largest batch, length and
	// token count whose GEMM shapes it tunes before the first request.
	WarmupOptions = encoder.WarmupOptions
)

// Precisions, tasks, poolings, classification functions and TopKAll
// (see package encoder).
const (
	PrecisionAsStored    = encoder.PrecisionAsStored
	PrecisionFP32        = encoder.PrecisionFP32
	PrecisionInt8Static  = encoder.PrecisionInt8Static
	PrecisionInt8Dynamic = encoder.PrecisionInt8Dynamic
	PrecisionBF16        = encoder.PrecisionBF16

	TaskBase                   = encoder.TaskBase
	TaskSequenceClassification = encoder.TaskSequenceClassification
	TaskQuestionAnswering      = encoder.TaskQuestionAnswering

	PoolMean = encoder.PoolMean
	PoolCLS  = encoder.PoolCLS

	FunctionDefault = encoder.FunctionDefault
	FunctionSigmoid = encoder.FunctionSigmoid
	FunctionSoftmax = encoder.FunctionSoftmax
	FunctionNone    = encoder.FunctionNone
	TopKAll         = encoder.TopKAll
)

// families is the registry: every family Load opens, by config.json's
// model_type (Family.ModelTypes) and architectures (Family.Classes).
var families = []*encoder.Family{bert.Family, distilbert.Family, xlmr.Family}

// Load opens a model from a folder or a Hugging Face model id (config.json,
// the weights, and the tokenizer when there is one), at o.Precision. The
// family comes from config.json's model_type (or, without one, its
// architectures) and the task from its architectures (BertModel,
// BertForSequenceClassification, BertForQuestionAnswering, and the
// DistilBert, XLMRoberta and Roberta ones), checked against the heads the
// weights hold; a config without architectures gets the task of its
// weights. An unsupported model_type or architecture is an error wrapping
// encoder.ErrConfig that lists what is supported; an option outside its
// domain is an error wrapping encoder.ErrConfig that names the value and
// the domain (Options.Check); a missing folder or file also wraps
// fs.ErrNotExist, and a path (encoder.LooksLikePath) is never looked up
// on the Hugging Face hub. The pipeline is safe for concurrent use; Close
// releases it.
func Load(ctx context.Context, pathOrID string, o Options) (*Pipeline, error) {
	dir, err := o.Resolve(ctx, pathOrID)
	if err != nil {
		return nil, err
	}
	cfg, err := checkpoint.LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("models: %w: %w", err, encoder.ErrConfig)
	}
	fam, err := familyOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", pathOrID, err)
	}
	if o.Quant.Source == "" {
		o.Quant.Source = pathOrID
	}
	return encoder.Load(ctx, dir, fam, o)
}

// familyOf picks the family of a config: by model_type, else by the
// first architecture's class name.
func familyOf(cfg *checkpoint.Config) (*encoder.Family, error) {
	if cfg.ModelType != "" {
		for _, f := range families {
			if f.HasModelType(cfg.ModelType) {
				return f, nil
			}
		}
		return nil, fmt.Errorf("model_type %q (architectures %v) is not supported; supported: %s: %w",
			cfg.ModelType, cfg.Architectures, supported(), encoder.ErrConfig)
	}
	if len(cfg.Architectures) > 0 {
		for _, f := range families {
			if _, ok := f.TaskOf(cfg.Architectures[0]); ok {
				return f, nil
			}
		}
		return nil, fmt.Errorf("config.json has no model_type, and architecture %s is not supported; supported: %s: %w",
			cfg.Architectures[0], supported(), encoder.ErrConfig)
	}
	return nil, fmt.Errorf("config.json names neither a model_type nor architectures; supported: %s: %w", supported(), encoder.ErrConfig)
}

// supported lists the model types and architectures Load opens.
func supported() string {
	var types, archs []string
	for _, f := range families {
		types = append(types, f.ModelTypes...)
		archs = append(archs, f.Architectures()...)
	}
	return "model_type " + strings.Join(types, ", ") + " with architectures " + strings.Join(archs, ", ")
}
