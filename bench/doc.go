// Package bench measures int8bert on the host the way the paper evaluates
// it: GEMM throughput per shape and backend (GEMM), model throughput per
// precision with the linear-block time and the INT8/FP32 speed-up (Model,
// on a model folder or on deterministic random weights of the real BERT,
// DistilBERT and XLM-R shapes: Archs, RandomWeights), and the accuracy
// metrics and dataset readers of `int8bert eval` (SST-2, MNLI, SQuAD with
// its official answer normalisation). Every speed figure is reported with
// ratios measured in the same run (INT8 vs FP32, ours vs oneDNN), never as
// an absolute target.
//
// bench may import every int8bert package below the command except
// models/encoder: it times models through the front door (models.New on
// models.RandomWeights, models.Load on a folder); nothing but
// cmd/int8bert imports it.
package bench
