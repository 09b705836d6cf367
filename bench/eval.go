package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Example is one labelled sentence or sentence pair of a classification
// dataset. Label is the dataset's label string ("0"/"1" for SST-2,
// "entailment"/"neutral"/"contradiction" for MNLI), "" for unlabelled test
// files.
type Example struct {
	Text, Pair string
	Label      string
}

// ErrData is wrapped by the errors of the dataset readers on malformed
// input.
var ErrData = errors.New("bad dataset")

// gluetsv is a tab-separated file split into lines, with its header's
// columns by name.
type gluetsv struct {
	path  string
	lines []string
	cols  map[string]int
}

// readGlueTSV reads path, checks it is UTF-8 and splits off its header.
func readGlueTSV(path string) (*gluetsv, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := splitTextLines(string(raw))
	for i, l := range lines {
		if !utf8.ValidString(l) {
			return nil, fmt.Errorf("%s:%d: invalid UTF-8: %w", path, i+1, ErrData)
		}
	}
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return nil, fmt.Errorf("%s:1: no header line: %w", path, ErrData)
	}
	f := &gluetsv{path: path, lines: lines, cols: map[string]int{}}
	for i, c := range strings.Split(lines[0], "\t") {
		c = strings.TrimSpace(c)
		if _, dup := f.cols[c]; !dup {
			f.cols[c] = i
		}
	}
	return f, nil
}

// splitTextLines splits text into lines, without their "\n" or "\r\n", and
// without the empty piece after a final newline.
func splitTextLines(s string) []string {
	s = strings.TrimPrefix(s, "\ufeff")
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// column returns the index of a header column, or -1.
func (f *gluetsv) column(name string) int {
	if i, ok := f.cols[name]; ok {
		return i
	}
	return -1
}

// need returns the index of a required header column.
func (f *gluetsv) need(name string) (int, error) {
	i := f.column(name)
	if i < 0 {
		return 0, fmt.Errorf("%s:1: header has no %q column: %w", f.path, name, ErrData)
	}
	return i, nil
}

// rows calls fn with the fields of every non-empty line after the header
// and its line number, checking the row has at least want fields.
func (f *gluetsv) rows(want int, fn func(line int, fields []string) error) error {
	for i, l := range f.lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		fields := strings.Split(l, "\t")
		if len(fields) < want {
			return fmt.Errorf("%s:%d: %d columns, the header names %d: %w", f.path, i+2, len(fields), want, ErrData)
		}
		if err := fn(i+2, fields); err != nil {
			return err
		}
	}
	return nil
}

// ReadSST2 reads a GLUE SST-2 TSV: "sentence\tlabel" (train, dev; labels
// 0 or 1) or "index\tsentence" (test; Label ""). Columns are found by their
// header name; sentences are stripped of surrounding white space as the
// training scripts did.
func ReadSST2(path string) ([]Example, error) {
	f, err := readGlueTSV(path)
	if err != nil {
		return nil, err
	}
	si, err := f.need("sentence")
	if err != nil {
		return nil, err
	}
	li := f.column("label")
	want := max(si, li) + 1
	var out []Example
	err = f.rows(want, func(line int, fields []string) error {
		e := Example{Text: strings.TrimSpace(fields[si])}
		if li >= 0 {
			e.Label = strings.TrimSpace(fields[li])
			if e.Label != "0" && e.Label != "1" {
				return fmt.Errorf("%s:%d: label %q is not 0 or 1: %w", path, line, e.Label, ErrData)
			}
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MNLILabels are the MNLI classes in GLUE's order.
var MNLILabels = []string{"entailment", "neutral", "contradiction"}

// ReadMNLI reads a GLUE MNLI TSV (train, dev_matched, dev_mismatched,
// test): the sentence1, sentence2 and gold_label columns, found by their
// header name among the others. Test files without gold_label give Label
// "". Rows whose gold label is "-" (no annotator consensus, in the original
// MultiNLI files) are skipped; any other label but the three classes is an
// error.
func ReadMNLI(path string) ([]Example, error) {
	f, err := readGlueTSV(path)
	if err != nil {
		return nil, err
	}
	s1, err := f.need("sentence1")
	if err != nil {
		return nil, err
	}
	s2, err := f.need("sentence2")
	if err != nil {
		return nil, err
	}
	gi := f.column("gold_label")
	want := max(s1, s2, gi) + 1
	var out []Example
	err = f.rows(want, func(line int, fields []string) error {
		e := Example{Text: strings.TrimSpace(fields[s1]), Pair: strings.TrimSpace(fields[s2])}
		if gi >= 0 {
			e.Label = strings.TrimSpace(fields[gi])
			switch e.Label {
			case "entailment", "neutral", "contradiction":
			case "-":
				return nil
			default:
				return fmt.Errorf("%s:%d: gold_label %q is not one of %s: %w", path, line, e.Label, strings.Join(MNLILabels, ", "), ErrData)
			}
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadTexts reads calibration texts: one per line, the first column of a
// tab-separated file, stripped; empty lines are skipped, and so is a first
// line that is a GLUE header ("sentence" or "sentence\tlabel"). limit > 0
// keeps the first limit texts.
func ReadTexts(path string, limit int) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, l := range splitTextLines(string(raw)) {
		if limit > 0 && len(out) >= limit {
			break
		}
		if !utf8.ValidString(l) {
			return nil, fmt.Errorf("%s:%d: invalid UTF-8: %w", path, i+1, ErrData)
		}
		if i == 0 && (l == "sentence" || l == "sentence\tlabel") {
			continue
		}
		if tab := strings.IndexByte(l, '\t'); tab >= 0 {
			l = l[:tab]
		}
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

// SquadExample is one SQuAD question. Answers are the gold answer texts
// (empty for a v2.0 unanswerable question, which has Impossible set).
type SquadExample struct {
	ID, Title, Question, Context string
	Answers                      []string
	Impossible                   bool
}

// ReadSQuAD reads a SQuAD v1.1 or v2.0 JSON file (data[].paragraphs[].qas[]).
// Every question must have an id, unique in the file.
func ReadSQuAD(path string) ([]SquadExample, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Data *[]struct {
			Title      string `json:"title"`
			Paragraphs []struct {
				Context string `json:"context"`
				QAs     []struct {
					ID       string `json:"id"`
					Question string `json:"question"`
					Answers  []struct {
						Text string `json:"text"`
					} `json:"answers"`
					Impossible bool `json:"is_impossible"`
				} `json:"qas"`
			} `json:"paragraphs"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrData, err)
	}
	if doc.Data == nil {
		return nil, fmt.Errorf("%s: no \"data\" array: %w", path, ErrData)
	}
	seen := map[string]bool{}
	var out []SquadExample
	for a, art := range *doc.Data {
		for p, par := range art.Paragraphs {
			for q, qa := range par.QAs {
				where := fmt.Sprintf("%s: data[%d].paragraphs[%d].qas[%d]", path, a, p, q)
				if qa.ID == "" {
					return nil, fmt.Errorf("%s: no id: %w", where, ErrData)
				}
				if seen[qa.ID] {
					return nil, fmt.Errorf("%s: duplicate id %q: %w", where, qa.ID, ErrData)
				}
				seen[qa.ID] = true
				e := SquadExample{ID: qa.ID, Title: art.Title, Question: qa.Question, Context: par.Context, Impossible: qa.Impossible}
				for _, ans := range qa.Answers {
					e.Answers = append(e.Answers, ans.Text)
				}
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// squadPunct reports whether r is in Python's string.punctuation, which the
// official SQuAD evaluation removes.
func squadPunct(r rune) bool {
	return r < utf8.RuneSelf && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r)
}

// squadWordRune reports whether r is a regular-expression word character in
// Python's Unicode mode.
func squadWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// NormalizeAnswer normalises an answer as the official SQuAD evaluation
// script does: lower case, remove ASCII punctuation, replace the articles
// a, an and the (whole words) by a space, collapse white space.
func NormalizeAnswer(s string) string {
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if squadPunct(r) {
			return -1
		}
		return r
	}, s)
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !squadWordRune(r) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !squadWordRune(r) {
				break
			}
			j += n
		}
		switch w := s[i:j]; w {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(w)
		}
		i = j
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// squadGolds returns the golds, or the no-answer "" when there are none.
func squadGolds(golds []string) []string {
	if len(golds) == 0 {
		return []string{""}
	}
	return golds
}

// ExactMatch is 1 when the normalised prediction equals one of the
// normalised golds, else 0; no golds means the no-answer "".
func ExactMatch(pred string, golds []string) float64 {
	p := NormalizeAnswer(pred)
	for _, g := range squadGolds(golds) {
		if NormalizeAnswer(g) == p {
			return 1
		}
	}
	return 0
}

// F1 is the token-level F1 of the normalised prediction against each
// normalised gold, the best over golds; no golds means the no-answer "".
// When the prediction or the gold has no tokens, F1 is 1 if both have none
// (a correct no-answer, as SQuAD v2.0 scores it) and 0 otherwise.
func F1(pred string, golds []string) float64 {
	pt := strings.Fields(NormalizeAnswer(pred))
	best := 0.0
	for _, g := range squadGolds(golds) {
		best = math.Max(best, squadTokenF1(pt, strings.Fields(NormalizeAnswer(g))))
	}
	return best
}

func squadTokenF1(pred, gold []string) float64 {
	if len(pred) == 0 || len(gold) == 0 {
		if len(pred) == len(gold) {
			return 1
		}
		return 0
	}
	count := map[string]int{}
	for _, t := range gold {
		count[t]++
	}
	same := 0
	for _, t := range pred {
		if count[t] > 0 {
			count[t]--
			same++
		}
	}
	if same == 0 {
		return 0
	}
	prec := float64(same) / float64(len(pred))
	rec := float64(same) / float64(len(gold))
	return 2 * prec * rec / (prec + rec)
}

// SquadScore is exact match and F1 in percent over N questions.
type SquadScore struct {
	EM, F1 float64
	N      int
}

// ScoreSQuAD scores predictions (answer text by question id; "" is the
// no-answer) as the official SQuAD v2.0 script does, which gives v1.1's
// figures on v1.1 data: the golds are the answers whose normalisation is
// not empty (the no-answer "" for an unanswerable question or when none is
// left), a missing prediction scores 0, and predictions for unknown ids are
// ignored. The examples must be non-empty with unique ids.
func ScoreSQuAD(preds map[string]string, ex []SquadExample) (SquadScore, error) {
	if len(ex) == 0 {
		return SquadScore{}, fmt.Errorf("bench: SQuAD score of no examples: %w", ErrData)
	}
	seen := make(map[string]bool, len(ex))
	var em, f1 float64
	for _, e := range ex {
		if seen[e.ID] {
			return SquadScore{}, fmt.Errorf("bench: SQuAD score: duplicate id %q: %w", e.ID, ErrData)
		}
		seen[e.ID] = true
		pred, ok := preds[e.ID]
		if !ok {
			continue
		}
		var golds []string
		if !e.Impossible {
			for _, a := range e.Answers {
				if NormalizeAnswer(a) != "" {
					golds = append(golds, a)
				}
			}
		}
		em += ExactMatch(pred, golds)
		f1 += F1(pred, golds)
	}
	n := float64(len(ex))
	return SquadScore{EM: 100 * em / n, F1: 100 * f1 / n, N: len(ex)}, nil
}

// Accuracy is the fraction of predictions equal to the gold labels.
func Accuracy(pred, gold []int) (float64, error) {
	return fractionEqual("accuracy", pred, gold)
}

// Agreement is the fraction of positions where two prediction lists agree
// (INT8 against FP32, say).
func Agreement(a, b []int) (float64, error) {
	return fractionEqual("agreement", a, b)
}

func fractionEqual(what string, a, b []int) (float64, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("bench: %s of %d against %d values: %w", what, len(a), len(b), ErrData)
	}
	if len(a) == 0 {
		return 0, fmt.Errorf("bench: %s of no values: %w", what, ErrData)
	}
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
	}
	return float64(same) / float64(len(a)), nil
}

// Cosine is the cosine similarity of a and b, accumulated in float64. It is
// NaN when the lengths differ or the vectors are empty, 1 when both are
// zero and 0 when only one is.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return math.NaN()
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	switch {
	case na == 0 && nb == 0:
		return 1
	case na == 0 || nb == 0:
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
