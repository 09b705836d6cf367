package tokenizer

import "testing"

// TestNormalForms checks NFD, NFKD, NFC and NFKC against Python's unicodedata.
func TestNormalForms(t *testing.T) {
	cases := []struct{ in, nfd, nfkd, nfc, nfkc string }{
		{"\U0000fb01 caf\U000000e9 cafe\U00000301", "\U0000fb01 cafe\U00000301 cafe\U00000301", "fi cafe\U00000301 cafe\U00000301", "\U0000fb01 caf\U000000e9 caf\U000000e9", "fi caf\U000000e9 caf\U000000e9"},
		{"\U00002460\U00002461 \U0000ff76\U0000ff9e \U0000212b \U00001112\U00001161\U000011ab", "\U00002460\U00002461 \U0000ff76\U0000ff9e A\U0000030a \U00001112\U00001161\U000011ab", "12 \U000030ab\U00003099 A\U0000030a \U00001112\U00001161\U000011ab", "\U00002460\U00002461 \U0000ff76\U0000ff9e \U000000c5 \U0000d55c", "12 \U000030ac \U000000c5 \U0000d55c"},
		{"a\U00000301\U00000323 a\U00000323\U00000301 \U00001e0b\U00000323", "a\U00000323\U00000301 a\U00000323\U00000301 d\U00000323\U00000307", "a\U00000323\U00000301 a\U00000323\U00000301 d\U00000323\U00000307", "\U00001ea1\U00000301 \U00001ea1\U00000301 \U00001e0d\U00000307", "\U00001ea1\U00000301 \U00001ea1\U00000301 \U00001e0d\U00000307"},
		{"\U000000bd \U00002126 \U00003300 \U0000fdfa", "\U000000bd \U000003a9 \U00003300 \U0000fdfa", "1\U000020442 \U000003a9 \U000030a2\U000030cf\U0000309a\U000030fc\U000030c8 \U00000635\U00000644\U00000649 \U00000627\U00000644\U00000644\U00000647 \U00000639\U00000644\U0000064a\U00000647 \U00000648\U00000633\U00000644\U00000645", "\U000000bd \U000003a9 \U00003300 \U0000fdfa", "1\U000020442 \U000003a9 \U000030a2\U000030d1\U000030fc\U000030c8 \U00000635\U00000644\U00000649 \U00000627\U00000644\U00000644\U00000647 \U00000639\U00000644\U0000064a\U00000647 \U00000648\U00000633\U00000644\U00000645"},
		{"\U0000ac00\U000011a8 \U00000b47\U00000b3e \U00000344", "\U00001100\U00001161\U000011a8 \U00000b47\U00000b3e \U00000308\U00000301", "\U00001100\U00001161\U000011a8 \U00000b47\U00000b3e \U00000308\U00000301", "\U0000ac01 \U00000b4b \U00000308\U00000301", "\U0000ac01 \U00000b4b \U00000308\U00000301"},
		{"x\U00000308\U00000304\U00000301 \U000000c5\U0000030a", "x\U00000308\U00000304\U00000301 A\U0000030a\U0000030a", "x\U00000308\U00000304\U00000301 A\U0000030a\U0000030a", "\U00001e8d\U00000304\U00000301 \U000000c5\U0000030a", "\U00001e8d\U00000304\U00000301 \U000000c5\U0000030a"},
		{"a\U00000315\U00000300\U000005ae\U00000300b", "a\U000005ae\U00000300\U00000300\U00000315b", "a\U000005ae\U00000300\U00000300\U00000315b", "\U000000e0\U000005ae\U00000300\U00000315b", "\U000000e0\U000005ae\U00000300\U00000315b"},
		{"\U00001100\U00001161\U000011a8\U000011a8 \U0001d400 \U00002000\U000000a0", "\U00001100\U00001161\U000011a8\U000011a8 \U0001d400 \U00002002\U000000a0", "\U00001100\U00001161\U000011a8\U000011a8 A   ", "\U0000ac01\U000011a8 \U0001d400 \U00002002\U000000a0", "\U0000ac01\U000011a8 A   "},
	}
	forms := []formNormalizer{{}, {compat: true}, {composed: true}, {compat: true, composed: true}}
	names := []string{"NFD", "NFKD", "NFC", "NFKC"}
	for _, c := range cases {
		want := []string{c.nfd, c.nfkd, c.nfc, c.nfkc}
		for k, f := range forms {
			n := f.normalize(fromOriginal(c.in), new(scratch))
			if string(n.s) != want[k] {
				t.Errorf("%s(%+q) = %+q, want %+q", names[k], c.in, n.s, want[k])
			}
			if len(n.start) != len(n.s) {
				t.Errorf("%s(%+q): ragged alignment", names[k], c.in)
			}
		}
	}
}

// TestSmallUnigramPipeline loads a hand-written tokenizer.json that uses the
// components the golden files do not: NFKC, Lowercase, Strip, a literal
// Replace, WhitespaceSplit + Metaspace in a Sequence, RobertaProcessing and
// byte fallback.
func TestSmallUnigramPipeline(t *testing.T) {
	js := `{
	  "added_tokens": [{"id": 0, "content": "<s>", "special": true}, {"id": 1, "content": "</s>", "special": true}],
	  "normalizer": {"type": "Sequence", "normalizers": [
	    {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": true, "strip_right": true},
	    {"type": "Replace", "pattern": {"String": "-"}, "content": " "}]},
	  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
	    {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}]},
	  "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 1], "cls": ["<s>", 0], "trim_offsets": true},
	  "model": {"type": "Unigram", "unk_id": 2, "byte_fallback": true, "vocab": [
	    ["<s>", 0], ["</s>", 0], ["<unk>", 0], ["▁fine", -1], ["▁fi", -2], ["ne", -2], ["▁", -3],
	    ["<0xC3>", -5], ["<0xA9>", -5], ["x", -4]]}
	}`
	tk, err := FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tk.EncodePair("  \ufb01ne-FINE ", "é")
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{0, 3, 3, 1, 1, 6, 7, 8, 1}
	if len(enc.IDs) != len(want) {
		t.Fatalf("have %v %q, want %v", enc.IDs, enc.Tokens, want)
	}
	for i := range want {
		if enc.IDs[i] != want[i] {
			t.Fatalf("have %v %q, want %v", enc.IDs, enc.Tokens, want)
		}
	}
	for _, ty := range enc.TypeIDs {
		if ty != 0 {
			t.Errorf("roberta type ids %v", enc.TypeIDs)
		}
	}
	// The ligature maps back to its original character.
	if enc.Offsets[1] != [2]int{2, 5} {
		t.Errorf("offsets of ▁fine: %v, want [2 5]", enc.Offsets[1])
	}
}

// TestAddedTokenFlags checks single_word and rstrip on a hand-written
// tokenizer (the golden files only use lstrip and normalized).
func TestAddedTokenFlags(t *testing.T) {
	js := `{
	  "added_tokens": [{"id": 3, "content": "zz", "single_word": true, "rstrip": true, "normalized": false}],
	  "pre_tokenizer": {"type": "WhitespaceSplit"},
	  "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0], ["a", -1], ["z", -1], ["zz", -1]]}
	}`
	tk, err := FromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tk.Encode("azz zz  a")
	if err != nil {
		t.Fatal(err)
	}
	// "azz": zz touches a word character, so the model sees it ("a", "zz" by
	// score); the free-standing zz is the added token and swallows "  ".
	wantOffs := [][2]int{{0, 1}, {1, 3}, {4, 8}, {8, 9}}
	if len(enc.Offsets) != len(wantOffs) {
		t.Fatalf("have %v %v", enc.IDs, enc.Offsets)
	}
	for i := range wantOffs {
		if enc.Offsets[i] != wantOffs[i] {
			t.Errorf("have %v %v, want offsets %v", enc.IDs, enc.Offsets, wantOffs)
			break
		}
	}
	if enc.SpecialTokensMask[2] != 0 || enc.IDs[2] != 3 {
		t.Errorf("added token: %v", enc.IDs)
	}
}
