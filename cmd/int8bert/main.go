// Command int8bert quantizes, evaluates, runs and benchmarks BERT-family
// encoders in INT8 (SmoothQuant W8A8) and FP32, and inspects the host.
//
// Running models (MODEL is a folder or a Hugging Face model id; classify,
// embed and qa read texts from the arguments or, without any, one per line on
// stdin, and write JSON lines, as tokenize does; forward reads and writes
// JSON files):
//
//	int8bert demo [--model MODEL] [--data dev.tsv] [--threads 1] [--seq 128] [--min-time 1s]
//	int8bert classify --model MODEL [--precision P] [--max-length N] [--pairs] [--batch 256] [--max-batch-tokens 2048] [--lenient] [text ...]
//	int8bert embed --model MODEL [--precision P] [--pooling cls|mean|last-token|splade] [--normalize=true] [text ...]
//	int8bert qa --model MODEL --question Q [--precision P] [--n-best 1] [--max-answer-length 30] [--doc-stride 128] [context ...]
//	int8bert fill-mask --model MODEL [--precision P] [--top-k 5] [--targets w1,w2] [text ...]
//	int8bert ner --model MODEL [--precision P] [--aggregation-strategy none] [--ignore-labels O] [--stride N] [text ...]
//	int8bert zero-shot --model MODEL --labels a,b [--precision P] [--hypothesis-template T] [--multi-label] [text ...]
//	int8bert forward --model DIR --inputs FILE.json [--out FILE.json] [--precision P]
//	int8bert tokenize --tokenizer FILE [--pair] [--max-length N] [--pad] [--no-special]
//
// Serving (docs/DESIGN.md section 9):
//
//	int8bert serve --model [NAME=]MODEL ... [--precision P] [--addr :8080] [--instances N] [--threads-per-instance T] [--pin] [--max-batch-tokens 4096] [--max-concurrent-requests 512]
//	int8bert --model-id MODEL [TEI's flags: --port, --hostname, --max-batch-tokens, ...]
//	int8bert bench serve --model MODEL [--clients 1,8,64] [--requests N] [--duration 20s] [--data dev.tsv]
//
// Quantizing and evaluating:
//
//	int8bert quantize --model MODEL --calib FILE --mode static|dynamic --alpha 0.5|auto -o DIR [--range max|percentile] [--fallback-sqnr DB] [-json]
//	int8bert eval --model MODEL --task sst2|mnli|squad --data FILE --precision fp32,int8-static,int8-dynamic [--calib FILE] [-json]
//
// Measuring the host and the kernels:
//
//	int8bert info [-json] [-peak]
//	int8bert info --model MODEL [-json]
//	int8bert bench gemm [-json] [-threads 1] [-reps 5] [-rep-time 20ms] [-peak-time 300ms] [-dtypes int8,fp32] [-shapes MxKxN,...] [-pin=true]
//	int8bert bench model --arch NAME|DIR --seq 256 --batch 1 --threads 1 --precision fp32,int8-static,int8-dynamic [--min-time 2s] [-json] [-cpuprofile F]
//	int8bert tune [-json] [-threads 1] [-cache PATH] [-ops u8s8,f32] [-shapes MxKxN,...] [-epilogues KIND,...]
//	int8bert tune --model MODEL [--max-batch 1] [--max-length N] [--max-tokens N] [--record=true] [-json] [-threads 1] [-cache PATH]
//	int8bert health [--addr HOST:PORT] [--timeout 3s]
//	int8bert help
//
// serve also takes every flag and variable of TEI's router (MODEL_ID,
// PORT, AUTO_TRUNCATE, ...), and "int8bert --model-id X" without the
// word serve runs as TEI's router does (docs/USAGE.md, "Coming from
// TEI"); flags beat variables.
//
// P is fp32, bf16, int8-static or int8-dynamic: an FP32 model is rounded
// to bf16 (a CPU with AVX512-BF16) or quantized at
// load (with --calib for int8-static), an INT8 artifact runs at its own
// precision; the commands that load a model also take the quantize flags
// (--calib, --alpha, --range, --fallback-sqnr). "int8bert <command> -h"
// prints a command's flags.
//
// Flags go before the texts: a flag after them is refused (put "--"
// before texts that start with "-"). classify, embed and qa write one
// JSON object per input line, in order: a blank line gets
// {"line": N, "text": "", "error": "blank line"}, and a line the model
// refuses (invalid UTF-8) is an error naming it, or with --lenient such
// an object, and the command goes on. --threads takes 1 to the number of
// CPUs; --max-length, left out, is the model's longest sequence (at most
// 512), given, 1 to that. A MODEL that looks like a path (./x, ../x, /x,
// a file or folder that exists) is never looked up on the Hugging Face
// hub. The library's notes and warnings (downloads, the tuning cache)
// are logged to stderr. How the figures of info, bench and tune are
// taken: docs/DESIGN.md section 7.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/serve"
)

const usage = `int8bert: INT8 BERT-family encoders on server CPUs

usage:
  int8bert demo [--model DIR-or-id]  quantize a small SST-2 model (shipped in assets/) or a hub model, and
                                 compare FP32, INT8-static and INT8-dynamic: predictions, accuracy, speed
  int8bert info [-json] [-peak]  CPU features, AMX permission, oneDNN version and ISA, measured peak
  int8bert info --model DIR-or-id [-json]
                                 a model's family, task, precision, INT8 recipe and tuning state
  int8bert bench gemm [flags]    every kernel and oneDNN, INT8 and FP32, on the BERT GEMM shapes
  int8bert tune [flags]          choose and cache the fastest correct kernel per BERT GEMM
  int8bert tune --model DIR      tune a model's own GEMMs (its warm-up) and write its tuning record
  int8bert tokenize [flags]      text lines on stdin to JSON ids, type ids, mask and offsets
  int8bert forward --model DIR --inputs FILE.json [--out FILE.json]
                                 run a model on token ids; outputs with Hugging Face's names
  int8bert classify --model DIR-or-id [text ...]     label per text (stdin: one per line)
  int8bert embed --model DIR-or-id [--pooling cls|mean|last-token|splade] [text ...]
  int8bert qa --model DIR-or-id --question Q [context ...]
  int8bert fill-mask --model DIR-or-id [--top-k 5] [--targets w1,w2] [text ...]   the mask tokens' candidates (a ForMaskedLM model)
  int8bert ner --model DIR-or-id [--aggregation-strategy none|simple|first|average|max] [--ignore-labels O] [--stride N] [text ...]
                                 entities per text (a ForTokenClassification model)
  int8bert zero-shot --model DIR-or-id --labels a,b,c [--hypothesis-template T] [--multi-label] [text ...]
                                 candidate labels per text, best first (an NLI classifier)
  int8bert quantize --model DIR-or-id --calib FILE --mode static|dynamic --alpha 0.5|auto -o DIR
                                 SmoothQuant W8A8: calibrate, quantize, write the INT8 artifact
  int8bert eval --model DIR --task sst2|mnli|squad --data FILE --precision fp32,int8-static,int8-dynamic
                                 accuracy (EM/F1 for squad) per precision and agreement with FP32
  int8bert bench model --arch bert-large|bert-base|distilbert|xlmr-base|roberta-base|electra-base|electra-small|DIR --seq 256 [flags]
                                 sequences/s per precision, linear-block time, INT8/FP32 speed-up
  int8bert bench cold --arch NAME|DIR [--calls 200]
                                 the first minutes on an empty tuning cache: warm-up, first calls cold vs warm
  int8bert serve --model [NAME=]DIR-or-id [--precision P] [--addr :8080] [--instances N --threads-per-instance T]
                                 HTTP server, drop-in for text-embeddings-inference: /embed /predict /rerank
                                 /tokenize /v1/embeddings /qa /health /info /metrics, dynamic batching;
                                 TEI's gRPC API too with --grpc-addr HOST:PORT
  int8bert --model-id DIR-or-id [TEI's flags]
                                 serve as TEI's router is run: its flags and variables (MODEL_ID, PORT, ...),
                                 its defaults (0.0.0.0:3000, metrics also on :9000); docs/USAGE.md "Coming from TEI"
  int8bert health [--addr A]     GET http://A/health: exit 0 on 200, else 1 (a container's HEALTHCHECK)
  int8bert help                  this text

Run "int8bert <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// The process-wide selector (what bench and smoothquant run on when
	// given none) is silent in the library; the CLI prints its notes.
	log := newLogger(os.Stderr)
	selector.SetDefaultWarn(func(msg string) { log.Warn(msg, "component", "selector") })
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "int8bert:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if isTerminal(stderr) {
		terminalTuneProgress.Store(&tuneProgress{w: stderr, now: time.Now})
	} else {
		terminalTuneProgress.Store(nil)
	}
	if len(args) == 0 && os.Getenv("MODEL_ID") != "" {
		return runServe(ctx, args, stdout, stderr, true) // TEI's form, from its variables
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "info":
		return runInfo(ctx, args[1:], stdout, stderr)
	case "classify", "embed", "qa", "fill-mask", "ner", "zero-shot":
		return runTask(ctx, args[0], args[1:], os.Stdin, stdout, stderr)
	case "forward":
		return runForward(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "quantize":
		return runQuantize(ctx, args[1:], stdout, stderr)
	case "eval":
		return runEval(ctx, args[1:], stdout, stderr)
	case "tune":
		return runTune(ctx, args[1:], stdout, stderr)
	case "tokenize":
		return runTokenize(ctx, args[1:], os.Stdin, stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr, false)
	case "health":
		return runHealth(ctx, args[1:], stdout, stderr, exitUnhealthy)
	case "-V", "--version", "version":
		ver, rev := serve.Version()
		fmt.Fprintln(stdout, "int8bert", ver, rev)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if strings.HasPrefix(args[0], "-") {
		// TEI's form: "int8bert --model-id X --port 80" is serve with
		// TEI's defaults (docs/USAGE.md, "Coming from TEI").
		return runServe(ctx, args, stdout, stderr, true)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
