package serve

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRequests: the request decoder never panics on any body, and
// what it accepts is well formed: every route's request either decodes
// or is a Validation error, 400 exactly when the body is not one valid
// JSON value in UTF-8 (as TEI's JSON extractor) and 422 otherwise;
// accepted inputs are valid UTF-8 and a predict input is one text or a
// pair.
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{
		`{"inputs": "a"}`, `{"inputs": ["a", "b"]}`, `{"inputs": [["a"], ["b", "c"]]}`, `{"inputs": [["a", "b", "c"]]}`,
		`{"inputs": []}`, `{"inputs": null}`, `{"inputs": 3}`, `{"query": "q", "texts": ["a"], "raw_scores": true}`,
		`{"input": ["x"], "encoding_format": "base64"}`, `{"question": "q", "context": "c", "top_k": 2}`,
		`{bad`, ``, `[]`, `"str"`, `{"inputs": "a"} {}`, "{\"inputs\": \"\xff\"}", `{"inputs": [[]]}`,
		`{"inputs": ["a", ["b"]]}`, `{"inputs": [["a"], "b"]}`, `{"normalize": "yes", "inputs": "a"}`,
		`{"inputs": [1, 2]}`, `{"inputs": [[1, 2], "a", []]}`, `{"inputs": [-1]}`, `{"inputs": [3000000000]}`,
		`{"inputs": "a", "truncation_direction": "Left", "prompt_name": "q", "dimensions": 4}`,
		`{"inputs": "a", "truncation_direction": "up"}`, `{"inputs": "a", "truncation_direction": null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(name string, v any, e *apiError) {
			if e == nil {
				return
			}
			want := 422
			if !utf8.Valid(data) || !json.Valid(data) {
				want = 400
			}
			if e.status != want || e.typ != errValidation || e.msg == "" {
				t.Fatalf("%s: %q: error %d %s %q, want %d Validation", name, data, e.status, e.typ, e.msg, want)
			}
		}
		var em embedRequest
		e := decodeJSON(data, &em)
		check("embed", &em, e)
		if e == nil {
			for _, s := range em.Inputs.list {
				if !utf8.ValidString(s.a) {
					t.Fatalf("embed: invalid UTF-8 accepted from %q", data)
				}
				if s.b != nil || (s.ids != nil && s.a != "") {
					t.Fatalf("embed: an input of %q is a pair, or both text and ids", data)
				}
				for _, id := range s.ids {
					if id < 0 {
						t.Fatalf("embed: negative token id accepted from %q", data)
					}
				}
			}
			if em.Inputs.single && len(em.Inputs.list) != 1 {
				t.Fatalf("embed: single input with %d texts", len(em.Inputs.list))
			}
			_ = em.Inputs.check("inputs", 32)
		}
		var pr predictRequest
		e = decodeJSON(data, &pr)
		check("predict", &pr, e)
		if e == nil {
			if pr.Inputs.single && len(pr.Inputs.list) != 1 {
				t.Fatalf("predict: single input with %d sequences", len(pr.Inputs.list))
			}
			for _, s := range pr.Inputs.list {
				if !utf8.ValidString(s.a) || (s.b != nil && !utf8.ValidString(*s.b)) {
					t.Fatalf("predict: invalid UTF-8 accepted from %q", data)
				}
			}
		}
		var rr rerankRequest
		check("rerank", &rr, decodeJSON(data, &rr))
		var tk tokenizeRequest
		check("tokenize", &tk, decodeJSON(data, &tk))
		var oa openAIRequest
		check("openai", &oa, decodeJSON(data, &oa))
		var qa qaRequest
		check("qa", &qa, decodeJSON(data, &qa))
		// What decodes re-encodes: the decoder accepted JSON.
		if decodeJSON(data, &em) == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
	})
}
