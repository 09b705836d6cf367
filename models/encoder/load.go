package encoder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
)

// Options control how a model is loaded and run: the one options type of
// every loader (models.Load, bert.Load, distilbert.Load, xlmr.Load, Load,
// NewTask). The zero value runs the model as its folder holds it, on the
// calling goroutine, with the process-wide selector.
type Options struct {
	// Selector runs the linear layers; nil means a process-wide selector
	// with the default tuning cache (SharedSelector).
	Selector *selector.Selector
	// Threads per linear layer (<= 1: the calling goroutine).
	Threads int
	// MaxLength bounds every encoding of the pipeline in tokens (special
	// tokens included); longer single texts are truncated. 0 means the
	// model's longest sequence, at most 512; more than the model takes is
	// an error.
	MaxLength int
	// MaxBatchTokens bounds the work of one forward pass of a pipeline
	// call (Classify, ClassifyPairs, Embed, Answer) in tokens, rows x
	// padded length: a call's inputs are sorted by length and run in
	// micro-batches under it, so its memory is bounded by the budget, not
	// by the number of inputs. 0 means DefaultMaxBatchTokens (2048); a
	// sequence longer than the budget runs alone; negative is an error.
	MaxBatchTokens int
	// Revision of a Hugging Face model id ("" means main).
	Revision string
	// Precision to run at. The zero value (PrecisionAsStored) runs the
	// folder as it is (FP32 weights, or an INT8 artifact). An INT8
	// precision on an FP32 model quantizes it at load: int8-static needs
	// Calib or CalibInputs; int8-dynamic without either quantizes without
	// smoothing. An INT8 artifact runs only at its own precision.
	Precision Precision
	// Calib are the calibration texts of an at-load quantization
	// (tokenized with the model's tokenizer, truncated to MaxLength).
	Calib []string
	// CalibInputs are calibration batches as token ids, for a model
	// folder without a tokenizer; they are used after Calib's batches.
	CalibInputs []*Inputs
	// Quant controls an at-load quantization (alpha, range, fallback,
	// progress); its Source defaults to the path or id loaded.
	Quant QuantizeOptions
	// Profile, when set, accumulates where forward passes spend their
	// time (of the FP32 model; Quant.Profile is the quantized model's).
	Profile *Profile
}

// check reports a bad option.
func (o *Options) check() error {
	if o.MaxLength < 0 {
		return fmt.Errorf("encoder: max length %d is negative: %w", o.MaxLength, ErrConfig)
	}
	return nil
}

// SharedSelector is the process-wide selector the loaders use when
// Options.Selector is nil: selector.Default, the one a calibration
// without a selector of its own uses too, so that both share one tuning.
func SharedSelector() (*selector.Selector, error) { return selector.Default() }

// selectorOf is o.Selector, or the shared one.
func (o *Options) selectorOf() (*selector.Selector, error) {
	if o.Selector != nil {
		return o.Selector, nil
	}
	return SharedSelector()
}

// ResolveModel turns a folder or a Hugging Face model id into a local
// folder holding config.json, the weights and the tokenizer, downloading
// what the hub cache lacks (never with HF_HUB_OFFLINE=1).
func ResolveModel(ctx context.Context, pathOrID, revision string) (string, error) {
	if st, err := os.Stat(pathOrID); err == nil && st.IsDir() {
		return pathOrID, nil
	}
	if pathOrID == "" || strings.HasPrefix(pathOrID, ".") || strings.HasPrefix(pathOrID, "/") {
		return "", fmt.Errorf("encoder: model folder %q does not exist: %w", pathOrID, ErrConfig)
	}
	hub := checkpoint.NewHub()
	dir, err := hub.ResolveModel(ctx, pathOrID, revision)
	if err != nil {
		return "", fmt.Errorf("encoder: %q is not a folder, and as a Hugging Face model id: %w", pathOrID, err)
	}
	if _, err := hub.Resolve(ctx, pathOrID, revision, "tokenizer.json"); err != nil {
		if !errors.Is(err, checkpoint.ErrNotFound) {
			return "", fmt.Errorf("encoder: %s: tokenizer.json: %w", pathOrID, err)
		}
		if _, err := hub.Resolve(ctx, pathOrID, revision, "vocab.txt"); err != nil {
			return "", fmt.Errorf("encoder: %s: no tokenizer.json, and vocab.txt: %w", pathOrID, err)
		}
		if _, err := hub.Resolve(ctx, pathOrID, revision, "tokenizer_config.json"); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			return "", fmt.Errorf("encoder: %s: tokenizer_config.json: %w", pathOrID, err)
		}
	}
	return dir, nil
}

// Load opens a model of family fam from a folder or a Hugging Face model
// id, with its tokenizer when the folder has one, at o.Precision. It is
// the family packages' entry point (bert.Load, distilbert.Load,
// xlmr.Load); callers that do not know the family use models.Load, which
// reads it from config.json.
func Load(ctx context.Context, pathOrID string, fam *Family, o Options) (*Pipeline, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dir, err := ResolveModel(ctx, pathOrID, o.Revision)
	if err != nil {
		return nil, err
	}
	if o.Selector, err = o.selectorOf(); err != nil {
		return nil, err
	}
	importTuningRecord(o.Selector, dir)
	p, err := loadPipeline(dir, fam, o)
	if err != nil {
		return nil, err
	}
	stored := p.Model.Encoder.Precision()
	switch {
	case o.Precision == PrecisionAsStored || o.Precision == stored:
		return p, nil
	case stored.Int8():
		p.Close()
		return nil, fmt.Errorf("encoder: %s holds an %s model, which cannot run as %s (load the FP32 model to quantize it differently): %w",
			pathOrID, stored, o.Precision, ErrConfig)
	case o.Precision == PrecisionInt8Static && len(o.Calib) == 0 && len(o.CalibInputs) == 0:
		p.Close()
		return nil, fmt.Errorf("encoder: int8-static on the FP32 model %s needs calibration texts (Options.Calib) or token batches (Options.CalibInputs): %w",
			pathOrID, smoothquant.ErrCalibration)
	}
	if o.Quant.Source == "" {
		o.Quant.Source = pathOrID
	}
	q, err := p.quantize(ctx, o.Calib, o.CalibInputs, o.Precision, o.Quant)
	p.Close()
	if err != nil {
		return nil, err
	}
	return q, nil
}
