package encoder

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/int8bert/int8bert/selector"
)

// Options control how the engine builds and runs a model (LoadTask,
// NewTask): the selector, threads, precision, attention arithmetic and
// profile. The zero value runs the model as its folder holds it, on the
// calling goroutine, with the process-wide selector. models.Options is
// the front door's, which adds the tokenizer's, the calibration's and the
// hub's settings.
type Options struct {
	// Selector runs the linear layers; nil means a process-wide selector
	// with the default tuning cache (selector.Default).
	Selector *selector.Selector
	// Threads per linear layer: 0 is the default (one: the calling
	// goroutine), else 1 to runtime.NumCPU() (more threads than CPUs
	// only slow a GEMM down, docs/DESIGN.md section 7.2).
	Threads int
	// Precision is PrecisionAsStored (the zero value: as the folder holds
	// it) or, on FP32 weights, PrecisionFP32 or PrecisionBF16 (the
	// linears' weights rounded to bfloat16 at load); INT8 comes from an
	// artifact or from TaskModel.Quantize.
	Precision Precision
	// Profile, when set, accumulates where forward passes spend their
	// time.
	Profile *Profile
	// Logger receives the process-wide selector's notes about its tuning
	// cache and oneDNN; nil discards them.
	Logger *slog.Logger
	// Attention is the arithmetic of an INT8 or bf16 model's attention
	// (docs/DESIGN.md sections 3.9 and 3.10): AttentionAuto (the zero
	// value) is $INT8BERT_ATTENTION ("f32", "int8" or "bf16") when set,
	// else, for an INT8 model, INT8 on CPUs with AVX-512 VNNI or AMX and
	// FP32 elsewhere (where INT8 attention is slower), and bf16 for a
	// bf16 model; AttentionF32 keeps both products and the softmax in
	// FP32, as an FP32 model always runs them. AttentionBF16 is for bf16
	// models only and AttentionInt8 not for them (ErrConfig). It does not
	// change an FP32 model.
	Attention AttentionMode
}

// Check reports an option outside its domain, naming the value and the
// domain (LoadTask and NewTask check them first).
func (o *Options) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("encoder: options: %s: %w", fmt.Sprintf(format, args...), ErrConfig)
	}
	if n := runtime.NumCPU(); o.Threads < 0 || o.Threads > n {
		return bad("Threads %d: want 0 (the default: one thread) or 1 to %d (the CPUs this process may use)", o.Threads, n)
	}
	if !o.Precision.valid() {
		return bad("%v: want PrecisionAsStored, PrecisionFP32, PrecisionBF16, PrecisionInt8Static or PrecisionInt8Dynamic", o.Precision)
	}
	if !o.Attention.valid() {
		return bad("%v: want AttentionAuto, AttentionF32, AttentionInt8 or AttentionBF16", o.Attention)
	}
	return nil
}

// selectorOf is o.Selector, or the process-wide selector.Default (whose
// notes then go to o.Logger).
func (o *Options) selectorOf() (*selector.Selector, error) {
	if o.Selector != nil {
		return o.Selector, nil
	}
	if l := o.Logger; l != nil {
		selector.SetDefaultWarn(func(msg string) { l.Warn(msg, "component", "selector") })
	}
	return selector.Default()
}
