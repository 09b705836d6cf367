package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/models"
	"github.com/int8bert/int8bert/serve"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// teiMainFields are the fields of TEI's Args in the vendored main.rs, with
// their clap attributes and Rust type.
func teiMainFields(t *testing.T) map[string][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "serve", "testdata", "tei-v1.9.3", "main.rs"))
	require.NoError(t, err)
	src := string(b)
	start := strings.Index(src, "struct Args {")
	require.Positive(t, start, "main.rs has struct Args")
	body := src[start : start+strings.Index(src[start:], "\n}\n")]
	re := regexp.MustCompile(`#\[clap\(([^\]]*)\)\]\s*\n(?:\s*#\[[^\]]*\]\s*\n)*\s*(\w+):\s*([^,\n]+),`)
	fields := map[string][2]string{}
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		fields[m[2]] = [2]string{m[1], m[3]}
	}
	require.Len(t, fields, strings.Count(body, "#[clap("), "every #[clap(...)] field of main.rs is read")
	return fields
}

// TestTEIFlagTable: every field of TEI v1.9.3's Args (main.rs) is in
// teiSettings and none else; each is a flag of serve, with TEI's short
// form and its kind (bool) as main.rs declares them, and each has a case
// in TestTEISettingHonoured.
func TestTEIFlagTable(t *testing.T) {
	fields := teiMainFields(t)
	require.GreaterOrEqual(t, len(fields), 28)
	ours := map[string]teiSetting{}
	for _, s := range teiSettings {
		ours[s.field] = s
	}
	fs := serveFlagSet()
	for name, f := range fields {
		s, ok := ours[name]
		if !assert.True(t, ok, "TEI's %s (--%s, %s) is missing from teiSettings", name, strings.ReplaceAll(name, "_", "-"), strings.ToUpper(name)) {
			continue
		}
		assert.True(t, strings.Contains(f[0], "long") && strings.Contains(f[0], "env"), "%s: clap(%s)", name, f[0])
		assert.Equal(t, strings.TrimSpace(f[1]) == "bool", s.bool, "%s: a bool in main.rs (%s)", name, f[1])
		fl := fs.Lookup(s.flag())
		if assert.NotNil(t, fl, "serve has no flag --%s", s.flag()) && s.bool {
			bf, ok := fl.Value.(interface{ IsBoolFlag() bool })
			assert.True(t, ok && bf.IsBoolFlag(), "--%s is a boolean flag", s.flag())
		}
		if strings.Contains(f[0], "short") {
			assert.NotNil(t, fs.Lookup(s.flag()[:1]), "TEI's -%s", s.flag()[:1])
		}
		_, tested := teiCases[name]
		assert.True(t, tested, "%s has no case in teiCases", name)
		if s.ours != "" {
			assert.NotNil(t, fs.Lookup(s.ours), "%s: our flag --%s", name, s.ours)
		}
	}
	for name := range ours {
		_, ok := fields[name]
		assert.True(t, ok, "teiSettings has %s, which main.rs has not", name)
	}
}

// teiConfig parses args (TEI's form: no "serve") with env as the whole
// environment and returns the flags and the configuration.
func teiConfig(args []string, env map[string]string, teiForm bool) (*serveFlags, serve.Config, error) {
	f := newServeFlags(io.Discard)
	f.teiForm = teiForm
	if err := f.parse(args, func(k string) string { return env[k] }); err != nil {
		return f, serve.Config{}, err
	}
	c, err := f.config(io.Discard)
	return f, c, err
}

// teiCase is a value of one TEI setting and what it makes of the
// configuration: check is nil for a value refused (err names it).
type teiCase struct {
	value string
	check func(t *testing.T, f *serveFlags, c serve.Config)
	err   string
}

const sst2Mini = "../../assets/sst2-xlmr-mini"

// teiCases: per TEI field, values and their effect, each tried as the
// variable and as the flag.
var teiCases = map[string][]teiCase{
	"model_id": {{value: "BAAI/bge-small-en-v1.5", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, []serve.ModelSpec{{Name: "BAAI/bge-small-en-v1.5", Source: "BAAI/bge-small-en-v1.5"}}, c.Models)
	}}},
	"revision": {{value: "refs/pr/2", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, "refs/pr/2", c.Load.Revision)
	}}},
	"tokenization_workers": {{value: "3", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, 3, c.TokenizationWorkers)
	}}, {value: "three", err: "three"}},
	"dtype": {
		{value: "float32", check: func(t *testing.T, f *serveFlags, c serve.Config) {
			assert.Equal(t, models.PrecisionFP32, c.Load.Precision)
		}},
		{value: "bfloat16", check: func(t *testing.T, f *serveFlags, c serve.Config) {
			assert.Equal(t, models.PrecisionBF16, c.Load.Precision)
		}},
		{value: "float16", err: "float16: not supported"},
		{value: "int4", err: `"int4": want float32 or bfloat16`},
	},
	"served_model_name": {{value: "intfloat/e5-small", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, []serve.ModelSpec{{Name: "intfloat/e5-small", Source: sst2Mini}}, c.Models)
	}}},
	"pooling": {{value: "cls", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "cls", c.Pooling) }}},
	"max_concurrent_requests": {{value: "7", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, 7, c.MaxConcurrentRequests)
	}}, {value: "-", err: "-"}},
	"max_batch_tokens": {{value: "1000", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, 1000, c.MaxBatchTokens)
		assert.Equal(t, -1, c.MaxBatchRequests, "no bound of requests but the tokens'")
	}}, {value: "1e3", err: "1e3"}},
	"max_batch_requests": {{value: "5", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, 5, c.MaxBatchRequests) }}},
	"max_client_batch_size": {{value: "9", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, 9, c.MaxClientBatchSize)
	}}},
	"auto_truncate": {
		{value: "false", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.False(t, c.AutoTruncate) }},
		{value: "true", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.True(t, c.AutoTruncate) }},
		{value: "maybe", err: "maybe"},
	},
	"default_prompt_name": {{value: "query", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, "query", c.DefaultPromptName)
	}}},
	"default_prompt": {{value: "query: ", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, "query: ", c.DefaultPrompt)
	}}},
	"dense_path": {{value: "2_Dense_256", err: "--dense-path (DENSE_PATH) \"2_Dense_256\": not supported"}},
	"hf_api_token": {{value: "hf_old", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, map[string]string{"HF_TOKEN": "hf_old"}, f.hubEnv)
		assert.Contains(t, strings.Join(f.notes, "\n"), "deprecated")
	}}},
	"hf_token": {{value: "hf_new", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, map[string]string{"HF_TOKEN": "hf_new"}, f.hubEnv)
	}}},
	"hostname": {
		{value: "127.0.0.1", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "127.0.0.1:3000", f.listen) }},
		{value: "::1", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "[::1]:3000", f.listen) }},
		{value: "localhost", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "localhost:3000", f.listen) }},
		{value: "no-such-host.invalid", err: `"no-such-host.invalid": not an IP address, not this machine's name, and it does not resolve`},
	},
	"port": {
		{value: "8123", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "0.0.0.0:8123", f.listen) }},
		{value: "70000", err: "70000: want 0 to 65535"},
	},
	"uds_path": {
		{value: teiUDSPath, check: func(t *testing.T, f *serveFlags, c serve.Config) {}},
		{value: "/run/tei.sock", err: `--uds-path (UDS_PATH) "/run/tei.sock"`},
	},
	"huggingface_hub_cache": {{value: "/data", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, map[string]string{"HF_HUB_CACHE": "/data"}, f.hubEnv)
	}}},
	"payload_limit": {
		{value: "123", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, int64(123), c.MaxBodyBytes) }},
		{value: "0", err: "--payload-limit (PAYLOAD_LIMIT) 0"},
	},
	"api_key": {{value: "s3cret", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "s3cret", c.APIKey) }}},
	"json_output": {
		{value: "true", check: func(t *testing.T, f *serveFlags, c serve.Config) {
			assert.True(t, *f.tei.jsonOutput)
			assert.Equal(t, "*slog.JSONHandler", fmt.Sprintf("%T", c.Logger.Handler()))
		}},
		{value: "false", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.False(t, *f.tei.jsonOutput) }},
	},
	"disable_spans": {{value: "true", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.True(t, *f.tei.disableSpans) }}},
	"otlp_endpoint": {{value: "http://localhost:4317", err: `--otlp-endpoint (OTLP_ENDPOINT) "http://localhost:4317"`}},
	"otlp_service_name": {{value: "tei.server", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, "tei.server", *f.tei.otlpService)
	}}},
	"prometheus_port": {
		{value: "9123", check: func(t *testing.T, f *serveFlags, c serve.Config) { assert.Equal(t, "0.0.0.0:9123", f.promListen) }},
		{value: "3000", err: "is the listen port too"},
	},
	"cors_allow_origin": {{value: "https://a.example", check: func(t *testing.T, f *serveFlags, c serve.Config) {
		assert.Equal(t, []string{"https://a.example"}, c.CORSAllowOrigin)
	}}},
}

// TestTEISettingHonoured: each TEI setting, as its variable and as its
// flag (TEI's form, "int8bert --model-id ..."), makes the configuration
// what TEI makes of it, or is refused with an error naming it.
func TestTEISettingHonoured(t *testing.T) {
	for _, s := range teiSettings {
		for _, tc := range teiCases[s.field] {
			base := map[string]string{"MODEL_ID": sst2Mini}
			if s.field == "model_id" {
				base = map[string]string{}
			}
			env := map[string]string{s.env(): tc.value}
			for k, v := range base {
				env[k] = v
			}
			arg := "--" + s.flag() + "=" + tc.value
			for _, form := range []struct {
				name string
				args []string
				env  map[string]string
			}{{"env " + s.env() + "=" + tc.value, nil, env}, {"flag " + arg, []string{arg}, base}} {
				f, c, err := teiConfig(form.args, form.env, true)
				if tc.check == nil {
					if assert.Error(t, err, form.name) {
						assert.Contains(t, err.Error(), tc.err, form.name)
						if strings.HasPrefix(form.name, "env") {
							assert.Contains(t, err.Error(), s.env(), "%s: the error names the variable", form.name)
						}
					}
					continue
				}
				if assert.NoError(t, err, form.name) {
					tc.check(t, f, c)
				}
			}
		}
	}
}

// TestTEIDefaults: with nothing but the model, TEI's form has TEI's
// defaults; "serve" keeps ours for the address and has no metrics port.
func TestTEIDefaults(t *testing.T) {
	f, c, err := teiConfig(nil, map[string]string{"MODEL_ID": "BAAI/bge-base-en-v1.5"}, true)
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:3000", f.listen)
	assert.Equal(t, "0.0.0.0:9000", f.promListen)
	assert.True(t, c.AutoTruncate)
	assert.Equal(t, 16384, c.MaxBatchTokens)
	assert.Equal(t, -1, c.MaxBatchRequests, "no bound but the tokens, as TEI")
	assert.Equal(t, 32, c.MaxClientBatchSize)
	assert.Equal(t, 512, c.MaxConcurrentRequests)
	assert.Equal(t, int64(2_000_000), c.MaxBodyBytes)
	assert.Equal(t, min(max(runtime.NumCPU()-1, 1), 64), c.TokenizationWorkers)
	assert.Equal(t, "", c.Pooling, "the model's own pooling config")
	assert.Equal(t, "BAAI/bge-base-en-v1.5", c.Models[0].Name, "TEI's served name is the id as given")
	assert.Empty(t, f.hubEnv)

	f, c, err = teiConfig([]string{"--model", sst2Mini}, nil, false)
	require.NoError(t, err)
	assert.Equal(t, ":8080", f.listen)
	assert.Equal(t, "", f.promListen)
	assert.True(t, c.AutoTruncate)
	assert.Equal(t, "sst2-xlmr-mini", c.Models[0].Name)

	// serve with TEI's variables: PORT changes the port of ours.
	f, _, err = teiConfig(nil, map[string]string{"MODEL_ID": sst2Mini, "PORT": "8081", "PROMETHEUS_PORT": "9001"}, false)
	require.NoError(t, err)
	assert.Equal(t, ":8081", f.listen)
	assert.Equal(t, ":9001", f.promListen)
}

// TestTEIFlagsBeatEnv: a flag, TEI's or ours for the same setting, beats
// the variable; two flags of one setting that disagree, and the
// settings TEI refuses together, are refused.
func TestTEIFlagsBeatEnv(t *testing.T) {
	env := map[string]string{"MODEL_ID": sst2Mini, "MAX_BATCH_TOKENS": "100", "PORT": "81", "PAYLOAD_LIMIT": "5",
		"DTYPE": "bfloat16", "AUTO_TRUNCATE": "false", "HOSTNAME": "10.1.2.3"}
	f, c, err := teiConfig([]string{"--max-batch-tokens", "200", "--addr", "127.0.0.1:0", "--max-body-bytes", "77",
		"--precision", "fp32", "--auto-truncate"}, env, true)
	require.NoError(t, err)
	assert.Equal(t, 200, c.MaxBatchTokens)
	assert.Equal(t, "127.0.0.1:0", f.listen, "--addr beats HOSTNAME and PORT")
	assert.Equal(t, int64(77), c.MaxBodyBytes, "--max-body-bytes beats PAYLOAD_LIMIT")
	assert.Equal(t, models.PrecisionFP32, c.Load.Precision, "--precision beats DTYPE")
	assert.True(t, c.AutoTruncate)

	f, c, err = teiConfig([]string{"--model-id", sst2Mini, "--port", "82", "--payload-limit", "9"}, env, true)
	require.NoError(t, err)
	assert.Equal(t, "10.1.2.3:82", f.listen)
	assert.Equal(t, int64(9), c.MaxBodyBytes)
	assert.Equal(t, sst2Mini, c.Models[0].Source, "--model-id beats MODEL_ID")

	for _, bad := range []struct {
		args []string
		env  map[string]string
		has  string
	}{
		{[]string{"--model", sst2Mini}, map[string]string{"MODEL_ID": "BAAI/bge"}, "both name the model"},
		{[]string{"--model", sst2Mini, "--model-id", "x"}, nil, "give one"},
		{[]string{"--model-id", "x", "--addr", ":80", "--port", "81"}, nil, "--addr :80 and TEI's --hostname/--port"},
		{[]string{"--model-id", "x", "--addr", ":80", "--hostname", "0.0.0.0"}, nil, "name the listen address twice"},
		{[]string{"--model-id", "x", "--precision", "int8-dynamic", "--dtype", "float32"}, nil, "disagree"},
		{[]string{"--model-id", "x", "--payload-limit", "1", "--max-body-bytes", "2"}, nil, "disagree"},
		{[]string{"--model-id", "x", "--default-prompt", "q: ", "--default-prompt-name", "query"}, nil, "cannot be used together"},
		{[]string{"--model-id", "x"}, map[string]string{"HF_TOKEN": "a", "HF_API_TOKEN": "b"}, "cannot be used together"},
		{[]string{"--model", "a=x", "--model", "b=y", "--served-model-name", "m"}, nil, "names one model; 2 are given"},
		{[]string{"--model", "a=x", "--served-model-name", "m"}, nil, "name the model apart"},
		{nil, map[string]string{"MODEL_ID": "x", "MAX_CLIENT_BATCH_SIZE": "many"}, `MAX_CLIENT_BATCH_SIZE="many"`},
		{nil, nil, "give at least one --model [NAME=]DIR-or-hub-id (or TEI's --model-id / MODEL_ID)"},
	} {
		_, _, err := teiConfig(bad.args, bad.env, true)
		if assert.Error(t, err, "%v %v", bad.args, bad.env) {
			assert.Contains(t, err.Error(), bad.has, "%v %v", bad.args, bad.env)
		}
	}
}

// TestTEIBoolFlags: a boolean flag takes --x, --x=true|false and
// --x true|false (clap's forms), ours as TEI's.
func TestTEIBoolFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--auto-truncate"}, true},
		{[]string{"--auto-truncate=false"}, false},
		{[]string{"--auto-truncate", "false"}, false},
		{[]string{"--auto-truncate", "true"}, true},
		{[]string{"--auto-truncate=true"}, true},
		{[]string{"--auto-truncate", "false", "--port", "1"}, false},
		{[]string{"-auto-truncate", "FALSE"}, false},
	} {
		_, cfg, err := teiConfig(append([]string{"--model-id", "x"}, c.args...), nil, true)
		if assert.NoError(t, err, "%v", c.args) {
			assert.Equal(t, c.want, cfg.AutoTruncate, "%v", c.args)
		}
	}
	f, cfg, err := teiConfig([]string{"--model-id", "x", "--json-output", "true", "--disable-spans", "false", "--pin", "true", "--warmup", "false"}, nil, true)
	require.NoError(t, err)
	assert.True(t, *f.tei.jsonOutput)
	assert.False(t, *f.tei.disableSpans)
	assert.True(t, cfg.Pin)
	assert.False(t, cfg.Warmup)
	// A word after a boolean flag that is not a boolean is still refused.
	_, _, err = teiConfig([]string{"--model-id", "x", "--auto-truncate", "sideways"}, nil, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unexpected argument "sideways"`)
	// Variables: clap's boolean words, nothing else.
	for v, want := range map[string]bool{"true": true, "1": true, "yes": true, "on": true, "false": false, "0": false, "no": false, "off": false} {
		f, _, err := teiConfig(nil, map[string]string{"MODEL_ID": "x", "JSON_OUTPUT": v}, true)
		if assert.NoError(t, err, v) {
			assert.Equal(t, want, *f.tei.jsonOutput, v)
		}
	}
}

// TestTEIHostnamePod: HOSTNAME as a container runtime sets it (the pod's
// name, this machine's name) listens on 0.0.0.0 as TEI, with a note.
func TestTEIHostnamePod(t *testing.T) {
	old := osHostname
	t.Cleanup(func() { osHostname = old })
	osHostname = func() (string, error) { return "tei-5f7d9c8b4-x2x7q", nil }
	f, _, err := teiConfig(nil, map[string]string{"MODEL_ID": "x", "HOSTNAME": "tei-5f7d9c8b4-x2x7q", "PORT": "80"}, true)
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:80", f.listen)
	assert.Equal(t, "0.0.0.0:9000", f.promListen)
	assert.Contains(t, strings.Join(f.notes, "\n"), "this machine's name")
	// With "serve" and --addr, HOSTNAME plays no part.
	f, _, err = teiConfig([]string{"--addr", "127.0.0.1:0"}, map[string]string{"MODEL_ID": "x", "HOSTNAME": "not-a-host.invalid"}, false)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", f.listen)
}

// startRun runs "int8bert args..." in this process with ctx and returns
// the URLs of the lines that start with prefix (from plain lines or
// --json-output's records), once n of them are out.
func startRun(t *testing.T, ctx context.Context, args []string, n int) ([]string, <-chan error) {
	t.Helper()
	t.Setenv("INT8BERT_TUNING_CACHE", "off")
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := run(ctx, args, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		errc <- err
	}()
	urls := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			var rec struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
				line = "json: " + rec.Msg
			}
			if _, rest, ok := strings.Cut(line, " on http://"); ok {
				u, _, _ := strings.Cut(rest, " ")
				u = "http://" + strings.TrimSuffix(u, "/metrics")
				if strings.HasPrefix(line, "json: ") {
					u = "json " + u
				}
				urls <- u
			}
		}
	}()
	var got []string
	for len(got) < n {
		select {
		case u := <-urls:
			got = append(got, u)
		case err := <-errc:
			t.Fatalf("int8bert %v ended before listening: %v", args, err)
		case <-time.After(2 * time.Minute):
			t.Fatalf("int8bert %v did not listen within 2 minutes", args)
		}
	}
	return got, errc
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// clearTEIEnv unsets every TEI variable for the test (the machine's own
// HOSTNAME among them).
func clearTEIEnv(t *testing.T) {
	for _, s := range teiSettings {
		t.Setenv(s.env(), "")
	}
}

// TestTEIServeFromEnv: "int8bert" with nothing but TEI's variables
// serves as TEI's router would: MODEL_ID, HOSTNAME, PORT, the metrics on
// PROMETHEUS_PORT, JSON logs on stdout, the batch settings in /info.
func TestTEIServeFromEnv(t *testing.T) {
	clearTEIEnv(t)
	for k, v := range map[string]string{"MODEL_ID": sst2Mini, "HOSTNAME": "127.0.0.1", "PORT": "0", "PROMETHEUS_PORT": "0",
		"MAX_BATCH_TOKENS": "2048", "MAX_CLIENT_BATCH_SIZE": "4", "AUTO_TRUNCATE": "false", "JSON_OUTPUT": "true",
		"TOKENIZATION_WORKERS": "1", "SERVED_MODEL_NAME": "org/sst2"} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls, errc := startRun(t, ctx, nil, 2)
	for i, u := range urls {
		var ok bool
		urls[i], ok = strings.CutPrefix(u, "json ")
		assert.True(t, ok, "JSON_OUTPUT: the line of %s is a JSON record", u)
	}
	code, body := getBody(t, urls[0]+"/health")
	assert.Equal(t, 200, code, body)
	code, body = getBody(t, urls[0]+"/info")
	require.Equal(t, 200, code, body)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &info))
	assert.EqualValues(t, 2048, info["max_batch_tokens"])
	assert.EqualValues(t, 4, info["max_client_batch_size"])
	assert.EqualValues(t, 1, info["tokenization_workers"])
	assert.Equal(t, false, info["auto_truncate"])
	assert.Contains(t, body, `"name":"org/sst2"`)
	code, body = getBody(t, urls[1]+"/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "int8bert_requests_total")
	cancel()
	select {
	case err := <-errc:
		assert.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

// TestTEIInvocation: TEI's documented command lines (docs quick_tour.md,
// local_cpu.md: "--model-id $model --port 8080") run as serve without
// the word, and "--flag false" forms among them.
func TestTEIInvocation(t *testing.T) {
	clearTEIEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls, errc := startRun(t, ctx, []string{"--model-id", sst2Mini, "--hostname", "127.0.0.1", "--port", "0",
		"--prometheus-port", "0", "--auto-truncate", "false", "--max-batch-tokens", "1024"}, 2)
	code, body := getBody(t, urls[0]+"/info")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `"auto_truncate":false`)
	assert.Contains(t, body, `"max_batch_tokens":1024`)
	assert.Contains(t, body, `"name":"`+sst2Mini+`"`, "TEI's served name is --model-id as given")
	cancel()
	require.NoError(t, <-errc)

	// A bad value stops TEI's form before anything loads.
	err := run(context.Background(), []string{"--model-id", sst2Mini, "--dtype", "float16"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "float16")
	err = run(context.Background(), []string{"--model-idd", sst2Mini}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "model-idd"), err.Error())
	assert.False(t, errors.Is(err, nil))
}

// TestTEISettingsSorted keeps teiSettings in main.rs's order, so that
// the table reads as TEI's --help.
func TestTEISettingsSorted(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "serve", "testdata", "tei-v1.9.3", "main.rs"))
	require.NoError(t, err)
	pos := make([]int, len(teiSettings))
	for i, s := range teiSettings {
		pos[i] = strings.Index(string(b), "\n    "+s.field+":")
		require.Positive(t, pos[i], s.field)
	}
	assert.True(t, sort.IntsAreSorted(pos))
}

// teiK8sContainer is what TestKubernetesTEIDeployment reads of a
// Deployment's container.
type teiK8sContainer struct {
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Readiness *k8sProbe `yaml:"readinessProbe"`
	Liveness  *k8sProbe `yaml:"livenessProbe"`
	Mounts    []struct {
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// TestKubernetesTEIDeployment: a Deployment written for TEI's image
// (testdata/tei-deployment.yaml) runs serve unchanged: its ports are
// where serve listens with its environment (PORT, TEI's metrics port
// 9000), and serve starts from its arguments and environment, HOSTNAME
// being the pod's name as Kubernetes sets it. The test stands in for the
// pod in two things only: the volume (/data is ../../assets here) and
// the ports, 0 instead of 80 and 9000, which it checks first.
func TestKubernetesTEIDeployment(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "tei-deployment.yaml"))
	require.NoError(t, err)
	var d struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []teiK8sContainer `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(data, &d))
	require.Equal(t, "Deployment", d.Kind)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	c := d.Spec.Template.Spec.Containers[0]
	require.NotEmpty(t, c.Args)
	require.NotEqual(t, "serve", c.Args[0], "TEI's arguments have no command word")
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	const pod = "tei-6d4f8b7c9-q8z2m"
	env["HOSTNAME"] = pod // as the kubelet sets it
	old := osHostname
	t.Cleanup(func() { osHostname = old })
	osHostname = func() (string, error) { return pod, nil }

	// Where the pod listens: the container's ports and probes.
	f, cfg, err := teiConfig(c.Args, env, true)
	require.NoError(t, err)
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	assert.Equal(t, "0.0.0.0:"+ports["http"], f.listen)
	assert.Equal(t, "0.0.0.0:"+ports["metrics"], f.promListen)
	for _, p := range []*k8sProbe{c.Readiness, c.Liveness} {
		require.NotNil(t, p)
		assert.Equal(t, "/health", p.HTTPGet.Path)
		assert.Equal(t, ports["http"], strconv.Itoa(p.HTTPGet.Port))
	}
	assert.Equal(t, 8192, cfg.MaxBatchTokens)
	assert.Equal(t, 64, cfg.MaxClientBatchSize)
	assert.Equal(t, 128, cfg.MaxConcurrentRequests)
	assert.Equal(t, int64(4_000_000), cfg.MaxBodyBytes)
	assert.True(t, cfg.AutoTruncate)
	assert.Equal(t, map[string]string{"HF_HUB_CACHE": "/data"}, f.hubEnv)

	// serve itself, with the volume and the ports of the test.
	clearTEIEnv(t)
	t.Setenv("HF_HUB_CACHE", os.Getenv("HF_HUB_CACHE")) // serve sets it from HUGGINGFACE_HUB_CACHE
	require.Contains(t, c.Mounts[0].MountPath, "/data")
	assets, err := filepath.Abs(filepath.Join("..", "..", "assets"))
	require.NoError(t, err)
	args := append([]string(nil), c.Args...)
	for i, a := range args {
		args[i] = strings.Replace(a, "/data/", assets+"/", 1)
	}
	env["PORT"], env["PROMETHEUS_PORT"] = "0", "0"
	env["HUGGINGFACE_HUB_CACHE"] = t.TempDir()
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urls, errc := startRun(t, ctx, args, 2)
	for i := range urls {
		urls[i] = strings.TrimPrefix(urls[i], "json ") // JSON_OUTPUT=true
		for _, any := range []string{"0.0.0.0", "[::]"} {
			urls[i] = strings.Replace(urls[i], any, "127.0.0.1", 1)
		}
	}
	code, body := getBody(t, urls[0]+"/health")
	assert.Equal(t, 200, code, body)
	code, body = getBody(t, urls[0]+"/info")
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, `"max_batch_tokens":8192`)
	code, body = getBody(t, urls[1]+"/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "int8bert_requests_total")
	cancel()
	require.NoError(t, <-errc)
}

// TestTEIDocsTable: docs/USAGE.md's "Coming from TEI" table has a row per
// TEI setting, with its flag and variable.
func TestTEIDocsTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "USAGE.md"))
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, "## Coming from TEI")
	for _, s := range teiSettings {
		assert.Contains(t, doc, "| `--"+s.flag(), "docs/USAGE.md has no row of --%s", s.flag())
		assert.Contains(t, doc, "| `"+s.env()+"` |", "docs/USAGE.md has no row of %s", s.env())
	}
}

// TestTEIListAndShortForms: --cors-allow-origin repeats (its variable is
// comma-separated), -p is --port, and "--" ends boolArgs' rewriting.
func TestTEIListAndShortForms(t *testing.T) {
	_, c, err := teiConfig([]string{"--model-id", "x", "--cors-allow-origin", "https://a.example", "--cors-allow-origin=https://b.example"}, nil, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"https://a.example", "https://b.example"}, c.CORSAllowOrigin)
	_, c, err = teiConfig(nil, map[string]string{"MODEL_ID": "x", "CORS_ALLOW_ORIGIN": "https://a.example, https://b.example"}, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"https://a.example", "https://b.example"}, c.CORSAllowOrigin)
	f, _, err := teiConfig([]string{"--model-id", "x", "-p", "8088"}, map[string]string{"PORT": "80"}, true)
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:8088", f.listen, "-p beats PORT")
	fs := serveFlagSet()
	assert.Equal(t, []string{"--pin=true", "--", "--warmup", "false"}, boolArgs(fs, []string{"--pin", "true", "--", "--warmup", "false"}))
	assert.Equal(t, []string{"--model", "true"}, boolArgs(fs, []string{"--model", "true"}), "not a boolean flag")
}
