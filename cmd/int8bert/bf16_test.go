package main

import (
	"math"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// needBF16 skips, by name, a test of the bf16 precision on a CPU without
// a bf16 path.
func needBF16(t *testing.T) {
	t.Helper()
	if cpu.X86.BF16Path() == cpu.ISANone {
		t.Skipf("%s: this CPU has neither AVX512-BF16 nor AMX-BF16 (%s): the bf16 precision cannot run here", t.Name(), cpu.X86.String())
	}
}

// TestEvalSST2BF16 evaluates the three trained SST-2 models at fp32 and
// bf16: the bf16 accuracy is within 0.3 points of the fp32 one (the whole
// dev set; its first 128 sentences in -short).
func TestEvalSST2BF16(t *testing.T) {
	needBF16(t)
	testTuningCache(t)
	dev := sharedPath(t, "data/sst2/dev.tsv")
	limit := "0"
	if testing.Short() {
		limit = "128"
	}
	for _, m := range []string{"sst2-bert-mini", "sst2-distilbert-mini", "sst2-xlmr-mini"} {
		t.Run(m, func(t *testing.T) {
			model := sharedPath(t, "models/"+m)
			var r evalOutput
			decodeEval(t, mustCLI(t, "eval", "--model", model, "--task", "sst2", "--data", dev, "--limit", limit,
				"--precision", "fp32,bf16", "--batch", "16", "-json"), &r)
			n := 872
			if limit != "0" {
				n = 128
			}
			checkEval(t, &r, "sst2", n, "fp32", "bf16")
			fp, bf := *r.Results[0].Accuracy, *r.Results[1].Accuracy
			t.Logf("%s: fp32 %.4f, bf16 %.4f, agreement %.4f", m, fp, bf, *r.Results[1].Agreement)
			if d := math.Abs(fp-bf) * 100; d > 0.3 {
				t.Errorf("bf16 accuracy %.2f%% is %.2f points from fp32's %.2f%% (at most 0.3)", 100*bf, d, 100*fp)
			}
		})
	}
}

// TestForwardBF16 runs classify at bf16 on a tiny model: it works on a
// CPU with a bf16 path, and elsewhere fails naming AVX512-BF16.
func TestForwardBF16(t *testing.T) {
	fastKernels(t)
	cls := tinyModel(t, "bert-seqcls")
	out, _, err := cli(t, "classify", "--model", cls, "--precision", "bf16", "the cat sat on the mat")
	if cpu.X86.BF16Path() == cpu.ISANone {
		if err == nil || !strings.Contains(err.Error(), "AVX512-BF16") {
			t.Fatalf("classify --precision bf16 on a CPU without bf16: %v, want an error naming AVX512-BF16", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "label") {
		t.Errorf("classify --precision bf16 printed no logits:\n%s", out)
	}
}

// TestTuneModelBF16: tune --model --precision bf16 tunes the bf16
// operation's keys (or, without a bf16 path, fails naming AVX512-BF16).
func TestTuneModelBF16(t *testing.T) {
	fastKernels(t)
	t.Setenv("INT8BERT_KERNEL", "")
	cls := tinyModel(t, "bert-seqcls")
	out, errb, err := cli(t, "tune", "--model", cls, "--precision", "bf16", "--record=false", "--max-length", "8", "--cache", "off", "--reps", "1", "--rep-time", "1ms")
	out += errb // the keys are listed as they are tuned, on stderr
	if cpu.X86.BF16Path() == cpu.ISANone {
		if err == nil || !strings.Contains(err.Error(), "AVX512-BF16") {
			t.Fatalf("tune --precision bf16 on a CPU without bf16: %v, want an error naming AVX512-BF16", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "bf16 m=") {
		t.Errorf("tune --precision bf16 tuned no bf16 key:\n%s", out)
	}
	wantCLIError(t, "calibration", "tune", "--model", cls, "--precision", "int8-static", "--cache", "off")
	wantCLIError(t, "tune --model", "tune", "--ops", "u8s8-kernel", "--cache", "off")
	wantCLIError(t, "unknown operation", "tune", "--ops", "bf17", "--cache", "off")
}
