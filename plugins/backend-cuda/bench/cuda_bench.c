/* cuda_bench.c — llmrt-cuda-bench: time and achieved bandwidth of every kernel of a Qwen3-8B
 * AWQ (g128) decode step on the CUDA backend, through the plugins exactly as the runtime
 * calls them, against the measured device-to-device copy bandwidth.
 *
 * Method (see NOTES.md): count the bytes each kernel must move (inputs read once, outputs
 * written once); time with CUDA events around a CUDA graph of `batch` back-to-back launches
 * (so host launch overhead is out, as in the decode graph), after a warm-up, median of many
 * repetitions; inputs rotate over enough copies to exceed the L2 several times, so HBM is
 * what is measured. floor = bytes / copy bandwidth; %floor = floor / time.
 *
 * Two step estimates close the table: the decode step as separate kernels (q, k, v, gate,
 * up apart; rmsnorm, rope, kv_store, silu_mul, add each a launch) and as the fused kernels
 * the model uses when the backend has them (qkv and gate_up projections, add_rmsnorm,
 * qk_norm_rope_store, swiglu). --sweep adds rows for the tuning variants (AWQ GEMV
 * K-splitting warps and x staging, decode-attention split sizes, programmatic dependent launch
 * off, sampling on the one-block path), each on a backend / quant instance created with that
 * [backend.cuda] tune, [quant.awq] tune or [backend.cuda] pdl value in its section;
 * --prefill adds prefill-sized rows (AWQ n = 128 and 2048 through dequant + cuBLAS, prefill
 * attention over 2048 tokens); --batch the serving rows: the AWQ batch kernel at n = 16..256
 * (and the same through the GEMV / cuBLAS with [quant.awq] tune mma=0, and its row-warp
 * choices), prefill attention on the tensor cores against the fp32 kernel at 512 and 2048
 * tokens, and decode attention at batch 32..256 (ctx 384, graph bound 40960) with the batch
 * kernel against the splits capped by the batch (att_inv=0). Those rows add TFLOP/s, and
 * their floor is the larger of the bytes at the copy bandwidth and the FLOPs at
 * LLMRT_BENCH_TFLOPS (default 790, the H200's measured dense bf16 rate).
 *
 * usage: llmrt-cuda-bench [--reps N] [--filter SUBSTRING] [--device N] [--sweep] [--prefill]
 *                         [--batch]
 * Plugins come from $LLMRT_PLUGIN_DIR, else <exe>/../lib/llmrt/plugins; LLMRT_BENCH_ROWS
 * (e.g. "32") narrows --batch's AWQ row counts, LLMRT_BENCH_AWQ_TUNES (";"-separated [quant.awq]
 * tune values, "-" for the defaults) replaces its knob rows, LLMRT_BENCH_ATT_TUNES (";"-separated
 * [backend.cuda] tune values) adds decode-attention batch rows under each. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llmrt/backend.h>
#include <llmrt/checkpoint.h>
#include <llmrt/cuda.h>
#include <llmrt/ext/fused.h>
#include <llmrt/quant.h>

/* Qwen3-8B */
#define HIDDEN 4096
#define INTER 12288
#define N_HEADS 32
#define N_KV 8
#define HEAD_DIM 128
#define VOCAB 151936
#define LAYERS 36
#define GROUP 128

#define ROTATE_BYTES ((size_t)384 << 20) /* each kernel's inputs rotate over at least this much */
#define BATCH 20                         /* launches per timed graph */

static const llmrt_backend_vtable *VT;
static llmrt_backend *B;
static int reps = 30;
static const char *filter;
static int sweep, prefill, batch_rows;
static double peak_tflops = 790.0; /* LLMRT_BENCH_TFLOPS */
static int device_index;
static double copy_gbs; /* measured device-to-device bandwidth, read + write */

#define DIE(...)                                                                              \
    do {                                                                                      \
        fprintf(stderr, "llmrt-cuda-bench: " __VA_ARGS__);                                    \
        fputc('\n', stderr);                                                                  \
        exit(1);                                                                              \
    } while (0)

#define OK(call)                                                                              \
    do {                                                                                      \
        llmrt_error err_ = {0};                                                               \
        llmrt_status st_ = (call);                                                            \
        (void)err_;                                                                           \
        if (st_ != LLMRT_OK)                                                                  \
            DIE("%s:%d: %s: %s", __FILE__, __LINE__, #call, llmrt_status_str(st_));           \
    } while (0)

/* ---- plugins ---- */

static char plugin_dir[PATH_MAX];

static const llmrt_plugin_desc *load_plugin(const char *file)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", plugin_dir, file);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "llmrt-cuda-bench: %s\n", dlerror());
        return NULL;
    }
    llmrt_plugin_get_fn get;
    void *sym = dlsym(h, LLMRT_PLUGIN_ENTRY);
    if (!sym)
        return NULL;
    memcpy(&get, &sym, sizeof get);
    return get(0);
}

static void log_cb(void *ctx, llmrt_log_level level, const char *who, const char *fmt, ...)
{
    (void)ctx;
    if (level > LLMRT_LOG_WARN)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *config_get(void *ctx, const char *key)
{
    (void)ctx, (void)key;
    return NULL;
}

static llmrt_host HOST = {sizeof(llmrt_host), LLMRT_ABI_VERSION, NULL, log_cb, config_get};

/* ---- helpers ---- */

static uint64_t rng_state = 0x1234567;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)((rnd() >> 40) * (1.0 / 16777216.0));
}

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    llmrt_error err = {0};
    if (VT->dev_alloc(B, bytes, &p, &err) != LLMRT_OK)
        DIE("%s", err.msg);
    return p;
}

static void upload(void *dev, const void *host, size_t bytes)
{
    llmrt_error err = {0};
    if (VT->copy(B, dev, host, bytes, LLMRT_COPY_H2D, &err) || VT->synchronize(B, &err))
        DIE("upload: %s", err.msg);
}

/* Device buffer of `n` random f32 in [lo, hi]. */
static float *dev_rand_f32(size_t n, float lo, float hi)
{
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = frand(lo, hi);
    float *d = dev_alloc(n * sizeof(float));
    upload(d, h, n * sizeof(float));
    free(h);
    return d;
}

/* Device buffer of n random f16 (bits) in [lo, hi]. */
static void *dev_rand_f16(size_t n, float lo, float hi)
{
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        h[i] = llmrt_f32_to_f16(frand(lo, hi));
    void *d = dev_alloc(n * 2);
    upload(d, h, n * 2);
    free(h);
    return d;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* One timed subject: enqueue(i) launches instance i (rotating buffers). Returns the median
 * microseconds per launch. */
typedef void (*enqueue_fn)(void *ctx, int i);

static double time_us(enqueue_fn fn, void *ctx)
{
    llmrt_error err = {0};
    /* eager warm-up sizes scratch buffers and loads modules */
    for (int i = 0; i < 3; i++)
        fn(ctx, i);
    if (VT->synchronize(B, &err))
        DIE("warm-up: %s", err.msg);
    llmrt_graph *g = NULL;
    if (VT->graph_begin(B, &err))
        DIE("graph_begin: %s", err.msg);
    for (int i = 0; i < BATCH; i++)
        fn(ctx, i);
    if (VT->graph_end(B, &g, &err))
        DIE("graph_end: %s", err.msg);
    llmrt_event *e0, *e1;
    OK(VT->event_create(B, &e0, &err));
    OK(VT->event_create(B, &e1, &err));
    for (int i = 0; i < 3; i++)
        OK(VT->graph_launch(B, g, &err));
    float *ms = malloc(reps * sizeof(float));
    for (int r = 0; r < reps; r++) {
        OK(VT->event_record(B, e0, &err));
        OK(VT->graph_launch(B, g, &err));
        OK(VT->event_record(B, e1, &err));
        OK(VT->event_sync(B, e1, &err));
        OK(VT->event_elapsed_ms(B, e0, e1, &ms[r], &err));
    }
    qsort(ms, reps, sizeof *ms, cmp_float);
    double med = ms[reps / 2];
    free(ms);
    VT->event_destroy(B, e0);
    VT->event_destroy(B, e1);
    VT->graph_destroy(B, g);
    return med * 1000.0 / BATCH;
}

typedef struct row {
    char name[64], shape[40];
    double us, bytes;
    int sep;   /* launches per decode step at batch 1 with separate kernels (0: not in it) */
    int fused; /* launches per decode step with the fused kernels */
} row;

static row rows[512];
static int n_rows;

static int wanted(const char *name)
{
    return !filter || strstr(name, filter);
}

static void report(const char *name, const char *shape, double us, double bytes, int sep, int fused)
{
    if (n_rows == (int)(sizeof rows / sizeof *rows))
        DIE("too many rows");
    row *r = &rows[n_rows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->us = us, r->bytes = bytes, r->sep = sep, r->fused = fused;
    const double gbs = bytes / (us * 1e-6) / 1e9;
    const double floor_us = copy_gbs > 0 ? bytes / (copy_gbs * 1e9) * 1e6 : 0;
    printf("%-30s %-22s %9.2f %9.1f %10.3f %9.2f %6.0f%%\n", name, shape, us, gbs, bytes / 1e6,
           floor_us, floor_us > 0 ? 100.0 * floor_us / us : 0.0);
    fflush(stdout);
}

/* A row with FLOPs too: TFLOP/s, and the floor = max(bytes at the copy bandwidth, FLOPs at
 * peak_tflops). Not part of the decode-step estimate. */
static void report_flops(const char *name, const char *shape, double us, double bytes, double flops)
{
    const double gbs = bytes / (us * 1e-6) / 1e9, tfs = flops / (us * 1e-6) / 1e12;
    const double mem_us = copy_gbs > 0 ? bytes / (copy_gbs * 1e9) * 1e6 : 0;
    const double fl_us = flops / (peak_tflops * 1e12) * 1e6;
    const double floor_us = mem_us > fl_us ? mem_us : fl_us;
    printf("%-30s %-22s %9.2f %9.1f %10.3f %9.2f %6.0f%%  %7.1f TFLOP/s (%s-bound floor)\n", name,
           shape, us, gbs, bytes / 1e6, floor_us, floor_us > 0 ? 100.0 * floor_us / us : 0.0, tfs,
           mem_us > fl_us ? "memory" : "compute");
    fflush(stdout);
}

/* ---- device copy: the bandwidth ceiling ---- */

typedef struct {
    void *a, *b;
    size_t bytes;
} copy_ctx;

static void enq_copy(void *c, int i)
{
    copy_ctx *x = c;
    llmrt_error err = {0};
    (void)i;
    OK(VT->copy(B, x->b, x->a, x->bytes, LLMRT_COPY_D2D, &err));
}

static void bench_copy(void)
{
    copy_ctx c = {NULL, NULL, (size_t)1 << 30};
    c.a = dev_alloc(c.bytes);
    c.b = dev_alloc(c.bytes);
    double us = time_us(enq_copy, &c);
    copy_gbs = 2.0 * c.bytes / (us * 1e-6) / 1e9;
    report("d2d copy (ceiling)", "1 GiB", us, 2.0 * c.bytes, 0, 0);
    VT->dev_free(B, c.a);
    VT->dev_free(B, c.b);
}

/* ---- dense f16 GEMV (lm_head) ---- */

typedef struct {
    llmrt_tensor w;
    float *x, *y;
    int n;
} gemm_ctx;

static void enq_gemm(void *c, int i)
{
    gemm_ctx *g = c;
    llmrt_error err = {0};
    (void)i;
    OK(VT->gemm(B, g->y, g->x, &g->w, g->n, &err));
}

static void bench_lm_head(void)
{
    if (!wanted("lm_head gemv"))
        return;
    gemm_ctx g;
    memset(&g, 0, sizeof g);
    g.w.dtype = LLMRT_DTYPE_F16;
    g.w.ndim = 2;
    g.w.shape[0] = VOCAB;
    g.w.shape[1] = HIDDEN;
    g.w.data = dev_rand_f16((size_t)VOCAB * HIDDEN, -0.05f, 0.05f);
    g.x = dev_rand_f32((size_t)8 * HIDDEN, -1, 1);
    g.y = dev_alloc((size_t)8 * VOCAB * sizeof(float));
    static const int ns[] = {1, 8};
    for (int k = 0; k < 2; k++) {
        g.n = ns[k];
        double bytes = (double)VOCAB * HIDDEN * 2 + (double)g.n * (HIDDEN + VOCAB) * 4;
        char name[48];
        snprintf(name, sizeof name, "lm_head gemv f16 n=%d", g.n);
        report(name, "151936x4096", time_us(enq_gemm, &g), bytes, g.n == 1, g.n == 1);
    }
    VT->dev_free(B, g.w.data), VT->dev_free(B, g.x), VT->dev_free(B, g.y);
}

/* ---- AWQ linears through quant-awq ---- */

typedef struct {
    const char *name;
    const llmrt_tensor_view *views;
    int n;
} mem_ckpt;

static llmrt_status ck_find(void *ctx, const char *name, llmrt_tensor_view *out, llmrt_error *err)
{
    mem_ckpt *c = ctx;
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->views[i].name, name) == 0) {
            *out = c->views[i];
            return LLMRT_OK;
        }
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "no tensor %s", name);
}

static int ck_has(void *ctx, const char *name)
{
    llmrt_tensor_view v;
    llmrt_error err;
    return ck_find(ctx, name, &v, &err) == LLMRT_OK;
}

typedef struct {
    const llmrt_quant_vtable *qv;
    llmrt_quant *q;
    llmrt_qlinear *l[256];
    int copies;
    float *x, *y;
    int n;
} awq_ctx;

static void enq_awq(void *c, int i)
{
    awq_ctx *a = c;
    llmrt_error err = {0};
    if (a->qv->linear_forward(a->q, a->l[i % a->copies], a->y, a->x, a->n, &err))
        DIE("awq forward: %s", err.msg);
}

/* Time one AWQ linear [out, in] (g128) at each token count in ns[0..nn). tune: NULL, or a
 * [quant.awq] tune value the quant instance is created with (a sweep row). sep / fused: its
 * launches per decode step (n = 1) with separate and with fused kernels. */
static void bench_awq(const llmrt_plugin_desc *qd, const char *name, int in, int out, int sep,
                      int fused, const int *ns, int nn, const char *tune)
{
    char full[96];
    snprintf(full, sizeof full, "awq %s", name);
    if (!wanted(full))
        return;
    const llmrt_quant_vtable *qv = qd->vtable;
    llmrt_backend_ref ref = {VT, B, "cuda"};
    char cfg[200];
    snprintf(cfg, sizeof cfg,
             "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": %d, \"version\": \"gemm\", "
             "\"zero_point\": true}", GROUP);
    awq_ctx a;
    memset(&a, 0, sizeof a);
    a.qv = qv;
    llmrt_error err = {0};
    const char *keys[] = {"tune"}, *vals[] = {tune}, *where[] = {"--sweep"};
    llmrt_section sec = {"quant.awq", 1, keys, vals, where};
    llmrt_status cst = qv->create(&HOST, tune ? &sec : NULL, cfg, &ref, &a.q, &err);
    if (cst)
        DIE("quant-awq create: %s", err.msg);
    /* random packed tensors; every copy is the same data loaded again (separate buffers) */
    const int ng = in / GROUP;
    int32_t *qw = malloc((size_t)in * (out / 8) * 4), *qz = malloc((size_t)ng * (out / 8) * 4);
    uint16_t *sc = malloc((size_t)ng * out * 2);
    for (size_t i = 0; i < (size_t)in * (out / 8); i++)
        qw[i] = (int32_t)rnd();
    for (size_t i = 0; i < (size_t)ng * (out / 8); i++)
        qz[i] = (int32_t)rnd();
    for (size_t i = 0; i < (size_t)ng * out; i++)
        sc[i] = llmrt_f32_to_f16(frand(0.001f, 0.02f));
    llmrt_tensor_view views[3] = {
        {"l.qweight", LLMRT_DTYPE_I32, 2, {in, out / 8}, qw, (size_t)in * (out / 8) * 4, "bench"},
        {"l.qzeros", LLMRT_DTYPE_I32, 2, {ng, out / 8}, qz, (size_t)ng * (out / 8) * 4, "bench"},
        {"l.scales", LLMRT_DTYPE_F16, 2, {ng, out}, sc, (size_t)ng * out * 2, "bench"}};
    mem_ckpt mc = {"bench", views, 3};
    llmrt_checkpoint ck = {&mc, "bench", "{}", ck_find, ck_has};
    const double awq_bytes = (double)in * out / 2 + (double)ng * out * 2 + (double)ng * out / 2;
    int max_n = 1;
    for (int k = 0; k < nn; k++)
        max_n = ns[k] > max_n ? ns[k] : max_n;
    /* prefill rows dequantise into one scratch: no rotation needed (compute bound); up to
     * 256 rows the weights must come from HBM, as in a decode step */
    a.copies = max_n > 256 ? 1 : (int)ceil(ROTATE_BYTES / awq_bytes);
    if (a.copies > 256)
        a.copies = 256;
    if (a.copies < 2 && max_n <= 256)
        a.copies = 2;
    for (int c = 0; c < a.copies; c++)
        if (qv->linear_load(a.q, &ck, "l", in, out, &a.l[c], &err))
            DIE("awq load %s: %s", name, err.msg);
    free(qw), free(qz), free(sc);
    a.x = dev_rand_f32((size_t)max_n * in, -1, 1);
    a.y = dev_alloc((size_t)max_n * out * sizeof(float));
    for (int k = 0; k < nn; k++) {
        a.n = ns[k];
        char rname[64], shape[40];
        snprintf(rname, sizeof rname, "awq %s n=%d%s%s%s", name, a.n, tune ? " [" : "",
                 tune ? tune : "", tune ? "]" : "");
        snprintf(shape, sizeof shape, "%dx%d g%d", out, in, GROUP);
        /* bytes the format must move (int4 + scales + zeros) + activations */
        const int dec = a.n == 1 && !tune;
        const double us = time_us(enq_awq, &a), bytes = awq_bytes + (double)a.n * (in + out) * 4;
        if (batch_rows && a.n > 1)
            report_flops(rname, shape, us, bytes, 2.0 * a.n * in * out);
        else
            report(rname, shape, us, bytes, dec ? sep : 0, dec ? fused : 0);
    }
    for (int c = 0; c < a.copies; c++)
        qv->linear_free(a.q, a.l[c]);
    qv->destroy(a.q);
    VT->dev_free(B, a.x), VT->dev_free(B, a.y);
}

/* ---- attention decode ---- */

typedef struct {
    llmrt_attn_params p[LAYERS];
    float *q, *out;
} att_ctx;

static void enq_att(void *c, int i)
{
    att_ctx *a = c;
    llmrt_error err = {0};
    OK(VT->attention(B, a->out, a->q, &a->p[i % LAYERS], &err));
}

/* batch sequences of ctx_len tokens (graph bound `bucket`), each with qlen query tokens
 * (1: decode; ctx_len: a whole-prompt prefill). tag: a sweep variant's name, or NULL. */
static void bench_attention(int ctx_len, int batch, int bucket, int qlen, const char *tag)
{
    const char *kind = qlen > 1 ? "attention prefill" : "attention decode";
    char name[64], shape[40];
    snprintf(name, sizeof name, "%s b=%d%s%s%s", kind, batch, tag ? " [" : "", tag ? tag : "",
             tag ? "]" : "");
    if (!wanted(name)) /* --filter "attention decode b=32" narrows to one batch */
        return;
    att_ctx a;
    memset(&a, 0, sizeof a);
    const int bs = 16, blocks_per_seq = (bucket + bs - 1) / bs;
    /* batch rows (> 8 sequences) and rows under a graph bound past the context: blocks for
     * the context only (a table's entries past it read nothing), and fewer layer copies once
     * one layer's cache exceeds the rotation (a batch-1 row at bound 40960 would otherwise
     * fill 36 layers of a 40960-token cache with random values first) */
    const int compact = batch > 8 || bucket > ctx_len, used = (ctx_len + bs - 1) / bs;
    const size_t n_blocks = (size_t)batch * (compact ? used : blocks_per_seq);
    const size_t cache_elems = n_blocks * bs * N_KV * HEAD_DIM;
    int layers = LAYERS;
    if (compact) {
        layers = (int)ceil(ROTATE_BYTES / (4.0 * cache_elems));
        layers = layers < 1 ? 1 : layers > LAYERS ? LAYERS : layers;
    }
    const int n_tok = batch * qlen;
    int32_t *tables = malloc((size_t)batch * blocks_per_seq * 4);
    for (size_t i = 0; i < (size_t)batch * blocks_per_seq; i++)
        tables[i] = (int32_t)((i * 7919) % n_blocks); /* scattered blocks */
    if (compact)
        for (int s = 0; s < batch; s++)
            for (int j = 0; j < blocks_per_seq; j++)
                tables[(size_t)s * blocks_per_seq + j] =
                    j < used ? (int32_t)(((size_t)s * used + j) * 7919 % n_blocks) : 0;
    int32_t *qs = malloc((size_t)(batch + 1) * 4), *lens = malloc((size_t)batch * 4);
    for (int s = 0; s <= batch; s++)
        qs[s] = s * qlen;
    for (int s = 0; s < batch; s++)
        lens[s] = ctx_len;
    int32_t *dqs = dev_alloc((size_t)(batch + 1) * 4), *dl = dev_alloc((size_t)batch * 4);
    int32_t *dt = dev_alloc((size_t)batch * blocks_per_seq * 4);
    upload(dqs, qs, (size_t)(batch + 1) * 4);
    upload(dl, lens, (size_t)batch * 4);
    free(qs), free(lens);
    upload(dt, tables, (size_t)batch * blocks_per_seq * 4);
    free(tables);
    /* one cache per layer, so the rotation exceeds the L2 */
    void *kc = dev_rand_f16(cache_elems * layers, -1, 1), *vc = dev_rand_f16(cache_elems * layers, -1, 1);
    for (int l = 0; l < LAYERS; l++) {
        llmrt_attn_params *p = &a.p[l];
        p->n_tokens = n_tok, p->n_seqs = batch, p->n_heads = N_HEADS, p->n_kv_heads = N_KV;
        p->head_dim = HEAD_DIM, p->scale = 1.0f / sqrtf((float)HEAD_DIM);
        p->query_start = dqs, p->seq_lens = dl, p->block_tables = dt;
        p->max_blocks_per_seq = blocks_per_seq, p->block_size = bs;
        p->max_seq_len = bucket, p->max_query_len = qlen, p->kv_dtype = LLMRT_DTYPE_F16;
        p->k_cache = (char *)kc + (size_t)(l % layers) * cache_elems * 2;
        p->v_cache = (char *)vc + (size_t)(l % layers) * cache_elems * 2;
    }
    a.q = dev_rand_f32((size_t)n_tok * N_HEADS * HEAD_DIM, -1, 1);
    a.out = dev_alloc((size_t)n_tok * N_HEADS * HEAD_DIM * 4);
    const double bytes = (double)batch * ctx_len * N_KV * HEAD_DIM * 2 * 2 +
                         2.0 * n_tok * N_HEADS * HEAD_DIM * 4;
    snprintf(shape, sizeof shape, "ctx %d (bound %d)", ctx_len, bucket);
    const int in_step = !tag && qlen == 1 && batch == 1 && ctx_len == 128 && bucket == 128;
    const double us = time_us(enq_att, &a);
    if (batch_rows) { /* causal: query i sees ctx_len - qlen + i + 1 keys; QK and PV */
        double keys = 0;
        for (int i = 0; i < qlen; i++)
            keys += ctx_len - qlen + i + 1;
        report_flops(name, shape, us, bytes, 4.0 * batch * keys * N_HEADS * HEAD_DIM);
    } else {
        report(name, shape, us, bytes, in_step ? LAYERS : 0, in_step ? LAYERS : 0);
    }
    VT->dev_free(B, kc), VT->dev_free(B, vc), VT->dev_free(B, dqs), VT->dev_free(B, dl);
    VT->dev_free(B, dt), VT->dev_free(B, a.q), VT->dev_free(B, a.out);
}

/* ---- small ops ---- */

typedef struct {
    int which;
    float *x[LAYERS], *y[LAYERS], *z[LAYERS];
    llmrt_tensor w;
    int32_t *ids, *pos, *slots;
    void *kc, *vc;
    int rows, d;
} small_ctx;

/* The backend's fused ops (the "llmrt.fused" extension); the bench needs them. */
static const llmrt_fused_ops *fused_ops(void)
{
    const llmrt_fused_ops *f =
        llmrt_backend_extension(VT, B, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
    if (!f) {
        fprintf(stderr, "llmrt-cuda-bench: the backend offers no %s extension\n", LLMRT_EXT_FUSED);
        exit(1);
    }
    return f;
}

enum { S_RMSNORM, S_QKNORM, S_ROPE, S_KVSTORE, S_SILU, S_ADD, S_EMBED, S_ARGMAX, S_ADDNORM,
       S_QKR, S_SWIGLU };

static void enq_small(void *c, int i)
{
    small_ctx *s = c;
    llmrt_error err = {0};
    const int l = i % LAYERS;
    switch (s->which) {
    case S_RMSNORM:
    case S_QKNORM:
        OK(VT->rmsnorm(B, s->y[l], s->x[l], &s->w, s->rows, s->d, 1e-6f, &err));
        break;
    case S_ROPE: OK(VT->rope(B, s->x[l], s->pos, 1, N_HEADS + N_KV, HEAD_DIM, 1e6f, &err)); break;
    case S_KVSTORE:
        OK(VT->kv_store(B, s->kc, s->vc, LLMRT_DTYPE_F16, s->x[l], s->y[l], s->slots, 1, N_KV,
                        HEAD_DIM, &err));
        break;
    case S_SILU: OK(VT->silu_mul(B, s->z[l], s->x[l], s->y[l], INTER, &err)); break;
    case S_ADD: OK(VT->add(B, s->z[l], s->x[l], s->y[l], HIDDEN, &err)); break;
    case S_EMBED: OK(VT->embedding(B, s->y[l], &s->w, s->ids, 1, &err)); break;
    case S_ARGMAX: OK(VT->argmax(B, s->ids, s->x[l % 4], 1, VOCAB, &err)); break;
    case S_ADDNORM:
        OK(fused_ops()->add_rmsnorm(B, s->z[l], s->x[l], s->y[l], &s->w, 1, HIDDEN, 1e-6f, &err));
        break;
    case S_QKR: /* one token: q [32 heads] normed + roped out, k / v into an f16 cache */
        OK(fused_ops()->qk_norm_rope_store(B, s->z[l], s->x[l], &s->w, &s->w, s->pos, s->slots, 1, N_HEADS,
                                  N_KV, HEAD_DIM, 1e-6f, 1e6f, s->kc, s->vc, LLMRT_DTYPE_F16, &err));
        break;
    case S_SWIGLU: OK(fused_ops()->swiglu(B, s->z[l], s->x[l], 1, INTER, &err)); break;
    }
}

static void bench_small(void)
{
    small_ctx s;
    memset(&s, 0, sizeof s);
    for (int l = 0; l < LAYERS; l++) {
        s.x[l] = dev_rand_f32(2 * INTER, -2, 2);
        s.y[l] = dev_rand_f32(INTER, -2, 2);
        s.z[l] = dev_alloc(INTER * 4);
    }
    s.kc = dev_alloc((size_t)64 * N_KV * HEAD_DIM * 2);
    s.vc = dev_alloc((size_t)64 * N_KV * HEAD_DIM * 2);
    s.w.dtype = LLMRT_DTYPE_F16;
    s.w.ndim = 1;
    int32_t zero = 0, slot = 5;
    s.ids = dev_alloc(64);
    s.pos = dev_alloc(4);
    s.slots = dev_alloc(4);
    upload(s.ids, &zero, 4);
    int32_t p = 1000;
    upload(s.pos, &p, 4);
    upload(s.slots, &slot, 4);
    struct {
        int which;
        const char *name, *shape;
        int rows, d;
        double bytes;
        int sep, fused; /* launches per decode step: separate / fused kernels */
    } cases[] = {
        /* separate: q norm and k norm, rope of q and of k are two launches each */
        {S_RMSNORM, "rmsnorm", "1x4096", 1, HIDDEN, 3.0 * HIDDEN * 4, 2 * LAYERS + 1, 0},
        {S_QKNORM, "rmsnorm q/k heads", "40x128", N_HEADS + N_KV, HEAD_DIM,
         3.0 * (N_HEADS + N_KV) * HEAD_DIM * 4, 2 * LAYERS, 0},
        {S_ROPE, "rope q+k", "40 heads x 128", 0, 0, 2.0 * (N_HEADS + N_KV) * HEAD_DIM * 4,
         2 * LAYERS, 0},
        {S_KVSTORE, "kv_store f16", "8 heads x 128", 0, 0, 2.0 * N_KV * HEAD_DIM * (4 + 2), LAYERS, 0},
        {S_SILU, "silu_mul", "12288", 0, 0, 3.0 * INTER * 4, LAYERS, 0},
        {S_ADD, "add (residual)", "4096", 0, 0, 3.0 * HIDDEN * 4, 2 * LAYERS, 0},
        {S_ADDNORM, "add_rmsnorm", "1x4096", 0, 0, 5.0 * HIDDEN * 4, 0, 2 * LAYERS + 1},
        {S_QKR, "qk_norm_rope_store f16", "48 heads x 128", 0, 0,
         (N_HEADS + 2 * N_KV) * HEAD_DIM * 4.0 + N_HEADS * HEAD_DIM * 4.0 + 2 * N_KV * HEAD_DIM * 2.0,
         0, LAYERS},
        {S_SWIGLU, "swiglu", "12288", 0, 0, 3.0 * INTER * 4, 0, LAYERS},
        {S_ARGMAX, "argmax", "1x151936", 0, 0, (double)VOCAB * 4, 1, 1},
    };
    s.w.shape[0] = HIDDEN;
    s.w.data = dev_rand_f16(HIDDEN, 0.5f, 1.5f);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (!wanted(cases[k].name))
            continue;
        s.which = cases[k].which;
        s.rows = cases[k].rows, s.d = cases[k].d;
        s.w.shape[0] = cases[k].d > 0 ? cases[k].d : s.which == S_QKR ? HEAD_DIM : HIDDEN;
        if (s.which == S_ARGMAX)
            for (int l = 0; l < 4; l++) {
                VT->dev_free(B, s.x[l]);
                s.x[l] = dev_rand_f32(VOCAB, -10, 10);
            }
        report(cases[k].name, cases[k].shape, time_us(enq_small, &s), cases[k].bytes,
               cases[k].sep, cases[k].fused);
    }
    if (wanted("embedding")) {
        VT->dev_free(B, s.w.data);
        s.w.ndim = 2;
        s.w.shape[0] = VOCAB;
        s.w.shape[1] = HIDDEN;
        s.w.data = dev_rand_f16((size_t)VOCAB * HIDDEN, -1, 1);
        s.w.dtype = LLMRT_DTYPE_F16;
        s.which = S_EMBED;
        report("embedding f16", "1x4096", time_us(enq_small, &s), (double)HIDDEN * 6, 1, 1);
    }
}

/* ---- sampling ----
 * Logits uniform in [-10, 10] (flat: the min-p / top-p candidate sets are large, a harder
 * case than real, peaked logits), rotating over copies that stay in L2 as the lm_head's
 * output does; u differs per row. */

typedef struct {
    float *x[4];
    int n_x;
    llmrt_sample_params *sp;
    int32_t *ids;
    int rows;
} sample_ctx;

static void enq_sample(void *c, int i)
{
    sample_ctx *s = c;
    llmrt_error err = {0};
    OK(VT->sample(B, s->ids, s->x[i % s->n_x], s->sp, s->rows, VOCAB, &err));
}

/* tag NULL: every configuration at 1 and 32 rows; else (a [backend.cuda] tune variant's backend)
 * the two headline ones at 1 row, named with the tag. */
static void bench_sample(const char *tag)
{
    if (!wanted("sample"))
        return;
    static const struct {
        const char *name;
        llmrt_sample_params sp;
        int headline;
    } cfgs[] = {
        {"sample T.8 k50 p.9 minp.05", {0.8f, 50, 0.9f, 0.05f, 0, 0}, 1},
        {"sample T.8 p.9 minp.05", {0.8f, 0, 0.9f, 0.05f, 0, 0}, 1},
        {"sample T.6 k20 p.95 (chat)", {0.6f, 20, 0.95f, 0.0f, 0, 0}, 0},
        {"sample T1 p.95", {1.0f, 0, 0.95f, 0.0f, 0, 0}, 0},
        {"sample T1 (id order)", {1.0f, 0, 1.0f, 0.0f, 0, 0}, 0},
    };
    static const int batches[] = {1, 32};
    for (int bi = 0; bi < (tag ? 1 : 2); bi++) {
        sample_ctx s;
        memset(&s, 0, sizeof s);
        s.rows = batches[bi];
        s.n_x = s.rows == 1 ? 4 : 2; /* 2 x 19 MB at 32 rows: within the 50 MB L2 */
        for (int l = 0; l < s.n_x; l++)
            s.x[l] = dev_rand_f32((size_t)s.rows * VOCAB, -10, 10);
        s.sp = dev_alloc(s.rows * sizeof *s.sp);
        s.ids = dev_alloc(s.rows * sizeof(int32_t));
        llmrt_sample_params *sp = malloc(s.rows * sizeof *sp);
        for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
            if (tag && !cfgs[k].headline)
                continue;
            for (int r = 0; r < s.rows; r++) {
                sp[r] = cfgs[k].sp;
                sp[r].uniform = r == 0 ? 0.37f : frand(0, 1);
            }
            upload(s.sp, sp, s.rows * sizeof *sp);
            char name[64], shape[40];
            snprintf(name, sizeof name, "%s%s%s%s", cfgs[k].name, tag ? " [" : "", tag ? tag : "",
                     tag ? "]" : "");
            snprintf(shape, sizeof shape, "%dx%d", s.rows, VOCAB);
            report(name, shape, time_us(enq_sample, &s), (double)s.rows * VOCAB * 4, 0, 0);
        }
        free(sp);
        for (int l = 0; l < s.n_x; l++)
            VT->dev_free(B, s.x[l]);
        VT->dev_free(B, s.sp);
        VT->dev_free(B, s.ids);
    }
}

/* (Re)create the backend with [backend.cuda] tune / pdl as given (NULL: the default). */
static void backend_open(const char *tune, const char *pdl)
{
    if (B)
        VT->destroy(B);
    B = NULL;
    char dev[16];
    snprintf(dev, sizeof dev, "%d", device_index);
    const char *keys[3] = {"device"}, *vals[3] = {dev}, *where[3] = {"--device"};
    size_t n = 1;
    if (tune)
        keys[n] = "tune", vals[n] = tune, where[n++] = "--sweep";
    if (pdl)
        keys[n] = "pdl", vals[n] = pdl, where[n++] = "--sweep";
    llmrt_section sec = {"backend.cuda", n, keys, vals, where};
    llmrt_error err = {0};
    if (VT->create(&HOST, &sec, &B, &err))
        DIE("%s", err.msg);
}

/* The decode step at batch 1, context 128, as the sum of its kernels' times. */
static void step_estimate(int fused)
{
    double step_us = 0, step_bytes = 0;
    printf("\ndecode step estimate (batch 1, context 128, %s kernels; each kernel's time as "
           "measured back to back in a graph):\n",
           fused ? "fused" : "separate");
    for (int i = 0; i < n_rows; i++) {
        const int k = fused ? rows[i].fused : rows[i].sep;
        step_us += rows[i].us * k;
        step_bytes += rows[i].bytes * k;
    }
    for (int i = 0; i < n_rows; i++) {
        const int k = fused ? rows[i].fused : rows[i].sep;
        if (k)
            printf("  %-32s x%-3d %9.1f us  %5.1f%% of the step\n", rows[i].name, k,
                   rows[i].us * k, 100.0 * rows[i].us * k / step_us);
    }
    const double floor_us = copy_gbs > 0 ? step_bytes / (copy_gbs * 1e9) * 1e6 : 0;
    printf("  total %.3f ms for %.2f GB: %.0f GB/s effective; floor %.3f ms at %.0f GB/s "
           "(%.0f%% of floor)\n",
           step_us / 1000, step_bytes / 1e9, step_bytes / (step_us * 1e-6) / 1e9, floor_us / 1000,
           copy_gbs, step_us > 0 ? 100 * floor_us / step_us : 0.0);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device_index = atoi(argv[++i]);
        else if (strcmp(argv[i], "--sweep") == 0)
            sweep = 1;
        else if (strcmp(argv[i], "--prefill") == 0)
            prefill = 1;
        else if (strcmp(argv[i], "--batch") == 0)
            batch_rows = 1;
        else {
            fprintf(stderr, "usage: llmrt-cuda-bench [--reps N] [--filter SUBSTRING] [--device N] "
                            "[--sweep] [--prefill] [--batch]\n");
            return 2;
        }
    }
    if (getenv("LLMRT_BENCH_TFLOPS") && atof(getenv("LLMRT_BENCH_TFLOPS")) > 0)
        peak_tflops = atof(getenv("LLMRT_BENCH_TFLOPS"));
    if (reps < 3)
        reps = 3;
    const char *env = getenv("LLMRT_PLUGIN_DIR");
    if (env && env[0]) {
        snprintf(plugin_dir, sizeof plugin_dir, "%s", env);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            DIE("cannot find the executable's folder; set LLMRT_PLUGIN_DIR");
        exe[n] = 0;
        snprintf(plugin_dir, sizeof plugin_dir, "%s/../lib/llmrt/plugins", dirname(exe));
    }
    const llmrt_plugin_desc *bd = load_plugin("backend-cuda.so");
    if (!bd)
        DIE("backend-cuda.so not found in %s", plugin_dir);
    VT = bd->vtable;
    llmrt_device_info info;
    int32_t count = 0;
    llmrt_error err = {0};
    VT->probe(&info, 1, &count, &err);
    if (count == 0) {
        printf("llmrt-cuda-bench: no CUDA device (%s)\n", err.msg);
        return 77;
    }
    backend_open(NULL, NULL);
    OK(VT->device_info(B, &info, &err));
    const llmrt_backend_ref ref = {VT, B, "cuda"};
    const llmrt_cuda_ext *cuda_ext = llmrt_cuda_ext_of(&ref);
    if (!cuda_ext)
        DIE("backend-cuda.so does not offer the \"" LLMRT_EXT_CUDA "\" extension");
    printf("llmrt-cuda-bench: %s, cc %d.%d, %d SMs, %.0f GiB, driver %d, runtime %d; median of %d "
           "graph replays of %d launches; programmatic dependent launch %s\n",
           info.name, info.cc_major, info.cc_minor, info.multiprocessors,
           info.mem_total / 1073741824.0, info.driver_version, info.runtime_version, reps, BATCH,
           cuda_ext->pdl(B) ? "on" : "off");
    printf("%-36s %-22s %9s %9s %10s %9s %7s\n", "kernel", "shape", "time_us", "GB/s", "MB",
           "floor_us", "%floor");

    bench_copy();
    bench_lm_head();
    const llmrt_plugin_desc *qd = load_plugin("quant-awq.so");
    static const int dec_ns[] = {1, 8, 32}, one[] = {1}, pf_ns[] = {128, 2048};
    const int QKV = (N_HEADS + 2 * N_KV) * HEAD_DIM;
    if (!qd) {
        printf("(quant-awq.so not found: AWQ rows skipped)\n");
    } else {
        bench_awq(qd, "q_proj", HIDDEN, N_HEADS * HEAD_DIM, LAYERS, 0, dec_ns, 3, NULL);
        bench_awq(qd, "k_proj", HIDDEN, N_KV * HEAD_DIM, 2 * LAYERS, 0, dec_ns, 3, NULL); /* k, v */
        bench_awq(qd, "qkv fused", HIDDEN, QKV, 0, LAYERS, dec_ns, 3, NULL);
        bench_awq(qd, "o_proj", N_HEADS * HEAD_DIM, HIDDEN, LAYERS, LAYERS, dec_ns, 3, NULL);
        bench_awq(qd, "gate_proj", HIDDEN, INTER, 2 * LAYERS, 0, dec_ns, 3, NULL); /* gate, up */
        bench_awq(qd, "gate_up fused", HIDDEN, 2 * INTER, 0, LAYERS, dec_ns, 3, NULL);
        bench_awq(qd, "down_proj", INTER, HIDDEN, LAYERS, LAYERS, dec_ns, 3, NULL);
    }
    bench_attention(128, 1, 128, 1, NULL);
    bench_attention(2048, 1, 2048, 1, NULL);
    bench_attention(2048, 1, 40960, 1, NULL);
    bench_attention(2048, 8, 2048, 1, NULL);
    bench_small();
    bench_sample(NULL);

    if (sweep) {
        printf("\n-- sweep --\n");
        static const char *const awq_tunes[] = {"sx=0", "kw=4", "kw=8", "kw=16"};
        for (size_t t = 0; qd && t < sizeof awq_tunes / sizeof *awq_tunes; t++) {
            bench_awq(qd, "qkv fused", HIDDEN, QKV, 0, 0, one, 1, awq_tunes[t]);
            bench_awq(qd, "o_proj", N_HEADS * HEAD_DIM, HIDDEN, 0, 0, one, 1, awq_tunes[t]);
            bench_awq(qd, "gate_up fused", HIDDEN, 2 * INTER, 0, 0, one, 1, awq_tunes[t]);
            bench_awq(qd, "down_proj", INTER, HIDDEN, 0, 0, one, 1, awq_tunes[t]);
        }
        static const char *const att_tunes[] = {"att_maxs=8", "att_maxs=16", "att_maxs=64",
                                                "att_cmin=64", "att_fill=2"};
        for (size_t t = 0; t < sizeof att_tunes / sizeof *att_tunes; t++) {
            backend_open(att_tunes[t], NULL);
            bench_attention(128, 1, 128, 1, att_tunes[t]);
            bench_attention(2048, 1, 2048, 1, att_tunes[t]);
        }
        backend_open(NULL, "off");
        if (qd) {
            bench_awq(qd, "o_proj", N_HEADS * HEAD_DIM, HIDDEN, 0, 0, one, 1, "pdl=off");
            bench_awq(qd, "gate_up fused", HIDDEN, 2 * INTER, 0, 0, one, 1, "pdl=off");
        }
        bench_attention(128, 1, 128, 1, "pdl=off");
        backend_open("sample_full=1", NULL); /* sampling on the one-block path, for the A/B */
        bench_sample("1-block");
        backend_open(NULL, NULL);
    }
    if (prefill) {
        printf("\n-- prefill --\n");
        if (qd) {
            bench_awq(qd, "q_proj", HIDDEN, N_HEADS * HEAD_DIM, 0, 0, pf_ns, 2, NULL);
            bench_awq(qd, "gate_up fused", HIDDEN, 2 * INTER, 0, 0, pf_ns, 2, NULL);
            bench_awq(qd, "down_proj", INTER, HIDDEN, 0, 0, pf_ns, 2, NULL);
        }
        bench_attention(128, 1, 128, 128, NULL);
        bench_attention(2048, 1, 2048, 2048, NULL);
    }

    if (batch_rows) {
        /* serving shapes (Qwen3-8B): each row through the batch kernel, then through the
         * GEMV / cuBLAS it replaced (mma=0) and under each row-warp choice and weight-ring depth */
        printf("\n-- batch (floors: memory at %.0f GB/s, compute at %.0f TFLOP/s) --\n", copy_gbs,
               peak_tflops);
        /* LLMRT_BENCH_ROWS="32,64" narrows the row counts (e.g. to profile one shape) */
        int bns[8] = {16, 32, 64, 128, 256}, nbn = 5;
        const char *rows_env = getenv("LLMRT_BENCH_ROWS");
        if (rows_env && rows_env[0]) {
            nbn = 0;
            for (const char *p = rows_env; *p && nbn < 8; p += strspn(p, ","))
                if ((bns[nbn] = (int)strtol(p, (char **)&p, 10)) > 0)
                    nbn++;
                else
                    DIE("LLMRT_BENCH_ROWS: '%s' is not a list of positive row counts", rows_env);
        }
        /* LLMRT_BENCH_AWQ_TUNES="-;mma_xdb=1" replaces the knob rows ("-": the defaults) */
        static const char *btunes[16] = {NULL,          "mma=0",         "mma_w=4",
                                         "mma_w=8",     "mma_stages=2",  "mma_stages=3",
                                         "mma_stages=4",  "mma_bn=16",
                                         "mma_bn=16,mma_w=8"};
        size_t nbt = 9;
        static char tunes_buf[512];
        const char *tunes_env = getenv("LLMRT_BENCH_AWQ_TUNES");
        if (tunes_env && tunes_env[0]) {
            snprintf(tunes_buf, sizeof tunes_buf, "%s", tunes_env);
            nbt = 0;
            for (char *save = NULL, *tok = strtok_r(tunes_buf, ";", &save); tok && nbt < 16;
                 tok = strtok_r(NULL, ";", &save))
                btunes[nbt++] = strcmp(tok, "-") == 0 ? NULL : tok;
        }
        for (size_t t = 0; qd && t < nbt; t++) {
            bench_awq(qd, "qkv fused", HIDDEN, QKV, 0, 0, bns, nbn, btunes[t]);
            bench_awq(qd, "o_proj", N_HEADS * HEAD_DIM, HIDDEN, 0, 0, bns, nbn, btunes[t]);
            bench_awq(qd, "gate_up fused", HIDDEN, 2 * INTER, 0, 0, bns, nbn, btunes[t]);
            bench_awq(qd, "down_proj", INTER, HIDDEN, 0, 0, bns, nbn, btunes[t]);
        }
        bench_attention(512, 1, 512, 512, NULL);
        bench_attention(2048, 1, 2048, 2048, NULL);
        static const int bbs[] = {32, 64, 256};
        for (size_t k = 0; k < sizeof bbs / sizeof *bbs; k++)
            bench_attention(384, bbs[k], 40960, 1, NULL);
        backend_open("att_pf_mma=0,att_inv=0", NULL);
        bench_attention(512, 1, 512, 512, "fp32 kernel");
        bench_attention(2048, 1, 2048, 2048, "fp32 kernel");
        for (size_t k = 0; k < sizeof bbs / sizeof *bbs; k++)
            bench_attention(384, bbs[k], 40960, 1, "att_inv=0");
        /* LLMRT_BENCH_ATT_TUNES="att_fill=16;att_bpf=0": decode attention's rows (batch 1 at
         * ctx 128 and 2048, the batch rows) again on a backend with each [backend.cuda] tune */
        static char att_buf[512];
        const char *att_env = getenv("LLMRT_BENCH_ATT_TUNES");
        snprintf(att_buf, sizeof att_buf, "%s", att_env ? att_env : "");
        for (char *save = NULL, *tok = strtok_r(att_buf, ";", &save); tok;
             tok = strtok_r(NULL, ";", &save)) {
            backend_open(strcmp(tok, "-") == 0 ? NULL : tok, NULL); /* "-": the defaults */
            bench_attention(128, 1, 40960, 1, tok);
            bench_attention(2048, 1, 40960, 1, tok);
            for (size_t k = 0; k < sizeof bbs / sizeof *bbs; k++)
                bench_attention(384, bbs[k], 40960, 1, tok);
        }
        backend_open(NULL, NULL);
    }

    step_estimate(0);
    step_estimate(1);
    VT->destroy(B);
    return 0;
}
