// Package checkpoint owns reading Hugging Face model folders: config.json,
// safetensors files (memory-mapped, single or sharded through
// model.safetensors.index.json), PyTorch's pytorch_model.bin (torch's zip
// format, read with a restricted unpickler that only rebuilds tensors and never
// runs code), a safetensors writer, and the Hugging Face hub cache resolver and
// downloader.
//
// It must not import any other int8bert package: it sits below
// models/encoder and smoothquant and depends only on the standard library and
// golang.org/x/sys (for mmap).
//
// Config normalises DistilBERT's field names (dim, n_layers, n_heads,
// hidden_dim, activation) onto the common BERT names (HiddenSize,
// NumHiddenLayers, NumAttentionHeads, IntermediateSize, HiddenAct); the
// original keys stay available in Config.Raw.
package checkpoint
