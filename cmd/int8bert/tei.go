package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// TEI's settings (text-embeddings-inference v1.9.3's router/src/main.rs,
// vendored as serve/testdata/tei-v1.9.3/main.rs): every field of its Args
// is a flag --kebab-case and a variable SCREAMING_SNAKE_CASE, and serve
// takes each under both names (docs/USAGE.md, "Coming from TEI").
// Flags beat variables; a TEI flag and ours naming one setting, both on
// the command line with different values, are refused.

// teiSetting is one field of TEI's Args.
type teiSetting struct {
	// field is main.rs's field name (model_id).
	field string
	// ours is our flag of the same setting where its name differs from
	// TEI's ("" for none, or the same name): given, it beats TEI's
	// variable as TEI's own flag would.
	ours string
	// bool: a flag taking --x, --x=true|false and --x true|false.
	bool bool
	// how serve honours it, for docs/USAGE.md's table and -h.
	how string
}

// flag is the setting's flag name (model-id).
func (s teiSetting) flag() string { return strings.ReplaceAll(s.field, "_", "-") }

// env is the setting's environment variable (MODEL_ID).
func (s teiSetting) env() string { return strings.ToUpper(s.field) }

// teiUDSPath is TEI's default --uds-path, the only one we accept (we run
// no backend process to talk to over a socket).
const teiUDSPath = "/tmp/text-embeddings-inference-server"

// teiSettings are TEI v1.9.3's settings in main.rs's order (the test
// TestTEIFlagTable checks the list against main.rs).
var teiSettings = []teiSetting{
	{field: "model_id", ours: "model", how: "the one model to serve (a folder or a hub id); --model is ours, for several"},
	{field: "revision", how: "the hub revision (branch, tag or commit) of the models"},
	{field: "tokenization_workers", how: "requests tokenized at once; default, as TEI, the CPUs less one (1 to 64)"},
	{field: "dtype", ours: "precision", how: "float32 is --precision fp32, bfloat16 is bf16 (CPUs with AVX512-BF16); float16 is refused"},
	{field: "served_model_name", how: "the model's name in requests (/v1 \"model\"); default: --model-id as given"},
	{field: "pooling", how: "overrides each model's own pooling, as TEI's: cls, mean, last-token or splade (a ForMaskedLM model's SPLADE vectors on /embed_sparse; splade on another model, or any other value, fails start-up)"},
	{field: "max_concurrent_requests", how: "most requests admitted at once (more: 429); default 512"},
	{field: "max_batch_tokens", how: "most tokens of one batch; default 16384, as TEI"},
	{field: "max_batch_requests", how: "most requests of one batch; default, as TEI, no bound but the tokens'"},
	{field: "max_client_batch_size", how: "most inputs of one request; default 32"},
	{field: "auto_truncate", bool: true, how: "cut inputs longer than the model takes; default true, as TEI 1.9"},
	{field: "default_prompt_name", how: "the prompt (by name, config_sentence_transformers.json) of inputs that name none"},
	{field: "default_prompt", how: "the prompt text of inputs that name none; not with --default-prompt-name"},
	{field: "dense_path", how: "refused at start-up: the Dense module is read from modules.json only"},
	{field: "hf_api_token", how: "deprecated name of --hf-token (a warning is logged); not with it"},
	{field: "hf_token", how: "the Hugging Face hub token; default: $HF_HOME/token if it exists"},
	{field: "hostname", how: "the address to listen on (see below for names); default 0.0.0.0"},
	{field: "port", how: "the port to listen on (also -p); default 3000 (80 in the image, as TEI's)"},
	{field: "uds_path", how: "accepted only as TEI's default " + teiUDSPath + " (no backend socket here)"},
	{field: "huggingface_hub_cache", how: "the hub cache folder (as HF_HUB_CACHE)"},
	{field: "payload_limit", ours: "max-body-bytes", how: "largest request body in bytes (more: 413); default 2000000"},
	{field: "api_key", how: "the Bearer token the routes require"},
	{field: "json_output", bool: true, how: "logs as JSON lines on stdout (slog's JSON handler)"},
	{field: "disable_spans", bool: true, how: "accepted: our logs carry no spans, as with it set"},
	{field: "otlp_endpoint", how: "refused at start-up: no OpenTelemetry export"},
	{field: "otlp_service_name", how: "accepted (used only with --otlp-endpoint, which is refused)"},
	{field: "prometheus_port", how: "/metrics also on this port (same hostname); default 9000 in TEI's form, none with \"serve\""},
	{field: "cors_allow_origin", how: "the CORS origins, repeatable (the variable: comma-separated)"},
}

// teiFlags are the TEI flags that are not also ours, bound by
// addTEIFlags.
type teiFlags struct {
	modelID, revision, dtype, servedName, promptName, prompt, densePath *string
	hfAPIToken, hfToken, hostname, udsPath, hubCache, apiKey            *string
	otlpEndpoint, otlpService                                           *string
	port, prometheusPort                                                *int
	payloadLimit                                                        *int64
	jsonOutput, disableSpans                                            *bool
	cors                                                                stringList
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// addTEIFlags adds the TEI flags serve has no name of its own for (the
// others, --max-batch-tokens and the like, are ours under TEI's name).
func (f *serveFlags) addTEIFlags() {
	fs, t := f.fs, &f.tei
	t.modelID = fs.String("model-id", "", "TEI: the model to serve, a folder or a hub id (or MODEL_ID; --model is ours)")
	t.revision = fs.String("revision", "", "TEI: the hub revision of the models: a branch, tag or commit (or REVISION)")
	t.dtype = fs.String("dtype", "", "TEI: float32 (--precision fp32) or bfloat16 (bf16) (or DTYPE)")
	t.servedName = fs.String("served-model-name", "", "TEI: the model's name in requests (or SERVED_MODEL_NAME; default: --model-id)")
	t.promptName = fs.String("default-prompt-name", "", "TEI: the prompt, by name, of inputs that name none (or DEFAULT_PROMPT_NAME)")
	t.prompt = fs.String("default-prompt", "", "TEI: the prompt text of inputs that name none (or DEFAULT_PROMPT)")
	t.densePath = fs.String("dense-path", "", "TEI: refused (the Dense module is read from modules.json) (or DENSE_PATH)")
	t.hfAPIToken = fs.String("hf-api-token", "", "TEI: deprecated name of --hf-token (or HF_API_TOKEN)")
	t.hfToken = fs.String("hf-token", "", "TEI: the Hugging Face hub token (or HF_TOKEN; default: $HF_HOME/token)")
	t.hostname = fs.String("hostname", "", "TEI: the address to listen on (or HOSTNAME; default 0.0.0.0; not with --addr)")
	t.port = fs.Int("port", 0, "TEI: the port to listen on (or PORT; default 3000, or --addr's; not with --addr)")
	fs.Var(intAlias{t.port}, "p", "TEI: short for --port")
	t.udsPath = fs.String("uds-path", teiUDSPath, "TEI: only its default is accepted (or UDS_PATH)")
	t.hubCache = fs.String("huggingface-hub-cache", "", "TEI: the hub cache folder (or HUGGINGFACE_HUB_CACHE)")
	t.payloadLimit = fs.Int64("payload-limit", 2_000_000, "TEI: largest request body in bytes (or PAYLOAD_LIMIT; --max-body-bytes is ours)")
	t.apiKey = fs.String("api-key", "", "TEI: the Bearer token requests must carry (or API_KEY)")
	t.jsonOutput = fs.Bool("json-output", false, "TEI: logs as JSON lines on stdout (or JSON_OUTPUT)")
	t.disableSpans = fs.Bool("disable-spans", false, "TEI: accepted; our logs carry no spans (or DISABLE_SPANS)")
	t.otlpEndpoint = fs.String("otlp-endpoint", "", "TEI: refused, no OpenTelemetry export (or OTLP_ENDPOINT)")
	t.otlpService = fs.String("otlp-service-name", "text-embeddings-inference.server", "TEI: accepted, used only with --otlp-endpoint (or OTLP_SERVICE_NAME)")
	t.prometheusPort = fs.Int("prometheus-port", 9000, "TEI: serve /metrics also on this port (or PROMETHEUS_PORT; TEI's form: default 9000)")
	fs.Var(&t.cors, "cors-allow-origin", "TEI: a CORS origin, repeatable (or CORS_ALLOW_ORIGIN, comma-separated)")
}

// intAlias is a second name of an int flag.
type intAlias struct{ p *int }

func (a intAlias) String() string {
	if a.p == nil {
		return "0"
	}
	return strconv.Itoa(*a.p)
}

func (a intAlias) Set(v string) error {
	n, err := strconv.ParseInt(v, 0, strconv.IntSize)
	if err != nil {
		return errors.New("parse error")
	}
	*a.p = int(n)
	return nil
}

// boolArgs rewrites "--flag true" and "--flag false" of fs's boolean
// flags into "--flag=true" ("--flag false" would otherwise end the flags
// at "false"), up to "--".
func boolArgs(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		name, ok := flagName(a)
		if !ok || strings.Contains(a, "=") || i+1 == len(args) {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if bf, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool || !bf.IsBoolFlag() {
			continue
		}
		if v, err := strconv.ParseBool(args[i+1]); err == nil {
			out[len(out)-1] = a + "=" + strconv.FormatBool(v)
			i++
		}
	}
	return out
}

// envBool reads a boolean variable as clap does a flag's (false: "",
// 0, f, false, n, no, off; true: 1, t, true, y, yes, on), refusing
// anything else.
func envBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "f", "false", "n", "no", "off":
		return false, nil
	case "1", "t", "true", "y", "yes", "on":
		return true, nil
	}
	return false, fmt.Errorf("want true or false")
}

// applyTEIEnv sets each TEI setting given neither by its flag nor by our
// flag of the same setting from its environment variable (an empty
// variable counts as unset, as clap has it). given are the flags of the
// command line.
func applyTEIEnv(fs *flag.FlagSet, given map[string]bool, getenv func(string) string) error {
	for _, s := range teiSettings {
		if given[s.flag()] || (s.ours != "" && given[s.ours]) || (s.field == "port" && given["p"]) {
			continue
		}
		v := getenv(s.env())
		if v == "" {
			continue
		}
		if s.field == "model_id" && given["model"] {
			continue // refused in config, naming both
		}
		var err error
		switch {
		case s.bool:
			var b bool
			if b, err = envBool(v); err == nil {
				err = fs.Set(s.flag(), strconv.FormatBool(b))
			}
		case s.field == "cors_allow_origin":
			for _, o := range strings.Split(v, ",") {
				if o = strings.TrimSpace(o); o != "" && err == nil {
					err = fs.Set(s.flag(), o)
				}
			}
		default:
			if err = fs.Set(s.flag(), v); err == nil {
				err = checkNumber(fs.Name(), fs.Lookup(s.flag()))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: environment %s=%q: %w", fs.Name(), s.env(), v, err)
		}
	}
	return nil
}

// osHostname is os.Hostname (a variable for the tests of a pod's name).
var osHostname = os.Hostname

// listenHost turns a --hostname (or HOSTNAME) into the host to listen
// on. TEI parses it as an IP address and listens on 0.0.0.0 when it is
// not one, so that the HOSTNAME every container runtime sets (the pod's
// name) does no harm; serve does the same for this machine's own name,
// listens on another name that resolves (TEI: 0.0.0.0 with a warning),
// and refuses a name that does not.
func listenHost(h string, note func(string)) (string, error) {
	h = strings.TrimSpace(h)
	if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
		return ip.String(), nil
	}
	if own, err := osHostname(); err == nil && strings.EqualFold(own, h) {
		note(fmt.Sprintf("hostname %q is this machine's name (a container's or pod's HOSTNAME): listening on 0.0.0.0, as TEI", h))
		return "0.0.0.0", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupHost(ctx, h); err != nil {
		return "", fmt.Errorf("serve: --hostname (or HOSTNAME) %q: not an IP address, not this machine's name, and it does not resolve: %w", h, err)
	}
	return h, nil
}
