package serve

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRouteRequests: the requests of /decode, /similarity,
// /embed_all and /vertex never panic the decoder; what it refuses is a
// Validation error, 400 for a body that is not JSON and 422 otherwise
// (as FuzzDecodeRequests), and the ids /decode accepts are a single list
// (single) or a batch, each id a token id or -1 (past the tokenizer's
// range).
func FuzzDecodeRouteRequests(f *testing.F) {
	for _, s := range []string{
		`{"ids": [1, 2]}`, `{"ids": [[1], [2, 3]]}`, `{"ids": []}`, `{"ids": [[]]}`, `{"ids": [-1]}`,
		`{"ids": [4294967295]}`, `{"ids": [4294967296]}`, `{"ids": [1.5]}`, `{"ids": [[1], 2]}`, `{"ids": null}`,
		`{"inputs": {"source_sentence": "a", "sentences": ["b"]}, "parameters": {"truncate": true}}`,
		`{"inputs": {"source_sentence": 1}}`, `{"instances": [{"inputs": "a"}, 3]}`, `{"instances": null}`,
		`{"inputs": "a", "truncation_direction": "left", "prompt_name": null}`, `{bad`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(name string, e *apiError) {
			want := 422
			if !utf8.Valid(data) || !json.Valid(data) {
				want = 400
			}
			if e != nil && (e.status != want || e.typ != errValidation || e.msg == "") {
				t.Fatalf("%s: %q: error %d %s %q, want %d Validation", name, data, e.status, e.typ, e.msg, want)
			}
		}
		var d decodeRequest
		e := decodeJSON(data, &d)
		check("decode", e)
		if e == nil && d.IDs.set {
			if d.IDs.single && len(d.IDs.list) != 1 {
				t.Fatalf("decode: single with %d lists from %q", len(d.IDs.list), data)
			}
			for _, ids := range d.IDs.list {
				for _, id := range ids {
					if id < -1 {
						t.Fatalf("decode: id %d from %q", id, data)
					}
				}
			}
		}
		var sr similarityRequest
		check("similarity", decodeJSON(data, &sr))
		var ea embedAllRequest
		e = decodeJSON(data, &ea)
		check("embed_all", e)
		if e == nil && ea.Inputs.single && len(ea.Inputs.list) != 1 {
			t.Fatalf("embed_all: single with %d inputs from %q", len(ea.Inputs.list), data)
		}
		var vr vertexRequest
		check("vertex", decodeJSON(data, &vr))
	})
}
