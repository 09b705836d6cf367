// Package models is the front door for loading a model: Load opens a
// Hugging Face checkpoint folder or model id of any supported family
// (BERT, DistilBERT, XLM-RoBERTa) and task (sequence classification,
// regression and multi-label heads included; question answering; the
// base model for embeddings), reading both from config.json (model_type
// and architectures) as Hugging Face's AutoModel classes do, so the
// caller never names a family. Options says the precision (FP32, or
// SmoothQuant INT8 static or dynamic, quantized at load), the calibration
// texts, threads, the longest encoding and the selector.
//
// Pipeline.Classify and ClassifyPairs score as Hugging Face's
// text-classification pipeline does: ClassifyOptions holds its
// function_to_apply and top_k, the zero value its defaults (softmax for
// a single-label head; sigmoid per label for a multi-label head or one
// with one label, such as a regression head or a reranker, whose raw
// score FunctionNone or Classification.Logits gives).
//
// A pipeline serves any number of goroutines. Each call runs in
// micro-batches under Options.MaxBatchTokens (memory bounded by the
// budget, not by the number of inputs), stops with ctx.Err() between
// micro-batches and layers once its context is done, and Close waits for
// the calls in flight before unmapping the weights: a later call returns
// ErrClosed.
//
// The types a caller needs (Options, Pipeline, Precision, EmbedOptions,
// QAOptions, ClassifyOptions, ...) are aliases of package models/encoder's,
// so that a program imports models alone.
//
// models imports models/encoder, the family packages models/bert,
// models/distilbert and models/xlmr (its registry of model_type to
// family) and checkpoint. It may be imported by anything that
// loads models (bench, the command, programs using the library); it must
// not be imported by encoder, the family packages or the packages below
// them (selector, smoothquant, kernels, checkpoint, tokenizer, cpu, dnnl).
package models
