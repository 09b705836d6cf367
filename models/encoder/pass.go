package encoder

import (
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/smoothquant"
)

// pass is a model's precision: its layers in the arithmetic they run and
// what a forward pass asks of them. It is chosen once, when the model is
// built (newModel at load: floatPass; buildTaskInt8 at the load of an
// artifact or at Quantize: int8Pass), and never re-read as a flag: forward
// calls it once for the embeddings and once per layer (docs/DESIGN.md
// section 2, "Precision").
type pass interface {
	// precision is the precision of the pass's linears.
	precision() Precision
	// numLayers is the number of layers (0 once closed).
	numLayers() int
	// int8 says the pass's buffers need the linears' u8 inputs.
	int8() bool
	// embedNorm runs the embeddings' LayerNorm of m in place on x, fusing
	// the quantize step of the first layer's input where the pass has one
	// (into s.xq); the result says it did (layer's xqReady).
	embedNorm(m *Model, x []float32, s *qscratch) (bool, error)
	// layer runs layer li in place on x. obs sees every linear's input
	// (FP32 only: forward refuses it elsewhere). xqReady says s.xq already
	// holds x quantized for the layer's QKV projection; the result says
	// the same of the next layer.
	layer(m *Model, li int, x []float32, in *Inputs, s *qscratch, obs observeFunc, xqReady bool) (bool, error)
	// attention is the arithmetic of the pass's attention.
	attention() AttentionMode
	// rowKeys are the keys of the layers' linears on rows rows, with
	// their Prepare (TaskModel.rowKeys).
	rowKeys(rows int, c Config, threads int) ([]linKey, error)
	// weightBytes is the memory of the layers' weights.
	weightBytes() int
	// linearBytes is the part of weightBytes the linears hold; trim is
	// Model.Trim (or Compact) for the linears.
	linearBytes() int
	trim(compact bool) int
	// close releases the layers' linears.
	close()
}

// floatPass is an FP32 or BF16 model's pass: the two differ only in their
// linears (linear.go), chosen when the layers are made.
type floatPass struct {
	prec   Precision // PrecisionFP32 or PrecisionBF16
	layers []layer
	// attnBF16 runs a bf16 model's attention products in bf16
	// (attention_bf16.go; Options.Attention).
	attnBF16 bool
}

func (p *floatPass) precision() Precision { return p.prec }
func (p *floatPass) numLayers() int       { return len(p.layers) }
func (p *floatPass) int8() bool           { return false }
func (p *floatPass) attention() AttentionMode {
	if p.attnBF16 {
		return AttentionBF16
	}
	return AttentionF32
}

func (p *floatPass) embedNorm(m *Model, x []float32, s *qscratch) (bool, error) {
	return false, m.embedNorm(x, s.rows, nil, nil)
}

func (p *floatPass) layer(m *Model, li int, x []float32, in *Inputs, s *qscratch, obs observeFunc, _ bool) (bool, error) {
	return false, m.layer(&p.layers[li], li, x, in, s.scratch, obs)
}

// setSingleForm is selector.Linear.SetSingleForm for every linear.
func (p *floatPass) setSingleForm(on bool) {
	for _, ly := range p.layers {
		for _, l := range []linear{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if s, ok := l.(interface{ SetSingleForm(bool) }); ok {
				s.SetSingleForm(on)
			}
		}
	}
}

// releaseLinears closes the layers' linears and keeps the layers, for a
// model that its caller closes next (QuantizeOptions.Consume): a pass run
// on it after fails with the selector's ErrClosed.
func (p *floatPass) releaseLinears() {
	for _, ly := range p.layers {
		for _, l := range []linear{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if l != nil {
				l.Close()
			}
		}
	}
}

func (p *floatPass) close() {
	for _, ly := range p.layers {
		for _, l := range []linear{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if l != nil {
				l.Close()
			}
		}
	}
	p.layers = nil
}

// int8Pass is an INT8 model's pass: its layers' quantized linears, the
// SmoothQuant mode they were calibrated for and the recipe.
type int8Pass struct {
	mode   smoothquant.Mode
	layers []qlayer
	// attn8 runs attention in INT8 (attention8.go; Options.Attention).
	attn8  bool
	recipe *smoothquant.Recipe
}

func (p *int8Pass) precision() Precision {
	if p.mode == smoothquant.Static {
		return PrecisionInt8Static
	}
	return PrecisionInt8Dynamic
}

func (p *int8Pass) numLayers() int { return len(p.layers) }
func (p *int8Pass) int8() bool     { return true }

func (p *int8Pass) attention() AttentionMode {
	if p.attn8 {
		return AttentionInt8
	}
	return AttentionF32
}

// embedNorm: in static mode the embeddings' LayerNorm also quantizes the
// first layer's input.
func (p *int8Pass) embedNorm(m *Model, x []float32, s *qscratch) (bool, error) {
	var qp *kernels.QuantParams
	var q []uint8
	if p.mode == smoothquant.Static && len(p.layers) > 0 {
		if qp = p.layers[0].lin[linQKV].staticParams(&s.qp); qp != nil {
			q = s.xq.u8
		}
	}
	return qp != nil, m.embedNorm(x, s.rows, q, qp)
}

func (p *int8Pass) close() {
	for _, q := range p.layers {
		q.close()
	}
	p.layers = nil
}
