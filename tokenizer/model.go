package tokenizer

import (
	"sort"
	"unicode/utf8"
)

// piece is one model token inside a word: its id and its byte range.
type piece struct {
	id   int32
	i, j int32
}

// model turns one pre-tokenized word into pieces, appended to out; its
// working memory is in sc.
type model interface {
	tokenize(word []byte, out []piece, sc *scratch) []piece
}

// byteTrie is a static trie over byte strings with sorted child arrays; the
// root's children are indexed directly.
type byteTrie struct {
	root   [256]int32 // child of the root per byte, or -1
	first  []int32    // first child index in labels/next of node n
	count  []uint16   // number of children of node n
	labels []byte
	next   []int32
	value  []int32 // value at node n, or -1
}

type buildNode struct {
	children map[byte]int32
	value    int32
}

func newByteTrie(keys []string, values []int32) *byteTrie {
	nodes := []buildNode{{value: -1}}
	for k, key := range keys {
		n := int32(0)
		for i := 0; i < len(key); i++ {
			c := key[i]
			if nodes[n].children == nil {
				nodes[n].children = map[byte]int32{}
			}
			child, ok := nodes[n].children[c]
			if !ok {
				child = int32(len(nodes))
				nodes = append(nodes, buildNode{value: -1})
				nodes[n].children[c] = child
			}
			n = child
		}
		if nodes[n].value < 0 {
			nodes[n].value = values[k]
		}
	}
	t := &byteTrie{
		first: make([]int32, len(nodes)),
		count: make([]uint16, len(nodes)),
		value: make([]int32, len(nodes)),
	}
	for i := range t.root {
		t.root[i] = -1
	}
	for n, node := range nodes {
		t.value[n] = node.value
		t.first[n] = int32(len(t.labels))
		t.count[n] = uint16(len(node.children))
		ls := make([]int, 0, len(node.children))
		for c := range node.children {
			ls = append(ls, int(c))
		}
		sort.Ints(ls)
		for _, c := range ls {
			t.labels = append(t.labels, byte(c))
			t.next = append(t.next, node.children[byte(c)])
			if n == 0 {
				t.root[c] = node.children[byte(c)]
			}
		}
	}
	return t
}

// child returns the child of node n by byte c, or -1.
func (t *byteTrie) child(n int32, c byte) int32 {
	if n == 0 {
		return t.root[c]
	}
	lo, hi := int(t.first[n]), int(t.first[n])+int(t.count[n])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch l := t.labels[m]; {
		case l == c:
			return t.next[m]
		case l < c:
			lo = m + 1
		default:
			hi = m
		}
	}
	return -1
}

// longest returns the value and length of the longest key that is a prefix of s.
func (t *byteTrie) longest(s []byte) (value int32, length int) {
	value, length = -1, 0
	n := int32(0)
	for i := 0; i < len(s); i++ {
		n = t.child(n, s[i])
		if n < 0 {
			break
		}
		if v := t.value[n]; v >= 0 {
			value, length = v, i+1
		}
	}
	return value, length
}

// wordPiece is greedy longest-match-first WordPiece.
type wordPiece struct {
	start    *byteTrie // pieces that may begin a word
	cont     *byteTrie // continuing pieces, prefix removed
	prefix   string    // continuing_subword_prefix ("##")
	unk      int32
	maxChars int
}

func (w *wordPiece) tokenize(word []byte, out []piece, _ *scratch) []piece {
	if w.maxChars > 0 && len(word) > w.maxChars && utf8.RuneCount(word) > w.maxChars {
		return append(out, piece{id: w.unk, i: 0, j: int32(len(word))})
	}
	base := len(out)
	trie := w.start
	for i := 0; i < len(word); {
		id, n := trie.longest(word[i:])
		if id < 0 {
			return append(out[:base], piece{id: w.unk, i: 0, j: int32(len(word))})
		}
		out = append(out, piece{id: id, i: int32(i), j: int32(i + n)})
		i += n
		trie = w.cont
	}
	return out
}

// unigram is SentencePiece's Unigram model as Hugging Face runs it: Viterbi
// over piece log-probabilities, unknown characters scored min_score - 10 and,
// with fuseUnk, runs of unknowns merged into one [unk].
type unigram struct {
	trie     *byteTrie
	scores   []float64
	unk      int32
	unkScore float64
	fuseUnk  bool
	byteFB   bool
	byteIDs  [256]int32 // ids of <0xXX> pieces when byteFB
}

type viterbiNode struct {
	score float64
	from  int32 // start of the best piece ending here; -1 when unset
	id    int32
}

func (u *unigram) tokenize(word []byte, out []piece, sc *scratch) []piece {
	n := len(word)
	if n == 0 {
		return out
	}
	if cap(sc.viterbi) < n+1 {
		sc.viterbi = make([]viterbiNode, n+1, max(n+1, 64))
	}
	best := sc.viterbi[:n+1]
	for i := range best {
		best[i] = viterbiNode{from: -1}
	}
	for s := 0; s < n; {
		here := best[s].score
		mblen := 1
		if word[s] >= utf8.RuneSelf {
			_, mblen = utf8.DecodeRune(word[s:])
		}
		single := false
		node := int32(0)
		for e := s; e < n; e++ {
			node = u.trie.child(node, word[e])
			if node < 0 {
				break
			}
			id := u.trie.value[node]
			if id < 0 {
				continue
			}
			cand := here + u.scores[id]
			t := &best[e+1]
			if t.from < 0 || cand > t.score {
				t.score, t.from, t.id = cand, int32(s), id
			}
			if e+1-s == mblen {
				single = true
			}
		}
		if !single {
			cand := here + u.unkScore
			t := &best[s+mblen]
			if t.from < 0 || cand > t.score {
				t.score, t.from, t.id = cand, int32(s), -1
			}
		}
		s += mblen
	}
	// Backtrack, then reverse the new pieces in place.
	base := len(out)
	for e := n; e > 0; {
		b := best[e]
		s := int(b.from)
		if b.id < 0 || b.id == u.unk {
			if u.fuseUnk && len(out) > base && out[len(out)-1].id == -1 {
				out[len(out)-1].i = int32(s)
			} else {
				out = append(out, piece{id: -1, i: int32(s), j: int32(e)})
			}
		} else {
			out = append(out, piece{id: b.id, i: int32(s), j: int32(e)})
		}
		e = s
	}
	for i, j := base, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if !u.byteFB {
		for k := base; k < len(out); k++ {
			if out[k].id < 0 {
				out[k].id = u.unk
			}
		}
		return out
	}
	// Byte fallback: an unknown span becomes its bytes' <0xXX> pieces.
	res := out[:base]
	tail := append(sc.tail[:0], out[base:]...)
	sc.tail = tail
	for _, p := range tail {
		if p.id >= 0 {
			res = append(res, p)
			continue
		}
		ok := true
		for k := p.i; k < p.j; k++ {
			if u.byteIDs[word[k]] < 0 {
				ok = false
				break
			}
		}
		if !ok {
			res = append(res, piece{id: u.unk, i: p.i, j: p.j})
			continue
		}
		for k := p.i; k < p.j; k++ {
			res = append(res, piece{id: u.byteIDs[word[k]], i: k, j: k + 1})
		}
	}
	return res
}
