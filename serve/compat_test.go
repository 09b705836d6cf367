package serve

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/models/encoder/encodertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// teiRequestFields reads the fields of the request types (the structs
// deriving Deserialize) of TEI's router/src/http/types.rs: "Struct.field".
func teiRequestFields(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	derive := regexp.MustCompile(`^#\[derive\(.*\bDeserialize\b`)
	start := regexp.MustCompile(`^pub\(crate\) struct (\w+) \{`)
	field := regexp.MustCompile(`^\s+pub (\w+):`)
	var out []string
	deser, in := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case in != "" && l == "}":
			in = ""
		case in != "":
			if m := field.FindStringSubmatch(l); m != nil {
				out = append(out, in+"."+m[1])
			}
		case derive.MatchString(l):
			deser = true
		case strings.HasPrefix(l, "pub(crate) "):
			if m := start.FindStringSubmatch(l); m != nil && deser {
				in = m[1]
			}
			deser = false
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// openAIRequestFields reads EmbeddingCreateParams' fields from the OpenAI
// SDK's embeddings.d.ts: "openai.field".
func openAIRequestFields(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	i := bytes.Index(b, []byte("export interface EmbeddingCreateParams {"))
	require.GreaterOrEqual(t, i, 0, "no EmbeddingCreateParams in %s", path)
	body := b[i:]
	body = body[:bytes.Index(body, []byte("\n}"))]
	field := regexp.MustCompile(`(?m)^    (\w+)\??:`)
	var out []string
	for _, m := range field.FindAllSubmatch(body, -1) {
		out = append(out, "openai."+string(m[1]))
	}
	return out
}

// A compatCase sends base and then variant (which sets or changes one
// field) to route. want is what the variant shows: "differs" (both 200,
// the answers differ: the field is honoured), "same" (both 200 and equal:
// a field TEI accepts and does nothing with, said in why), or a status
// (the base 200, the variant refused with that 4xx: a required field
// left out, or a value TEI refuses).
type compatCase struct {
	route, base, variant, want, why string
}

// TestTEIRequestFieldsCompatible: every field of TEI v1.9.3's request
// types (types.rs) and of the OpenAI SDK's EmbeddingCreateParams
// (openai 7.55.0) has a case here, and each case shows the field honoured
// as TEI (or, on /v1, OpenAI) honours it, or refused with a 4xx. A field
// the pinned sources have and the table lacks fails the test, and so does
// an entry for a field they do not have.
func TestTEIRequestFieldsCompatible(t *testing.T) {
	fields := append(teiRequestFields(t, "testdata/tei-v1.9.3/types.rs"),
		openAIRequestFields(t, "testdata/openai-7.55.0/embeddings.d.ts")...)
	require.Greater(t, len(fields), 30, "the parsers found too few fields: %v", fields)

	long := strconv.Quote(encodertest.Words(10, 40)) // longer than optionsMaxLength
	q := func(s string) string { return strings.ReplaceAll(s, "LONG", long) }
	emb := `{"model": "e", "inputs": "w5 w6 w7"}`
	embLong := `{"model": "e", "inputs": LONG, "truncate": true}`
	pred := `{"model": "c", "inputs": "w5 w6 w7"}`
	predLong := `{"model": "c", "inputs": LONG, "truncate": true}`
	rr := `{"model": "r", "query": "w5 w6", "texts": ["w7 w8", "w9"]}`
	rrLong := `{"model": "r", "query": "w5 w6", "texts": [LONG], "truncate": true}`
	sim := `{"model": "e", "inputs": {"source_sentence": "w5 w6", "sentences": ["w7 w8", "w9 w10"]}}`
	simLong := `{"model": "e", "inputs": {"source_sentence": LONG, "sentences": ["w7 w8"]}, "parameters": {"truncate": true}}`
	sparse := `{"model": "e", "inputs": "w5 w6"}`
	oai := `{"model": "e", "input": "w5 w6 w7"}`
	dec := `{"model": "e", "ids": [101, 5, 6, 102]}`
	table := map[string][]compatCase{
		"EmbedRequest.inputs":               {{"/embed", emb, `{"model": "e"}`, "422", "required"}, {"/embed", emb, `{"model": "e", "inputs": [5, 6, 7]}`, "differs", "token ids"}},
		"EmbedRequest.truncate":             {{"/embed", embLong, `{"model": "e", "inputs": LONG, "truncate": false}`, "422", ""}},
		"EmbedRequest.truncation_direction": {{"/embed", embLong, `{"model": "e", "inputs": LONG, "truncate": true, "truncation_direction": "left"}`, "differs", ""}, {"/embed", emb, `{"model": "e", "inputs": "w5", "truncation_direction": "sideways"}`, "422", ""}},
		"EmbedRequest.prompt_name":          {{"/embed", emb, `{"model": "e", "inputs": "w5 w6 w7", "prompt_name": "query"}`, "differs", ""}, {"/embed", emb, `{"model": "e", "inputs": "w5", "prompt_name": "nope"}`, "422", ""}},
		"EmbedRequest.normalize":            {{"/embed", emb, `{"model": "e", "inputs": "w5 w6 w7", "normalize": false}`, "differs", ""}},
		"EmbedRequest.dimensions":           {{"/embed", emb, `{"model": "e", "inputs": "w5 w6 w7", "dimensions": 16}`, "differs", ""}, {"/embed", emb, `{"model": "e", "inputs": "w5", "dimensions": 0}`, "422", ""}},

		"PredictRequest.inputs":               {{"/predict", pred, `{"model": "c"}`, "422", "required"}, {"/predict", pred, `{"model": "c", "inputs": ["w5 w6", "w7"]}`, "differs", "a pair"}},
		"PredictRequest.truncate":             {{"/predict", predLong, `{"model": "c", "inputs": LONG, "truncate": false}`, "422", ""}},
		"PredictRequest.truncation_direction": {{"/predict", predLong, `{"model": "c", "inputs": LONG, "truncate": true, "truncation_direction": "left", "raw_scores": false}`, "differs", ""}},
		"PredictRequest.raw_scores":           {{"/predict", pred, `{"model": "c", "inputs": "w5 w6 w7", "raw_scores": true}`, "differs", ""}},

		"RerankRequest.query":                {{"/rerank", rr, `{"model": "r", "texts": ["w7 w8"]}`, "422", "required"}, {"/rerank", rr, `{"model": "r", "query": "w11", "texts": ["w7 w8", "w9"]}`, "differs", ""}},
		"RerankRequest.texts":                {{"/rerank", rr, `{"model": "r", "query": "w5 w6"}`, "422", "required"}, {"/rerank", rr, `{"model": "r", "query": "w5 w6", "texts": ["w9", "w12 w13"]}`, "differs", ""}},
		"RerankRequest.truncate":             {{"/rerank", rrLong, `{"model": "r", "query": "w5 w6", "texts": [LONG], "truncate": false}`, "422", ""}},
		"RerankRequest.truncation_direction": {{"/rerank", rrLong, `{"model": "r", "query": "w5 w6", "texts": [LONG], "truncate": true, "truncation_direction": "left"}`, "differs", ""}},
		"RerankRequest.raw_scores":           {{"/rerank", rr, `{"model": "r", "query": "w5 w6", "texts": ["w7 w8", "w9"], "raw_scores": true}`, "differs", ""}},
		"RerankRequest.return_text":          {{"/rerank", rr, `{"model": "r", "query": "w5 w6", "texts": ["w7 w8", "w9"], "return_text": true}`, "differs", ""}},

		"OpenAICompatRequest.input":           {{"/v1/embeddings", oai, `{"model": "e"}`, "422", "required"}, {"/v1/embeddings", oai, `{"model": "e", "input": [[5, 6, 7]]}`, "differs", "token ids"}},
		"OpenAICompatRequest.model":           {{"/v1/embeddings", oai, `{"model": "x", "input": "w5 w6 w7"}`, "differs", "a served name picks its model"}, {"/v1/embeddings", oai, `{"model": "any/hub-id", "input": "w5 w6 w7"}`, "same", "another name: the default model, with a warning, as TEI"}},
		"OpenAICompatRequest.user":            {{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "user": "u-1"}`, "same", "TEI and OpenAI take it for abuse monitoring only"}, {"/v1/embeddings", oai, `{"model": "e", "input": "w5", "user": 5}`, "422", ""}},
		"OpenAICompatRequest.encoding_format": {{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "encoding_format": "base64"}`, "differs", ""}, {"/v1/embeddings", oai, `{"model": "e", "input": "w5", "encoding_format": "int8"}`, "422", ""}},
		"OpenAICompatRequest.dimensions":      {{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "dimensions": 16}`, "differs", ""}, {"/v1/embeddings", oai, `{"model": "e", "input": "w5", "dimensions": 0}`, "422", ""}},

		"SimilarityRequest.inputs":                  {{"/similarity", sim, `{"model": "e"}`, "422", "required"}},
		"SimilarityRequest.parameters":              {{"/similarity", sim, `{"model": "e", "inputs": {"source_sentence": "w5 w6", "sentences": ["w7 w8", "w9 w10"]}, "parameters": {"prompt_name": "query"}}`, "differs", ""}},
		"SimilarityInput.source_sentence":           {{"/similarity", sim, `{"model": "e", "inputs": {"sentences": ["w7 w8"]}}`, "422", "required"}, {"/similarity", sim, `{"model": "e", "inputs": {"source_sentence": "w9 w10", "sentences": ["w7 w8", "w9 w10"]}}`, "differs", ""}},
		"SimilarityInput.sentences":                 {{"/similarity", sim, `{"model": "e", "inputs": {"source_sentence": "w5 w6"}}`, "422", "required"}, {"/similarity", sim, `{"model": "e", "inputs": {"source_sentence": "w5 w6", "sentences": ["w5 w6", "w9 w10"]}}`, "differs", ""}},
		"SimilarityParameters.truncate":             {{"/similarity", simLong, `{"model": "e", "inputs": {"source_sentence": LONG, "sentences": ["w7 w8"]}, "parameters": {"truncate": false}}`, "422", ""}},
		"SimilarityParameters.truncation_direction": {{"/similarity", simLong, `{"model": "e", "inputs": {"source_sentence": LONG, "sentences": ["w7 w8"]}, "parameters": {"truncate": true, "truncation_direction": "left"}}`, "differs", ""}},
		"SimilarityParameters.prompt_name":          {{"/similarity", sim, `{"model": "e", "inputs": {"source_sentence": "w5 w6", "sentences": ["w7 w8", "w9 w10"]}, "parameters": {"prompt_name": "query"}}`, "differs", ""}},

		// Without a SPLADE head /embed_sparse answers TEI's 424 for a
		// well-formed request; its fields are read and checked first.
		"EmbedSparseRequest.inputs":               {{"/embed_sparse", sparse, `{"model": "e"}`, "422", "required (the base is TEI's 424 for a model without SPLADE pooling)"}},
		"EmbedSparseRequest.truncate":             {{"/embed_sparse", sparse, `{"model": "e", "inputs": "w5", "truncate": "yes"}`, "422", ""}},
		"EmbedSparseRequest.truncation_direction": {{"/embed_sparse", sparse, `{"model": "e", "inputs": "w5", "truncation_direction": "sideways"}`, "422", ""}},
		"EmbedSparseRequest.prompt_name":          {{"/embed_sparse", sparse, `{"model": "e", "inputs": "w5", "prompt_name": 5}`, "422", ""}},

		"EmbedAllRequest.inputs":               {{"/embed_all", emb, `{"model": "e"}`, "422", "required"}, {"/embed_all", emb, `{"model": "e", "inputs": [5, 6, 7]}`, "differs", "token ids"}},
		"EmbedAllRequest.truncate":             {{"/embed_all", embLong, `{"model": "e", "inputs": LONG, "truncate": false}`, "422", ""}},
		"EmbedAllRequest.truncation_direction": {{"/embed_all", embLong, `{"model": "e", "inputs": LONG, "truncate": true, "truncation_direction": "left"}`, "differs", ""}},
		"EmbedAllRequest.prompt_name":          {{"/embed_all", emb, `{"model": "e", "inputs": "w5 w6 w7", "prompt_name": "query"}`, "differs", ""}},

		"TokenizeRequest.inputs":             {{"/tokenize", emb, `{"model": "e"}`, "422", "required"}, {"/tokenize", emb, `{"model": "e", "inputs": ["w5 w6 w7", "w8"]}`, "differs", ""}},
		"TokenizeRequest.add_special_tokens": {{"/tokenize", emb, `{"model": "e", "inputs": "w5 w6 w7", "add_special_tokens": false}`, "differs", ""}},
		"TokenizeRequest.prompt_name":        {{"/tokenize", emb, `{"model": "e", "inputs": "w5 w6 w7", "prompt_name": "query"}`, "differs", ""}},

		"DecodeRequest.ids":                 {{"/decode", dec, `{"model": "e"}`, "422", "required"}, {"/decode", dec, `{"model": "e", "ids": [[5, 6], [7]]}`, "differs", "a batch"}},
		"DecodeRequest.skip_special_tokens": {{"/decode", dec, `{"model": "e", "ids": [101, 5, 6, 102], "skip_special_tokens": false}`, "differs", ""}},

		"VertexRequest.instances": {{"/vertex", `{"instances": [{"inputs": "w5 w6"}]}`, `{}`, "422", "required"}, {"/vertex", `{"instances": [{"inputs": "w5 w6"}]}`, `{"instances": [{"inputs": "w5 w6"}, {"inputs": "w7"}]}`, "differs", ""}},

		// The OpenAI SDK's EmbeddingCreateParams; where TEI's /v1 and
		// OpenAI differ, OpenAI's reading wins (the rule).
		"openai.input":           {{"/v1/embeddings", oai, `{"model": "e", "input": ["w5 w6 w7", "w8"]}`, "differs", "a list"}, {"/v1/embeddings", oai, `{"model": "e", "input": [5, 6, 7]}`, "differs", "an array of tokens"}},
		"openai.model":           {{"/v1/embeddings", oai, `{"model": "x", "input": "w5 w6 w7"}`, "differs", ""}, {"/v1/embeddings", oai, `{"model": "text-embedding-3-small", "input": "w5 w6 w7"}`, "same", "not a served name: the default model, as TEI"}},
		"openai.dimensions":      {{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "dimensions": 8}`, "differs", ""}},
		"openai.encoding_format": {{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "encoding_format": "float"}`, "same", "float is the default"}, {"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "encoding_format": "base64"}`, "differs", ""}},
		"openai.user":            {{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "user": "u-2"}`, "same", "abuse monitoring only"}},
	}
	// Fields neither knows are ignored, as TEI ignores them.
	unknown := []compatCase{
		{"/embed", emb, `{"model": "e", "inputs": "w5 w6 w7", "colour": "blue"}`, "same", "unknown field"},
		{"/v1/embeddings", oai, `{"model": "e", "input": "w5 w6 w7", "colour": "blue"}`, "same", "unknown field"},
	}

	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
		assert.Contains(t, table, f, "%s: a field of the pinned sources without a case here", f)
	}
	var names []string
	for f := range table {
		names = append(names, f)
		assert.True(t, want[f], "%s: a case for a field the pinned sources do not have", f)
	}
	sort.Strings(names)

	e := wordModel(t, "golden/models/bert-base", false, promptsJSON)
	x := wordModel(t, "golden/models/distilbert-base", false, "")
	c := wordModel(t, "golden/models/bert-seqcls", false, "")
	r := wordModel(t, "golden/heads/xlm-roberta-crossencoder", true, "")
	_, ts := newServer(t, Config{Models: []ModelSpec{{Name: "e", Source: e}, {Name: "x", Source: x}, {Name: "c", Source: c}, {Name: "r", Source: r}},
		Load: wordOptions(t), MaxClientBatchSize: 4})
	run := func(name string, k compatCase) {
		t.Helper()
		what := name + " " + k.why
		code, base := post(t, ts, k.route, q(k.base))
		if k.route == "/embed_sparse" {
			require.Equal(t, 424, code, "%s: base %s: %s", what, k.base, base)
		} else {
			require.Equal(t, 200, code, "%s: base %s: %s", what, k.base, base)
		}
		vcode, v := post(t, ts, k.route, q(k.variant))
		switch k.want {
		case "differs":
			require.Equal(t, 200, vcode, "%s: %s: %s", what, k.variant, v)
			assert.NotEqual(t, string(base), string(v), "%s: %s answers as without the field", what, k.variant)
		case "same":
			require.Equal(t, 200, vcode, "%s: %s: %s", what, k.variant, v)
			assert.Equal(t, string(base), string(v), "%s: %s", what, k.variant)
		default:
			status, err := strconv.Atoi(k.want)
			require.NoError(t, err)
			assert.Equal(t, status, vcode, "%s: %s: %s", what, k.variant, v)
		}
	}
	for _, f := range names {
		for _, k := range table[f] {
			run(f, k)
		}
	}
	for _, k := range unknown {
		run("unknown", k)
	}
}
