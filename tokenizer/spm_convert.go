package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// SentencePiece converters: the tokenizer.json that transformers 4.31's
// convert_slow_tokenizer.py makes from a SentencePiece model, per model
// type (docs/DESIGN.md, the SentencePiece subsection of the tokenizer
// chapter).
const (
	// SPMDebertaV2 is DebertaV2Converter (model_type deberta-v2, spm.model).
	SPMDebertaV2 = "deberta-v2"
	// SPMXLMRoberta is XLMRobertaConverter (model_type xlm-roberta).
	SPMXLMRoberta = "xlm-roberta"
	// SPMCamembert is CamembertConverter (model_type camembert).
	SPMCamembert = "camembert"
)

// spmClasses maps tokenizer_config.json's tokenizer_class to a converter.
var spmClasses = map[string]string{
	"DebertaV2Tokenizer":  SPMDebertaV2,
	"XLMRobertaTokenizer": SPMXLMRoberta,
	"CamembertTokenizer":  SPMCamembert,
}

// spmConverterOf picks the converter for a SentencePiece model in dir:
// tokenizer_config.json's tokenizer_class, else config.json's
// model_type, else spm.model's name (only DeBERTa-v2 uses it).
func spmConverterOf(dir, name string, cfg []byte) (string, error) {
	var tc struct {
		Class string `json:"tokenizer_class"`
	}
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &tc); err != nil {
			return "", formatError{fmt.Errorf("tokenizer: tokenizer_config.json: %w", err)}
		}
	}
	if tc.Class != "" {
		if c := spmClasses[strings.TrimSuffix(tc.Class, "Fast")]; c != "" {
			return c, nil
		}
		return "", formatError{fmt.Errorf("tokenizer: %s: tokenizer_class %q has no SentencePiece conversion (DebertaV2Tokenizer, XLMRobertaTokenizer and CamembertTokenizer do)", name, tc.Class)}
	}
	mc, err := readLimited(filepath.Join(dir, "config.json"), MaxConfigSize)
	if errors.Is(err, ErrTooLarge) {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	if err == nil {
		var c struct {
			ModelType string `json:"model_type"`
		}
		if json.Unmarshal(mc, &c) == nil && c.ModelType != "" {
			switch c.ModelType {
			case SPMDebertaV2, SPMXLMRoberta, SPMCamembert:
				return c.ModelType, nil
			}
			return "", formatError{fmt.Errorf("tokenizer: %s: model_type %q has no SentencePiece conversion (deberta-v2, xlm-roberta and camembert do)", name, c.ModelType)}
		}
	}
	if filepath.Base(name) == "spm.model" {
		return SPMDebertaV2, nil
	}
	return "", formatError{fmt.Errorf("tokenizer: %s: cannot tell which model it belongs to: add tokenizer_config.json's tokenizer_class or config.json's model_type (deberta-v2, xlm-roberta or camembert)", name)}
}

// loadSPM reads a SentencePiece model file and the tokenizer_config.json
// and config.json beside it.
func loadSPM(path string) (*Tokenizer, error) {
	data, err := readLimited(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	dir := filepath.Dir(path)
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	conv, err := spmConverterOf(dir, path, cfg)
	if err != nil {
		return nil, err
	}
	t, err := FromSentencePiece(data, conv, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// spmSpecial is one special token of the fast tokenizer: its content
// and the AddedToken flags.
type spmSpecial struct {
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
}

// FromSentencePiece builds a tokenizer from the contents of a
// SentencePiece model (spm.model, sentencepiece.bpe.model) as
// transformers 4.31 converts it to a fast tokenizer with the converter
// conv (SPMDebertaV2, SPMXLMRoberta or SPMCamembert); configJSON, when
// not nil, is the tokenizer_config.json beside it: do_lower_case and
// split_by_punct (DeBERTa-v2), and the special tokens (bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token,
// additional_special_tokens; a string or an AddedToken object).
// Unigram and BPE models (trainer_spec.model_type 1 and 2) are converted.
func FromSentencePiece(model []byte, conv string, configJSON []byte) (_ *Tokenizer, err error) {
	defer func() {
		if err != nil && !errors.Is(err, ErrFormat) {
			err = formatError{err}
		}
	}()
	m, err := parseSPM(model)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: sentencepiece model: %w", err)
	}
	j, err := spmTokenizerJSON(m, conv, configJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: sentencepiece model: %w", err)
	}
	data, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: sentencepiece model: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w (converted from a sentencepiece model)", err)
	}
	return t, nil
}

// spmTokenizerJSON lays m out as the converter conv's tokenizer.json.
func spmTokenizerJSON(m *spmModel, conv string, configJSON []byte) (map[string]any, error) {
	if len(m.pieces) == 0 {
		return nil, errors.New("no pieces")
	}
	if m.modelType != 1 && m.modelType != 2 {
		return nil, fmt.Errorf("trainer_spec.model_type %d is not supported; Unigram (1) and BPE (2) models are converted", m.modelType)
	}
	var cfg struct {
		Lower        bool
		SplitByPunct bool
	}
	raw := map[string]json.RawMessage{}
	if len(configJSON) > 0 {
		if err := json.Unmarshal(configJSON, &raw); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
		// Absent or null fields keep their defaults.
		for _, k := range []string{"do_lower_case", "split_by_punct"} {
			if v, ok := raw[k]; ok && !isNull(v) {
				var b bool
				if err := json.Unmarshal(v, &b); err != nil {
					return nil, fmt.Errorf("tokenizer_config.json: %s: %w", k, err)
				}
				*map[string]*bool{"do_lower_case": &cfg.Lower, "split_by_punct": &cfg.SplitByPunct}[k] = b
			}
		}
	}

	// The vocabulary, as each converter's vocab() and unk_id() lay it out.
	type entry struct {
		piece string
		score float64
	}
	var vocab []entry
	var unkID int32
	var names map[string]string
	var additional []string
	maskFlags := spmSpecial{} // the fast tokenizer's default flags for mask_token
	switch conv {
	case SPMDebertaV2:
		for _, p := range m.pieces {
			vocab = append(vocab, entry{p.piece, float64(p.score)})
		}
		unkID = m.unkID
		if unkID < 0 || int(unkID) >= len(vocab) {
			return nil, fmt.Errorf("trainer_spec.unk_id %d is not a piece (%d pieces)", unkID, len(vocab))
		}
		names = map[string]string{"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]", "sep_token": "[SEP]",
			"pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}
	case SPMXLMRoberta, SPMCamembert:
		if conv == SPMXLMRoberta {
			if len(m.pieces) < 3 {
				return nil, fmt.Errorf("%d pieces: XLM-R's layout needs <unk>, <s> and </s> first", len(m.pieces))
			}
			vocab = []entry{{"<s>", 0}, {"<pad>", 0}, {"</s>", 0}, {"<unk>", 0}}
			for _, p := range m.pieces[3:] {
				vocab = append(vocab, entry{p.piece, float64(p.score)})
			}
		} else {
			vocab = []entry{{"<s>NOTUSED", 0}, {"<pad>", 0}, {"</s>NOTUSED", 0}, {"<unk>", 0}, {"<unk>NOTUSED", -100}}
			for _, p := range m.pieces[1:] {
				vocab = append(vocab, entry{p.piece, float64(p.score)})
			}
			additional = []string{"<s>NOTUSED", "</s>NOTUSED"}
		}
		vocab = append(vocab, entry{"<mask>", 0})
		unkID = 3
		names = map[string]string{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
			"pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"}
		// XLMRobertaTokenizerFast and CamembertTokenizerFast wrap a string
		// mask_token in AddedToken(lstrip=True), normalized by default.
		maskFlags = spmSpecial{LStrip: true, Normalized: true}
	default:
		return nil, fmt.Errorf("converter %q is not one of %s, %s, %s", conv, SPMDebertaV2, SPMXLMRoberta, SPMCamembert)
	}
	ids := map[string]int32{}
	for i, e := range vocab {
		ids[e.piece] = int32(i) // the last of duplicates, as the Rust Unigram's map
	}

	// The special tokens, in the order the fast tokenizer adds them
	// (bos, eos, unk, sep, pad, cls, mask, additional): a string gets
	// the flags of a special token (not normalized), an object its own.
	specialOf := func(key string, v json.RawMessage, def spmSpecial) (spmSpecial, error) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			def.Content = s
		} else {
			obj := spmSpecial{Normalized: true} // AddedToken's default
			if err := json.Unmarshal(v, &obj); err != nil {
				return def, fmt.Errorf("tokenizer_config.json: %s: want a string or an AddedToken object: %w", key, err)
			}
			def = obj
		}
		if def.Content == "" {
			return def, fmt.Errorf("tokenizer_config.json: %s: empty", key)
		}
		return def, nil
	}
	var specials []spmSpecial
	for _, key := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		def := spmSpecial{Content: names[key]}
		if key == "mask_token" {
			def.LStrip, def.Normalized = maskFlags.LStrip, maskFlags.Normalized
		}
		if v, ok := raw[key]; ok && !isNull(v) {
			var err error
			if def, err = specialOf(key, v, spmSpecial{}); err != nil {
				return nil, err
			}
			if key == "mask_token" && json.Unmarshal(v, new(string)) == nil {
				def.LStrip, def.Normalized = maskFlags.LStrip, maskFlags.Normalized
			}
		}
		specials = append(specials, def)
	}
	if v, ok := raw["additional_special_tokens"]; ok && !isNull(v) {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: additional_special_tokens: %w", err)
		}
		for i, e := range list {
			s, err := specialOf(fmt.Sprintf("additional_special_tokens[%d]", i), e, spmSpecial{})
			if err != nil {
				return nil, err
			}
			specials = append(specials, s)
		}
	} else {
		for _, s := range additional {
			specials = append(specials, spmSpecial{Content: s})
		}
	}
	var added []jsonAdded
	seen := map[string]bool{}
	next := int32(len(vocab))
	for _, s := range specials {
		if seen[s.Content] {
			continue
		}
		seen[s.Content] = true
		id, ok := ids[s.Content]
		if !ok {
			id = next
			next++
		}
		added = append(added, jsonAdded{ID: id, Content: s.Content, SingleWord: s.SingleWord, LStrip: s.LStrip,
			RStrip: s.RStrip, Normalized: s.Normalized, Special: true})
	}
	addedID := map[string]int32{}
	for _, a := range added {
		addedID[a.Content] = a.ID
	}

	// The post-processor's ids are the slow tokenizer's
	// convert_tokens_to_ids of the converter's literal tokens.
	var post map[string]any
	special := func(tok string, id int32) map[string]any {
		return map[string]any{"id": tok, "ids": []int32{id}, "tokens": []string{tok}}
	}
	item := func(kind, id string, typeID int) map[string]any {
		return map[string]any{kind: map[string]any{"id": id, "type_id": typeID}}
	}
	var normalizers, pretok []any
	if conv == SPMDebertaV2 {
		idOf := func(tok string) int32 {
			if id, ok := addedID[tok]; ok {
				return id
			}
			if id, ok := ids[tok]; ok {
				return id
			}
			return unkID
		}
		post = map[string]any{"type": "TemplateProcessing",
			"single":         []any{item("SpecialToken", "[CLS]", 0), item("Sequence", "A", 0), item("SpecialToken", "[SEP]", 0)},
			"pair":           []any{item("SpecialToken", "[CLS]", 0), item("Sequence", "A", 0), item("SpecialToken", "[SEP]", 0), item("Sequence", "B", 1), item("SpecialToken", "[SEP]", 1)},
			"special_tokens": map[string]any{"[CLS]": special("[CLS]", idOf("[CLS]")), "[SEP]": special("[SEP]", idOf("[SEP]"))},
		}
		if cfg.Lower {
			normalizers = append(normalizers, map[string]any{"type": "Lowercase"})
		}
		normalizers = append(normalizers, map[string]any{"type": "Strip", "strip_left": true, "strip_right": true})
		if cfg.SplitByPunct {
			pretok = append(pretok, map[string]any{"type": "Punctuation", "behavior": "Isolated"})
		}
	} else {
		bos, eos := int32(0), int32(2) // XLM-R's fairseq ids
		if conv == SPMCamembert {
			// CamembertTokenizer: a piece's id is its index + 4, except
			// index 0 (<unk>) and pieces it lacks, which are <unk> (3).
			pieceID := func(tok string) int32 {
				for i, p := range m.pieces {
					if p.piece == tok && i > 0 {
						return int32(i) + 4
					}
				}
				return 3
			}
			bos, eos = pieceID("<s>"), pieceID("</s>")
		}
		post = map[string]any{"type": "TemplateProcessing",
			"single":         []any{item("SpecialToken", "<s>", 0), item("Sequence", "A", 0), item("SpecialToken", "</s>", 0)},
			"pair":           []any{item("SpecialToken", "<s>", 0), item("Sequence", "A", 0), item("SpecialToken", "</s>", 0), item("SpecialToken", "</s>", 0), item("Sequence", "B", 0), item("SpecialToken", "</s>", 0)},
			"special_tokens": map[string]any{"<s>": special("<s>", bos), "</s>": special("</s>", eos)},
		}
	}
	if len(m.charsmap) > 0 {
		normalizers = append(normalizers, map[string]any{"type": "Precompiled", "precompiled_charsmap": base64.StdEncoding.EncodeToString(m.charsmap)})
	}
	normalizers = append(normalizers, map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " {2,}"}, "content": " "})
	metaspace := map[string]any{"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}
	var pre any = metaspace
	if conv == SPMDebertaV2 {
		pre = map[string]any{"type": "Sequence", "pretokenizers": append(pretok, metaspace)}
	}
	var model map[string]any
	if m.modelType == 1 {
		uv := make([][2]any, len(vocab))
		for i, e := range vocab {
			uv[i] = [2]any{e.piece, e.score}
		}
		model = map[string]any{"type": "Unigram", "unk_id": unkID, "vocab": uv}
	} else {
		bv := make(map[string]int32, len(vocab))
		for i, e := range vocab {
			bv[e.piece] = int32(i)
		}
		if _, ok := bv[m.unkPiece]; !ok {
			return nil, fmt.Errorf("trainer_spec.unk_piece %q is not in the vocabulary", m.unkPiece)
		}
		model = map[string]any{"type": "BPE", "vocab": bv, "merges": spmMerges(m.pieces), "unk_token": m.unkPiece,
			"fuse_unk": true, "byte_fallback": false}
	}
	return map[string]any{
		"added_tokens":   added,
		"normalizer":     map[string]any{"type": "Sequence", "normalizers": normalizers},
		"pre_tokenizer":  pre,
		"post_processor": post,
		"decoder":        metaspace,
		"model":          model,
	}, nil
}

// spmMerges is what transformers 4.31's SentencePieceExtractor.extract()
// derives from a BPE model's pieces (SpmConverter passes no scores): for
// each piece in id order, every split into two pieces of the model
// (at character boundaries), ordered by the left piece's id then the
// right's, then all ordered by the merged piece's id. Where a piece
// repeats, it is split once and its last id counts, as in the
// extractor's dict.
func spmMerges(pieces []spmPiece) [][2]string {
	id := make(map[string]int, len(pieces))
	for i, p := range pieces {
		id[p.piece] = i
	}
	type merge struct {
		pair [2]string
		rank int // the merged piece's id
	}
	var merges []merge
	done := make(map[string]bool, len(pieces))
	for _, p := range pieces {
		if done[p.piece] { // a dict's keys: each piece once, at its first place
			continue
		}
		done[p.piece] = true
		var local [][2]string
		for k := range p.piece {
			if k == 0 {
				continue
			}
			l, r := p.piece[:k], p.piece[k:]
			if _, ok := id[l]; !ok {
				continue
			}
			if _, ok := id[r]; ok {
				local = append(local, [2]string{l, r})
			}
		}
		sort.SliceStable(local, func(a, b int) bool {
			if id[local[a][0]] != id[local[b][0]] {
				return id[local[a][0]] < id[local[b][0]]
			}
			return id[local[a][1]] < id[local[b][1]]
		})
		for _, pair := range local {
			merges = append(merges, merge{pair, id[p.piece]})
		}
	}
	sort.SliceStable(merges, func(a, b int) bool { return merges[a].rank < merges[b].rank })
	out := make([][2]string, len(merges))
	for i, m := range merges {
		out[i] = m.pair
	}
	return out
}
