package tokenizer

// trimmer is a post-processor that trims offsets (ByteLevel, RobertaProcessing).
type trimmer interface {
	offsetTrim() offsetTrim
}

// postProcessor adds special tokens and type ids around encoded texts.
type postProcessor interface {
	// added returns the number of tokens it adds to a single text or a pair.
	added(pair bool) int
	// apply appends a, and b when pair is set, with its tokens around them.
	apply(e *assembler, a, b seq, pair bool)
	// secondTypeID is the type id of the second text's tokens.
	secondTypeID() int32
}

// templateItem is one element of a TemplateProcessing template: a special
// token (ids and tokens) or a sequence (A = 0, B = 1).
type templateItem struct {
	special bool
	ids     []int32
	tokens  []string
	seq     int
	typeID  int32
}

// templateProcessor is Hugging Face's TemplateProcessing.
type templateProcessor struct {
	single, pair []templateItem
}

func countSpecial(items []templateItem) int {
	n := 0
	for _, it := range items {
		if it.special {
			n += len(it.ids)
		}
	}
	return n
}

func (p *templateProcessor) added(pair bool) int {
	if pair {
		return countSpecial(p.pair)
	}
	return countSpecial(p.single)
}

func (p *templateProcessor) secondTypeID() int32 {
	for _, it := range p.pair {
		if !it.special && it.seq == 1 {
			return it.typeID
		}
	}
	return 1
}

func (p *templateProcessor) apply(e *assembler, a, b seq, pair bool) {
	items := p.single
	if pair {
		items = p.pair
	}
	for _, it := range items {
		switch {
		case it.special:
			for k, id := range it.ids {
				e.special(id, it.tokens[k], it.typeID)
			}
		case it.seq == 0:
			e.seq(a, it.typeID, 0)
		case pair:
			e.seq(b, it.typeID, 1)
		}
	}
}

// bertProcessor is BertProcessing: [CLS] A [SEP] (B [SEP]), type ids 0 then 1.
type bertProcessor struct {
	cls, sep       int32
	clsTok, sepTok string
}

func (p *bertProcessor) added(pair bool) int {
	if pair {
		return 3
	}
	return 2
}

func (p *bertProcessor) secondTypeID() int32 { return 1 }

func (p *bertProcessor) apply(e *assembler, a, b seq, pair bool) {
	e.special(p.cls, p.clsTok, 0)
	e.seq(a, 0, 0)
	e.special(p.sep, p.sepTok, 0)
	if pair {
		e.seq(b, 1, 1)
		e.special(p.sep, p.sepTok, 1)
	}
}

// robertaProcessor is RobertaProcessing: <s> A </s> (</s> B </s>), type ids
// 0, offsets trimmed as its trim_offsets and add_prefix_space say (even
// without the special tokens).
type robertaProcessor struct {
	cls, sep       int32
	clsTok, sepTok string
	trim           offsetTrim
}

func (p *robertaProcessor) offsetTrim() offsetTrim { return p.trim }

func (p *robertaProcessor) added(pair bool) int {
	if pair {
		return 4
	}
	return 2
}

func (p *robertaProcessor) secondTypeID() int32 { return 0 }

func (p *robertaProcessor) apply(e *assembler, a, b seq, pair bool) {
	e.special(p.cls, p.clsTok, 0)
	e.seq(a, 0, 0)
	e.special(p.sep, p.sepTok, 0)
	if pair {
		e.special(p.sep, p.sepTok, 0)
		e.seq(b, 0, 1)
		e.special(p.sep, p.sepTok, 0)
	}
}
