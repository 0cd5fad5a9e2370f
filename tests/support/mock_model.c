/* mock_model.c — see mock_model.h. */
#include "mock_model.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llmrt/ext/logits_mask.h>

#include "mock_backend.h"
#include "sampler.h"

/* ======================================================================= the logits */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

mock_model_cfg mock_model_default_cfg(void)
{
    mock_model_cfg c = {97, 2, 2, 4, 4096, -1, 0, LLMRT_DTYPE_F32};
    return c;
}

void mock_model_logits(const mock_model_cfg *cfg, const int32_t *tokens, int32_t n,
                       float *logits)
{
    uint64_t h = 0x6a09e667f3bcc908ull;
    for (int32_t i = 0; i < n; i++)
        h = mix64(h ^ ((uint64_t)(uint32_t)tokens[i] * 0x9e3779b97f4a7c15ull + (uint64_t)i));
    for (int32_t v = 0; v < cfg->vocab; v++) {
        uint64_t x = mix64(h ^ ((uint64_t)v << 32 | (uint64_t)v));
        logits[v] = (float)((double)(x >> 40) * (1.0 / 16777216.0)) * 8.0f - 4.0f;
    }
    if (cfg->eos_id >= 0 && cfg->eos_id < cfg->vocab)
        logits[cfg->eos_id] = (cfg->eos_after > 0 && n >= cfg->eos_after) ? 20.0f : -20.0f;
}

int32_t mock_model_greedy(const mock_model_cfg *cfg, const int32_t *prompt, int32_t n,
                          int32_t max_new, int32_t *out)
{
    int32_t *ctx = malloc(sizeof *ctx * (size_t)(n + max_new));
    float *lg = malloc(sizeof *lg * (size_t)cfg->vocab);
    memcpy(ctx, prompt, sizeof *ctx * (size_t)n);
    int32_t k = 0;
    while (k < max_new) {
        mock_model_logits(cfg, ctx, n + k, lg);
        int32_t best = 0;
        for (int32_t v = 1; v < cfg->vocab; v++)
            if (lg[v] > lg[best])
                best = v;
        ctx[n + k] = best;
        out[k++] = best;
        if (best == cfg->eos_id)
            break;
    }
    free(ctx);
    free(lg);
    return k;
}

/* ======================================================================= the ops backend */

typedef struct rec_op {
    int kind; /* 1 copy, 2 argmax, 3 sample, 4 forward, 5 forward_argmax, 6 logits mask,
               * 7 event record */
    llmrt_event *ev;
    const int32_t *slots;
    const uint32_t *words;
    void *dst;
    const void *src;
    size_t bytes;
    llmrt_copy_kind ck;
    int32_t *out;
    const float *logits;
    const llmrt_sample_params *params;
    int32_t rows, vocab;
    llmrt_model *model;
    llmrt_batch batch;
    const llmrt_kv_cache *kv;
    float *flogits;
} rec_op;

struct llmrt_graph {
    rec_op *ops;
    int n, cap;
};

struct llmrt_event {
    double t;
    int recorded;
};

typedef struct mops {
    llmrt_backend_ref inner;
    mock_ops_opts o;
    mock_ops_stats st;
    struct llmrt_graph *capture; /* non-NULL while capturing */
    llmrt_sampler *sampler;
    int32_t sampler_vocab;
} mops;

static mops *M(llmrt_backend *b) { return (mops *)(void *)b; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int record(llmrt_backend *b, const rec_op *op)
{
    struct llmrt_graph *g = M(b)->capture;
    if (!g)
        return 0;
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 8;
        g->ops = realloc(g->ops, sizeof *g->ops * (size_t)g->cap);
    }
    g->ops[g->n++] = *op;
    return 1;
}

static llmrt_status o_probe(llmrt_device_info *out, int32_t max, int32_t *count, llmrt_error *err)
{
    *count = 0;
    return LLMRT_OK;
}
static llmrt_status o_create(const llmrt_host *h, const llmrt_section *cfg, llmrt_backend **out,
                             llmrt_error *err)
{
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "use mock_ops_backend_new");
}
static void o_destroy(llmrt_backend *b) { (void)b; }
static uint32_t o_caps(llmrt_backend *b)
{
    const mock_ops_opts *o = &M(b)->o;
    uint32_t c = LLMRT_BACKEND_CAP_MAPPED_HOST;
    if (o->async)
        c |= LLMRT_BACKEND_CAP_ASYNC;
    if (o->graphs && o->graph_events)
        c |= LLMRT_BACKEND_CAP_GRAPH_EVENTS;
    if (o->graphs)
        c |= LLMRT_BACKEND_CAP_GRAPHS;
    if (o->host_is_device)
        c |= LLMRT_BACKEND_CAP_HOST_IS_DEVICE;
    return c;
}
static llmrt_status o_info(llmrt_backend *b, llmrt_device_info *out, llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "mock ops device");
    out->is_gpu = M(b)->o.is_gpu;
    out->mem_total = M(b)->o.mem_total;
    out->mem_free = M(b)->o.mem_free;
    return LLMRT_OK;
}
static llmrt_status o_dev_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err)
{
    if (M(b)->capture)
        return llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: dev_alloc during graph capture");
    llmrt_status st = M(b)->inner.vt->dev_alloc(M(b)->inner.b, bytes, out, err);
    if (st == LLMRT_OK)
        M(b)->st.live_dev++;
    return st;
}
static void o_dev_free(llmrt_backend *b, void *p)
{
    if (p)
        M(b)->st.live_dev--;
    M(b)->inner.vt->dev_free(M(b)->inner.b, p);
}
static llmrt_status o_host_alloc(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                                 llmrt_error *err)
{
    return M(b)->inner.vt->host_alloc(M(b)->inner.b, bytes, flags, out, err);
}
static void o_host_free(llmrt_backend *b, void *p) { M(b)->inner.vt->host_free(M(b)->inner.b, p); }
static llmrt_status o_host_register(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                                    llmrt_error *err)
{
    return M(b)->inner.vt->host_register(M(b)->inner.b, p, bytes, flags, err);
}
static void o_host_unregister(llmrt_backend *b, void *p)
{
    M(b)->inner.vt->host_unregister(M(b)->inner.b, p);
}
static llmrt_status o_host_device_ptr(llmrt_backend *b, void *host, void **dev, llmrt_error *err)
{
    return M(b)->inner.vt->host_device_ptr(M(b)->inner.b, host, dev, err);
}
static llmrt_status o_copy(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                           llmrt_copy_kind kind, llmrt_error *err)
{
    rec_op op = {.kind = 1, .dst = dst, .src = src, .bytes = bytes, .ck = kind};
    if (kind == LLMRT_COPY_D2D)
        M(b)->st.d2d_copies++;
    if (record(b, &op))
        return LLMRT_OK;
    return M(b)->inner.vt->copy(M(b)->inner.b, dst, src, bytes, kind, err);
}
static llmrt_status o_sync(llmrt_backend *b, llmrt_error *err)
{
    if (M(b)->capture)
        return llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: synchronize during graph capture");
    return LLMRT_OK;
}
static llmrt_status o_ev_create(llmrt_backend *b, llmrt_event **out, llmrt_error *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? LLMRT_OK : llmrt_fail(err, LLMRT_ERR_NOMEM, "mock ops: event");
}
static void o_ev_destroy(llmrt_backend *b, llmrt_event *e) { free(e); }
static llmrt_status o_ev_record(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    if (M(b)->capture && M(b)->o.graph_events) {
        rec_op op = {.kind = 7, .ev = e};
        record(b, &op);
        return LLMRT_OK;
    }
    if (M(b)->capture)
        return llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: event_record during graph capture");
    e->t = now();
    e->recorded = 1;
    return LLMRT_OK;
}
static llmrt_status o_ev_sync(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    return e->recorded ? LLMRT_OK
                       : llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: event_sync on an unrecorded event");
}
static llmrt_status o_ev_elapsed(llmrt_backend *b, llmrt_event *s, llmrt_event *e, float *ms,
                                 llmrt_error *err)
{
    if (!s->recorded || !e->recorded)
        return llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: elapsed on an unrecorded event");
    *ms = (float)((e->t - s->t) * 1e3);
    return LLMRT_OK;
}
static llmrt_status o_graph_begin(llmrt_backend *b, llmrt_error *err)
{
    if (M(b)->capture)
        return llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: nested capture");
    M(b)->capture = calloc(1, sizeof *M(b)->capture);
    return LLMRT_OK;
}
static llmrt_status o_graph_end(llmrt_backend *b, llmrt_graph **out, llmrt_error *err)
{
    if (!M(b)->capture)
        return llmrt_fail(err, LLMRT_ERR_STATE, "mock ops: graph_end without graph_begin");
    *out = M(b)->capture;
    M(b)->capture = NULL;
    M(b)->st.graphs_captured++;
    return LLMRT_OK;
}
static void o_graph_destroy(llmrt_backend *b, llmrt_graph *g)
{
    if (!g)
        return;
    free(g->ops);
    free(g);
}

static llmrt_status host_argmax(int32_t *out, const float *logits, int32_t rows, int32_t vocab)
{
    for (int32_t r = 0; r < rows; r++)
        out[r] = llmrt_sampler_argmax(logits + (size_t)r * (size_t)vocab, vocab);
    return LLMRT_OK;
}

static llmrt_status host_sample(mops *m, int32_t *out, const float *logits,
                                const llmrt_sample_params *p, int32_t rows, int32_t vocab,
                                llmrt_error *err)
{
    if (!m->sampler || m->sampler_vocab != vocab) {
        llmrt_sampler_free(m->sampler);
        m->sampler = NULL;
        llmrt_status st = llmrt_sampler_new(vocab, &m->sampler, err);
        if (st)
            return st;
        m->sampler_vocab = vocab;
    }
    for (int32_t r = 0; r < rows; r++) {
        llmrt_sampling sp;
        llmrt_sampling_init(&sp);
        sp.temperature = p[r].temperature;
        sp.top_k = p[r].top_k;
        sp.top_p = p[r].top_p;
        sp.min_p = p[r].min_p;
        out[r] = llmrt_sampler_pick(m->sampler, logits + (size_t)r * (size_t)vocab, &sp,
                                    p[r].uniform);
    }
    return LLMRT_OK;
}

static llmrt_status o_argmax(llmrt_backend *b, int32_t *out, const float *logits, int32_t rows,
                             int32_t vocab, llmrt_error *err)
{
    M(b)->st.argmax_calls++;
    rec_op op = {.kind = 2, .out = out, .logits = logits, .rows = rows, .vocab = vocab};
    if (record(b, &op))
        return LLMRT_OK;
    return host_argmax(out, logits, rows, vocab);
}

static llmrt_status o_sample(llmrt_backend *b, int32_t *out, const float *logits,
                             const llmrt_sample_params *params, int32_t rows, int32_t vocab,
                             llmrt_error *err)
{
    M(b)->st.sample_calls++;
    rec_op op = {.kind = 3, .out = out, .logits = logits, .params = params, .rows = rows,
                 .vocab = vocab};
    if (record(b, &op))
        return LLMRT_OK;
    return host_sample(M(b), out, logits, params, rows, vocab, err);
}

static llmrt_status run_forward(llmrt_model *m, const llmrt_batch *batch,
                                const llmrt_kv_cache *kv, float *logits, llmrt_error *err);
static llmrt_status run_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                       const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                       llmrt_error *err);

static void host_mask(mops *m, float *logits, const int32_t *slots, const uint32_t *words,
                      int32_t rows, int32_t vocab)
{
    const int32_t W = (vocab + 31) / 32;
    for (int32_t r = 0; r < rows; r++) {
        if (slots[r] < 0)
            continue;
        m->st.masked_rows++;
        const uint32_t *w = words + (size_t)slots[r] * (size_t)W;
        for (int32_t v = 0; v < vocab; v++)
            if (!((w[v >> 5] >> (v & 31)) & 1u))
                logits[(size_t)r * (size_t)vocab + (size_t)v] = -INFINITY;
    }
}

static llmrt_status o_mask_apply(llmrt_backend *b, float *logits, const int32_t *slots,
                                 const uint32_t *words, int32_t rows, int32_t vocab,
                                 llmrt_error *err)
{
    M(b)->st.mask_calls++;
    rec_op op = {.kind = 6, .flogits = logits, .slots = slots, .words = words, .rows = rows,
                 .vocab = vocab};
    if (record(b, &op))
        return LLMRT_OK;
    host_mask(M(b), logits, slots, words, rows, vocab);
    return LLMRT_OK;
}

static const llmrt_logits_mask_ops mask_ext = {
    .struct_size = sizeof(llmrt_logits_mask_ops),
    .apply = o_mask_apply,
};

static const void *o_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    if (M(b)->o.mask && name && strcmp(name, LLMRT_EXT_LOGITS_MASK) == 0 &&
        version <= LLMRT_EXT_LOGITS_MASK_VERSION)
        return &mask_ext;
    return NULL;
}

static llmrt_status o_graph_launch(llmrt_backend *b, llmrt_graph *g, llmrt_error *err)
{
    M(b)->st.graph_launches++;
    for (int i = 0; i < g->n; i++) {
        rec_op *op = &g->ops[i];
        llmrt_status st = LLMRT_OK;
        switch (op->kind) {
        case 1: st = M(b)->inner.vt->copy(M(b)->inner.b, op->dst, op->src, op->bytes, op->ck, err); break;
        case 2: st = host_argmax(op->out, op->logits, op->rows, op->vocab); break;
        case 3: st = host_sample(M(b), op->out, op->logits, op->params, op->rows, op->vocab, err); break;
        case 4: st = run_forward(op->model, &op->batch, op->kv, op->flogits, err); break;
        case 5: st = run_forward_argmax(op->model, &op->batch, op->kv, op->flogits, op->out, err); break;
        case 6: host_mask(M(b), op->flogits, op->slots, op->words, op->rows, op->vocab); break;
        case 7:
            op->ev->t = now();
            op->ev->recorded = 1;
            M(b)->st.graph_event_records++;
            break;
        }
        if (st)
            return st;
    }
    return LLMRT_OK;
}

static llmrt_backend_vtable ops_vtable_init(void)
{
    llmrt_backend_vtable v = mock_backend_vtable;
    v.struct_size = sizeof v;
    v.probe = o_probe, v.create = o_create, v.destroy = o_destroy, v.caps = o_caps;
    v.device_info = o_info, v.dev_alloc = o_dev_alloc, v.dev_free = o_dev_free;
    v.host_alloc = o_host_alloc, v.host_free = o_host_free, v.host_register = o_host_register;
    v.host_unregister = o_host_unregister, v.host_device_ptr = o_host_device_ptr;
    v.copy = o_copy, v.synchronize = o_sync, v.event_create = o_ev_create;
    v.event_destroy = o_ev_destroy, v.event_record = o_ev_record, v.event_sync = o_ev_sync;
    v.event_elapsed_ms = o_ev_elapsed;
    v.extension = o_extension;
    return v;
}

/* One vtable per option set (argmax / sample / graphs may be absent): kept in the instance. */
typedef struct mops_holder {
    mops m;
    llmrt_backend_vtable vt;
} mops_holder;

llmrt_backend_ref mock_ops_backend_new(const mock_ops_opts *o)
{
    mops_holder *h = calloc(1, sizeof *h);
    h->m.inner = mock_backend_new(-1, 1);
    h->m.o = *o;
    h->vt = ops_vtable_init();
    h->vt.argmax = o->argmax ? o_argmax : NULL;
    h->vt.sample = o->sample ? o_sample : NULL;
    if (o->graphs) {
        h->vt.graph_begin = o_graph_begin, h->vt.graph_end = o_graph_end;
        h->vt.graph_launch = o_graph_launch, h->vt.graph_destroy = o_graph_destroy;
    } else {
        h->vt.graph_begin = NULL, h->vt.graph_end = NULL;
        h->vt.graph_launch = NULL, h->vt.graph_destroy = NULL;
    }
    llmrt_backend_ref r = {&h->vt, (llmrt_backend *)(void *)&h->m, "mockops"};
    return r;
}

void mock_ops_backend_free(llmrt_backend_ref *ref)
{
    if (!ref->b)
        return;
    mops *m = M(ref->b);
    llmrt_sampler_free(m->sampler);
    mock_backend_free(&m->inner);
    free((mops_holder *)(void *)m);
    ref->b = NULL;
}

mock_ops_stats mock_ops_get_stats(const llmrt_backend_ref *ref) { return M(ref->b)->st; }

static int is_ops_backend(const llmrt_backend_ref *be) { return be->vt->graph_launch == o_graph_launch || be->vt->copy == o_copy; }

/* ======================================================================= the model */

struct llmrt_model {
    mock_model_cfg cfg;
    llmrt_backend_ref be;
    llmrt_model_params params;
    int64_t forwards;
    int64_t argmax_forwards; /* of them through forward_argmax */
    int64_t host_input_forwards; /* of them reading step inputs in host memory */
    int32_t max_rows, max_seqs;
    int32_t *ctx; /* scratch [max_position] */
    float *tmp;   /* scratch [vocab] */
};

llmrt_status mock_model_create(const mock_model_cfg *cfg, const llmrt_backend_ref *be,
                               const llmrt_model_params *params, llmrt_model **out,
                               llmrt_error *err)
{
    if (cfg->vocab < 2 || cfg->vocab > 65536 || cfg->head_dim < 4 || cfg->n_layers < 1 ||
        cfg->n_kv_heads < 1 || cfg->max_position < 2)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mock model: bad config");
    llmrt_model *m = calloc(1, sizeof *m);
    m->cfg = *cfg;
    m->be = *be;
    m->params = *params;
    m->ctx = malloc(sizeof *m->ctx * (size_t)cfg->max_position);
    m->tmp = malloc(sizeof *m->tmp * (size_t)cfg->vocab);
    *out = m;
    return LLMRT_OK;
}

void mock_model_destroy(llmrt_model *m)
{
    if (!m)
        return;
    free(m->ctx);
    free(m->tmp);
    free(m);
}

int64_t mock_model_argmax_forwards(llmrt_model *m) { return m->argmax_forwards; }
int64_t mock_model_host_input_forwards(llmrt_model *m) { return m->host_input_forwards; }

void mock_model_counts(llmrt_model *m, int64_t *forwards, int32_t *max_rows, int32_t *max_seqs)
{
    *forwards = m->forwards;
    *max_rows = m->max_rows;
    *max_seqs = m->max_seqs;
}

static void mm_info(llmrt_model *m, llmrt_model_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->arch, sizeof out->arch, "MockForCausalLM");
    out->n_layers = m->cfg.n_layers;
    out->n_heads = m->cfg.n_kv_heads;
    out->n_kv_heads = m->cfg.n_kv_heads;
    out->head_dim = m->cfg.head_dim;
    out->hidden = m->cfg.n_kv_heads * m->cfg.head_dim;
    out->intermediate = out->hidden;
    out->vocab = m->cfg.vocab;
    out->max_position = m->cfg.max_position;
    out->weight_dtype = m->cfg.weight_dtype;
    out->weight_bytes = 1234;
}

/* Element (layer l, slot, head h, dim d) of a cache array. */
static size_t kv_index(const llmrt_kv_cache *kv, int32_t slot, int32_t h, int32_t d)
{
    return ((size_t)slot * (size_t)kv->n_kv_heads + (size_t)h) * (size_t)kv->head_dim + (size_t)d;
}

#define BAD(...) return llmrt_fail(err, LLMRT_ERR_INTERNAL, "mock model: " __VA_ARGS__)

/* Context tokens of a sequence whose block table row is bt [width], for positions [0, n). */
static llmrt_status read_context(llmrt_model *m, const llmrt_kv_cache *kv, const int32_t *bt,
                                 int32_t width, int32_t n, int32_t seq, llmrt_error *err)
{
    for (int32_t p = 0; p < n; p++) {
        if (p / kv->block_size >= width)
            BAD("seq %d position %d is beyond its block table (width %d)", seq, p, width);
        int32_t blk = bt[p / kv->block_size];
        if (blk < 0 || blk >= kv->n_blocks)
            BAD("seq %d position %d: block id %d out of range", seq, p, blk);
        int32_t slot = blk * kv->block_size + p % kv->block_size;
        int32_t id = -1;
        for (int32_t l = 0; l < kv->n_layers; l++)
            for (int32_t h = 0; h < kv->n_kv_heads; h++)
                for (int c = 0; c < 2; c++) {
                    const void *arr = c ? kv->v[l] : kv->k[l];
                    int32_t t = (int32_t)llmrt_load_f(arr, kv->dtype, (int64_t)kv_index(kv, slot, h, 0)) +
                                256 * (int32_t)llmrt_load_f(arr, kv->dtype, (int64_t)kv_index(kv, slot, h, 1));
                    int32_t q = (int32_t)llmrt_load_f(arr, kv->dtype, (int64_t)kv_index(kv, slot, h, 2)) +
                                256 * (int32_t)llmrt_load_f(arr, kv->dtype, (int64_t)kv_index(kv, slot, h, 3));
                    if (q != p)
                        BAD("seq %d position %d: the cache (block %d, layer %d) holds position %d "
                            "— wrong block table or stale data",
                            seq, p, blk, l, q);
                    if (id >= 0 && t != id)
                        BAD("seq %d position %d: layers disagree on the token", seq, p);
                    id = t;
                }
        m->ctx[p] = id;
    }
    return LLMRT_OK;
}

static llmrt_status run_forward(llmrt_model *m, const llmrt_batch *b, const llmrt_kv_cache *kv,
                                float *logits, llmrt_error *err)
{
    const mock_model_cfg *cfg = &m->cfg;
    const int32_t T = b->n_tokens, S = b->n_seqs;
    m->forwards++;
    if (is_ops_backend(&m->be) && mock_backend_is_host_memory(&M(m->be.b)->inner, b->positions))
        m->host_input_forwards++;
    if (T > m->max_rows)
        m->max_rows = T;
    if (S > m->max_seqs)
        m->max_seqs = S;
    if (T < 1 || S < 1 || T > m->params.max_tokens || S > m->params.max_seqs)
        BAD("batch of %d tokens / %d seqs, created for at most %d / %d", T, S,
            m->params.max_tokens, m->params.max_seqs);
    if (kv->n_layers != cfg->n_layers || kv->n_kv_heads != cfg->n_kv_heads ||
        kv->head_dim != cfg->head_dim)
        BAD("KV geometry does not match the model");
    const int32_t *qs = b->query_start, *pos = b->positions, *slot = b->slot_mapping;
    const int32_t W = b->max_blocks_per_seq, BS = kv->block_size;
    if (qs[0] != 0 || qs[S] != T)
        BAD("query_start[0] = %d, query_start[%d] = %d, n_tokens %d", qs[0], S, qs[S], T);
    for (int32_t s = 0; s < S; s++) {
        int32_t ql = qs[s + 1] - qs[s], len = b->seq_lens[s];
        if (ql < 1)
            BAD("seq %d has %d query tokens", s, ql);
        if (ql > b->max_query_len || len > b->max_seq_len)
            BAD("seq %d: qlen %d / len %d above the batch bounds %d / %d", s, ql, len,
                b->max_query_len, b->max_seq_len);
        if (len > W * BS || len > cfg->max_position)
            BAD("seq %d: length %d exceeds its block table (%d x %d) or max position", s, len,
                W, BS);
        if (!b->all_logits && b->logits_rows[s] != qs[s + 1] - 1)
            BAD("seq %d: logits row %d, expected %d", s, b->logits_rows[s], qs[s + 1] - 1);
        for (int32_t r = qs[s]; r < qs[s + 1]; r++) {
            int32_t p = len - ql + (r - qs[s]);
            if (pos[r] != p)
                BAD("row %d (seq %d): position %d, expected %d", r, s, pos[r], p);
            if (slot[r] == -1)
                continue;
            int32_t blk = b->block_tables[(size_t)s * (size_t)W + (size_t)(p / BS)];
            if (blk <= 0 || blk >= kv->n_blocks)
                BAD("row %d (seq %d): block %d (block 0 is reserved)", r, s, blk);
            if (slot[r] != blk * BS + p % BS)
                BAD("row %d (seq %d): slot %d, block table says %d", r, s, slot[r],
                    blk * BS + p % BS);
            if (b->token_ids[r] < 0 || b->token_ids[r] >= cfg->vocab)
                BAD("row %d: token id %d", r, b->token_ids[r]);
        }
    }
    /* write this step's K/V */
    for (int32_t r = 0; r < T; r++) {
        if (slot[r] < 0)
            continue;
        float vals[4] = {(float)(b->token_ids[r] % 256), (float)(b->token_ids[r] / 256),
                         (float)(pos[r] % 256), (float)(pos[r] / 256)};
        for (int32_t l = 0; l < kv->n_layers; l++)
            for (int32_t h = 0; h < kv->n_kv_heads; h++)
                for (int32_t d = 0; d < kv->head_dim; d++) {
                    float v = d < 4 ? vals[d] : (float)(l + h);
                    llmrt_store_f(kv->k[l], kv->dtype, (int64_t)kv_index(kv, slot[r], h, d), v);
                    llmrt_store_f(kv->v[l], kv->dtype, (int64_t)kv_index(kv, slot[r], h, d), v);
                }
    }
    /* logits from the context read back through the block tables */
    for (int32_t s = 0; s < S; s++) {
        int32_t ql = qs[s + 1] - qs[s], len = b->seq_lens[s];
        const int32_t *bt = b->block_tables + (size_t)s * (size_t)W;
        llmrt_status st = read_context(m, kv, bt, W, len, s, err);
        if (st)
            return st;
        if (b->all_logits) {
            for (int32_t r = qs[s]; r < qs[s + 1]; r++)
                mock_model_logits(cfg, m->ctx, len - ql + (r - qs[s]) + 1,
                                  logits + (size_t)r * (size_t)cfg->vocab);
        } else {
            mock_model_logits(cfg, m->ctx, len, logits + (size_t)s * (size_t)cfg->vocab);
        }
    }
    return LLMRT_OK;
}

/* forward_argmax: forward, the argmax of each row, and then the logits poisoned with NaN —
 * the contract leaves them unspecified, so an engine that still read them (a row sampled on
 * the host, logprobs) would see it. */
static llmrt_status run_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                       const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                       llmrt_error *err)
{
    llmrt_status st = run_forward(m, batch, kv, logits, err);
    if (st)
        return st;
    if (batch->all_logits)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL, "mock model: forward_argmax with all_logits");
    m->argmax_forwards++;
    const int32_t V = m->cfg.vocab;
    for (int32_t s = 0; s < batch->n_seqs; s++) {
        out[s] = llmrt_sampler_argmax(logits + (size_t)s * (size_t)V, V);
        for (int32_t i = 0; i < V; i++)
            logits[(size_t)s * (size_t)V + (size_t)i] = NAN;
    }
    return LLMRT_OK;
}

static llmrt_status mm_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                      const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                      llmrt_error *err)
{
    if (is_ops_backend(&m->be) && M(m->be.b)->capture) {
        rec_op op = {.kind = 5, .model = m, .batch = *batch, .kv = kv, .flogits = logits,
                     .out = out};
        record(m->be.b, &op);
        return LLMRT_OK;
    }
    return run_forward_argmax(m, batch, kv, logits, out, err);
}

static llmrt_status mm_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                               float *logits, llmrt_error *err)
{
    if (is_ops_backend(&m->be) && M(m->be.b)->capture) {
        rec_op op = {.kind = 4, .model = m, .batch = *batch, .kv = kv, .flogits = logits};
        record(m->be.b, &op);
        return LLMRT_OK;
    }
    return run_forward(m, batch, kv, logits, err);
}

static llmrt_status mm_probe(const char *config_json, llmrt_error *err)
{
    return strstr(config_json, "MockForCausalLM") ? LLMRT_OK : LLMRT_ERR_NOT_FOUND;
}

static int json_int(json_t *o, const char *key, int def)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        return (int)json_integer_value(v);
    if (json_is_array(v) && json_is_integer(json_array_get(v, 0)))
        return (int)json_integer_value(json_array_get(v, 0));
    return def;
}

static llmrt_status mm_create(const llmrt_host *host, const llmrt_section *cfg,
                              const llmrt_checkpoint *ckpt, const llmrt_backend_ref *backend,
                              const llmrt_quant_ref *quant, const llmrt_model_params *params,
                              llmrt_model **out, llmrt_error *err)
{
    json_error_t je;
    json_t *root = json_loads(ckpt->config_json, 0, &je);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "mock model: config.json: %s", je.text);
    mock_model_cfg c = mock_model_default_cfg();
    c.vocab = json_int(root, "vocab_size", c.vocab);
    c.n_layers = json_int(root, "num_hidden_layers", c.n_layers);
    c.n_kv_heads = json_int(root, "num_key_value_heads", c.n_kv_heads);
    c.head_dim = json_int(root, "head_dim", c.head_dim);
    c.max_position = json_int(root, "max_position_embeddings", c.max_position);
    c.eos_id = json_int(root, "eos_token_id", c.eos_id);
    c.eos_after = json_int(root, "mock_eos_after", c.eos_after);
    json_decref(root);
    return mock_model_create(&c, backend, params, out, err);
}

const llmrt_model_vtable mock_model_vtable = {
    .struct_size = sizeof(llmrt_model_vtable),
    .probe = mm_probe,
    .create = mm_create,
    .destroy = mock_model_destroy,
    .info = mm_info,
    .forward = mm_forward,
    .forward_argmax = mm_forward_argmax,
};

const llmrt_plugin_desc mock_model_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_MODEL,
    .name = "mock",
    .version = "1.0.0",
    .description = "test model: logits are a hash of the context read back from the KV cache",
    .license = "MIT",
    .vtable = &mock_model_vtable,
    .init = NULL,
};

/* ======================================================================= the rig */

#include "test_util.h"

static const char *const rig_host_kv[] = {"memory.fallback", "pageable", NULL};

mock_rig_opts mock_rig_default_opts(void)
{
    mock_rig_opts o;
    memset(&o, 0, sizeof o);
    o.memory = "pageable";
    o.ops.argmax = 1;
    o.ops.sample = 1;
    o.model = mock_model_default_cfg();
    llmrt_engine_settings_default(&o.set);
    o.set.kv_tokens = 4096;
    o.set.async_scheduling = 0;
    return o;
}

llmrt_status mock_rig_open(mock_rig *r, const mock_rig_opts *o, llmrt_error *err)
{
    memset(r, 0, sizeof *r);
    r->host = mock_host(rig_host_kv);
    r->be = mock_ops_backend_new(&o->ops);
    char file[128];
    snprintf(file, sizeof file, "memory-%s.so", o->memory);
    char *path = tu_plugin_path(file);
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    free(path);
    if (!d)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "memory plugin %s not built", file);
    const llmrt_memory_vtable *mvt = d->vtable;
    llmrt_section empty = {"memory", 0, NULL, NULL, NULL};
    llmrt_memory *m = NULL;
    llmrt_status st = mvt->create(&r->host, &empty, &r->be, &m, err);
    if (st)
        return st;
    r->mem.vt = mvt, r->mem.m = m, r->mem.name = d->name;
    llmrt_model_params mp = {o->set.max_num_batched_tokens, o->set.max_num_seqs, NULL};
    st = mock_model_create(&o->model, &r->be, &mp, &r->model, err);
    if (st)
        return st;
    llmrt_engine_parts parts;
    memset(&parts, 0, sizeof parts);
    parts.backend = r->be;
    parts.memory = r->mem;
    parts.model_vt = &mock_model_vtable;
    parts.model = r->model;
    parts.tokenizer = o->tok;
    r->eos = o->model.eos_id;
    parts.eos_ids = o->n_eos ? o->eos : &r->eos;
    parts.n_eos = o->n_eos ? o->n_eos : (r->eos >= 0 ? 1 : 0);
    parts.model_path = "(mock)";
    parts.sampling = o->sampling;
    llmrt_engine_options eo;
    llmrt_engine_options_init(&eo);
    eo.quiet = 1;
    eo.on_step = o->on_step;
    eo.step_user = o->step_user;
    return llmrt_engine_create_from_parts(&parts, &o->set, &eo, &r->e, err);
}

void mock_rig_close(mock_rig *r)
{
    llmrt_engine_destroy(r->e);
    r->e = NULL;
    mock_model_destroy(r->model);
    r->model = NULL;
    if (r->mem.m)
        r->mem.vt->destroy(r->mem.m);
    r->mem.m = NULL;
    if (r->be.b)
        mock_ops_backend_free(&r->be);
}
