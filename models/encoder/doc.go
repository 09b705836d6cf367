// Package encoder is the transformer encoder shared by BERT, DistilBERT and
// XLM-RoBERTa: embeddings and their LayerNorm, post-LayerNorm layers (fused
// QKV projection, masked multi-head attention, output projection with the
// residual, FFN with GELU) and the heads (pooler, classifiers, question
// answering span logits, sentence embeddings).
//
// Every linear layer is one selector call (LinearF32 here); nothing in this
// package knows which kernel ran. The family packages (models/bert,
// models/distilbert, models/xlmr) map their configurations and tensor names
// onto Config and Names.
//
// encoder may import selector, kernels, tokenizer and checkpoint; it must not
// import the family packages, bench or the command.
package encoder
