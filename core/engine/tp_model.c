/* tp_model.c — runtime.tensor_parallel ranks as one model (see tp_model.h).
 *
 * One process, one thread per rank: NCCL's one-process form (ncclCommInitAll) and the CPU's
 * in-process collectives both want it, the engine stays single-threaded towards its users,
 * and nothing crosses a process boundary. A forward: rank 0's thread (the engine's) prepares
 * what each rank needs that allocates (its KV cache of the engine's geometry, room for the
 * step's index arrays) — so no rank can fail alone once collectives start — then releases
 * the worker threads and runs rank 0; every rank broadcasts the step's arrays from rank 0 and
 * runs its shard's forward (only rank 0 writes logits); rank 0 returns once every worker has
 * enqueued its forward. */
#include "tp_model.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/collective.h>

#include "config.h"
#include "error.h"
#include "kv_cache.h"
#include "log.h"

enum { N_ARRAYS = 7 };

typedef struct tp_rank {
    llmrt_backend_ref be;   /* rank 0: the caller's */
    llmrt_quant_ref quant;  /* rank 0: the caller's */
    llmrt_model *model;
    llmrt_kv kv;            /* ranks > 0: the engine's geometry on this rank's backend */
    int kv_ok;
    void *arrays;           /* ranks > 0: the step's index arrays (device) */
    size_t arrays_cap;
    pthread_t th;
    int th_ok;
    llmrt_status st;        /* the last forward's */
    llmrt_error err;
} tp_rank;

typedef struct tp_model {
    llmrt_model_vtable self;      /* the group's vtable: tp_vtable_base + the plugin's chat */
    const llmrt_model_vtable *vt; /* the shards' plugin */
    const llmrt_collective_ops *coll;
    int32_t n;
    int group_ok;
    tp_rank *r; /* [n] */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int32_t n_done;
    int quit;
    /* the forward in flight */
    const llmrt_batch *batch;
    size_t bytes[N_ARRAYS];
} tp_model;

/* The step's index arrays in the order they are broadcast, with their sizes in bytes. */
static void array_sizes(const llmrt_batch *b, size_t *bytes)
{
    const size_t T = (size_t)b->n_tokens, S = (size_t)b->n_seqs, I = sizeof(int32_t);
    bytes[0] = T * I, bytes[1] = T * I, bytes[2] = T * I;
    bytes[3] = (S + 1) * I, bytes[4] = S * I;
    bytes[5] = S * (size_t)b->max_blocks_per_seq * I;
    bytes[6] = b->logits_rows ? S * I : 0;
}

static const int32_t **array_slot(llmrt_batch *b, int i)
{
    const int32_t **p[N_ARRAYS] = {&b->token_ids,  &b->positions,    &b->slot_mapping,
                                   &b->query_start, &b->seq_lens,    &b->block_tables,
                                   &b->logits_rows};
    return p[i];
}

/* Rank r's part of a forward: the arrays from rank 0 into its own (rank 0 sends), then its
 * shard's forward on them. */
static llmrt_status rank_forward(tp_model *t, int32_t r, const llmrt_kv_cache *kv0,
                                 float *logits, int32_t *argmax_out, llmrt_error *err)
{
    tp_rank *R = &t->r[r];
    llmrt_batch b = *t->batch;
    llmrt_status st;
    size_t off = 0;
    for (int i = 0; i < N_ARRAYS; i++) {
        const int32_t **slot = array_slot(&b, i);
        if (!t->bytes[i])
            continue;
        void *buf = r == 0 ? (void *)*slot : (char *)R->arrays + off;
        if ((st = t->coll->broadcast(R->be.b, buf, t->bytes[i], err)))
            return st;
        *slot = buf;
        off += (t->bytes[i] + 255) & ~(size_t)255;
    }
    if (r == 0)
        return argmax_out ? t->vt->forward_argmax(R->model, &b, kv0, logits, argmax_out, err)
                          : t->vt->forward(R->model, &b, kv0, logits, err);
    return t->vt->forward(R->model, &b, &R->kv.view, NULL, err);
}

typedef struct worker_arg {
    tp_model *t;
    int32_t r;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    tp_model *t = wa.t;
    tp_rank *R = &t->r[wa.r];
    uint64_t seen = 0;
    llmrt_error aerr = {0};
    if (t->coll->attach_thread(R->be.b, &aerr) != LLMRT_OK)
        LOG_WARN("tensor parallel rank %d: %s", (int)wa.r, aerr.msg);
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->quit && t->gen == seen)
            pthread_cond_wait(&t->go, &t->mu);
        if (t->quit)
            break;
        seen = t->gen;
        pthread_mutex_unlock(&t->mu);
        memset(&R->err, 0, sizeof R->err);
        R->st = rank_forward(t, wa.r, NULL, NULL, NULL, &R->err);
        pthread_mutex_lock(&t->mu);
        t->n_done++;
        pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* What ranks > 0 need for this batch, allocated here (rank 0's thread) so that no rank fails
 * alone once the collectives start. */
static llmrt_status prepare(tp_model *t, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                            llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    array_sizes(batch, t->bytes);
    size_t need = 0;
    for (int i = 0; i < N_ARRAYS; i++)
        need += (t->bytes[i] + 255) & ~(size_t)255;
    for (int32_t r = 1; r < t->n; r++) {
        tp_rank *R = &t->r[r];
        if (R->kv_ok && (R->kv.n_blocks != kv->n_blocks || R->kv.block_size != kv->block_size ||
                         R->kv.dtype != kv->dtype || R->kv.n_layers != kv->n_layers ||
                         R->kv.n_kv_heads != kv->n_kv_heads || R->kv.head_dim != kv->head_dim)) {
            llmrt_kv_free(&R->kv);
            R->kv_ok = 0;
        }
        if (!R->kv_ok) {
            st = llmrt_kv_init(&R->kv, &R->be, kv->n_layers, kv->n_kv_heads, kv->head_dim,
                               kv->block_size, kv->n_blocks - 1, kv->dtype, err);
            if (st) {
                llmrt_error_prefix(err, "tensor-parallel rank %d", (int)r);
                return st;
            }
            R->kv_ok = 1;
        }
        if (R->arrays_cap < need) {
            if (R->arrays)
                R->be.vt->dev_free(R->be.b, R->arrays);
            R->arrays = NULL;
            R->arrays_cap = 0;
            size_t cap = need < 4096 ? 4096 : 2 * need;
            if ((st = R->be.vt->dev_alloc(R->be.b, cap, &R->arrays, err))) {
                llmrt_error_prefix(err, "tensor-parallel rank %d: step arrays", (int)r);
                return st;
            }
            R->arrays_cap = cap;
        }
    }
    return st;
}

static llmrt_status run(tp_model *t, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                        float *logits, int32_t *out, llmrt_error *err)
{
    if (!batch || !kv)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "tensor parallel forward: batch and kv "
                                                      "are required");
    llmrt_status st = prepare(t, batch, kv, err);
    if (st)
        return st;
    pthread_mutex_lock(&t->mu);
    t->batch = batch;
    t->n_done = 0;
    t->gen++;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    st = rank_forward(t, 0, kv, logits, out, err);
    pthread_mutex_lock(&t->mu);
    while (t->n_done < t->n - 1)
        pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
    if (st)
        return st;
    for (int32_t r = 1; r < t->n; r++)
        if (t->r[r].st) {
            *err = t->r[r].err;
            llmrt_error_prefix(err, "tensor-parallel rank %d", (int)r);
            return t->r[r].st;
        }
    return LLMRT_OK;
}

static llmrt_status tp_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                               float *logits, llmrt_error *err)
{
    return run((tp_model *)m, batch, kv, logits, NULL, err);
}

static llmrt_status tp_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                      const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                      llmrt_error *err)
{
    if (!out)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "tensor parallel forward_argmax: an output buffer is required");
    return run((tp_model *)m, batch, kv, logits, out, err);
}

static void tp_info(llmrt_model *m, llmrt_model_info *out)
{
    tp_model *t = (tp_model *)m;
    t->vt->info(t->r[0].model, out);
    uint64_t bytes = 0;
    for (int32_t r = 0; r < t->n; r++) {
        llmrt_model_info ri;
        memset(&ri, 0, sizeof ri);
        t->vt->info(t->r[r].model, &ri);
        bytes += ri.weight_bytes;
    }
    out->weight_bytes = bytes; /* over every rank */
    out->tp_size = t->n;
}

static void tp_destroy(llmrt_model *m)
{
    tp_model *t = (tp_model *)m;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    for (int32_t r = 1; r < t->n; r++)
        if (t->r[r].th_ok)
            pthread_join(t->r[r].th, NULL);
    for (int32_t r = 0; r < t->n; r++) {
        tp_rank *R = &t->r[r];
        if (R->be.b && t->coll)
            t->coll->attach_thread(R->be.b, &R->err);
        if (R->model)
            t->vt->destroy(R->model);
        if (r == 0)
            continue;
        if (R->kv_ok)
            llmrt_kv_free(&R->kv);
        if (R->arrays)
            R->be.vt->dev_free(R->be.b, R->arrays);
        if (R->quant.q)
            R->quant.vt->destroy(R->quant.q);
    }
    if (t->group_ok) {
        llmrt_backend *bs[16];
        for (int32_t r = 0; r < t->n; r++)
            bs[r] = t->r[r].be.b;
        t->coll->group_free(bs, t->n);
    }
    for (int32_t r = 1; r < t->n; r++)
        llmrt_runtime_backend_close(&t->r[r].be);
    if (t->n > 0 && t->r[0].be.b && t->coll)
        t->coll->attach_thread(t->r[0].be.b, &t->r[0].err);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->go);
    pthread_cond_destroy(&t->done);
    free(t->r);
    free(t);
}

static llmrt_status tp_probe(const char *config_json, llmrt_error *err)
{
    (void)config_json;
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "the tensor-parallel group is not a plugin");
}

static const llmrt_model_vtable tp_vtable_base = {
    .struct_size = sizeof(llmrt_model_vtable),
    .probe = tp_probe,
    .destroy = tp_destroy,
    .info = tp_info,
    .forward = tp_forward,
    .forward_argmax = tp_forward_argmax,
};

llmrt_status llmrt_tp_model_create(llmrt_runtime *rt, int32_t n, const llmrt_checkpoint *ck,
                                   const llmrt_plugin_entry *me, const llmrt_plugin_entry *qe,
                                   const char *quant_json, const llmrt_backend_ref *be0,
                                   const llmrt_quant_ref *q0, const llmrt_model_params *params,
                                   const llmrt_model_vtable **vt_out, llmrt_model **out,
                                   llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char section[96];
    const llmrt_model_vtable *mvt = me->desc->vtable;
    if (n < 2 || n > 16)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "runtime.tensor_parallel = %d: want 2..16",
                          (int)n);
    const llmrt_collective_ops *coll =
        llmrt_backend_extension(be0->vt, be0->b, LLMRT_EXT_COLLECTIVE,
                                LLMRT_EXT_COLLECTIVE_VERSION);
    if (!coll || !LLMRT_VT_HAS(coll, llmrt_collective_ops, attach_thread))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "runtime.tensor_parallel = %d: backend '%s' has no collectives (the "
                          "\"llmrt.collective\" extension); use tensor_parallel = 1",
                          (int)n, be0->name ? be0->name : "?");
    tp_model *t = calloc(1, sizeof *t);
    TRY_ALLOC(err, t, "the tensor-parallel group");
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    t->vt = mvt;
    t->coll = coll;
    t->r = calloc((size_t)n, sizeof *t->r);
    if (!t->r) {
        free(t);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory: the tensor-parallel group");
    }
    t->n = n;
    t->r[0].be = *be0;
    if (q0)
        t->r[0].quant = *q0;
    for (int32_t r = 1; r < n; r++) {
        TRY(llmrt_runtime_backend_open_rank(rt, r, &t->r[r].be, err));
        if (t->r[r].be.vt != be0->vt)
            FAIL(err, LLMRT_ERR_INTERNAL, "tensor-parallel rank %d opened another backend plugin",
                 (int)r);
    }
    {
        llmrt_backend *bs[16];
        for (int32_t r = 0; r < n; r++)
            bs[r] = t->r[r].be.b;
        st = coll->group_init(bs, n, err);
        if (st) {
            llmrt_error_prefix(err, "runtime.tensor_parallel = %d", (int)n);
            goto cleanup;
        }
        t->group_ok = 1;
    }
    for (int32_t r = 0; r < n; r++) {
        tp_rank *R = &t->r[r];
        TRY(coll->attach_thread(R->be.b, err));
        if (r > 0 && qe) {
            const llmrt_quant_vtable *qvt = qe->desc->vtable;
            snprintf(section, sizeof section, "quant.%s", qe->desc->name);
            st = qvt->create(&rt->host, llmrt_config_plugin_section(rt->cfg, section), quant_json,
                             &R->be, &R->quant.q, err);
            if (st) {
                llmrt_error_prefix(err, "quant plugin '%s' of tensor-parallel rank %d",
                                   qe->desc->name, (int)r);
                goto cleanup;
            }
            R->quant.vt = qvt;
            R->quant.name = qe->desc->name;
        }
        snprintf(section, sizeof section, "model.%s", me->desc->name);
        st = mvt->create(&rt->host, llmrt_config_plugin_section(rt->cfg, section), ck, &R->be,
                         qe ? &R->quant : NULL, params, &R->model, err);
        if (st) {
            llmrt_error_prefix(err, "tensor-parallel rank %d of %d", (int)r, (int)n);
            goto cleanup;
        }
        llmrt_model_info info;
        memset(&info, 0, sizeof info);
        mvt->info(R->model, &info);
        if (info.tp_size != n)
            FAIL(err, LLMRT_ERR_UNSUPPORTED,
                 "runtime.tensor_parallel = %d: model plugin '%s' does not shard itself "
                 "(it reports tp_size %d; use tensor_parallel = 1)",
                 (int)n, me->desc->name, (int)info.tp_size);
    }
    TRY(coll->attach_thread(be0->b, err));
    for (int32_t r = 1; r < n; r++) {
        worker_arg *wa = malloc(sizeof *wa);
        TRY_ALLOC(err, wa, "a rank thread");
        wa->t = t, wa->r = r;
        if (pthread_create(&t->r[r].th, NULL, worker_main, wa) != 0) {
            free(wa);
            FAIL(err, LLMRT_ERR_NOMEM, "tensor parallel: cannot start the thread of rank %d",
                 (int)r);
        }
        t->r[r].th_ok = 1;
    }
    t->self = tp_vtable_base;
    if (LLMRT_VT_HAS(mvt, llmrt_model_vtable, chat))
        t->self.chat = mvt->chat;
    *vt_out = &t->self;
    *out = (llmrt_model *)t;
    LOG_INFO("tensor parallel: %d ranks on %s (one thread per rank)", (int)n,
             be0->name ? be0->name : "?");
    return LLMRT_OK;
cleanup:
    tp_destroy((llmrt_model *)t);
    return st;
}
