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
	n := floatBytes(m.wordEmb, m.posEmb, m.typeEmb, m.embLN, m.embLNBias, m.relBias) + m.dis.bytes() + m.pass.weightBytes()
	if m.proj != nil {
		n += m.proj.lin.Bytes() + 4*len(m.proj.bias)
	}
	return n
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

// Resident is the memory a model holds, by kind (docs/DESIGN.md section
// 9.9). Every field is in bytes.
type Resident struct {
	// Packed is the linears' weights as the kernels run them: every
	// packed form made so far, a compact copy still held, oneDNN's
	// reordered copies, and the column sums.
	Packed int
	// Other is every other weight: the embeddings (mapped from the file
	// where the checkpoint is; the kernel brings in the rows that are
	// read), the LayerNorms, biases, weight scales and smoothing vectors.
	Other int
	// Scratch is the pass buffers the model's pool holds: the kept set
	// (a warm-up's) and the idle sets no collection has freed yet.
	Scratch int
}

// Total is the sum of the kinds.
func (r Resident) Total() int { return r.Packed + r.Other + r.Scratch }

// Resident is the memory the model holds, by kind.
func (m *TaskModel) Resident() Resident {
	r := m.Encoder.Resident()
	for _, d := range append([]*Dense{m.pooler, m.qa}, m.head...) {
		if d != nil {
			r.Packed += d.lin.Bytes()
			r.Other += 4 * len(d.bias)
		}
	}
	return r
}

// Resident is the memory the encoder holds, by kind (TaskModel.Resident).
func (m *Model) Resident() Resident {
	packed := m.pass.linearBytes()
	if m.proj != nil {
		packed += m.proj.lin.Bytes()
	}
	return Resident{Packed: packed, Other: m.WeightBytes() - packed, Scratch: m.scratchPool.bytes()}
}

// Trim gives back what the model holds and no call has used since the
// previous Trim: the linears' packed forms that no call ran on (selector
// Linear.Trim; a warm-up's are kept) and the idle pass buffers (not the
// kept set). It returns the bytes released; the Go runtime returns them
// to the system at its next collection and scavenge.
func (m *TaskModel) Trim() int { return m.trim(false) }

// Compact is Trim for a model at rest: each linear keeps one packed form,
// the one most calls ran on (selector Linear.Compact), and a warm-up's.
// A later call that needs a released form packs it again from the kept
// one (docs/DESIGN.md section 9.9).
func (m *TaskModel) Compact() int { return m.trim(true) }

func (m *TaskModel) trim(compact bool) int {
	// Through the gate, as every call: a Trim racing with Close (a
	// server's idle release during its shutdown) releases nothing once
	// Close has begun, and Close waits for a Trim in progress.
	if m.enter() != nil {
		return 0
	}
	defer m.leave()
	n := m.Encoder.trim(compact)
	for _, d := range append([]*Dense{m.pooler, m.qa}, m.head...) {
		if d != nil && d.lin != nil {
			n += trimLinear(d.lin, compact)
		}
	}
	return n
}

// trimmer is a selector Linear of any operation.
type trimmer interface {
	Trim() int
	Compact() int
}

// trimLinear is l.Compact() where compact, else l.Trim().
func trimLinear(l trimmer, compact bool) int {
	if compact {
		return l.Compact()
	}
	return l.Trim()
}

// Trim is TaskModel.Trim for the encoder: 0 once Close has begun.
func (m *Model) Trim() int {
	if m.g.enter() != nil {
		return 0
	}
	defer m.g.leave()
	return m.trim(false)
}

func (m *Model) trim(compact bool) int {
	n := m.pass.trim(compact) + m.scratchPool.dropIdle()
	if m.proj != nil {
		n += trimLinear(m.proj.lin, compact)
	}
	return n
}

func (p *floatPass) linearBytes() int {
	n := 0
	for _, ly := range p.layers {
		for _, l := range []linear{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if l != nil {
				n += l.Bytes()
			}
		}
	}
	return n
}

func (p *floatPass) trim(compact bool) int {
	n := 0
	for _, ly := range p.layers {
		for _, l := range []linear{ly.qkv, ly.o, ly.ffn1, ly.ffn2} {
			if l != nil {
				n += trimLinear(l, compact)
			}
		}
	}
	return n
}

func (p *int8Pass) linearBytes() int {
	n := 0
	for _, q := range p.layers {
		for _, l := range q.lin {
			if l != nil && l.lin != nil {
				n += l.lin.Bytes()
			}
			if l != nil && l.f32 != nil {
				n += l.f32.Bytes()
			}
		}
	}
	return n
}

func (p *int8Pass) trim(compact bool) int {
	n := 0
	for _, q := range p.layers {
		for _, l := range q.lin {
			if l != nil && l.lin != nil {
				n += trimLinear(l.lin, compact)
			}
			if l != nil && l.f32 != nil {
				n += trimLinear(l.f32, compact)
			}
		}
	}
	return n
}

// ScratchBytes is the memory of the pass buffers one pass of up to rows
// tokens takes (what newBuffers allocates; INT8 attention's quantized
// Q, K and V, made on first use, are left out): what each instance running
// a pass of the token budget holds on top of the weights (docs/DESIGN.md
// section 9.10).
func (m *Model) ScratchBytes(rows int) int { return scratchBytes(m.cfg, m.pass.int8(), rows) }

// scratchBytes is newBuffersFor(c, int8, rows).bytes() without the
// buffers.
func scratchBytes(c Config, int8 bool, rows int) int {
	h, in := c.Hidden, c.Intermediate
	n := 4 * rows * (6*h + in)
	if c.Projects() {
		n += 4 * rows * c.EmbeddingWidth()
	}
	if int8 {
		n += rows*(2*h+u8Ld(in)) + 4*3*rows + 4*rows*max(h, in)
	}
	return n
}

// bytes is the memory of the buffers.
func (b *buffers) bytes() int {
	n := floatBytes(b.x, b.qkv, b.ctx, b.t, b.f, b.tmp, b.emb, b.xq.scales, b.ctxq.scales, b.fq.scales, b.a8.qs, b.a8.ks, b.a8.vs)
	n += len(b.xq.u8) + len(b.ctxq.u8) + len(b.fq.u8) + len(b.a8.q) + 4*len(b.a8.vb)
	for _, s := range b.a8.vt {
		for _, p := range s {
			n += len(p.Data) + 4*len(p.ColSum)
		}
	}
	return n
}

// bytes is the memory of the sets the pool holds: the kept one and the
// idle ones still alive (a set a pass holds is not counted).
func (p *bufferPool) bytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	if p.kept != nil {
		n += p.kept.bytes()
	}
	for _, w := range p.idle {
		if b := w.Value(); b != nil && b != p.kept {
			n += b.bytes()
		}
	}
	return n
}

// dropIdle forgets the idle sets (not the kept one) and returns their
// bytes.
func (p *bufferPool) dropIdle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.idle {
		if b := w.Value(); b != nil {
			n += b.bytes()
		}
	}
	p.idle = p.idle[:0]
	return n
}

// TuningBytes estimates the memory of the selector's choices for the
// model's keys (selector.Selector.ChoiceBytes): the tuning record in use.
func (m *TaskModel) TuningBytes() int {
	return m.Encoder.Selector().ChoiceBytes(m.ownsKey)
}
