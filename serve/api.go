package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/int8bert/int8bert/models"
)

// Error types, as TEI names them in "error_type".
const (
	errValidation = "Validation"
	errOverloaded = "Overloaded"
	errUnhealthy  = "Unhealthy"
	errBackend    = "Backend"
	errTokenizer  = "Tokenizer"
	errEmpty      = "Empty"
)

// apiError is an error answered to the client: its status and TEI's
// error type.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// tooLarge is a 413 for a body found over the limit while it was read
// (sent chunked, with no Content-Length to refuse it by): the route's
// wrapper answers it and then reads the rest of the body away, so that
// a client still sending reads the answer rather than a reset
// (Server.drainAfter).
type tooLarge struct{ *apiError }

func (e *tooLarge) Unwrap() error { return e.apiError }

// overloaded is a 429 with its Retry-After: the seconds the instances
// are expected to take to run the work in flight (docs/DESIGN.md section
// 9.11).
type overloaded struct {
	*apiError
	retryAfter int
}

func (e *overloaded) Unwrap() error { return e.apiError }

// overload is a 429 Overloaded with msg and Retry-After seconds.
func overload(msg string, retryAfter int) error {
	return &overloaded{&apiError{http.StatusTooManyRequests, errOverloaded, msg}, max(retryAfter, 1)}
}

func invalid(format string, args ...any) *apiError {
	return &apiError{http.StatusUnprocessableEntity, errValidation, fmt.Sprintf(format, args...)}
}

// errorBody is TEI's error response.
type errorBody struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

// decodeBody reads a JSON object of at most limit bytes into v: an
// oversize body is 413, anything but one JSON value of v's shape is 422.
// Unknown fields are ignored, as TEI does.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &tooLarge{&apiError{http.StatusRequestEntityTooLarge, errValidation,
				fmt.Sprintf("request body larger than %d bytes; send at most that, or raise --max-body-bytes", limit)}}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return &apiError{http.StatusRequestTimeout, errValidation, "the request body was not received in time (--read-timeout)"}
		}
		return invalid("reading the request body: %v", err)
	}
	if err := decodeJSON(data, v); err != nil {
		return err
	}
	return nil
}

// decodeJSON parses data as one JSON value into v: a body that is not
// one JSON value is 400, one of another shape 422, as TEI's JSON
// extractor (axum's syntax and data rejections) answers them.
func decodeJSON(data []byte, v any) *apiError {
	if !utf8.Valid(data) {
		// encoding/json would turn each bad byte into U+FFFD.
		return notJSON("the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var syntax *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF):
			return notJSON("empty request body: want a JSON object")
		case errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) || !json.Valid(data):
			// (A first value of the wrong type followed by bad syntax
			// is still not JSON.)
			return notJSON("invalid JSON: %v", err)
		}
		if name := blame(data, v); name != "" && !strings.Contains(err.Error(), name) {
			return invalid("invalid JSON: `%s`: %v", name, err)
		}
		return invalid("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return notJSON("invalid JSON: more than one value in the request body")
	}
	return nil
}

// blame names the field of data that does not fit v, a pointer to a
// request struct: a field's own decoder (inputs, texts, direction, ...)
// says what it wants but not its name, which encoding/json does not add.
// It returns "" when no single field is at fault.
func blame(data []byte, v any) string {
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return ""
	}
	t = t.Elem()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		raw, ok := obj[name]
		if name == "" || name == "-" || !ok {
			continue
		}
		if json.Unmarshal(raw, reflect.New(f.Type).Interface()) != nil {
			return name
		}
	}
	return ""
}

// isNull reports a JSON null, which an optional input field reads as
// absent (TEI's Option).
func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// notJSON is a body that is not one JSON value: 400.
func notJSON(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, errValidation, fmt.Sprintf(format, args...)}
}

// texts is TEI's Input: a string or a list of strings.
type texts struct {
	list   []string
	single bool
	set    bool
}

func (t *texts) UnmarshalJSON(b []byte) error {
	if t.set = !isNull(b); !t.set {
		return nil // absent
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		t.list, t.single = []string{s}, true
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("want a string or a list of strings")
	}
	t.list = l
	return nil
}

// check reports an absent or empty input (400 Empty, as TEI), or more
// than most texts.
func (t *texts) check(field string, most int) error {
	return checkInputs(t.set, len(t.list), field, "a string or a list of strings", most)
}

// checkInputs reports an absent (set false) or empty input (400 Empty, as
// TEI), or more than most inputs (n); want says what the field takes.
func checkInputs(set bool, n int, field, want string, most int) error {
	switch {
	case !set:
		return invalid("`%s` is required: %s", field, want)
	case n == 0:
		return emptyInput("validation", "`%s` cannot be empty", field)
	case n > most:
		return tooMany(n, most)
	}
	return nil
}

// tooMany is TEI's batch size error (422 Validation, counted as
// "batch_size").
func tooMany(n, most int) error {
	return labelled("batch_size", invalid("batch size %d > maximum allowed batch size %d (--max-client-batch-size)", n, most))
}

// sequence is one input: a text, a pair of texts (/predict), or token
// ids (ids set: TEI's InputType::Ids).
type sequence struct {
	a   string
	b   *string
	ids []int32
}

// inputs is TEI's Input, which /embed and the OpenAI route take: a text,
// token ids (a list of integers), or a batch whose items are texts or
// lists of token ids.
type inputs struct {
	list   []sequence
	single bool
	set    bool
}

// inputsWant says what inputs takes.
const inputsWant = "a string or a list of strings, token ids (a list of integers), or a list of strings and lists of token ids"

func (in *inputs) UnmarshalJSON(b []byte) error {
	if in.set = !isNull(b); !in.set {
		return nil // absent
	}
	if q, err := inputItem(b); err == nil {
		// [] is one input of no ids, as TEI's untagged Input reads it
		// (Single(Ids([]))): its tokenization refuses it, 400 Empty.
		in.list, in.single = []sequence{q}, true
		return nil
	} else if !errors.Is(err, errNotInput) {
		return err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New("want " + inputsWant)
	}
	in.list = make([]sequence, len(raw))
	for i, r := range raw {
		q, err := inputItem(r)
		if err != nil {
			return fmt.Errorf("batch item %d: %w", i, err)
		}
		in.list[i] = q
	}
	return nil
}

// errNotInput is inputItem's error for a value that is neither a string
// nor a list of integers.
var errNotInput = errors.New("want a string or a list of token ids (integers from 0)")

// inputItem reads TEI's InputType: a string, or a list of token ids (as
// TEI's u32: integers from 0; above the largest int32, an id is outside
// every vocabulary).
func inputItem(b []byte) (sequence, error) {
	if isNull(b) {
		return sequence{}, errNotInput
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return sequence{a: s}, nil
	}
	var ids []uint32
	if err := json.Unmarshal(b, &ids); err != nil {
		return sequence{}, errNotInput
	}
	q := sequence{ids: make([]int32, len(ids))}
	for k, id := range ids {
		if id > math.MaxInt32 {
			return sequence{}, fmt.Errorf("token id %d is outside the vocabulary", id)
		}
		q.ids[k] = int32(id)
	}
	return q, nil
}

// check reports an absent or empty input, or more than most inputs.
func (in *inputs) check(field string, most int) error {
	return checkInputs(in.set, len(in.list), field, inputsWant, most)
}

// flag is a boolean field that TEI declares a bool with a default
// (normalize, raw_scores, return_text, add_special_tokens): absent is the
// default, null is refused (422), as serde refuses it.
type flag struct{ v, set bool }

func (f *flag) UnmarshalJSON(b []byte) error {
	if isNull(b) {
		return errors.New("a boolean field (normalize, raw_scores, return_text, add_special_tokens) is null: want true or false, or leave it out")
	}
	if err := json.Unmarshal(b, &f.v); err != nil {
		return err
	}
	f.set = true
	return nil
}

// or is the field's value, or def when it was absent.
func (f flag) or(def bool) bool {
	if !f.set {
		return def
	}
	return f.v
}

// direction is TEI's TruncationDirection: "Right" (the default when the
// field is absent) or "Left", or the two in lower case; any other value,
// null included, is refused (422), as serde refuses it.
type direction struct{ d models.TruncationDirection }

func (d *direction) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil || isNull(b) {
		return fmt.Errorf("truncation_direction %s: want \"Right\" or \"Left\" (or \"right\", \"left\")", b)
	}
	v, err := models.ParseTruncationDirection(s)
	if err != nil || s == "" {
		return fmt.Errorf("truncation_direction %q: want \"Right\" or \"Left\" (or \"right\", \"left\")", s)
	}
	d.d = v
	return nil
}

// predictInputs is TEI's PredictInput: "text", ["a", "b"] (one pair), or
// a batch [["text"], ["a", "b"], ...] of single texts and pairs.
type predictInputs struct {
	list   []sequence
	single bool
	set    bool
}

func (p *predictInputs) UnmarshalJSON(b []byte) error {
	if p.set = !isNull(b); !p.set {
		return nil // absent
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		p.list, p.single = []sequence{{a: s}}, true
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New("want a string, a pair of strings [string, string] or a batch of single strings and pairs [[string], [string, string], ...]")
	}
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw[0], &s); err == nil {
		// ["a"] or ["a", "b"]: one input.
		var l []string
		if err := json.Unmarshal(b, &l); err != nil || len(l) > 2 {
			return errors.New("a list of strings is one input: a text [string] or a pair [string, string]; a batch is a list of such lists")
		}
		seq := sequence{a: l[0]}
		if len(l) == 2 {
			seq.b = &l[1]
		}
		p.list, p.single = []sequence{seq}, true
		return nil
	}
	for i, r := range raw {
		var l []string
		if err := json.Unmarshal(r, &l); err != nil || len(l) < 1 || len(l) > 2 {
			return fmt.Errorf("batch item %d: want [string] or [string, string]", i)
		}
		seq := sequence{a: l[0]}
		if len(l) == 2 {
			seq.b = &l[1]
		}
		p.list = append(p.list, seq)
	}
	return nil
}

// Requests of the TEI routes. Model picks one of the server's models by
// name (empty: the first); Truncate cuts inputs longer than the model's
// limit instead of refusing them.
// Direction is where Truncate cuts (TEI's truncation_direction); a
// PromptName is one of the model's prompts (config_sentence_transformers.json),
// else the server's default prompt applies (Config.DefaultPromptName,
// DefaultPrompt); Dimensions keeps the first N values of each vector.
type embedRequest struct {
	Inputs     inputs    `json:"inputs"`
	Normalize  flag      `json:"normalize"`
	Truncate   *bool     `json:"truncate"`
	Direction  direction `json:"truncation_direction"`
	PromptName *string   `json:"prompt_name"`
	Dimensions *int      `json:"dimensions"`
	Model      string    `json:"model"`
}

type predictRequest struct {
	Inputs    predictInputs `json:"inputs"`
	Truncate  *bool         `json:"truncate"`
	Direction direction     `json:"truncation_direction"`
	RawScores flag          `json:"raw_scores"`
	Model     string        `json:"model"`
}

type rerankRequest struct {
	Query      *string   `json:"query"`
	Texts      texts     `json:"texts"`
	Truncate   *bool     `json:"truncate"`
	Direction  direction `json:"truncation_direction"`
	RawScores  flag      `json:"raw_scores"`
	ReturnText flag      `json:"return_text"`
	Model      string    `json:"model"`
}

type tokenizeRequest struct {
	Inputs           texts   `json:"inputs"`
	AddSpecialTokens flag    `json:"add_special_tokens"`
	PromptName       *string `json:"prompt_name"`
	Model            string  `json:"model"`
}

type qaRequest struct {
	Question     *string `json:"question"`
	Context      *string `json:"context"`
	TopK         int     `json:"top_k"`
	MaxAnswerLen int     `json:"max_answer_len"`
	DocStride    int     `json:"doc_stride"`
	Model        string  `json:"model"`
}

// fillMaskRequest is our /fill-mask: a text or a list of texts, each
// with mask tokens, and the Hugging Face pipeline's top_k and targets.
type fillMaskRequest struct {
	Inputs  json.RawMessage `json:"inputs"`
	TopK    int             `json:"top_k"`
	Targets []string        `json:"targets"`
	Model   string          `json:"model"`
}

// Responses.
type prediction struct {
	Score float32 `json:"score"`
	Label string  `json:"label"`
}

type rank struct {
	Index int     `json:"index"`
	Text  *string `json:"text,omitempty"`
	Score float32 `json:"score"`
}

type simpleToken struct {
	ID      int32  `json:"id"`
	Text    string `json:"text"`
	Special bool   `json:"special"`
	Start   *int   `json:"start"`
	Stop    *int   `json:"stop"`
}

// boolOr is *b, or def when the field was absent.
func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// quoted lists names for a message.
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
