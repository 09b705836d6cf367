// Package smoothquant holds observers, smoothing factors, alpha search,
// weight quantization, and the quantization recipe of int8bert's W8A8 path
// (docs/DESIGN.md section 3).
//
// An Observer collects, for one linear layer's input, the per-channel signed
// minimum and maximum over every calibration row and a fixed-size reservoir
// sample of rows. QuantizeLinear turns an FP32 linear layer plus its
// observer into a QLinear:
//
//   - smoothing factors s_j = max|X_j|^alpha / max|W_:,j|^(1-alpha) move
//     quantization difficulty from outlier activation channels into the
//     weights (the input is multiplied by 1/s, the weight columns by s);
//   - weights are symmetric int8 per output channel;
//   - in static mode the smoothed input gets one asymmetric u8 scale and
//     zero point per tensor; in dynamic mode the runtime computes one
//     symmetric scale per row;
//   - alpha is fixed or searched per layer over a grid, scoring each
//     candidate by the SQNR of the layer output on the observer's sample,
//     simulated with the same u8 x s8 kernels and epilogue as the runtime;
//   - a layer whose best SQNR is below a threshold stays FP32.
//
// Tensors and LoadQLinear write and read a quantized layer as safetensors
// tensors; Recipe is the artifact's JSON metadata.
//
// Errors never panic: bad calibration data wraps ErrCalibration, bad shapes,
// options or tensors wrap ErrInvalid.
//
// The calibration's GEMMs (the FP32 reference output and the simulated
// u8 x s8 ones) run on Linears of Options.Selector, so that they use the
// kernels the runtime uses and INT8BERT_KERNEL, INT8BERT_CPU_DISABLE and
// the tuning cache hold for them. smoothquant may import cpu, kernels,
// selector and checkpoint; it must not import dnnl, tokenizer or the model
// packages (docs/DESIGN.md section 1.1).
package smoothquant
