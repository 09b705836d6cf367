package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/int8bert/int8bert/dnnl"
)

func TestInfoJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"info", "-json"}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var r infoReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("info -json is not JSON: %v\n%s", err, out.String())
	}
	if r.Paths.Int8 == "" || r.Paths.FP32 == "" {
		t.Errorf("missing paths: %+v", r.Paths)
	}
	if r.DNNL.Available != dnnl.Available {
		t.Errorf("onednn.available = %v in a build where dnnl.Available = %v", r.DNNL.Available, dnnl.Available)
	}
	if !r.DNNL.Available && !strings.Contains(r.DNNL.Reason, "not available") {
		t.Errorf("no reason given for oneDNN being unavailable: %q", r.DNNL.Reason)
	}
}

func TestInfoText(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"info"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpu:", "amx:", "paths:", "oneDNN:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("info output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"info", "extra"}, {"bench"}, {"bench", "gemm", "-threads", "0"}, {"bench", "gemm", "-bogus"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestBenchGEMMJSON(t *testing.T) {
	if !dnnl.Available {
		var out, errb bytes.Buffer
		err := run(context.Background(), []string{"bench", "gemm", "-json", "-time", "1ms"}, &out, &errb)
		if err == nil {
			t.Fatal("bench gemm without oneDNN succeeded; it has nothing to measure yet")
		}
		t.Logf("without oneDNN: %v", err)
		return
	}
	if testing.Short() {
		t.Skip("bench gemm takes seconds; run without -short")
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"bench", "gemm", "-json", "-time", "1ms"}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var r struct {
		Results []struct {
			Shape, DType, Backend string
			GOPS                  float64 `json:"gops"`
			VsF32                 float64 `json:"vs_f32"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 14 {
		t.Fatalf("%d results, want 14 (7 shapes x f32, int8)", len(r.Results))
	}
	for _, x := range r.Results {
		if !(x.GOPS > 0) || !(x.VsF32 > 0) || x.Backend != "onednn" {
			t.Errorf("bad result %+v", x)
		}
	}
}
