// Package-private C shim between Go and oneDNN's C API.
//
// Every entry point returns a dnnl_status_t. The shim owns the differences
// between oneDNN 2.x and 3.x (memory descriptors by value or by handle, how
// scales and zero points are attached, the post-op signatures) so that the Go
// side sees one API. All pointers passed in are borrowed for the duration of the
// call only; the shim never keeps a pointer into Go memory.
#ifndef INT8BERT_DNNL_SHIM_H
#define INT8BERT_DNNL_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "oneapi/dnnl/dnnl.h"

#define I8B_MAX_POST_OPS 8

// Post-op kinds, shared with Go (dnnl/cgo/cgo.go).
enum {
    I8B_PO_GELU_ERF = 1,
    I8B_PO_GELU_TANH = 2,
    I8B_PO_RELU = 3,
    I8B_PO_SUM = 4,
    I8B_PO_ADD = 5,
    I8B_PO_MUL = 6,
};

// Shapes of the second operand of a binary post-op.
enum {
    I8B_BIN_ROW = 1,  // [1, N]: one value per output column
    I8B_BIN_COL = 2,  // [M, 1]: one value per output row
    I8B_BIN_FULL = 3, // [M, N]
};

// Data types, shared with Go. Mapped to dnnl_data_type_t in the shim.
enum {
    I8B_F32 = 1,
    I8B_BF16 = 2,
    I8B_S8 = 3,
    I8B_U8 = 4,
    I8B_S32 = 5,
};

typedef struct {
    int kind;    // I8B_PO_*
    int shape;   // I8B_BIN_* for ADD and MUL
    float scale; // for SUM: dst = scale*dst_prev + result
} i8b_post_op;

typedef struct {
    int64_t m; // rows; <= 0 means a runtime dimension
    int64_t k, n;
    int src_dt, wei_dt, dst_dt; // I8B_* types
    int bias;                   // 1: f32 bias of N values
    int src_scale;              // 1: one runtime f32 scale for the source
    int wei_scales;             // 1: N runtime f32 scales for the weights
    int src_zero_point;         // 1: one runtime s32 zero point for the source
    int dst_quant;              // 1: dst = round(x/dst_scale) + dst_zero_point
    float dst_scale;
    int32_t dst_zero_point;
    int n_post_ops;
    i8b_post_op post_ops[I8B_MAX_POST_OPS];
} i8b_matmul_config;

typedef struct i8b_matmul i8b_matmul;

typedef struct {
    int64_t m;
    const void *src;     // [m][k] row-major, src_dt
    const void *weights; // packed by i8b_matmul_pack_weights
    const float *bias;   // [n] or NULL
    void *dst;           // [m][n] row-major, dst_dt; holds the addend for SUM
    float src_scale;
    const float *wei_scales; // [n] or NULL
    int32_t src_zero_point;
    const float *binary[I8B_MAX_POST_OPS]; // operand of post-op i, or NULL
    void *scratchpad;                      // i8b_matmul_scratchpad_size bytes
    int threads;                           // <= 0: leave the runtime's setting
} i8b_exec_args;

typedef struct {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime;
    int effective_isa; // I8B_ISA_*
} i8b_info;

// ISA levels, shared with Go; only levels both oneDNN 2.x and 3.x know.
enum {
    I8B_ISA_ALL = 0,
    I8B_ISA_SSE41 = 1,
    I8B_ISA_AVX = 2,
    I8B_ISA_AVX2 = 3,
    I8B_ISA_AVX2_VNNI = 4,
    I8B_ISA_AVX512_CORE = 5,
    I8B_ISA_AVX512_CORE_VNNI = 6,
    I8B_ISA_AVX512_CORE_BF16 = 7,
    I8B_ISA_AVX512_CORE_AMX = 8,
    I8B_ISA_OTHER = 99,
};

dnnl_status_t i8b_engine_create(dnnl_engine_t *engine);
dnnl_status_t i8b_engine_destroy(dnnl_engine_t engine);
void i8b_get_info(i8b_info *info);
dnnl_status_t i8b_set_max_isa(int isa);

dnnl_status_t i8b_matmul_create(dnnl_engine_t engine,
        const i8b_matmul_config *cfg, i8b_matmul **out);
void i8b_matmul_destroy(i8b_matmul *mm);
size_t i8b_matmul_weights_size(const i8b_matmul *mm);
size_t i8b_matmul_scratchpad_size(const i8b_matmul *mm);
const char *i8b_matmul_impl(const i8b_matmul *mm);

// A copy of a primitive's packed-weights descriptor: weights packed for one
// primitive serve another whose descriptor is equal.
typedef struct i8b_layout i8b_layout;
dnnl_status_t i8b_matmul_layout(const i8b_matmul *mm, i8b_layout **out);
int i8b_layout_equal(const i8b_matmul *mm, const i8b_layout *l);
void i8b_layout_destroy(i8b_layout *l);

// Reorders weights given as [n][k] row-major (a PyTorch Linear weight) of type
// src_dt into the primitive's preferred layout at packed, which must hold
// i8b_matmul_weights_size bytes.
dnnl_status_t i8b_matmul_pack_weights(i8b_matmul *mm, int src_dt,
        const void *w_nk, void *packed, int threads);

dnnl_status_t i8b_matmul_execute(i8b_matmul *mm, const i8b_exec_args *args);

void *i8b_aligned_alloc(size_t size);
void i8b_free(void *p);

// The number of engines, matmuls, layouts and i8b_aligned_alloc blocks
// created and not yet destroyed or freed, process-wide (for the tests that
// check that what Go drops is released).
typedef struct {
    long engines, matmuls, layouts, allocs;
} i8b_live_counts;
void i8b_live(i8b_live_counts *out);

#endif
