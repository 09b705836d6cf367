// Package models is the front door: Load opens a Hugging Face checkpoint
// folder or model id of any supported family (BERT, DistilBERT,
// XLM-RoBERTa) and task (sequence classification, regression and
// multi-label heads included; question answering; the base model for
// embeddings), reading both from config.json (model_type and
// architectures) as Hugging Face's AutoModel classes do, so the caller
// never names a family. Options says the precision (FP32, BF16, or
// SmoothQuant INT8 static or dynamic, quantized at load), the calibration
// texts, threads, the longest encoding and the selector.
//
// The package holds the text pipelines, one file per task in the order of
// Hugging Face's pipelines (options, pre-processing, the pass,
// post-processing): classify.go (Classify, ClassifyPairs: ClassifyOptions
// holds the text-classification pipeline's function_to_apply and top_k,
// the zero value its defaults), embed.go (Embed), answer.go (Answer), and
// run.go (Encode, EncodeIDs and Run, for a server's batcher that gathers
// the sequences of many requests). A new task is one new file here plus a
// head in package models/encoder. pipeline.go holds what they share
// (tokenizing, streaming), prompts.go the prompts of
// config_sentence_transformers.json, load.go the options and Load,
// quantize.go the precisions and quantization, warmup.go the warm-up,
// forward.go the token-level types (Inputs, Output, Config, Task, Profile).
//
// A pipeline serves any number of goroutines. Each call runs in
// micro-batches under Options.MaxBatchTokens (memory bounded by the
// budget, not by the number of inputs), stops with ctx.Err() between
// micro-batches and layers once its context is done, and Close waits for
// the calls in flight before unmapping the weights: a later call returns
// ErrClosed.
//
// Package models/encoder is the engine below: tokens in, tensors out.
// models imports it, the family packages models/bert, models/distilbert
// and models/xlmr (its registry of model_type to family), tokenizer and
// checkpoint. It may be imported by anything that loads models (bench,
// serve, the command, programs using the library), which import it rather
// than models/encoder; it must not be imported by encoder, the family
// packages or the packages below them (selector, smoothquant, kernels,
// checkpoint, tokenizer, cpu, dnnl).
package models
