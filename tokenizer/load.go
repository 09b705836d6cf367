package tokenizer

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Load reads a tokenizer from path: a tokenizer.json, a BERT vocab.txt, a
// byte-level BPE vocab.json or merges.txt (the pair is read together), a
// SentencePiece spm.model or sentencepiece.bpe.model, or a folder holding
// one of them (tokenizer.json preferred, then vocab.txt, then vocab.json
// with merges.txt, then spm.model, then sentencepiece.bpe.model;
// tokenizer_config.json next to the others supplies do_lower_case,
// add_prefix_space and friends, and added_tokens.json the legacy BPE
// pair's added tokens).
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		f, ok := Find(path)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s holds no tokenizer.json, vocab.txt, vocab.json with merges.txt, spm.model or sentencepiece.bpe.model", path)
		}
		return LoadFile(f)
	}
	return LoadFile(path)
}

// Find returns the tokenizer file that Load reads in dir, and whether
// there is one: tokenizer.json, vocab.txt, vocab.json when merges.txt
// is beside it, spm.model, or sentencepiece.bpe.model.
func Find(dir string) (string, bool) {
	exists := func(name string) bool {
		st, err := os.Stat(filepath.Join(dir, name))
		return err == nil && !st.IsDir()
	}
	for _, name := range []string{"tokenizer.json", "vocab.txt"} {
		if exists(name) {
			return filepath.Join(dir, name), true
		}
	}
	if exists("vocab.json") && exists("merges.txt") {
		return filepath.Join(dir, "vocab.json"), true
	}
	for _, name := range []string{"spm.model", "sentencepiece.bpe.model"} {
		if exists(name) {
			return filepath.Join(dir, name), true
		}
	}
	return "", false
}

// LoadFile reads a tokenizer.json, a vocab.txt when the name ends in
// .txt, the vocab.json and merges.txt of one folder when the name is
// either of them, or a SentencePiece model when the name ends in .model
// (converted as tokenizer_config.json's tokenizer_class or config.json's
// model_type says: FromSentencePiece).
func LoadFile(path string) (*Tokenizer, error) {
	if strings.HasSuffix(path, ".model") {
		return loadSPM(path)
	}
	if base := filepath.Base(path); base == "vocab.json" || base == "merges.txt" {
		return loadVocabMerges(filepath.Dir(path))
	}
	data, err := readLimited(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if strings.HasSuffix(path, ".txt") {
		cfg, err := readConfig(filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		t, err := FromVocab(data, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, path)
		}
		return t, nil
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

type jsonTokenizer struct {
	AddedTokens   []jsonAdded     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         json.RawMessage `json:"model"`
	Decoder       json.RawMessage `json:"decoder"`
	Truncation    *struct {
		MaxLength int    `json:"max_length"`
		Strategy  string `json:"strategy"`
		Stride    int    `json:"stride"`
		Direction string `json:"direction"`
	} `json:"truncation"`
	Padding *struct {
		Strategy        json.RawMessage `json:"strategy"`
		Direction       string          `json:"direction"`
		PadToMultipleOf *int            `json:"pad_to_multiple_of"`
		PadID           int32           `json:"pad_id"`
		PadTypeID       int32           `json:"pad_type_id"`
		PadToken        string          `json:"pad_token"`
	} `json:"padding"`
}

type jsonAdded struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type typed struct {
	Type string `json:"type"`
}

func isNull(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	return len(m) == 0 || string(m) == "null"
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json.
func FromJSON(data []byte) (_ *Tokenizer, err error) {
	defer func() {
		if err != nil && !errors.Is(err, ErrFormat) {
			err = formatError{err}
		}
	}()
	var j jsonTokenizer
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: %w", err)
	}
	if isNull(j.Model) {
		return nil, errors.New("tokenizer: tokenizer.json: model: missing")
	}
	t := &Tokenizer{ids: map[string]int32{}, special: map[string]int32{}}
	if err := t.loadModel(j.Model); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: model: %w", err)
	}
	limit := int32(2*len(t.vocab) + len(j.AddedTokens) + 1024)
	for k, a := range j.AddedTokens {
		if a.ID < 0 || a.ID > limit || a.Content == "" {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: added_tokens[%d]: bad id %d or empty content", k, a.ID)
		}
		t.setToken(a.ID, a.Content)
		t.added = append(t.added, AddedToken(a))
	}
	if t.norm, err = parseNormalizer(j.Normalizer); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: normalizer: %w", err)
	}
	if t.pre, err = parsePreTokenizer(j.PreTokenizer); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: pre_tokenizer: %w", err)
	}
	if t.post, err = t.parsePostProcessor(j.PostProcessor); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: post_processor: %w", err)
	}
	t.dec = parseDecoder(j.Decoder)
	if err := t.checkPostIDs(); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer.json: post_processor: %w", err)
	}
	if tr := j.Truncation; tr != nil {
		t.hasFileOpts = true
		t.fileOpts.MaxLength = tr.MaxLength
		t.fileOpts.Stride = tr.Stride
		t.fileOpts.TruncateLeft = tr.Direction == "Left"
		switch tr.Strategy {
		case "LongestFirst", "":
			t.fileOpts.Truncation = LongestFirst
		case "OnlyFirst":
			t.fileOpts.Truncation = OnlyFirst
		case "OnlySecond":
			t.fileOpts.Truncation = OnlySecond
		default:
			return nil, fmt.Errorf("tokenizer: tokenizer.json: truncation.strategy: unknown %q", tr.Strategy)
		}
	}
	sp := t.Special()
	t.padID, t.padToken = max(sp.PAD, 0), t.Token(max(sp.PAD, 0))
	if p := j.Padding; p != nil {
		t.hasFileOpts = true
		t.padID, t.padTypeID, t.padToken = p.PadID, p.PadTypeID, p.PadToken
		if p.PadID < 0 || int(p.PadID) >= len(t.vocab) {
			return nil, fmt.Errorf("tokenizer: tokenizer.json: padding.pad_id: %d out of range", p.PadID)
		}
		t.fileOpts.PadLeft = p.Direction == "Left"
		if p.PadToMultipleOf != nil {
			t.fileOpts.PadToMultipleOf = *p.PadToMultipleOf
		}
		var fixed struct {
			Fixed *int `json:"Fixed"`
		}
		switch {
		case string(bytes.TrimSpace(p.Strategy)) == `"BatchLongest"`:
			t.fileOpts.Padding = PadLongest
		case json.Unmarshal(p.Strategy, &fixed) == nil && fixed.Fixed != nil:
			t.fileOpts.Padding = PadFixed
			t.fileOpts.PadLength = *fixed.Fixed
		default:
			return nil, fmt.Errorf("tokenizer: tokenizer.json: padding.strategy: unknown %s", p.Strategy)
		}
	}
	t.buildMatchers()
	return t, nil
}

// checkPostIDs makes sure the post-processor only adds ids of the vocabulary.
func (t *Tokenizer) checkPostIDs() error {
	var ids []int32
	switch p := t.post.(type) {
	case *templateProcessor:
		for _, it := range append(append([]templateItem(nil), p.single...), p.pair...) {
			ids = append(ids, it.ids...)
		}
	case *bertProcessor:
		ids = append(ids, p.cls, p.sep)
	case *robertaProcessor:
		ids = append(ids, p.cls, p.sep)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.vocab) {
			return fmt.Errorf("special token id %d is not in the vocabulary of %d", id, len(t.vocab))
		}
	}
	return nil
}

func (t *Tokenizer) setToken(id int32, s string) {
	for int(id) >= len(t.vocab) {
		t.vocab = append(t.vocab, "")
	}
	t.vocab[id] = s
	if _, ok := t.ids[s]; !ok {
		t.ids[s] = id
	}
}

// buildMatchers prepares the added-token matchers; the patterns of
// normalized tokens are their content run through the normalizer.
func (t *Tokenizer) buildMatchers() {
	var raw, normed []AddedToken
	var rawP, normP []string
	for _, a := range t.added {
		t.special[a.Content] = a.ID
		if a.Normalized && t.norm != nil {
			n := t.norm.normalize(fromOriginal(a.Content), new(scratch))
			normed = append(normed, a)
			normP = append(normP, string(n.s))
		} else if a.Normalized {
			normed = append(normed, a)
			normP = append(normP, a.Content)
		} else {
			raw = append(raw, a)
			rawP = append(rawP, a.Content)
		}
	}
	t.raw = newAddedMatcher(raw, rawP)
	t.normed = newAddedMatcher(normed, normP)
}

func (t *Tokenizer) loadModel(m json.RawMessage) error {
	var ty typed
	if err := json.Unmarshal(m, &ty); err != nil {
		return err
	}
	switch ty.Type {
	case "WordPiece":
		var w struct {
			Vocab    map[string]int32 `json:"vocab"`
			Unk      string           `json:"unk_token"`
			Prefix   *string          `json:"continuing_subword_prefix"`
			MaxChars *int             `json:"max_input_chars_per_word"`
		}
		if err := json.Unmarshal(m, &w); err != nil {
			return err
		}
		if len(w.Vocab) == 0 {
			return errors.New("vocab: empty")
		}
		for s, id := range w.Vocab {
			if id < 0 || int(id) > 4*len(w.Vocab)+1024 {
				return fmt.Errorf("vocab: id %d of %q out of range", id, s)
			}
			t.setToken(id, s)
		}
		prefix, maxChars := "##", 100
		if w.Prefix != nil {
			prefix = *w.Prefix
		}
		if w.MaxChars != nil {
			maxChars = *w.MaxChars
		}
		if w.Unk == "" {
			w.Unk = "[UNK]"
		}
		unk, ok := w.Vocab[w.Unk]
		if !ok {
			return fmt.Errorf("unk_token: %q is not in the vocabulary", w.Unk)
		}
		t.model = newWordPiece(w.Vocab, prefix, unk, maxChars)
		t.kind = "WordPiece"
	case "Unigram":
		var u struct {
			Vocab        [][2]json.RawMessage `json:"vocab"`
			UnkID        *int32               `json:"unk_id"`
			ByteFallback bool                 `json:"byte_fallback"`
		}
		if err := json.Unmarshal(m, &u); err != nil {
			return err
		}
		if len(u.Vocab) == 0 {
			return errors.New("vocab: empty")
		}
		model := &unigram{unk: -1, fuseUnk: true, byteFB: u.ByteFallback, scores: make([]float64, len(u.Vocab))}
		keys := make([]string, len(u.Vocab))
		vals := make([]int32, len(u.Vocab))
		minScore := math.Inf(1)
		for i, e := range u.Vocab {
			if err := json.Unmarshal(e[0], &keys[i]); err != nil {
				return fmt.Errorf("vocab[%d]: piece: %w", i, err)
			}
			if err := json.Unmarshal(e[1], &model.scores[i]); err != nil {
				return fmt.Errorf("vocab[%d]: score: %w", i, err)
			}
			vals[i] = int32(i)
			minScore = min(minScore, model.scores[i])
			t.setToken(int32(i), keys[i])
		}
		if u.UnkID != nil {
			if *u.UnkID < 0 || int(*u.UnkID) >= len(u.Vocab) {
				return fmt.Errorf("unk_id: %d out of range", *u.UnkID)
			}
			model.unk = *u.UnkID
		}
		if model.unk < 0 {
			return errors.New("unk_id: missing (needed for unknown characters)")
		}
		model.unkScore = minScore - 10
		for i := range model.byteIDs {
			model.byteIDs[i] = -1
			if id, ok := t.ids[fmt.Sprintf("<0x%02X>", i)]; ok {
				model.byteIDs[i] = id
			}
		}
		model.trie = newByteTrie(keys, vals)
		t.model = model
		t.kind = "Unigram"
		t.unkText, t.unkID = true, model.unk
	case "BPE":
		return t.loadBPE(m)
	case "":
		return errors.New("type: missing")
	default:
		return fmt.Errorf("type: %q is not supported (WordPiece, Unigram and BPE are)", ty.Type)
	}
	return nil
}

func newWordPiece(vocab map[string]int32, prefix string, unk int32, maxChars int) *wordPiece {
	var sk, ck []string
	var sv, cv []int32
	for s, id := range vocab {
		if prefix != "" && strings.HasPrefix(s, prefix) && len(s) > len(prefix) {
			ck = append(ck, s[len(prefix):])
			cv = append(cv, id)
		}
		sk = append(sk, s)
		sv = append(sv, id)
	}
	// Keep loading deterministic when two spellings collide: lower id first.
	sortByID(sk, sv)
	sortByID(ck, cv)
	w := &wordPiece{start: newByteTrie(sk, sv), unk: unk, maxChars: maxChars, prefix: prefix}
	w.cont = w.start
	if prefix != "" {
		w.cont = newByteTrie(ck, cv)
	}
	return w
}

func sortByID(keys []string, ids []int32) {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sortInts(idx, func(a, b int) bool { return ids[a] < ids[b] })
	k2 := make([]string, len(keys))
	i2 := make([]int32, len(ids))
	for n, i := range idx {
		k2[n], i2[n] = keys[i], ids[i]
	}
	copy(keys, k2)
	copy(ids, i2)
}

func parseNormalizer(m json.RawMessage) (normalizer, error) {
	if isNull(m) {
		return nil, nil
	}
	var ty typed
	if err := json.Unmarshal(m, &ty); err != nil {
		return nil, err
	}
	switch ty.Type {
	case "BertNormalizer":
		var b struct {
			CleanText    *bool `json:"clean_text"`
			Chinese      *bool `json:"handle_chinese_chars"`
			StripAccents *bool `json:"strip_accents"`
			Lowercase    *bool `json:"lowercase"`
		}
		if err := json.Unmarshal(m, &b); err != nil {
			return nil, fmt.Errorf("BertNormalizer: %w", err)
		}
		def := func(p *bool) bool { return p == nil || *p }
		n := &bertNormalizer{cleanText: def(b.CleanText), chineseChars: def(b.Chinese), lowercase: def(b.Lowercase)}
		n.stripAccents = n.lowercase
		if b.StripAccents != nil {
			n.stripAccents = *b.StripAccents
		}
		return n, nil
	case "Sequence":
		var s struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(m, &s); err != nil {
			return nil, fmt.Errorf("type Sequence: %w", err)
		}
		var seq sequenceNormalizer
		for i, sub := range s.Normalizers {
			n, err := parseNormalizer(sub)
			if err != nil {
				return nil, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return seq, nil
	case "Precompiled":
		var p struct {
			Map *string `json:"precompiled_charsmap"`
		}
		if err := json.Unmarshal(m, &p); err != nil {
			return nil, fmt.Errorf("type Precompiled: %w", err)
		}
		if p.Map == nil || *p.Map == "" {
			return nil, nil // an empty charsmap is the identity
		}
		blob, err := base64.StdEncoding.DecodeString(*p.Map)
		if err != nil {
			return nil, fmt.Errorf("type Precompiled: precompiled_charsmap: %w", err)
		}
		n, err := newPrecompiled(blob)
		if err != nil {
			return nil, fmt.Errorf("type Precompiled: precompiled_charsmap: %w", err)
		}
		return n, nil
	case "Replace":
		var r struct {
			Pattern struct {
				String *string `json:"String"`
				Regex  *string `json:"Regex"`
			} `json:"pattern"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(m, &r); err != nil {
			return nil, fmt.Errorf("type Replace: %w", err)
		}
		switch {
		case r.Pattern.String != nil:
			if *r.Pattern.String == "" {
				return nil, errors.New("type Replace: pattern.String: empty")
			}
			return &replaceNormalizer{literal: *r.Pattern.String, content: r.Content}, nil
		case r.Pattern.Regex != nil:
			re, err := regexp.Compile(*r.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("type Replace: pattern.Regex: %w", err)
			}
			return &replaceNormalizer{re: re, content: r.Content}, nil
		}
		return nil, errors.New("type Replace: pattern: neither String nor Regex")
	case "Strip":
		var s struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := json.Unmarshal(m, &s); err != nil {
			return nil, fmt.Errorf("type Strip: %w", err)
		}
		return stripNormalizer{left: s.Left, right: s.Right}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "StripAccents":
		return stripAccentsNormalizer{}, nil
	case "NFD":
		return formNormalizer{}, nil
	case "NFKD":
		return formNormalizer{compat: true}, nil
	case "NFC":
		return formNormalizer{composed: true}, nil
	case "NFKC":
		return formNormalizer{compat: true, composed: true}, nil
	case "":
		return nil, errors.New("type: missing")
	}
	return nil, fmt.Errorf("type: %q is not supported", ty.Type)
}

func parsePreTokenizer(m json.RawMessage) (preTokenizer, error) {
	if isNull(m) {
		return nil, nil
	}
	var ty typed
	if err := json.Unmarshal(m, &ty); err != nil {
		return nil, err
	}
	switch ty.Type {
	case "BertPreTokenizer":
		return bertPreTokenizer{}, nil
	case "WhitespaceSplit":
		return whitespaceSplit{}, nil
	case "ByteLevel":
		var b struct {
			AddPrefixSpace *bool `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(m, &b); err != nil {
			return nil, fmt.Errorf("type ByteLevel: %w", err)
		}
		return byteLevel{addPrefix: b.AddPrefixSpace == nil || *b.AddPrefixSpace, useRegex: b.UseRegex == nil || *b.UseRegex}, nil
	case "Whitespace":
		return whitespacePreTokenizer{}, nil
	case "Punctuation":
		var b struct {
			Behavior *string `json:"behavior"`
		}
		if err := json.Unmarshal(m, &b); err != nil {
			return nil, fmt.Errorf("type Punctuation: %w", err)
		}
		if b.Behavior != nil && *b.Behavior != "Isolated" {
			return nil, fmt.Errorf("type Punctuation: behavior %q is not supported (only Isolated)", *b.Behavior)
		}
		return punctuationPreTokenizer{}, nil
	case "Metaspace":
		var ms struct {
			Replacement    string  `json:"replacement"`
			AddPrefixSpace *bool   `json:"add_prefix_space"`
			PrependScheme  *string `json:"prepend_scheme"`
			Split          *bool   `json:"split"`
		}
		if err := json.Unmarshal(m, &ms); err != nil {
			return nil, fmt.Errorf("type Metaspace: %w", err)
		}
		r, size := utf8.DecodeRuneInString(ms.Replacement)
		if size == 0 || size != len(ms.Replacement) || r == utf8.RuneError {
			return nil, fmt.Errorf("type Metaspace: replacement: want one character, have %q", ms.Replacement)
		}
		p := &metaspace{replacement: r, rep: ms.Replacement, prepend: prependAlways, split_: ms.Split == nil || *ms.Split}
		if ms.PrependScheme != nil {
			switch *ms.PrependScheme {
			case "always":
				p.prepend = prependAlways
			case "first":
				p.prepend = prependFirst
			case "never":
				p.prepend = prependNever
			default:
				return nil, fmt.Errorf("type Metaspace: prepend_scheme: unknown %q", *ms.PrependScheme)
			}
		}
		if ms.AddPrefixSpace != nil && !*ms.AddPrefixSpace {
			p.prepend = prependNever
		}
		return p, nil
	case "Sequence":
		var s struct {
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(m, &s); err != nil {
			return nil, fmt.Errorf("type Sequence: %w", err)
		}
		var seq sequencePreTokenizer
		for i, sub := range s.PreTokenizers {
			p, err := parsePreTokenizer(sub)
			if err != nil {
				return nil, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			if p != nil {
				seq = append(seq, p)
			}
		}
		return seq, nil
	case "":
		return nil, errors.New("type: missing")
	}
	return nil, fmt.Errorf("type: %q is not supported", ty.Type)
}

func (t *Tokenizer) parsePostProcessor(m json.RawMessage) (postProcessor, error) {
	if isNull(m) {
		return nil, nil
	}
	var ty typed
	if err := json.Unmarshal(m, &ty); err != nil {
		return nil, err
	}
	pairOf := func(name string, raw json.RawMessage) (string, int32, error) {
		var v [2]json.RawMessage
		var s string
		var id int32
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", 0, fmt.Errorf("%s: %w", name, err)
		}
		if err := json.Unmarshal(v[0], &s); err != nil {
			return "", 0, fmt.Errorf("%s: %w", name, err)
		}
		if err := json.Unmarshal(v[1], &id); err != nil {
			return "", 0, fmt.Errorf("%s: %w", name, err)
		}
		if id < 0 {
			return "", 0, fmt.Errorf("%s: negative id", name)
		}
		return s, id, nil
	}
	switch ty.Type {
	case "ByteLevel":
		var b struct {
			Trim           *bool `json:"trim_offsets"`
			AddPrefixSpace *bool `json:"add_prefix_space"`
		}
		if err := json.Unmarshal(m, &b); err != nil {
			return nil, fmt.Errorf("ByteLevel: %w", err)
		}
		return &byteLevelProcessor{trim: offsetTrim{trim: b.Trim == nil || *b.Trim, addPrefix: b.AddPrefixSpace == nil || *b.AddPrefixSpace}}, nil
	case "BertProcessing", "RobertaProcessing":
		var b struct {
			Sep            json.RawMessage `json:"sep"`
			Cls            json.RawMessage `json:"cls"`
			Trim           *bool           `json:"trim_offsets"`
			AddPrefixSpace *bool           `json:"add_prefix_space"`
		}
		if err := json.Unmarshal(m, &b); err != nil {
			return nil, fmt.Errorf("%s: %w", ty.Type, err)
		}
		sepTok, sep, err := pairOf(ty.Type+": sep", b.Sep)
		if err != nil {
			return nil, err
		}
		clsTok, cls, err := pairOf(ty.Type+": cls", b.Cls)
		if err != nil {
			return nil, err
		}
		if ty.Type == "BertProcessing" {
			return &bertProcessor{cls: cls, sep: sep, clsTok: clsTok, sepTok: sepTok}, nil
		}
		trim := offsetTrim{trim: b.Trim == nil || *b.Trim, addPrefix: b.AddPrefixSpace == nil || *b.AddPrefixSpace}
		return &robertaProcessor{cls: cls, sep: sep, clsTok: clsTok, sepTok: sepTok, trim: trim}, nil
	case "TemplateProcessing":
		var tp struct {
			Single        []map[string]json.RawMessage `json:"single"`
			Pair          []map[string]json.RawMessage `json:"pair"`
			SpecialTokens map[string]struct {
				ID     string   `json:"id"`
				IDs    []int32  `json:"ids"`
				Tokens []string `json:"tokens"`
			} `json:"special_tokens"`
		}
		if err := json.Unmarshal(m, &tp); err != nil {
			return nil, fmt.Errorf("TemplateProcessing: %w", err)
		}
		conv := func(field string, in []map[string]json.RawMessage) ([]templateItem, error) {
			var out []templateItem
			for i, it := range in {
				var body struct {
					ID     string `json:"id"`
					TypeID int32  `json:"type_id"`
				}
				if raw, ok := it["SpecialToken"]; ok {
					if err := json.Unmarshal(raw, &body); err != nil {
						return nil, fmt.Errorf("TemplateProcessing: %s[%d]: %w", field, i, err)
					}
					st, ok := tp.SpecialTokens[body.ID]
					if !ok || len(st.IDs) != len(st.Tokens) {
						return nil, fmt.Errorf("TemplateProcessing: %s[%d]: special token %q missing from special_tokens", field, i, body.ID)
					}
					for _, id := range st.IDs {
						if id < 0 {
							return nil, fmt.Errorf("TemplateProcessing: special_tokens: %q: negative id", body.ID)
						}
					}
					out = append(out, templateItem{special: true, ids: st.IDs, tokens: st.Tokens, typeID: body.TypeID})
				} else if raw, ok := it["Sequence"]; ok {
					if err := json.Unmarshal(raw, &body); err != nil {
						return nil, fmt.Errorf("TemplateProcessing: %s[%d]: %w", field, i, err)
					}
					switch body.ID {
					case "A":
						out = append(out, templateItem{seq: 0, typeID: body.TypeID})
					case "B":
						out = append(out, templateItem{seq: 1, typeID: body.TypeID})
					default:
						return nil, fmt.Errorf("TemplateProcessing: %s[%d]: sequence id %q", field, i, body.ID)
					}
				} else {
					return nil, fmt.Errorf("TemplateProcessing: %s[%d]: neither SpecialToken nor Sequence", field, i)
				}
			}
			return out, nil
		}
		single, err := conv("single", tp.Single)
		if err != nil {
			return nil, err
		}
		pair, err := conv("pair", tp.Pair)
		if err != nil {
			return nil, err
		}
		return &templateProcessor{single: single, pair: pair}, nil
	case "":
		return nil, errors.New("type: missing")
	}
	return nil, fmt.Errorf("type: %q is not supported", ty.Type)
}

// FromVocab builds a BERT WordPiece tokenizer from the contents of a
// vocab.txt (one token per line, the line number is the id) and, when not
// nil, of its tokenizer_config.json (do_lower_case, strip_accents,
// tokenize_chinese_chars).
func FromVocab(vocabTxt, configJSON []byte) (_ *Tokenizer, err error) {
	defer func() {
		if err != nil {
			err = formatError{err}
		}
	}()
	vocab := map[string]int32{}
	t := &Tokenizer{ids: map[string]int32{}, special: map[string]int32{}}
	sc := bufio.NewScanner(bytes.NewReader(vocabTxt))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for n := int32(0); sc.Scan(); n++ {
		tok := strings.TrimRight(sc.Text(), "\r")
		if !utf8.ValidString(tok) {
			return nil, fmt.Errorf("tokenizer: vocab.txt: line %d is not valid UTF-8", n+1)
		}
		if _, ok := vocab[tok]; !ok {
			vocab[tok] = n
		}
		t.setToken(n, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokenizer: vocab.txt: %w", err)
	}
	cfg := struct {
		Lower   *bool `json:"do_lower_case"`
		Strip   *bool `json:"strip_accents"`
		Chinese *bool `json:"tokenize_chinese_chars"`
	}{}
	if len(configJSON) > 0 {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
		}
	}
	lower := cfg.Lower == nil || *cfg.Lower
	n := &bertNormalizer{cleanText: true, chineseChars: cfg.Chinese == nil || *cfg.Chinese, lowercase: lower, stripAccents: lower}
	if cfg.Strip != nil {
		n.stripAccents = *cfg.Strip
	}
	t.norm = n
	t.pre = bertPreTokenizer{}
	unk, ok := vocab["[UNK]"]
	if !ok {
		return nil, errors.New("tokenizer: vocab.txt: no [UNK] token")
	}
	t.model = newWordPiece(vocab, "##", unk, 100)
	t.kind = "WordPiece"
	t.dec = wordPieceDecoder{prefix: "##", cleanup: true} // BertTokenizerFast's
	for _, s := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		if id, ok := vocab[s]; ok {
			t.added = append(t.added, AddedToken{ID: id, Content: s, Special: true})
		}
	}
	cls, ok1 := vocab["[CLS]"]
	sep, ok2 := vocab["[SEP]"]
	if ok1 && ok2 {
		t.post = &bertProcessor{cls: cls, sep: sep, clsTok: "[CLS]", sepTok: "[SEP]"}
	}
	sp := t.Special()
	t.padID = max(sp.PAD, 0)
	t.padToken = t.Token(t.padID)
	t.buildMatchers()
	return t, nil
}

// loadVocabMerges reads dir's vocab.json and merges.txt (and
// tokenizer_config.json and added_tokens.json when they are there).
func loadVocabMerges(dir string) (*Tokenizer, error) {
	vocab, err := readLimited(filepath.Join(dir, "vocab.json"), MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	merges, err := readLimited(filepath.Join(dir, "merges.txt"), MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: byte-level BPE needs merges.txt beside vocab.json: %w", err)
	}
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	added, err := readLimited(filepath.Join(dir, "added_tokens.json"), MaxConfigSize)
	switch {
	case errors.Is(err, os.ErrNotExist):
		added = nil
	case err != nil:
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromVocabMergesAdded(vocab, merges, cfg, added)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	return t, nil
}

// FromVocabMerges builds a byte-level BPE tokenizer (RoBERTa's, GPT-2's
// vocabulary) from the contents of a vocab.json (token to id) and a
// merges.txt (one merge a line, after a "#version" line), as transformers'
// RobertaTokenizerFast makes it from them: ByteLevel pre-tokenizer and
// decoder, RobertaProcessing with trimmed offsets, and the special tokens
// <s>, </s>, <unk>, <pad> and <mask> (which takes the white space before
// it); a special token missing from vocab.json is added at the next id.
// configJSON, when not nil, is the tokenizer_config.json beside them:
// add_prefix_space, trim_offsets and the special tokens' names
// (bos_token, eos_token, sep_token, cls_token, unk_token, pad_token,
// mask_token, each a string or an object with "content").
func FromVocabMerges(vocabJSON, mergesTxt, configJSON []byte) (*Tokenizer, error) {
	return FromVocabMergesAdded(vocabJSON, mergesTxt, configJSON, nil)
}

// FromVocabMergesAdded is FromVocabMerges with, when addedTokensJSON is not
// nil, the added_tokens.json beside them (token to id), read as
// transformers 4.31's from_pretrained reads it for a folder without
// tokenizer.json (docs/DESIGN.md section 2.5): the tokens in the order
// of their ids, each id the tokenizer's size so far (vocab.json's
// entries and the tokens added before it), else an error wrapping
// ErrFormat, as transformers refuses such a file; a token is special
// when it is one of the special tokens' names, and runs of special and
// of other tokens are added in turn: a new token takes the next id, a
// special token already in vocab.json keeps its id, and an ordinary one
// already there is left as the vocabulary has it. Special tokens
// missing from vocab.json come after them.
func FromVocabMergesAdded(vocabJSON, mergesTxt, configJSON, addedTokensJSON []byte) (_ *Tokenizer, err error) {
	defer func() {
		if err != nil {
			err = formatError{err}
		}
	}()
	var vocab map[string]int32
	if err := json.Unmarshal(vocabJSON, &vocab); err != nil {
		return nil, fmt.Errorf("tokenizer: vocab.json: %w", err)
	}
	if len(vocab) == 0 {
		return nil, errors.New("tokenizer: vocab.json: empty")
	}
	if !utf8.Valid(mergesTxt) {
		return nil, errors.New("tokenizer: merges.txt: not valid UTF-8")
	}
	var merges []string
	for n, line := range strings.Split(string(mergesTxt), "\n") {
		line = strings.TrimRight(line, "\r")
		if (n == 0 && strings.HasPrefix(line, "#version")) || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("tokenizer: merges.txt: line %d: want two tokens separated by a space, have %q", n+1, line)
		}
		merges = append(merges, f[0]+" "+f[1])
	}
	if len(merges) == 0 {
		return nil, errors.New("tokenizer: merges.txt: no merges")
	}
	cfg := struct {
		AddPrefixSpace *bool                      `json:"add_prefix_space"`
		TrimOffsets    *bool                      `json:"trim_offsets"`
		Tokens         map[string]json.RawMessage `json:"-"`
	}{}
	names := map[string]string{"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
		"unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"}
	if len(configJSON) > 0 {
		if err := json.Unmarshal(configJSON, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
		}
		if err := json.Unmarshal(configJSON, &cfg.Tokens); err != nil {
			return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)
		}
		for key := range names {
			raw, ok := cfg.Tokens[key]
			if !ok || isNull(raw) {
				continue
			}
			var s string
			var obj struct {
				Content string `json:"content"`
			}
			switch {
			case json.Unmarshal(raw, &s) == nil:
			case json.Unmarshal(raw, &obj) == nil:
				s = obj.Content
			default:
				return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %s: want a string or an object with content", key)
			}
			if s == "" {
				return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %s: empty", key)
			}
			names[key] = s
		}
	}
	prefix := cfg.AddPrefixSpace != nil && *cfg.AddPrefixSpace
	trim := cfg.TrimOffsets == nil || *cfg.TrimOffsets
	next := int32(0)
	for _, id := range vocab {
		next = max(next, id+1)
	}
	type addedJSON struct {
		ID         int32  `json:"id"`
		Content    string `json:"content"`
		LStrip     bool   `json:"lstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var added []addedJSON
	// byContent indexes added by content.
	byContent := map[string]int{}
	if addedTokensJSON != nil {
		special := map[string]bool{}
		for _, s := range names {
			special[s] = true
		}
		extra, err := readAddedTokens(addedTokensJSON, vocab, special)
		if err != nil {
			return nil, err
		}
		for _, a := range extra {
			byContent[a.Content] = len(added)
			added = append(added, addedJSON{ID: a.ID, Content: a.Content, Normalized: !a.Special, Special: a.Special})
			next = max(next, a.ID+1)
		}
	}
	seen := map[string]int32{}
	for _, key := range []string{"bos_token", "pad_token", "eos_token", "unk_token", "sep_token", "cls_token", "mask_token"} {
		s := names[key]
		if _, ok := seen[s]; ok {
			continue
		}
		if i, ok := byContent[s]; ok {
			// Already added: it keeps its id and takes the special
			// token's settings, as transformers' last pass over the
			// special tokens gives them.
			added[i] = addedJSON{ID: added[i].ID, Content: s, LStrip: key == "mask_token", Special: true}
			seen[s] = added[i].ID
			continue
		}
		id, ok := vocab[s]
		if !ok {
			id = next
			next++
		}
		seen[s] = id
		added = append(added, addedJSON{ID: id, Content: s, LStrip: key == "mask_token", Special: true})
	}
	j := map[string]any{
		"added_tokens":   added,
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": trim},
		"post_processor": map[string]any{"type": "RobertaProcessing", "sep": []any{names["sep_token"], seen[names["sep_token"]]}, "cls": []any{names["cls_token"], seen[names["cls_token"]]}, "trim_offsets": trim, "add_prefix_space": prefix},
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "continuing_subword_prefix": "", "end_of_word_suffix": ""},
	}
	data, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: vocab.json and merges.txt: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w (from vocab.json and merges.txt)", err)
	}
	return t, nil
}

// addedToken is one token of an added_tokens.json as the tokenizer holds
// it.
type addedToken struct {
	ID      int32
	Content string
	Special bool
}

// readAddedTokens reads an added_tokens.json (token to id) beside a
// vocab.json as transformers 4.31's PreTrainedTokenizerBase.from_pretrained
// adds it to a fast tokenizer made from the slow files, with the Rust
// tokenizers' AddedVocabulary (0.13) under it: sorted by id, each id must
// be the tokenizer's size so far (the vocabulary's entries, the new tokens
// added and those of the run not added yet); runs of special (in special)
// and of other tokens are added in turn, a new token at the vocabulary's
// size plus the new tokens before it, a special one already in the
// vocabulary at its id, an ordinary one already there not at all.
func readAddedTokens(data []byte, vocab map[string]int32, special map[string]bool) ([]addedToken, error) {
	var m map[string]int64
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("tokenizer: added_tokens.json: want an object of token to id: %w", err)
	}
	type entry struct {
		tok string
		id  int64
	}
	entries := make([]entry, 0, len(m))
	for tok, id := range m {
		if tok == "" {
			return nil, errors.New("tokenizer: added_tokens.json: an empty token")
		}
		entries = append(entries, entry{tok, id})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := cmp.Compare(a.id, b.id); c != 0 {
			return c
		}
		return strings.Compare(a.tok, b.tok)
	})
	ids := make(map[int32]bool, len(vocab))
	for _, id := range vocab {
		ids[id] = true
	}
	var out []addedToken
	fresh := 0 // tokens added that vocab.json lacks
	has := map[string]bool{}
	var run []string
	runSpecial := false
	flush := func() error {
		for _, s := range run {
			if has[s] {
				continue
			}
			if id, ok := vocab[s]; ok {
				if runSpecial {
					out, has[s] = append(out, addedToken{id, s, true}), true
				}
				continue
			}
			id := int32(len(vocab) + fresh)
			if ids[id] {
				return fmt.Errorf("tokenizer: added_tokens.json: %q would take id %d, which vocab.json gives another token (its ids are not 0 to %d)",
					s, id, len(vocab)-1)
			}
			fresh++
			out, has[s] = append(out, addedToken{id, s, runSpecial}), true
		}
		run = run[:0]
		return nil
	}
	for i, e := range entries {
		if want := int64(len(vocab) + fresh + len(run)); e.id != want {
			return nil, fmt.Errorf("tokenizer: added_tokens.json: %q has id %d, want %d (the tokenizer's size before it; transformers refuses a non-consecutive added token)",
				e.tok, e.id, want)
		}
		if sp := special[e.tok]; i > 0 && sp != runSpecial {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		run, runSpecial = append(run, e.tok), special[e.tok]
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// ErrFormat is wrapped by every error that the contents of a tokenizer
// file cause (tokenizer.json, vocab.txt, vocab.json, merges.txt, or the
// tokenizer_config.json beside them): bad JSON, a missing or unknown
// field, an unsupported component, a merge of tokens not in the
// vocabulary.
var ErrFormat = errors.New("tokenizer: bad tokenizer file")

// formatError wraps a load error with ErrFormat, keeping its message.
type formatError struct{ err error }

func (e formatError) Error() string   { return e.err.Error() }
func (e formatError) Unwrap() []error { return []error{e.err, ErrFormat} }
