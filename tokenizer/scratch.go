package tokenizer

import "sync"

// scratch is the working memory of encoding inputs: the normalized strings
// and their alignments, the pre-tokenizer's word lists, the model's pieces
// and the sequences before post-processing. A batch worker reuses one for
// every input it encodes, and Encode takes one from a pool, so that what an
// input allocates is what its Encoding holds. Nothing an Encoding holds
// points into a scratch.
//
// Normalized strings and word lists come from arenas: str and list hand out
// slots in order, and release gives back every slot handed out since a mark.
// A slot is never handed out twice between a mark and its release, so the
// strings and words of one piece of text never share memory with each other.
type scratch struct {
	strs   []*nstr
	nstrs  int // slots of strs in use
	lists  []*[]nstr
	nlists int // slots of lists in use

	spans, nspans []span
	pieces, tail  []piece
	viterbi       []viterbiNode
	bpeSyms       []bpeSymbol
	bpeHeap       []bpeCand
	bpeSrc        []byte
	bpeCache      map[string][]piece // words the model below merged, by their bytes
	bpeCacheOf    *bpe
	seqs          [2]seq // the first and second text of an input
	runeIdx       []int32
	dec           []rune
	forms         []formRune
	locs          [][2]int
	asm           assembler // empty between inputs
}

// scratchMark is a point to release a scratch's arenas back to.
type scratchMark struct{ strs, lists int }

func (sc *scratch) mark() scratchMark { return scratchMark{sc.nstrs, sc.nlists} }

// release gives back the slots handed out since m; what was read from them
// must no longer be used.
func (sc *scratch) release(m scratchMark) { sc.nstrs, sc.nlists = m.strs, m.lists }

// str hands out an empty normalized string with room for capacity bytes.
// The caller appends to it through the pointer, so that the slot keeps what
// it grows to.
func (sc *scratch) str(capacity int) *nstr {
	if sc.nstrs == len(sc.strs) {
		sc.strs = append(sc.strs, new(nstr))
	}
	n := sc.strs[sc.nstrs]
	sc.nstrs++
	if cap(n.s) < capacity || cap(n.start) < capacity || cap(n.end) < capacity {
		*n = newNstr(capacity)
	} else {
		n.s, n.start, n.end = n.s[:0], n.start[:0], n.end[:0]
	}
	return n
}

// list hands out an empty word list with room for capacity words, to be
// appended to through the pointer.
func (sc *scratch) list(capacity int) *[]nstr {
	if sc.nlists == len(sc.lists) {
		sc.lists = append(sc.lists, new([]nstr))
	}
	l := sc.lists[sc.nlists]
	sc.nlists++
	if cap(*l) < capacity {
		*l = make([]nstr, 0, capacity)
	} else {
		*l = (*l)[:0]
	}
	return l
}

// scratchKeep bounds what a pooled scratch may hold: one that grew past it
// (a long input) is left to the collector rather than kept for the next.
const scratchKeep = 1 << 16

// small reports whether sc is small enough to keep in the pool.
func (sc *scratch) small() bool {
	if len(sc.bpeCache) > bpeCacheWords || len(sc.strs) > 64 || len(sc.lists) > 64 || cap(sc.runeIdx) > scratchKeep || cap(sc.viterbi) > scratchKeep {
		return false
	}
	for _, n := range sc.strs {
		if cap(n.s) > scratchKeep || cap(n.start) > scratchKeep || cap(n.end) > scratchKeep {
			return false
		}
	}
	for _, l := range sc.lists {
		if cap(*l) > scratchKeep/8 {
			return false
		}
	}
	for _, s := range sc.seqs {
		if cap(s.ids) > scratchKeep/4 || cap(s.tokens) > scratchKeep/16 || cap(s.offs) > scratchKeep/16 {
			return false
		}
	}
	return cap(sc.pieces) <= scratchKeep/8 && cap(sc.tail) <= scratchKeep/8 && cap(sc.spans) <= scratchKeep/16 &&
		cap(sc.nspans) <= scratchKeep/16 && cap(sc.dec) <= scratchKeep/4 && cap(sc.forms) <= scratchKeep/16 &&
		cap(sc.locs) <= scratchKeep/16 && cap(sc.bpeSyms) <= scratchKeep/8 && cap(sc.bpeHeap) <= scratchKeep/8 &&
		cap(sc.bpeSrc) <= scratchKeep
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch takes a scratch from the pool; putScratch gives it back.
func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) {
	if !sc.small() {
		return
	}
	sc.release(scratchMark{})
	scratchPool.Put(sc)
}
