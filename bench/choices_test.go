package bench

import (
	"context"
	"github.com/int8bert/int8bert/models"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/selector"
	"github.com/int8bert/int8bert/smoothquant"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forwardEveryPrecision runs a tiny BERT through sel at FP32, then
// quantizes it (calibration included) to INT8 static and dynamic and runs
// those too: every GEMM a forward pass and a calibration make.
func forwardEveryPrecision(t *testing.T, sel *selector.Selector) {
	t.Helper()
	// INT8 attention's products too, on every tier: where it does not pay
	// the default keeps attention in FP32 (docs/DESIGN.md section 3.10).
	t.Setenv(models.EnvAttention, "int8")
	a := tinyArchOf(t, "bert-base")
	a.Config.NumHiddenLayers = 1
	m, err := models.New(RandomWeights(a, models.TaskSequenceClassification, 5), a.Config, models.Options{Selector: sel, Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	ec, err := a.ModelConfig()
	require.NoError(t, err)
	in := randomInputs(ec, 2, 9, 7)
	_, err = m.Forward(context.Background(), in, false)
	require.NoError(t, err, "fp32 forward")
	calib := []*models.Inputs{randomInputs(ec, 2, 12, 8), randomInputs(ec, 1, 20, 9)}
	for _, p := range []models.Precision{models.PrecisionInt8Static, models.PrecisionInt8Dynamic} {
		q, err := m.QuantizeInputs(context.Background(), calib, p, models.QuantizeOptions{Options: smoothquant.Options{Alpha: 0.5}})
		require.NoError(t, err, "quantize %s", p)
		_, err = q.Forward(context.Background(), in, false)
		require.NoError(t, err, "%s forward", p)
		require.NoError(t, q.Close())
	}
}

// requireCalibrationChoices checks that the calibration's GEMMs went
// through the selector: the simulated u8 x s8 ones (static and dynamic, no
// bias) and the FP32 reference (no epilogue), which no forward pass runs.
func requireCalibrationChoices(t *testing.T, choices []selector.Choice) {
	t.Helper()
	has := func(prefix, ep string) bool {
		return slices.ContainsFunc(choices, func(ch selector.Choice) bool {
			return strings.HasPrefix(ch.Key, prefix+" ") && strings.Contains(ch.Key, " ep="+ep+" ")
		})
	}
	assert.True(t, has(selector.OpU8S8, "zp+scale+colscale/f32"), "no static calibration GEMM among the choices")
	assert.True(t, has(selector.OpU8S8, "zp+rowscale+colscale/f32"), "no dynamic calibration GEMM among the choices")
	assert.True(t, has(selector.OpF32, "none/f32"), "no FP32 calibration reference among the choices")
}

// opsOf returns the operations of the keys of choices.
func opsOf(choices []selector.Choice) []string {
	var ops []string
	for _, ch := range choices {
		op, _, _ := strings.Cut(ch.Key, " ") // Key.String starts with the operation
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	return ops
}

// TestForcedGenericEverywhere checks that INT8BERT_KERNEL=generic holds for
// every GEMM of an FP32, INT8-static and INT8-dynamic forward pass and of
// the calibration, attention's products included: the selector's record
// of choices names the generic kernels only, and covers every operation.
func TestForcedGenericEverywhere(t *testing.T) {
	t.Setenv(selector.EnvKernel, "generic")
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, RepTime: 100 * time.Microsecond})
	require.NoError(t, err)
	defer sel.Close()
	forwardEveryPrecision(t, sel)
	choices := sel.Choices()
	require.NotEmpty(t, choices)
	for _, ch := range choices {
		assert.Equal(t, cpu.ISAGeneric, ch.ISA, "%s ran %s", ch.Key, ch.Kernel)
		assert.Equal(t, "generic", ch.Forced, ch.Key)
	}
	assert.Equal(t, []string{selector.OpF32, selector.OpF32Kernel, selector.OpU8S8, selector.OpU8S8Kernel}, opsOf(choices))
	requireCalibrationChoices(t, choices)
}

// TestCPUDisableEverywhere checks that a CPU without AVX2 and AMX (what
// INT8BERT_CPU_DISABLE=avx2,amx makes of cpu.X86, here through
// Options.Features) runs no native kernel but the generic ones anywhere: in
// the linears, in attention and in calibration. oneDNN, which picks its own
// instruction set, may still serve the linears.
func TestCPUDisableEverywhere(t *testing.T) {
	off, err := cpu.X86.Apply("avx2,amx")
	require.NoError(t, err)
	requireGenericOnly(t, &off)
}

// envChild marks the process TestCPUDisableEnvironment starts.
const envChild = "INT8BERT_TEST_CPU_DISABLE_CHILD"

// TestCPUDisableEnvironment is TestCPUDisableEverywhere through the
// environment variable itself: cpu.X86 reads INT8BERT_CPU_DISABLE once at
// start-up, so the test runs itself again in a child process with
// INT8BERT_CPU_DISABLE=avx2,amx, whose selector takes cpu.X86 as it is.
func TestCPUDisableEnvironment(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		require.Equal(t, "avx2,amx", os.Getenv(cpu.EnvDisable))
		require.False(t, cpu.X86.AVX2, "cpu.X86 kept AVX2 under %s", cpu.EnvDisable)
		requireGenericOnly(t, nil)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCPUDisableEnvironment$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"=1", cpu.EnvDisable+"=avx2,amx", selector.EnvKernel+"=", selector.EnvCache+"=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child process:\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestCPUDisableEnvironment", "child process:\n%s", out)
}

// requireGenericOnly runs every precision through a selector on features
// (nil: cpu.X86) and checks that no native kernel but the generic ones
// was chosen or even measured.
func requireGenericOnly(t *testing.T, features *cpu.Features) {
	t.Helper()
	sel, err := selector.New(selector.Options{CachePath: "off", Reps: 1, RepTime: 100 * time.Microsecond, Features: features})
	require.NoError(t, err)
	defer sel.Close()
	forwardEveryPrecision(t, sel)
	choices := sel.Choices()
	for _, ch := range choices {
		assert.Contains(t, []cpu.ISA{cpu.ISAGeneric, selector.OneDNN}, ch.ISA, "%s ran %s", ch.Key, ch.Kernel)
		for _, m := range ch.Measured {
			if m.Backend == selector.BackendNative {
				assert.Contains(t, m.Kernel, "Generic", "%s measured %s on a CPU without AVX2", ch.Key, m.Kernel)
			}
		}
	}
	assert.Equal(t, []string{selector.OpF32, selector.OpF32Kernel, selector.OpU8S8, selector.OpU8S8Kernel}, opsOf(choices))
	requireCalibrationChoices(t, choices)
}
