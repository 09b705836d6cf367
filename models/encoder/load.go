package encoder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/int8bert/int8bert/checkpoint"
	"github.com/int8bert/int8bert/selector"
)

// LoadOptions control Load.
type LoadOptions struct {
	// Selector runs the linear layers; nil means a process-wide selector
	// with the default tuning cache.
	Selector *selector.Selector
	// Threads per linear layer (<= 1: the calling goroutine).
	Threads int
	// Revision of a Hugging Face model id ("" means main).
	Revision string
	// Precision to run at. The zero value runs the folder as it is (FP32
	// weights, or an INT8 artifact). An INT8 precision on an FP32 model
	// quantizes it at load: int8-static needs Calib.
	Precision Precision
	// Calib are the calibration texts of an at-load quantization.
	Calib []string
	// Quant controls an at-load quantization.
	Quant QuantizeOptions
}

var (
	sharedOnce sync.Once
	sharedSel  *selector.Selector
	sharedErr  error
)

// SharedSelector is the process-wide selector Load uses by default.
func SharedSelector() (*selector.Selector, error) {
	sharedOnce.Do(func() { sharedSel, sharedErr = selector.New(selector.Options{}) })
	return sharedSel, sharedErr
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
// id, with its tokenizer: the entry point of the family packages
// (bert.Load, distilbert.Load, xlmr.Load).
func Load(ctx context.Context, pathOrID string, fam *Family, o LoadOptions) (*Pipeline, error) {
	dir, err := ResolveModel(ctx, pathOrID, o.Revision)
	if err != nil {
		return nil, err
	}
	sel := o.Selector
	if sel == nil {
		if sel, err = SharedSelector(); err != nil {
			return nil, err
		}
	}
	p, err := LoadPipeline(dir, fam, sel, Options{Threads: o.Threads})
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
	}
	if o.Quant.Source == "" {
		o.Quant.Source = pathOrID
	}
	q, err := p.Quantize(ctx, o.Calib, o.Precision, o.Quant)
	p.Close()
	if err != nil {
		return nil, err
	}
	return q, nil
}
