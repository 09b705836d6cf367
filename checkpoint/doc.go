// Package checkpoint owns reading Hugging Face model folders: config.json,
// safetensors files (memory-mapped, single or sharded through
// model.safetensors.index.json), PyTorch's pytorch_model.bin (torch's zip
// format, read with a restricted unpickler that only rebuilds tensors and never
// runs code), a safetensors writer (for the INT8 artifact), and the Hugging
// Face hub cache resolver and downloader.
//
// It must not import any other int8bert package: it sits below
// models/encoder and smoothquant and depends only on the standard library and
// golang.org/x/sys (for mmap).
//
// Config normalises DistilBERT's field names (dim, n_layers, n_heads,
// hidden_dim, activation) onto the common BERT names (HiddenSize,
// NumHiddenLayers, NumAttentionHeads, IntermediateSize, HiddenAct); the
// original keys stay available in Config.Raw.
//
// The unpickler accepts exactly these globals: collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the
// storage types torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,
// Bool}Storage. Any other global is refused with an error naming it.
//
// Float32 on safetensors F32 data returns a view of the read-only mapping
// when it is aligned: treat every returned slice as read-only, and copy it
// before modifying it or using it after Close.
package checkpoint
