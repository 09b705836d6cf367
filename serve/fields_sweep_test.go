package serve

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
)

// fieldSweep is one route's request: its Go type (whose JSON fields are
// swept) and a body the route answers 200.
type fieldSweep struct {
	route string
	typ   reflect.Type
	base  string
}

// sweepBad are the invalid JSON values of a request field by its Go
// type: a value of the wrong JSON type, and for a count a negative, a
// fractional, an overflowing and a too-large one, and NaN (not JSON:
// 400). A field of a type without an entry fails the test, so that a new
// field is swept when it is added.
var sweepBad = map[reflect.Type][]string{
	reflect.TypeOf(0):                         {`-1`, `1.5`, `1e999`, `"1"`, `true`, `NaN`, `9999999999`},
	reflect.TypeOf((*int)(nil)):               {`-1`, `1.5`, `1e999`, `"1"`, `true`, `NaN`, `9999999999`},
	reflect.TypeOf(false):                     {`"yes"`, `1`, `[]`},
	reflect.TypeOf((*bool)(nil)):              {`"yes"`, `1`, `[]`},
	reflect.TypeOf(flag{}):                    {`"yes"`, `1`, `[]`},
	reflect.TypeOf(direction{}):               {`"up"`, `""`, `5`, `null`},
	reflect.TypeOf(""):                        {`5`, `[]`},
	reflect.TypeOf((*string)(nil)):            {`5`, `[]`},
	reflect.TypeOf([]string(nil)):             {`[5]`, `{}`},
	reflect.TypeOf((*[]string)(nil)):          {`[5]`, `{}`},
	reflect.TypeOf(inputs{}):                  {`{}`, `true`, `[{}]`},
	reflect.TypeOf(texts{}):                   {`{}`, `true`, `[5]`},
	reflect.TypeOf(predictInputs{}):           {`{}`, `true`, `[[]]`},
	reflect.TypeOf(idLists{}):                 {`{}`, `"x"`, `[-1]`, `[1.5]`},
	reflect.TypeOf(json.RawMessage(nil)):      {`{}`, `true`, `5`},
	reflect.TypeOf((*[]json.RawMessage)(nil)): {`{}`, `[5]`},
	reflect.TypeOf(jsonObject{}):              {`5`, `[]`, `"x"`},
	reflect.TypeOf((*encodingFields)(nil)):    {`5`, `[]`},
}

// jsonObject stands for a nested object's own value.
type jsonObject struct{}

// sweepValid are values a field takes although its type's list calls
// them invalid, with why.
var sweepValid = map[string][]string{
	// Hugging Face's pipelines take any top_k above the candidates and
	// answer all of them; max_answer_len too.
	"/fill-mask top_k":   {`9999999999`},
	"/qa max_answer_len": {`9999999999`},
}

// sweepModel is a model field's invalid values (a name no model has).
var sweepModel = []string{`"no-such-model"`}

// TestEveryRequestFieldRefusesInvalidValues: every JSON field of every
// route's request (TEI's routes, /v1/embeddings, ours), set to each
// invalid value of its type (the wrong JSON type, a negative, fractional,
// overflowing or too large count, an unknown enum, NaN), is refused as
// TEI's JSON extractor or validation refuses it: 400 for a body that is
// not JSON, else 422 with TEI's error JSON (OpenAI's on /v1) naming the
// field; never a 200, a 5xx or a silent default.
func TestEveryRequestFieldRefusesInvalidValues(t *testing.T) {
	e := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	c := wordModel(t, "golden/models/bert-seqcls", false, "")
	r := wordModel(t, "golden/heads/xlm-roberta-crossencoder", true, "")
	qa := encodertest.WordFolder(t, sharedModel(t, "golden/models/bert-qa"), false)
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: e}, {Name: "c", Source: c}, {Name: "r", Source: r}, {Name: "qa", Source: qa},
		{Name: "mlm", Source: filepath.Join("..", "models", "testdata", "mlm", "bert-mlm")},
		{Name: "ner", Source: tasksModel("bert-ner")}, {Name: "nli", Source: tasksModel("xlmr-nli")}},
		Load: wordOptions(t), MaxClientBatchSize: 4})

	routes := []fieldSweep{
		{"/embed", reflect.TypeOf(embedRequest{}), `{"model": "e", "inputs": "w5 w6"}`},
		{"/predict", reflect.TypeOf(predictRequest{}), `{"model": "c", "inputs": "w5 w6"}`},
		{"/rerank", reflect.TypeOf(rerankRequest{}), `{"model": "r", "query": "w5", "texts": ["w6", "w7"]}`},
		{"/tokenize", reflect.TypeOf(tokenizeRequest{}), `{"model": "e", "inputs": "w5 w6"}`},
		{"/qa", reflect.TypeOf(qaRequest{}), `{"model": "qa", "question": "w5", "context": "w6 w7 w8"}`},
		{"/fill-mask", reflect.TypeOf(fillMaskRequest{}), `{"model": "mlm", "inputs": "a [MASK] film"}`},
		{"/ner", reflect.TypeOf(nerRequest{}), `{"model": "ner", "inputs": "Paris"}`},
		{"/zero-shot", reflect.TypeOf(zeroShotRequest{}), `{"model": "nli", "inputs": "a fine film", "candidate_labels": ["good", "bad"]}`},
		{"/embed_all", reflect.TypeOf(embedAllRequest{}), `{"model": "e", "inputs": "w5 w6"}`},
		{"/similarity", reflect.TypeOf(similarityRequest{}), `{"model": "e", "inputs": {"source_sentence": "w5", "sentences": ["w6"]}}`},
		{"/decode", reflect.TypeOf(decodeRequest{}), `{"model": "e", "ids": [101, 5, 102]}`},
		{"/vertex", reflect.TypeOf(vertexRequest{}), `{"instances": [{"model": "e", "inputs": "w5"}]}`},
		{"/v1/embeddings", reflect.TypeOf(openAIRequest{}), `{"model": "e", "input": "w5 w6"}`},
	}
	for _, rt := range routes {
		code, b := post(t, ts, rt.route, rt.base)
		require.Equal(t, 200, code, "%s base %s: %s", rt.route, rt.base, b)
		var base map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(rt.base), &base))
		// Each JSON field, with the object it lives in (a nested
		// struct's fields are set inside the base's object of that name).
		type field struct {
			outer, name string
			typ         reflect.Type
		}
		var fields []field
		for i := range rt.typ.NumField() {
			f := rt.typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			// A nested object (an anonymous struct, or a pointer to
			// one or to encodingFields): its fields are swept inside
			// it, and the object itself gets a value of the wrong type.
			nested := f.Type
			if nested.Kind() == reflect.Pointer {
				nested = nested.Elem()
			}
			if nested.Kind() == reflect.Struct && (nested.Name() == "" || nested == reflect.TypeOf(encodingFields{})) {
				for j := range nested.NumField() {
					g := nested.Field(j)
					gname, _, _ := strings.Cut(g.Tag.Get("json"), ",")
					fields = append(fields, field{name, gname, g.Type})
				}
				fields = append(fields, field{"", name, reflect.TypeOf(jsonObject{})})
				continue
			}
			fields = append(fields, field{"", name, f.Type})
		}
		for _, f := range fields {
			key := rt.route + " " + f.name
			bad, ok := sweepBad[f.typ]
			if !ok {
				t.Errorf("%s (%s): no invalid values for its type: add them to sweepBad", key, f.typ)
				continue
			}
			if f.name == "model" && f.typ.Kind() == reflect.String {
				bad = append(append([]string(nil), bad...), sweepModel...)
			}
			for _, v := range bad {
				if isIn(sweepValid[key], v) {
					continue
				}
				body := map[string]json.RawMessage{}
				for k, x := range base {
					body[k] = x
				}
				if f.outer != "" {
					inner := map[string]json.RawMessage{}
					if raw, ok := base[f.outer]; ok {
						require.NoError(t, json.Unmarshal(raw, &inner))
					}
					inner[f.name] = json.RawMessage(v)
					body[f.outer] = marshalRaw(inner)
				} else {
					body[f.name] = json.RawMessage(v)
				}
				raw := string(marshalRaw(body))
				code, b := post(t, ts, rt.route, raw)
				switch {
				case v == `NaN` || v == `1e999` && code == 400:
					// Not JSON (NaN), or a number no JSON decoder
					// holds: TEI's extractor answers 400 or 422.
					assert.Contains(t, []int{400, 422}, code, "%s = %s: %s", key, v, b)
				default:
					assert.Equal(t, 422, code, "%s = %s: %s", key, v, b)
				}
				if code == 200 || code >= 500 {
					continue
				}
				msg := errorMessage(t, rt.route, b)
				if v != `NaN` {
					assert.Contains(t, msg, f.name, "%s = %s: the error does not name the field: %s", key, v, b)
				}
			}
		}
	}
}

// isIn reports whether v is in list.
func isIn(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// marshalRaw is a JSON object of raw values, its keys in order (values
// that are not JSON, NaN, are written as they are).
func marshalRaw(m map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", k, m[k])
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// errorMessage is a refusal's message: TEI's error JSON, or OpenAI's on
// /v1/embeddings.
func errorMessage(t *testing.T, route string, b []byte) string {
	t.Helper()
	if route == "/v1/embeddings" {
		var o struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(b, &o), "%s", b)
		return o.Error.Message
	}
	var e errorBody
	require.NoError(t, json.Unmarshal(b, &e), "%s", b)
	assert.Contains(t, []string{errValidation, errEmpty, errTokenizer}, e.ErrorType, "%s", b)
	return e.Error
}
