// Package encoder is the transformer encoder shared by BERT, DistilBERT and
// XLM-RoBERTa: embeddings and their LayerNorm, post-LayerNorm layers (fused
// QKV projection, masked multi-head attention, output projection with the
// residual, FFN with GELU) and the heads (pooler, classifiers, question
// answering span logits, sentence embeddings).
//
// Every linear layer is one selector call (a selector.Linear of
// kernels.GEMMF32 at FP32, of kernels.GEMMU8S8 at INT8), and attention's
// two products run on the kernels Selector.KernelF32 chooses; nothing in
// this package picks a kernel. The family packages
// (models/bert, models/distilbert, models/xlmr) map their configurations and
// tensor names onto Config and Names and describe their heads in a Family.
//
// Loading: package models is the front door (models.Load picks the family
// from config.json and calls Load here). Load opens a folder or hub id as a
// Pipeline of a given family, working out the task from config.json's
// architectures and the tensors present; Options, the one options type of
// every loader, sets precision, calibration, quantization, threads, max
// length and selector. NewTask builds a model from weights that are not in
// a folder (bench's random weights).
//
// Classification (Pipeline.Classify, ClassifyPairs): scores as Hugging
// Face's text-classification pipeline gives them. ClassifyOptions carries
// its function_to_apply (FunctionDefault, FunctionSigmoid,
// FunctionSoftmax, FunctionNone) and top_k (0: the best label only; k: the
// k best, sorted; TopKAll: every label); the zero value is its defaults.
// The default function comes from config.json (TaskModel.DefaultFunction):
// sigmoid per label when problem_type is multi_label_classification or the
// head has one label (regression, rerankers and other cross-encoders
// included), softmax otherwise. A Classification keeps every label's
// score and the raw logits (a regression's value is its logit:
// FunctionNone). TaskModel.Postprocess does the same to logits from
// Forward.
//
// Serving (docs/DESIGN.md section 2): the Pipeline's text methods
// (Classify, ClassifyPairs, Embed, Answer) sort a call's inputs by length
// and stream them through the model in packed passes of at most
// Options.MaxBatchTokens real tokens (DefaultMaxBatchTokens by default;
// no padding computed: Inputs.Lens, docs/DESIGN.md section 2.2), keeping only each input's token ids
// and result, so a call's memory is bounded by the budget rather than by
// its number of inputs; results come back in the caller's order. The
// context of a call is checked while tokenizing, between micro-batches and
// between layers (Model.ForwardContext, TaskModel.ForwardContext): a
// cancelled call returns ctx.Err() after at most one layer of one
// micro-batch. Close (of a Pipeline, TaskModel or Model) waits for the
// calls in flight, then releases the linears and unmaps the weights; any
// call after it, or racing with it, returns ErrClosed.
//
// INT8 (SmoothQuant W8A8, docs/DESIGN.md section 3): TaskModel.Quantize (or
// Pipeline.Quantize, Options.Precision at load) calibrates the FP32 model,
// quantizes the four linears of every layer with package smoothquant and
// builds the INT8 model from the resulting artifact, the same way Load
// builds it from a saved ArtifactFile, so a saved model runs bit for bit as
// the one just quantized. In static mode (PrecisionInt8Static) no separate
// quantize pass runs: LayerNorm writes the next GEMM's u8 input with the
// residual, FFN1's epilogue requantizes for FFN2, and attention writes the
// O projection's u8 input head by head. Dynamic mode (PrecisionInt8Dynamic)
// quantizes each linear's input per token. Attention, LayerNorm, softmax and
// the heads stay FP32.
//
// First calls (docs/DESIGN.md section 4.8): Pipeline.Warmup tunes, before
// any request, every GEMM key a forward pass meets up to a batch and
// length, and packs the weights for the chosen kernels; Save writes the
// model's tuning record (TuningRecordFile) next to the artifact, and Load
// hands it to the selector, so a shipped folder starts warm on the CPU and
// build that tuned it.
//
// encoder may import cpu, selector, smoothquant, kernels, tokenizer and
// checkpoint; it must not import dnnl, models, the family packages, bench or
// the command (docs/DESIGN.md section 1.1).
package encoder
