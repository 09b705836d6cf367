package bench

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFixture writes a fixture into the test's temporary folder.
func writeFixture(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadSST2(t *testing.T) {
	p := writeFixture(t, "dev.tsv", "sentence\tlabel\nit 's a charming journey . \t1\r\n\nbleak and desperate \t0\n")
	got, err := ReadSST2(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{{Text: "it 's a charming journey .", Label: "1"}, {Text: "bleak and desperate", Label: "0"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// A test file: index and sentence, no labels.
	p = writeFixture(t, "test.tsv", "index\tsentence\n0\tuneasy mishmash of styles and genres .\n1\tthis film 's relationship to actual tension is the same\n")
	got, err = ReadSST2(p)
	if err != nil {
		t.Fatal(err)
	}
	want = []Example{{Text: "uneasy mishmash of styles and genres ."}, {Text: "this film 's relationship to actual tension is the same"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReadSST2Errors(t *testing.T) {
	for _, c := range []struct{ name, content, want string }{
		{"missing-column", "sentence\tlabel\ngood\t1\nno label here\n", ":3:"},
		{"bad-label", "sentence\tlabel\ngood\t1\nbad\tpositive\n", ":3: label \"positive\""},
		{"utf8", "sentence\tlabel\ngood\t1\nbad \xff\t0\n", ":3: invalid UTF-8"},
		{"no-sentence", "text\tlabel\ngood\t1\n", ":1: header has no \"sentence\""},
		{"empty", "", ":1: no header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeFixture(t, c.name+".tsv", c.content)
			_, err := ReadSST2(p)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), p+c.want) || !errors.Is(err, ErrData) {
				t.Errorf("error %q does not name %q", err, p+c.want)
			}
		})
	}
	if _, err := ReadSST2(filepath.Join(t.TempDir(), "absent.tsv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

func TestReadMNLI(t *testing.T) {
	header := "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
	row := func(s1, s2, gold string) string {
		return "0\t1\t2\tfiction\t( x )\t( y )\t(ROOT x)\t(ROOT y)\t" + s1 + "\t" + s2 + "\t" + gold + "\t" + gold + "\n"
	}
	p := writeFixture(t, "dev_matched.tsv", header+
		row("The new rights are nice enough", "Everyone really likes the newest benefits ", "neutral")+
		row("He said \"yes\".", "He agreed.", "entailment")+
		row("No consensus here.", "Something.", "-")+
		row("It rained.", "It was dry.", "contradiction"))
	got, err := ReadMNLI(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{
		{"The new rights are nice enough", "Everyone really likes the newest benefits", "neutral"},
		{"He said \"yes\".", "He agreed.", "entailment"},
		{"It rained.", "It was dry.", "contradiction"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	// Test files have no gold_label.
	p = writeFixture(t, "test_matched.tsv", "index\tsentence1\tsentence2\n0\tA man.\tA person.\n")
	got, err = ReadMNLI(p)
	if err != nil || !reflect.DeepEqual(got, []Example{{Text: "A man.", Pair: "A person."}}) {
		t.Errorf("test file: %q, %v", got, err)
	}
	for _, c := range []struct{ name, content, want string }{
		{"bad-label", header + row("a", "b", "maybe"), ":2: gold_label \"maybe\""},
		{"no-sentence2", "sentence1\tgold_label\na\tneutral\n", ":1: header has no \"sentence2\""},
		{"short-row", "sentence1\tsentence2\tgold_label\na\tb\tneutral\na\tb\n", ":3:"},
	} {
		p := writeFixture(t, c.name+".tsv", c.content)
		if _, err := ReadMNLI(p); err == nil || !strings.Contains(err.Error(), p+c.want) {
			t.Errorf("%s: error %v, want it to name %q", c.name, err, p+c.want)
		}
	}
}

func TestReadTexts(t *testing.T) {
	p := writeFixture(t, "sst2.tsv", "sentence\tlabel\nfirst one \t1\n\n  \nsecond\t0\nthird\t1\n")
	got, err := ReadTexts(p, 0)
	if err != nil || !reflect.DeepEqual(got, []string{"first one", "second", "third"}) {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = ReadTexts(p, 2)
	if err != nil || !reflect.DeepEqual(got, []string{"first one", "second"}) {
		t.Errorf("limit 2: got %q, %v", got, err)
	}
	// Plain text; a header line only counts as such on the first line.
	p = writeFixture(t, "plain.txt", "sentence\r\nhello world\r\nsentence\n")
	got, err = ReadTexts(p, -1)
	if err != nil || !reflect.DeepEqual(got, []string{"hello world", "sentence"}) {
		t.Errorf("plain: got %q, %v", got, err)
	}
	p = writeFixture(t, "first.txt", "sentences are fine\n")
	if got, err = ReadTexts(p, 0); err != nil || len(got) != 1 {
		t.Errorf("non-header first line: %q, %v", got, err)
	}
	p = writeFixture(t, "bad.txt", "ok\n\xc3\x28\n")
	if _, err := ReadTexts(p, 0); err == nil || !strings.Contains(err.Error(), p+":2:") {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if _, err := ReadTexts(filepath.Join(t.TempDir(), "absent"), 0); err == nil {
		t.Error("absent file: no error")
	}
}

// TestReadSST2Dev reads the real GLUE SST-2 dev file from the shared folder.
func TestReadSST2Dev(t *testing.T) {
	p := filepath.Join(sharedFolder(), "data", "sst2", "dev.tsv")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("skipping: SST-2 dev not found at %s (the project's shared folder; set INT8BERT_SHARED): %v", p, err)
	}
	ex, err := ReadSST2(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 872 {
		t.Fatalf("%d examples, want 872", len(ex))
	}
	pos := 0
	for i, e := range ex {
		if e.Text == "" || e.Pair != "" {
			t.Fatalf("row %d: %+v", i+2, e)
		}
		if e.Label == "1" {
			pos++
		}
	}
	t.Logf("%d examples, %d positive", len(ex), pos)
	if pos != 444 {
		t.Errorf("%d positive examples, want 444", pos)
	}
	if ex[0].Text != "it 's a charming and often affecting journey ." || ex[0].Label != "1" {
		t.Errorf("first example %+v", ex[0])
	}
	texts, err := ReadTexts(p, 0)
	if err != nil || len(texts) != 872 || texts[0] != ex[0].Text {
		t.Errorf("ReadTexts: %d texts, %v", len(texts), err)
	}
}

func TestNormalizeAnswer(t *testing.T) {
	for in, want := range map[string]string{
		"The  Cat!":                    "cat",
		"the Eiffel Tower":             "eiffel tower",
		"An apple a day":               "apple day",
		"  Theatre, anthem and Atlas ": "theatre anthem and atlas",
		"Denver Broncos.":              "denver broncos",
		"(a) 1,000-ton":                "1000ton",
		"A.":                           "",
		"l'été, the café":              "lété café",
		"the_end":                      "theend",
		"Über—the—top":                 "über— —top",
		"":                             "",
	} {
		if got := NormalizeAnswer(in); got != want {
			t.Errorf("NormalizeAnswer(%q) = %q, want %q", in, got, want)
		}
	}
}

func closeTo(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestExactMatchAndF1(t *testing.T) {
	golds := []string{"Denver Broncos", "The Denver Broncos", "Broncos"}
	if em := ExactMatch("the denver broncos!", golds); em != 1 {
		t.Errorf("EM = %v, want 1", em)
	}
	if em := ExactMatch("Denver", golds); em != 0 {
		t.Errorf("EM = %v, want 0", em)
	}
	// "Denver" against "Denver Broncos": precision 1, recall 1/2.
	if f := F1("Denver", golds); !closeTo(f, 2.0/3) {
		t.Errorf("F1 = %v, want 2/3", f)
	}
	// The best gold wins: "broncos won" against "Broncos" is 2/3, against
	// "Denver Broncos" 1/2.
	if f := F1("broncos won", golds); !closeTo(f, 2.0/3) {
		t.Errorf("F1 = %v, want 2/3", f)
	}
	// Repeated tokens count as often as they occur in both.
	if f := F1("a b b c", []string{"b b b d"}); !closeTo(f, 2*(2.0/3)*(2.0/4)/((2.0/3)+(2.0/4))) {
		t.Errorf("F1 with repeats = %v", f)
	}
	if f := F1("cat", []string{"dog"}); f != 0 {
		t.Errorf("F1 of disjoint answers = %v", f)
	}
	// No-answer (SQuAD v2.0).
	if ExactMatch("", nil) != 1 || F1("", nil) != 1 || F1("", []string{""}) != 1 || F1("the", nil) != 1 {
		t.Error("empty prediction against no answer should score 1")
	}
	if ExactMatch("cat", nil) != 0 || F1("cat", nil) != 0 || F1("", []string{"cat"}) != 0 {
		t.Error("an answer against no answer (or the reverse) should score 0")
	}
}

func TestReadAndScoreSQuAD(t *testing.T) {
	v2 := `{"version": "v2.0", "data": [
	 {"title": "Normans", "paragraphs": [
	  {"context": "The Normans were in Normandy, a region in France.",
	   "qas": [
	    {"id": "q1", "question": "In what country is Normandy located?", "answers": [{"text": "France", "answer_start": 43}, {"text": "France.", "answer_start": 43}], "is_impossible": false},
	    {"id": "q2", "question": "Who gave their name to Normandy?", "answers": [], "plausible_answers": [{"text": "Normans", "answer_start": 4}], "is_impossible": true}
	   ]}]},
	 {"title": "Other", "paragraphs": [
	  {"context": "Denver Broncos won Super Bowl 50.",
	   "qas": [{"id": "q3", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": 0}]},
	           {"id": "q4", "question": "Which bowl?", "answers": [{"text": "Super Bowl 50", "answer_start": 19}]}]}]}]}`
	p := writeFixture(t, "dev-v2.0.json", v2)
	ex, err := ReadSQuAD(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []SquadExample{
		{ID: "q1", Title: "Normans", Question: "In what country is Normandy located?", Context: "The Normans were in Normandy, a region in France.", Answers: []string{"France", "France."}},
		{ID: "q2", Title: "Normans", Question: "Who gave their name to Normandy?", Context: "The Normans were in Normandy, a region in France.", Impossible: true},
		{ID: "q3", Title: "Other", Question: "Who won?", Context: "Denver Broncos won Super Bowl 50.", Answers: []string{"Denver Broncos"}},
		{ID: "q4", Title: "Other", Question: "Which bowl?", Context: "Denver Broncos won Super Bowl 50.", Answers: []string{"Super Bowl 50"}},
	}
	if !reflect.DeepEqual(ex, want) {
		t.Fatalf("got %+v\nwant %+v", ex, want)
	}
	preds := map[string]string{
		"q1":    "france",  // EM 1, F1 1
		"q2":    "",        // correct no-answer: 1, 1
		"q3":    "Denver",  // EM 0, F1 2/3
		"extra": "ignored", // q4 is missing: 0, 0
	}
	s, err := ScoreSQuAD(preds, ex)
	if err != nil {
		t.Fatal(err)
	}
	if s.N != 4 || !closeTo(s.EM, 50) || !closeTo(s.F1, 100*(1+1+2.0/3)/4) {
		t.Errorf("score %+v, want EM 50, F1 %.4f over 4", s, 100*(1+1+2.0/3)/4)
	}
	// An answer to the unanswerable question scores 0.
	preds["q2"] = "Normans"
	if s, _ := ScoreSQuAD(preds, ex); !closeTo(s.EM, 25) {
		t.Errorf("answering the impossible question: %+v", s)
	}
	if _, err := ScoreSQuAD(preds, nil); err == nil {
		t.Error("no examples: no error")
	}
	if _, err := ScoreSQuAD(preds, append(ex, ex[0])); err == nil {
		t.Error("duplicate ids: no error")
	}

	// v1.1: no is_impossible.
	p = writeFixture(t, "dev-v1.1.json", `{"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "a", "question": "q", "answers": [{"text": "x", "answer_start": 0}]}]}]}]}`)
	if ex, err := ReadSQuAD(p); err != nil || len(ex) != 1 || ex[0].Impossible || !reflect.DeepEqual(ex[0].Answers, []string{"x"}) {
		t.Errorf("v1.1: %+v, %v", ex, err)
	}
	for name, content := range map[string]string{
		"syntax":     `{"data": [`,
		"no-data":    `{"version": "1.1"}`,
		"no-id":      `{"data": [{"paragraphs": [{"qas": [{"question": "q"}]}]}]}`,
		"duplicate":  `{"data": [{"paragraphs": [{"qas": [{"id": "x"}, {"id": "x"}]}]}]}`,
		"wrong-type": `{"data": {"title": 1}}`,
	} {
		p := writeFixture(t, name+".json", content)
		if _, err := ReadSQuAD(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming the file", name, err)
		}
	}
}

func TestAccuracyAgreementCosine(t *testing.T) {
	if acc, err := Accuracy([]int{1, 0, 1, 1}, []int{1, 1, 1, 0}); err != nil || acc != 0.5 {
		t.Errorf("Accuracy = %v, %v", acc, err)
	}
	if ag, err := Agreement([]int{2, 2, 2}, []int{2, 2, 2}); err != nil || ag != 1 {
		t.Errorf("Agreement = %v, %v", ag, err)
	}
	if _, err := Accuracy([]int{1}, []int{1, 0}); err == nil {
		t.Error("length mismatch: no error")
	}
	if _, err := Agreement(nil, nil); err == nil {
		t.Error("empty: no error")
	}
	if c := Cosine([]float32{1, 2, 3}, []float32{2, 4, 6}); !closeTo(c, 1) {
		t.Errorf("Cosine of parallel vectors = %v", c)
	}
	if c := Cosine([]float32{1, 0}, []float32{0, 1}); c != 0 {
		t.Errorf("Cosine of orthogonal vectors = %v", c)
	}
	if c := Cosine([]float32{1, 1}, []float32{-1, -1}); !closeTo(c, -1) {
		t.Errorf("Cosine of opposite vectors = %v", c)
	}
	if c := Cosine([]float32{3, 4}, []float32{4, 3}); !closeTo(c, 24.0/25) {
		t.Errorf("Cosine = %v, want 0.96", c)
	}
	if !math.IsNaN(Cosine([]float32{1}, []float32{1, 2})) || !math.IsNaN(Cosine(nil, nil)) {
		t.Error("mismatched or empty vectors should give NaN")
	}
	if Cosine([]float32{0, 0}, []float32{0, 0}) != 1 || Cosine([]float32{0, 0}, []float32{1, 0}) != 0 {
		t.Error("zero vectors")
	}
}
