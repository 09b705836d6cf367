package encoder

// WeightBytes is the memory of the model's weights: the embeddings, the
// LayerNorms and biases, and every linear's weights with the packed forms
// made so far (so it grows on the first pass as the kernels pack theirs).
func (m *TaskModel) WeightBytes() int {
	n := m.Encoder.WeightBytes()
	for _, d := range append([]*Dense{m.pooler, m.qa}, m.head...) {
		if d != nil {
			n += d.lin.Bytes() + 4*len(d.bias)
		}
	}
	return n
}

// WeightBytes is the memory of the encoder's weights (TaskModel.WeightBytes).
func (m *Model) WeightBytes() int {
	return floatBytes(m.wordEmb, m.posEmb, m.typeEmb, m.embLN, m.embLNBias) + m.pass.weightBytes()
}

// floatBytes is the memory of float32 slices s.
func floatBytes(s ...[]float32) int {
	n := 0
	for _, x := range s {
		n += 4 * len(x)
	}
	return n
}

func (p *floatPass) weightBytes() int {
	n := 0
	for _, ly := range p.layers {
		n += floatBytes(ly.qkvBias, ly.oBias, ly.attnLN, ly.attnLNBias, ly.ffn1Bias, ly.ffn2Bias, ly.outLN, ly.outLNBias)
		for _, l := range []linear{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if l != nil {
				n += l.Bytes()
			}
		}
	}
	return n
}

func (p *int8Pass) weightBytes() int {
	n := 0
	for _, q := range p.layers {
		n += floatBytes(q.attnLN, q.attnLNBias, q.outLN, q.outLNBias)
		for _, l := range q.lin {
			if l == nil {
				continue
			}
			n += 4 * len(l.pre)
			if l.lin != nil {
				n += l.lin.Bytes()
			}
			if l.f32 != nil {
				n += l.f32.Bytes()
			}
			if l.q != nil {
				n += 4*len(l.q.Bias) + len(l.q.W) + 4*len(l.q.WF32)
			}
		}
	}
	return n
}
