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
// The engine: tokens in, tensors out. Package models is the front door:
// it resolves folders and hub ids, picks the family from config.json,
// tokenizes, and holds the text tasks (classification, embeddings,
// question answering) and their options, one file per task. Here LoadTask
// opens a local folder as a TaskModel of a given family, working out the
// task from config.json's architectures and the tensors present; Options
// sets the selector, threads, precision, attention arithmetic and
// profile. NewTask builds a model from weights that are not in a folder
// (random weights of a real architecture).
//
// Passes (docs/DESIGN.md section 2): TaskModel.Stream runs token
// sequences (Tokens) in packed passes of at most a budget of real tokens
// (no padding computed: Inputs.Lens, docs/DESIGN.md section 2.2), sorted
// by length, all on one set of buffers sized to the largest pass, so a
// call's memory is bounded by the budget rather than by its number of
// inputs. The context of a call is checked between passes and between
// layers (Model.ForwardContext, TaskModel.ForwardContext): a cancelled
// call returns ctx.Err() after at most one layer of one pass. Close (of a
// TaskModel or Model) waits for the calls in flight (Enter, Leave), then
// releases the linears and unmaps the weights; any call after it, or
// racing with it, returns ErrClosed.
//
// INT8 (SmoothQuant W8A8, docs/DESIGN.md section 3): TaskModel.Quantize
// calibrates the FP32 model on token batches,
// quantizes the four linears of every layer with package smoothquant and
// builds the INT8 model from the resulting artifact, the same way
// LoadTask builds it from a saved ArtifactFile, so a saved model runs bit for bit as
// the one just quantized. In static mode (PrecisionInt8Static) no separate
// quantize pass runs: LayerNorm writes the next GEMM's u8 input with the
// residual, FFN1's epilogue requantizes for FFN2, and attention writes the
// O projection's u8 input head by head. Dynamic mode (PrecisionInt8Dynamic)
// quantizes each linear's input per token. Attention, LayerNorm, softmax and
// the heads stay FP32.
//
// First calls (docs/DESIGN.md section 4.8): TaskModel.Warmup tunes,
// before any request, every GEMM key a forward pass meets up to a batch
// and length, and packs the weights for the chosen kernels; Save writes
// the model's tuning record (TuningRecordFile) next to the artifact, and
// LoadTask hands it to the selector, so a shipped folder starts warm on the CPU and
// build that tuned it.
//
// encoder may import cpu, selector, smoothquant, kernels and checkpoint;
// it must not import tokenizer (tokenizing is the front door's), dnnl,
// models, the family packages, bench, serve or the command, and only
// models and the family packages may import it (docs/DESIGN.md section
// 1.1).
package encoder
