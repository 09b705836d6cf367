//go:build cgo && !nodnnl

// C shim over oneDNN's C API; see shim.h. Builds against oneDNN 2.x (Debian 12
// ships 2.6.3) and 3.x: every difference between the two is behind
// DNNL_VERSION_MAJOR in this file.
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "oneapi/dnnl/dnnl_version.h"

#if DNNL_VERSION_MAJOR >= 3
#define I8B_V3 1
typedef dnnl_memory_desc_t md_t; // a handle; created and destroyed
typedef const_dnnl_memory_desc_t cmd_t;
#define MD(x) (x)
static dnnl_status_t md_init(md_t *md, int nd, const dnnl_dims_t dims,
        dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    return dnnl_memory_desc_create_with_tag(md, nd, dims, dt, tag);
}
static void md_release(md_t *md) {
    if (*md) dnnl_memory_desc_destroy(*md);
    *md = NULL;
}
#else
#define I8B_V3 0
typedef dnnl_memory_desc_t md_t; // a plain struct
typedef const dnnl_memory_desc_t *cmd_t;
#define MD(x) (&(x))
static dnnl_status_t md_init(md_t *md, int nd, const dnnl_dims_t dims,
        dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    return dnnl_memory_desc_init_by_tag(md, nd, dims, dt, tag);
}
static void md_release(md_t *md) { (void)md; }
#endif

#define CHECK(x)                                                               \
    do {                                                                       \
        dnnl_status_t s_ = (x);                                                \
        if (s_ != dnnl_success) return s_;                                     \
    } while (0)
#define TRY(x)                                                                 \
    do {                                                                       \
        st = (x);                                                              \
        if (st != dnnl_success) goto out;                                      \
    } while (0)

struct i8b_matmul {
    i8b_matmul_config cfg;
    dnnl_engine_t engine; // borrowed: the Go side keeps the engine alive
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    size_t weights_size;
    size_t scratch_size;
    // oneDNN 2.x's int8 matmul does not compute scale*acc + bias (the order
    // the Go API promises, and 3.x's): with scales on 2.x the bias goes in
    // as a binary add post-op placed first. The Go tests check both paths.
    int bias_as_post_op;
    int post_arg_index[I8B_MAX_POST_OPS]; // post-op position in oneDNN
};

static dnnl_data_type_t to_dt(int t) {
    switch (t) {
    case I8B_F32: return dnnl_f32;
    case I8B_BF16: return dnnl_bf16;
    case I8B_S8: return dnnl_s8;
    case I8B_U8: return dnnl_u8;
    case I8B_S32: return dnnl_s32;
    }
    return dnnl_data_type_undef;
}

// --- threads -----------------------------------------------------------------

typedef void (*omp_set_fn)(int);
static omp_set_fn omp_set_num_threads_p;
static pthread_once_t omp_once = PTHREAD_ONCE_INIT;

// oneDNN's OpenMP runtime is whatever libdnnl was linked with (libgomp for
// Debian, libiomp5 for some builds); find its omp_set_num_threads at run time
// rather than linking a second OpenMP runtime into the process.
static void omp_lookup(void) {
    omp_set_num_threads_p = (omp_set_fn)dlsym(RTLD_DEFAULT, "omp_set_num_threads");
}

static void set_threads(int n) {
    if (n <= 0) return;
    pthread_once(&omp_once, omp_lookup);
    if (omp_set_num_threads_p) omp_set_num_threads_p(n);
}

// --- live handles ------------------------------------------------------------

// What the shim has created and not yet destroyed, counted with relaxed
// atomics (a handle may be released on any thread: the Go runtime's cleanup
// goroutine releases the ones dropped without Close). Read by i8b_live.
static long live_engines, live_matmuls, live_layouts, live_allocs;

static void live_add(long *c, long d) { __atomic_fetch_add(c, d, __ATOMIC_RELAXED); }

void i8b_live(i8b_live_counts *out) {
    out->engines = __atomic_load_n(&live_engines, __ATOMIC_RELAXED);
    out->matmuls = __atomic_load_n(&live_matmuls, __ATOMIC_RELAXED);
    out->layouts = __atomic_load_n(&live_layouts, __ATOMIC_RELAXED);
    out->allocs = __atomic_load_n(&live_allocs, __ATOMIC_RELAXED);
}

// --- engine and info ---------------------------------------------------------

dnnl_status_t i8b_engine_create(dnnl_engine_t *engine) {
    dnnl_status_t st = dnnl_engine_create(engine, dnnl_cpu, 0);
    if (st == dnnl_success) live_add(&live_engines, 1);
    return st;
}

dnnl_status_t i8b_engine_destroy(dnnl_engine_t engine) {
    dnnl_status_t st = dnnl_engine_destroy(engine);
    if (st == dnnl_success) live_add(&live_engines, -1);
    return st;
}

// 3.0 renamed dnnl_cpu_isa_all (no cap: every ISA the CPU has) to
// dnnl_cpu_isa_default; same value, 0.
#if I8B_V3
#define I8B_DNNL_ISA_ALL dnnl_cpu_isa_default
#else
#define I8B_DNNL_ISA_ALL dnnl_cpu_isa_all
#endif

static int isa_from_dnnl(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case I8B_DNNL_ISA_ALL: return I8B_ISA_ALL;
    case dnnl_cpu_isa_sse41: return I8B_ISA_SSE41;
    case dnnl_cpu_isa_avx: return I8B_ISA_AVX;
    case dnnl_cpu_isa_avx2: return I8B_ISA_AVX2;
    case dnnl_cpu_isa_avx2_vnni: return I8B_ISA_AVX2_VNNI;
    case dnnl_cpu_isa_avx512_core: return I8B_ISA_AVX512_CORE;
    case dnnl_cpu_isa_avx512_core_vnni: return I8B_ISA_AVX512_CORE_VNNI;
    case dnnl_cpu_isa_avx512_core_bf16: return I8B_ISA_AVX512_CORE_BF16;
    case dnnl_cpu_isa_avx512_core_amx: return I8B_ISA_AVX512_CORE_AMX;
#if I8B_V3
    // Levels 3.x added above the common ones: report the common level they
    // contain, as 2.x does on the same CPU.
    case dnnl_cpu_isa_avx2_vnni_2: return I8B_ISA_AVX2_VNNI;
    case dnnl_cpu_isa_avx512_core_fp16: return I8B_ISA_AVX512_CORE_BF16;
    case dnnl_cpu_isa_avx512_core_amx_fp16: return I8B_ISA_AVX512_CORE_AMX;
#endif
    default: return I8B_ISA_OTHER;
    }
}

static int isa_to_dnnl(int isa, dnnl_cpu_isa_t *out) {
    switch (isa) {
    case I8B_ISA_ALL: *out = I8B_DNNL_ISA_ALL; return 1;
    case I8B_ISA_SSE41: *out = dnnl_cpu_isa_sse41; return 1;
    case I8B_ISA_AVX: *out = dnnl_cpu_isa_avx; return 1;
    case I8B_ISA_AVX2: *out = dnnl_cpu_isa_avx2; return 1;
    case I8B_ISA_AVX2_VNNI: *out = dnnl_cpu_isa_avx2_vnni; return 1;
    case I8B_ISA_AVX512_CORE: *out = dnnl_cpu_isa_avx512_core; return 1;
    case I8B_ISA_AVX512_CORE_VNNI: *out = dnnl_cpu_isa_avx512_core_vnni; return 1;
    case I8B_ISA_AVX512_CORE_BF16: *out = dnnl_cpu_isa_avx512_core_bf16; return 1;
    case I8B_ISA_AVX512_CORE_AMX: *out = dnnl_cpu_isa_avx512_core_amx; return 1;
    }
    return 0;
}

void i8b_get_info(i8b_info *info) {
    const dnnl_version_t *v = dnnl_version();
    info->major = v->major;
    info->minor = v->minor;
    info->patch = v->patch;
    info->hash = v->hash;
    info->cpu_runtime = v->cpu_runtime;
    info->effective_isa = isa_from_dnnl(dnnl_get_effective_cpu_isa());
}

dnnl_status_t i8b_set_max_isa(int isa) {
    dnnl_cpu_isa_t d;
    if (!isa_to_dnnl(isa, &d)) return dnnl_invalid_arguments;
    return dnnl_set_max_cpu_isa(d);
}

// --- matmul ------------------------------------------------------------------

static dnnl_status_t append_eltwise(dnnl_post_ops_t po, dnnl_alg_kind_t alg,
        float alpha, float beta) {
#if I8B_V3
    return dnnl_post_ops_append_eltwise(po, alg, alpha, beta);
#else
    return dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta);
#endif
}

static dnnl_status_t append_sum(dnnl_post_ops_t po, float scale) {
#if I8B_V3
    return dnnl_post_ops_append_sum(po, scale, 0, dnnl_data_type_undef);
#else
    return dnnl_post_ops_append_sum(po, scale);
#endif
}

static dnnl_status_t append_binary(dnnl_post_ops_t po, dnnl_alg_kind_t alg,
        int64_t m, int64_t n, int shape) {
    dnnl_dims_t dims = {1, n};
    if (shape == I8B_BIN_COL) {
        dims[0] = m;
        dims[1] = 1;
    } else if (shape == I8B_BIN_FULL) {
        dims[0] = m;
    } else if (shape != I8B_BIN_ROW) {
        return dnnl_invalid_arguments;
    }
    md_t md;
    memset(&md, 0, sizeof(md));
    CHECK(md_init(&md, 2, dims, dnnl_f32, dnnl_ab));
    dnnl_status_t st = dnnl_post_ops_append_binary(po, alg, MD(md));
    md_release(&md);
    return st;
}

static int is_int(int dt) { return dt == I8B_S8 || dt == I8B_U8; }

dnnl_status_t i8b_matmul_create(dnnl_engine_t engine,
        const i8b_matmul_config *cfg, i8b_matmul **out) {
    dnnl_status_t st = dnnl_success;
    *out = NULL;
    if (cfg->n_post_ops < 0 || cfg->n_post_ops > I8B_MAX_POST_OPS
            || cfg->k <= 0 || cfg->n <= 0)
        return dnnl_invalid_arguments;
    i8b_matmul *mm = calloc(1, sizeof(*mm));
    if (!mm) return dnnl_out_of_memory;
    live_add(&live_matmuls, 1); // i8b_matmul_destroy, also on failure below
    mm->cfg = *cfg;
    mm->engine = engine;

    int64_t m = cfg->m > 0 ? cfg->m : DNNL_RUNTIME_DIM_VAL;
    dnnl_dims_t src_dims = {m, cfg->k}, wei_dims = {cfg->k, cfg->n},
                dst_dims = {m, cfg->n}, bias_dims = {1, cfg->n};
    md_t src_md, wei_md, dst_md, bias_md;
    memset(&src_md, 0, sizeof(src_md));
    memset(&wei_md, 0, sizeof(wei_md));
    memset(&dst_md, 0, sizeof(dst_md));
    memset(&bias_md, 0, sizeof(bias_md));
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    int scaled = cfg->src_scale || cfg->wei_scales;

    TRY(md_init(&src_md, 2, src_dims, to_dt(cfg->src_dt), dnnl_ab));
    TRY(md_init(&wei_md, 2, wei_dims, to_dt(cfg->wei_dt), dnnl_format_tag_any));
    TRY(md_init(&dst_md, 2, dst_dims, to_dt(cfg->dst_dt), dnnl_ab));
    mm->bias_as_post_op = !I8B_V3 && scaled && cfg->bias;
    if (cfg->bias && !mm->bias_as_post_op)
        TRY(md_init(&bias_md, 2, bias_dims, dnnl_f32, dnnl_ab));

    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
#if I8B_V3
    if (cfg->src_scale) TRY(dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_SRC, 0));
    if (cfg->wei_scales)
        TRY(dnnl_primitive_attr_set_scales_mask(attr, DNNL_ARG_WEIGHTS, 1 << 1));
    if (cfg->src_zero_point)
        TRY(dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_SRC, 0));
#else
    if (scaled) {
        float rt = DNNL_RUNTIME_F32_VAL;
        TRY(dnnl_primitive_attr_set_output_scales(
                attr, 1, cfg->wei_scales ? 1 << 1 : 0, &rt));
    }
    if (cfg->src_zero_point) {
        int32_t rt = DNNL_RUNTIME_S32_VAL;
        TRY(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &rt));
    }
#endif
    TRY(dnnl_post_ops_create(&po));
    int idx = 0;
    if (mm->bias_as_post_op) {
        TRY(append_binary(po, dnnl_binary_add, m, cfg->n, I8B_BIN_ROW));
        idx++;
    }
    for (int i = 0; i < cfg->n_post_ops; i++, idx++) {
        const i8b_post_op *p = &cfg->post_ops[i];
        mm->post_arg_index[i] = idx;
        switch (p->kind) {
        case I8B_PO_GELU_ERF: TRY(append_eltwise(po, dnnl_eltwise_gelu_erf, 0, 0)); break;
        case I8B_PO_GELU_TANH: TRY(append_eltwise(po, dnnl_eltwise_gelu_tanh, 0, 0)); break;
        case I8B_PO_RELU: TRY(append_eltwise(po, dnnl_eltwise_relu, 0, 0)); break;
        case I8B_PO_SUM: TRY(append_sum(po, p->scale)); break;
        case I8B_PO_ADD: TRY(append_binary(po, dnnl_binary_add, m, cfg->n, p->shape)); break;
        case I8B_PO_MUL: TRY(append_binary(po, dnnl_binary_mul, m, cfg->n, p->shape)); break;
        default: st = dnnl_invalid_arguments; goto out;
        }
    }
    if (cfg->dst_quant) {
        // Requantization as the last post-op: x/scale + zero point, then the
        // primitive rounds and saturates to the s8/u8 destination. A linear
        // post-op keeps the order (scale, bias, post-ops, requantize) the
        // same on 2.x and 3.x.
        if (!is_int(cfg->dst_dt) || !(cfg->dst_scale > 0)) {
            st = dnnl_invalid_arguments;
            goto out;
        }
        TRY(append_eltwise(po, dnnl_eltwise_linear, 1.0f / cfg->dst_scale,
                (float)cfg->dst_zero_point));
    }
    TRY(dnnl_primitive_attr_set_post_ops(attr, po));

#if I8B_V3
    TRY(dnnl_matmul_primitive_desc_create(&mm->pd, engine, src_md, wei_md,
            (cfg->bias && !mm->bias_as_post_op) ? bias_md : NULL, dst_md, attr));
#else
    {
        dnnl_matmul_desc_t desc;
        TRY(dnnl_matmul_desc_init(&desc, &src_md, &wei_md,
                (cfg->bias && !mm->bias_as_post_op) ? &bias_md : NULL, &dst_md));
        TRY(dnnl_primitive_desc_create(&mm->pd, &desc, attr, engine, NULL));
    }
#endif
    {
        cmd_t w = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_weights_md, 0);
        cmd_t sp = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_scratchpad_md, 0);
        mm->weights_size = dnnl_memory_desc_get_size(w);
        mm->scratch_size = sp ? dnnl_memory_desc_get_size(sp) : 0;
    }
    TRY(dnnl_primitive_create(&mm->prim, mm->pd));

out:
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    md_release(&src_md);
    md_release(&wei_md);
    md_release(&dst_md);
    md_release(&bias_md);
    if (st != dnnl_success) {
        i8b_matmul_destroy(mm);
        return st;
    }
    *out = mm;
    return dnnl_success;
}

void i8b_matmul_destroy(i8b_matmul *mm) {
    if (!mm) return;
    if (mm->prim) dnnl_primitive_destroy(mm->prim);
    if (mm->pd) dnnl_primitive_desc_destroy(mm->pd);
    free(mm);
    live_add(&live_matmuls, -1);
}

size_t i8b_matmul_weights_size(const i8b_matmul *mm) { return mm->weights_size; }
size_t i8b_matmul_scratchpad_size(const i8b_matmul *mm) { return mm->scratch_size; }

struct i8b_layout {
    md_t md;
};

dnnl_status_t i8b_matmul_layout(const i8b_matmul *mm, i8b_layout **out) {
    cmd_t w = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_weights_md, 0);
    i8b_layout *l = calloc(1, sizeof(*l));
    if (!l) return dnnl_out_of_memory;
#if I8B_V3
    dnnl_status_t st = dnnl_memory_desc_clone(&l->md, w);
    if (st != dnnl_success) {
        free(l);
        return st;
    }
#else
    l->md = *w;
#endif
    live_add(&live_layouts, 1);
    *out = l;
    return dnnl_success;
}

int i8b_layout_equal(const i8b_matmul *mm, const i8b_layout *l) {
    cmd_t w = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_weights_md, 0);
    return dnnl_memory_desc_equal(w, MD(l->md));
}

void i8b_layout_destroy(i8b_layout *l) {
    if (!l) return;
    md_release(&l->md);
    free(l);
    live_add(&live_layouts, -1);
}

const char *i8b_matmul_impl(const i8b_matmul *mm) {
    const char *name = NULL;
    if (dnnl_primitive_desc_query(mm->pd, dnnl_query_impl_info_str, 0, &name)
            != dnnl_success)
        return "";
    return name ? name : "";
}

// Runs a primitive once on the current thread with its own stream.
static dnnl_status_t run(dnnl_engine_t engine, dnnl_primitive_t prim, int nargs,
        const dnnl_exec_arg_t *args) {
    dnnl_stream_t stream = NULL;
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    dnnl_status_t st = dnnl_primitive_execute(prim, stream, nargs, args);
    if (st == dnnl_success) st = dnnl_stream_wait(stream);
    dnnl_stream_destroy(stream);
    return st;
}

dnnl_status_t i8b_matmul_pack_weights(i8b_matmul *mm, int src_dt,
        const void *w_nk, void *packed, int threads) {
    dnnl_status_t st = dnnl_success;
    md_t user_md;
    memset(&user_md, 0, sizeof(user_md));
    dnnl_memory_t user_mem = NULL, packed_mem = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_primitive_attr_t attr = NULL;
    cmd_t want = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_weights_md, 0);

    // Logical dims are (K, N); memory is [N][K], i.e. format tag "ba".
    dnnl_dims_t dims = {mm->cfg.k, mm->cfg.n};
    set_threads(threads);
    TRY(md_init(&user_md, 2, dims, to_dt(src_dt), dnnl_ba));
    TRY(dnnl_memory_create(&user_mem, MD(user_md), mm->engine, (void *)w_nk));
    TRY(dnnl_memory_create(&packed_mem, want, mm->engine, packed));
    TRY(dnnl_primitive_attr_create(&attr));
    TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_library));
    TRY(dnnl_reorder_primitive_desc_create(
            &rpd, MD(user_md), mm->engine, want, mm->engine, attr));
    TRY(dnnl_primitive_create(&reorder, rpd));
    {
        dnnl_exec_arg_t args[2] = {
                {DNNL_ARG_FROM, user_mem}, {DNNL_ARG_TO, packed_mem}};
        TRY(run(mm->engine, reorder, 2, args));
    }
out:
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (user_mem) dnnl_memory_destroy(user_mem);
    if (packed_mem) dnnl_memory_destroy(packed_mem);
    md_release(&user_md);
    return st;
}

#define MAX_ARGS (8 + I8B_MAX_POST_OPS + 1)

// The arguments of one execution and the objects made for them.
typedef struct {
    dnnl_memory_t mems[MAX_ARGS];
    md_t mds[MAX_ARGS];
    dnnl_exec_arg_t args[MAX_ARGS];
    int nm, nd, na;
} arg_list;

// Appends one argument over ptr with the descriptor md.
static dnnl_status_t add_mem_md(arg_list *l, dnnl_engine_t eng, int arg,
        cmd_t md, const void *ptr) {
    if (l->na >= MAX_ARGS) return dnnl_invalid_arguments;
    CHECK(dnnl_memory_create(&l->mems[l->nm], md, eng, (void *)ptr));
    l->args[l->na].arg = arg;
    l->args[l->na].memory = l->mems[l->nm++];
    l->na++;
    return dnnl_success;
}

// Appends one argument: a plain row-major memory of nd dims over ptr.
static dnnl_status_t add_mem(arg_list *l, dnnl_engine_t eng, int arg, int nd,
        int64_t d0, int64_t d1, dnnl_data_type_t dt, const void *ptr) {
    if (l->na >= MAX_ARGS) return dnnl_invalid_arguments;
    dnnl_dims_t dims = {d0, d1};
    CHECK(md_init(&l->mds[l->nd], nd, dims, dt, nd == 1 ? dnnl_a : dnnl_ab));
    l->nd++;
    return add_mem_md(l, eng, arg, MD(l->mds[l->nd - 1]), ptr);
}

dnnl_status_t i8b_matmul_execute(i8b_matmul *mm, const i8b_exec_args *a) {
    const i8b_matmul_config *c = &mm->cfg;
    dnnl_status_t st = dnnl_success;
    int64_t m = c->m > 0 ? c->m : a->m;
    if (m <= 0 || (c->m > 0 && a->m != c->m)) return dnnl_invalid_arguments;

    arg_list l;
    float *out_scales = NULL;
    memset(&l, 0, sizeof(l));

    TRY(add_mem(&l, mm->engine, DNNL_ARG_SRC, 2, m, c->k, to_dt(c->src_dt), a->src));
    {
        cmd_t w = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_weights_md, 0);
        TRY(add_mem_md(&l, mm->engine, DNNL_ARG_WEIGHTS, w, a->weights));
    }
    TRY(add_mem(&l, mm->engine, DNNL_ARG_DST, 2, m, c->n, to_dt(c->dst_dt), a->dst));
    if (c->bias && !mm->bias_as_post_op) {
        if (!a->bias) { st = dnnl_invalid_arguments; goto out; }
        TRY(add_mem(&l, mm->engine, DNNL_ARG_BIAS, 2, 1, c->n, dnnl_f32, a->bias));
    }
    if (mm->scratch_size) {
        cmd_t sp = dnnl_primitive_desc_query_md(mm->pd, dnnl_query_scratchpad_md, 0);
        TRY(add_mem_md(&l, mm->engine, DNNL_ARG_SCRATCHPAD, sp, a->scratchpad));
    }
#if I8B_V3
    if (c->src_scale)
        TRY(add_mem(&l, mm->engine, DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, 1, 1, 0, dnnl_f32, &a->src_scale));
    if (c->wei_scales) {
        if (!a->wei_scales) { st = dnnl_invalid_arguments; goto out; }
        TRY(add_mem(&l, mm->engine, DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, 1, c->n, 0, dnnl_f32, a->wei_scales));
    }
#else
    if (c->src_scale || c->wei_scales) {
        // 2.x has one output scale: src_scale * wei_scale[n].
        int64_t cnt = c->wei_scales ? c->n : 1;
        if (c->wei_scales && !a->wei_scales) { st = dnnl_invalid_arguments; goto out; }
        out_scales = malloc(sizeof(float) * cnt);
        if (!out_scales) { st = dnnl_out_of_memory; goto out; }
        float s = c->src_scale ? a->src_scale : 1.0f;
        for (int64_t j = 0; j < cnt; j++)
            out_scales[j] = c->wei_scales ? s * a->wei_scales[j] : s;
        TRY(add_mem(&l, mm->engine, DNNL_ARG_ATTR_OUTPUT_SCALES, 1, cnt, 0, dnnl_f32, out_scales));
    }
#endif
    if (c->src_zero_point)
        TRY(add_mem(&l, mm->engine, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, 1, 1, 0, dnnl_s32, &a->src_zero_point));
    if (mm->bias_as_post_op) {
        if (!a->bias) { st = dnnl_invalid_arguments; goto out; }
        TRY(add_mem(&l, mm->engine, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, 2, 1, c->n,
                dnnl_f32, a->bias));
    }
    for (int i = 0; i < c->n_post_ops; i++) {
        const i8b_post_op *p = &c->post_ops[i];
        if (p->kind != I8B_PO_ADD && p->kind != I8B_PO_MUL) continue;
        if (!a->binary[i]) { st = dnnl_invalid_arguments; goto out; }
        int64_t d0 = p->shape == I8B_BIN_ROW ? 1 : m;
        int64_t d1 = p->shape == I8B_BIN_COL ? 1 : c->n;
        TRY(add_mem(&l, mm->engine,
                DNNL_ARG_ATTR_MULTIPLE_POST_OP(mm->post_arg_index[i]) | DNNL_ARG_SRC_1,
                2, d0, d1, dnnl_f32, a->binary[i]));
    }
    set_threads(a->threads);
    st = run(mm->engine, mm->prim, l.na, l.args);
out:
    for (int i = 0; i < l.nm; i++) dnnl_memory_destroy(l.mems[i]);
    for (int i = 0; i < l.nd; i++) md_release(&l.mds[i]);
    free(out_scales);
    return st;
}

void *i8b_aligned_alloc(size_t size) {
    if (size == 0) size = 64;
    size = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, size);
    if (p) live_add(&live_allocs, 1);
    return p;
}

void i8b_free(void *p) {
    if (!p) return;
    free(p);
    live_add(&live_allocs, -1);
}
