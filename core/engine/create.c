/* create.c — an engine from open parts (llmrt_engine_create_from_parts, engine_parts.h) and
 * its end (llmrt_engine_destroy): the KV element type, the longest sequence and the KV
 * capacity (cache.kv_tokens, else from the device's free memory and
 * cache.gpu_memory_utilization, else the cpu default) and its prefix cache, the step buffers,
 * scheduler and sampler, the events of both step halves, what the backend and memory path allow (async
 * scheduling, graphs), and the published facts.
 *
 * Why apart from open.c: tests and tools build engines from parts they opened themselves
 * (mock model, mock backend); llmrt_engine_create (open.c) opens them from runtime.ini. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine_internal.h"
#include "error.h"
#include "log.h"

#define CPU_DEFAULT_KV_TOKENS 8192

void llmrt_engine_options_init(llmrt_engine_options *o) { memset(o, 0, sizeof *o); }

static const char *gib(uint64_t bytes, char *buf, size_t n)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, n, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    return buf;
}

/* Capacity in tokens from the device's memory (cache.gpu_memory_utilization). */
static llmrt_status gpu_capacity(llmrt_engine *e, uint64_t bytes_per_token, int64_t *tokens,
                                 llmrt_error *err)
{
    uint64_t free_b = e->dev.mem_free, total = e->dev.mem_total;
    if (e->bvt->mem_info) {
        llmrt_status st = e->bvt->mem_info(e->b, &free_b, &total, err);
        if (st) {
            llmrt_error_prefix(err, "measuring device memory for the KV cache");
            return st;
        }
    }
    if (total == 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "the backend reports no device memory size, so the KV cache cannot "
                          "be sized from cache.gpu_memory_utilization; set cache.kv_tokens");
    double util = e->set.gpu_memory_utilization;
    double used = (double)(total - (free_b < total ? free_b : total));
    double budget = util * (double)total - used;
    char a[32], b[32], c[32];
    if (budget < (double)bytes_per_token * e->set.block_size)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "no room for a KV cache: cache.gpu_memory_utilization = %.2f allows "
                          "%s of %s device memory, but %s is already used after loading the "
                          "model (raise cache.gpu_memory_utilization, or set cache.kv_tokens)",
                          util, gib((uint64_t)(util * (double)total), a, sizeof a),
                          gib(total, b, sizeof b), gib((uint64_t)used, c, sizeof c));
    /* whole blocks only, and one of them is the reserved zero block */
    int64_t blocks = (int64_t)(budget / ((double)bytes_per_token * e->set.block_size)) - 1;
    if (blocks < 1)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "no room for a KV cache: cache.gpu_memory_utilization = %.2f leaves "
                          "%.0f bytes after loading, less than two blocks of %d tokens (raise "
                          "cache.gpu_memory_utilization, or set cache.kv_tokens)",
                          util, budget, e->set.block_size);
    *tokens = blocks * e->set.block_size;
    snprintf(e->capacity_source, sizeof e->capacity_source,
             "cache.gpu_memory_utilization = %.2f", util);
    return LLMRT_OK;
}

/* "temperature 0.6, top_p 0.95, top_k 20": the model folder's sampling defaults. */
static void sampling_text(const llmrt_hf_sampling *g, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
#define ITEM(bit, fmt, v)                                                                     \
    if ((g->set & (bit)) && n < cap)                                                          \
        n += (size_t)snprintf(buf + n, cap - n, "%s" fmt, n ? ", " : "", v);
    ITEM(LLMRT_SAMPLING_TEMPERATURE, "temperature %g", (double)g->temperature)
    ITEM(LLMRT_SAMPLING_TOP_P, "top_p %g", (double)g->top_p)
    ITEM(LLMRT_SAMPLING_TOP_K, "top_k %d", (int)g->top_k)
    ITEM(LLMRT_SAMPLING_MIN_P, "min_p %g", (double)g->min_p)
    ITEM(LLMRT_SAMPLING_REPETITION_PENALTY, "repetition_penalty %g", (double)g->repetition_penalty)
#undef ITEM
}

llmrt_status llmrt_engine_create_from_parts(const llmrt_engine_parts *parts,
                                            const llmrt_engine_settings *settings,
                                            const llmrt_engine_options *opts,
                                            llmrt_engine **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    double t0 = llmrt_now_s();
    llmrt_engine *e = calloc(1, sizeof *e);
    if (!e) {
        if (parts->release)
            parts->release(parts->release_ctx);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    e->parts = *parts;
    sampling_text(&parts->sampling, e->sampling_text, sizeof e->sampling_text);
    e->set = *settings;
    if (opts)
        e->opts = *opts;
    e->cur = NO_FLIGHT;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->bvt = parts->backend.vt;
    e->b = parts->backend.b;
    e->on_step = e->opts.on_step;
    e->step_user = e->opts.step_user;
    if (!e->bvt || !e->b || !parts->memory.vt || !parts->model_vt || !parts->model)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "engine: backend, memory plugin and model are required");
    e->be_caps = e->bvt->caps(e->b);
    {
        llmrt_error derr = {0};
        if (e->bvt->device_info(e->b, &e->dev, &derr) != LLMRT_OK)
            snprintf(e->dev.name, sizeof e->dev.name, "unknown device");
    }
    llmrt_sched_default_limits(e->dev.is_gpu, &e->set.max_num_seqs,
                               &e->set.max_num_batched_tokens);
    parts->model_vt->info(parts->model, &e->info);
    const llmrt_model_info *mi = &e->info;
    if (mi->n_layers <= 0 || mi->n_kv_heads <= 0 || mi->head_dim <= 0 || mi->vocab <= 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "the model reports an unusable geometry (layers %d, kv heads %d, head dim %d, "
             "vocab %d)",
             mi->n_layers, mi->n_kv_heads, mi->head_dim, mi->vocab);
    const llmrt_engine_settings *S = &e->set;
    if (S->block_size < 1 || S->max_num_seqs < 1 || S->max_num_batched_tokens < 1)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "engine settings: cache.block_size %d, scheduler.max_num_seqs %d, "
             "scheduler.max_num_batched_tokens %d (each must be >= 1)",
             S->block_size, S->max_num_seqs, S->max_num_batched_tokens);
    if (parts->n_eos > 0) {
        e->eos = malloc(sizeof *e->eos * (size_t)parts->n_eos);
        TRY_ALLOC(err, e->eos, "eos ids");
        memcpy(e->eos, parts->eos_ids, sizeof *e->eos * (size_t)parts->n_eos);
        e->n_eos = parts->n_eos;
    }

    /* KV element type: auto = f32 where device memory is host memory (cpu), else the model's
     * f16/bf16 */
    llmrt_dtype kv_dtype = S->kv_dtype;
    if (kv_dtype == LLMRT_DTYPE_INVALID)
        kv_dtype = !(e->be_caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) &&
                           (mi->weight_dtype == LLMRT_DTYPE_F16 ||
                            mi->weight_dtype == LLMRT_DTYPE_BF16)
                       ? mi->weight_dtype
                       : LLMRT_DTYPE_F32; /* the rule `llmrt logits` uses too */
    uint64_t per_token = llmrt_kv_bytes_per_token(mi->n_layers, mi->n_kv_heads, mi->head_dim,
                                                  kv_dtype);

    /* Longest sequence: the user's, else the model's; capacity may lower it below. */
    int64_t want_len = S->max_model_len > 0 ? S->max_model_len : mi->max_position;
    if (S->max_model_len > 0 && mi->max_position > 0 && S->max_model_len > mi->max_position)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "cache.max_model_len = %d is longer than the model's max_position_embeddings = "
             "%d (use at most %d, or 0 for the model's own)",
             S->max_model_len, mi->max_position, mi->max_position);

    int64_t capacity = 0;
    int gpu_auto = S->kv_tokens <= 0 && e->dev.is_gpu;
    if (S->kv_tokens > 0) {
        capacity = S->kv_tokens;
        snprintf(e->capacity_source, sizeof e->capacity_source, "cache.kv_tokens");
    } else if (!gpu_auto) {
        capacity = CPU_DEFAULT_KV_TOKENS > S->max_model_len ? CPU_DEFAULT_KV_TOKENS
                                                            : S->max_model_len;
        snprintf(e->capacity_source, sizeof e->capacity_source,
                 "default for the cpu backend");
    }
    if (want_len <= 0 && capacity <= 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "the model reports no max_position_embeddings; set cache.max_model_len");
    if (want_len <= 0)
        want_len = capacity;

    /* Step buffers first, so a GPU-sized cache accounts for them. */
    int64_t len_bound = capacity > 0 && capacity < want_len ? capacity : want_len;
    int32_t width = (int32_t)((len_bound + S->block_size - 1) / S->block_size);
    TRY(llmrt_step_buffers_init(&e->sb, &parts->backend, &parts->memory,
                                S->max_num_batched_tokens, S->max_num_seqs, width, mi->vocab,
                                err));
    e->sb_ok = 1;
    if (gpu_auto)
        TRY(gpu_capacity(e, per_token, &capacity, err));
    int64_t blocks = (capacity + S->block_size - 1) / S->block_size;
    if (blocks > INT32_MAX - 1)
        blocks = INT32_MAX - 1;
    capacity = blocks * S->block_size;
    if (S->max_model_len > 0 && S->max_model_len > capacity)
        FAIL(err, LLMRT_ERR_LIMIT,
             "cache.max_model_len = %d does not fit in the KV cache of %lld tokens (%s); raise "
             "cache.kv_tokens or lower cache.max_model_len",
             S->max_model_len, (long long)capacity, e->capacity_source);
    e->max_model_len = (int32_t)(want_len < capacity ? want_len : capacity);
    e->max_bt_width = (e->max_model_len + S->block_size - 1) / S->block_size;
    if (e->max_bt_width > width)
        FAIL(err, LLMRT_ERR_INTERNAL, "block table width %d > allocated %d", e->max_bt_width,
             width);
    TRY(llmrt_kv_init(&e->kv, &parts->backend, mi->n_layers, mi->n_kv_heads, mi->head_dim,
                      S->block_size, (int32_t)blocks, kv_dtype, err));
    e->kv_ok = 1;
    if (S->prefix_caching)
        TRY(llmrt_kv_prefix_enable(&e->kv, err));
    TRY(llmrt_sched_init(&e->sched, &e->kv, S->max_num_seqs, S->max_num_batched_tokens, err));
    e->sched_ok = 1;
    TRY(llmrt_sampler_new(mi->vocab, &e->sampler, err));
    e->row_scratch = malloc(sizeof(float) * (size_t)mi->vocab);
    e->sampled = calloc((size_t)S->max_num_seqs, sizeof *e->sampled);
    e->lp_buf = calloc((size_t)S->max_num_seqs, sizeof *e->lp_buf);
    e->top_ids = calloc((size_t)S->max_num_seqs * LLMRT_MAX_TOP_LOGPROBS, sizeof *e->top_ids);
    e->top_lps = calloc((size_t)S->max_num_seqs * LLMRT_MAX_TOP_LOGPROBS, sizeof *e->top_lps);
    TRY_ALLOC(err, e->row_scratch && e->sampled && e->lp_buf && e->top_ids && e->top_lps,
              "sampling buffers");
    e->row_fate = calloc((size_t)S->max_num_seqs, 1);
    TRY_ALLOC(err, e->row_fate, "step bookkeeping");
    TRY(engine_grammar_init(e, err));
    if (e->mask_words) {
        e->repick_words = malloc((size_t)e->mask_words * sizeof *e->repick_words);
        TRY_ALLOC(err, e->repick_words, "a token mask");
    }
    for (int f = 0; f < 2; f++) {
        e->fl[f].items = calloc((size_t)S->max_num_seqs, sizeof *e->fl[f].items);
        e->fl[f].row_host = calloc((size_t)S->max_num_seqs, 1);
        TRY_ALLOC(err, e->fl[f].items && e->fl[f].row_host, "step bookkeeping");
        for (int k = 0; k < EV_COUNT; k++)
            TRY(e->bvt->event_create(e->b, &e->ev[f][k], err));
    }

    /* What the backend and memory path allow. */
    const uint32_t mc = e->sb.mem_caps;
    e->out_shared = e->sb.out.host[0] == e->sb.out.host[1];
    e->in_shared_async = e->sb.in.host[0] == e->sb.in.host[1] &&
                         e->sb.in.path != LLMRT_MEM_PATH_PAGEABLE;
    e->async_on = S->async_scheduling && (e->be_caps & LLMRT_BACKEND_CAP_ASYNC) &&
                  !(e->out_shared && (mc & LLMRT_MEM_CAP_ZERO_COPY));
    e->graphs_on = S->cuda_graphs && (e->be_caps & LLMRT_BACKEND_CAP_GRAPHS) &&
                   e->bvt->graph_begin && e->bvt->graph_end && e->bvt->graph_launch &&
                   e->bvt->graph_destroy;
    e->copies_in_graph = (mc & LLMRT_MEM_CAP_COPIES_CAPTURABLE) &&
                         (mc & LLMRT_MEM_CAP_DOUBLE_BUFFERED);
    e->outputs_in_place = (mc & LLMRT_MEM_CAP_ZERO_COPY) != 0;
    e->inputs_in_place = e->outputs_in_place && !(mc & LLMRT_MEM_CAP_INPUTS_GATHERED);
    {
        llmrt_mem_stats ms;
        memset(&ms, 0, sizeof ms);
        parts->memory.vt->stats(parts->memory.m, &ms);
        e->offload_bytes = ms.offload_layers > 0 ? ms.offload_bytes : 0;
        if (ms.offload_layers > 0 && e->graphs_on && !(mc & LLMRT_MEM_CAP_OFFLOAD_CAPTURABLE)) {
            e->graphs_on = 0; /* the forward's own weight copies would not be captured */
            if (!e->opts.quiet)
                LOG_INFO("graphs off: the offloaded layers' weights are copied synchronously "
                         "(%s), which a graph cannot capture",
                         ms.offload_path);
        }
    }
    e->graph_events = e->graphs_on && e->copies_in_graph &&
                      (e->be_caps & LLMRT_BACKEND_CAP_GRAPH_EVENTS);
    e->graph_max_rows = S->max_num_seqs < S->max_num_batched_tokens ? S->max_num_seqs
                                                                     : S->max_num_batched_tokens;
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        e->seed_base = llmrt_sampler_mix((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
    }

    /* Published facts. */
    llmrt_engine_stats *P = &e->pub;
    P->kv_capacity_tokens = (int64_t)llmrt_kv_usable_blocks(&e->kv) * S->block_size;
    P->kv_blocks_total = llmrt_kv_usable_blocks(&e->kv);
    P->kv_block_size = S->block_size;
    P->kv_bytes = e->kv.bytes;
    snprintf(P->kv_dtype, sizeof P->kv_dtype, "%s", llmrt_dtype_name(kv_dtype));
    snprintf(P->kv_capacity_source, sizeof P->kv_capacity_source, "%s", e->capacity_source);
    P->max_model_len = e->max_model_len;
    P->max_num_seqs = S->max_num_seqs;
    P->max_num_batched_tokens = S->max_num_batched_tokens;
    P->async_scheduling = e->async_on;
    P->cuda_graphs = e->graphs_on;
    P->prefix_caching = e->kv.prefix_on;
    snprintf(P->backend, sizeof P->backend, "%s", parts->backend.name ? parts->backend.name : "?");
    snprintf(P->device, sizeof P->device, "%s", e->dev.name);
    snprintf(P->memory_plugin, sizeof P->memory_plugin, "%s",
             parts->memory.name ? parts->memory.name : "?");
    snprintf(P->model_arch, sizeof P->model_arch, "%s", mi->arch);
    snprintf(P->model_path, sizeof P->model_path, "%s", parts->model_path ? parts->model_path : "");
    snprintf(P->quant, sizeof P->quant, "%s", parts->quant_name ? parts->quant_name : "none");
    P->weight_bytes = mi->weight_bytes;
    if (e->bvt->mem_info) {
        llmrt_error merr = {0};
        uint64_t fr = 0, tot = 0;
        if (e->bvt->mem_info(e->b, &fr, &tot, &merr) == LLMRT_OK)
            P->device_mem_total = tot, P->device_mem_free = fr;
        if (parts->device_free_before > fr && P->device_mem_total)
            P->device_mem_engine = parts->device_free_before - fr;
    } else {
        P->device_mem_total = e->dev.mem_total;
        P->device_mem_free = e->dev.mem_free;
    }
    P->load_time_s = parts->load_time_s + (llmrt_now_s() - t0);
    engine_publish(e);
    if (!e->opts.quiet) {
        char a[32];
        LOG_INFO("KV cache: %lld tokens (%d blocks of %d), %s %s (%s); max_model_len %d; "
                 "prefix caching %s",
                 (long long)P->kv_capacity_tokens, P->kv_blocks_total, S->block_size,
                 gib(e->kv.bytes, a, sizeof a), P->kv_dtype, e->capacity_source,
                 e->max_model_len, e->kv.prefix_on ? "on" : "off");
        LOG_INFO("engine: backend %s (%s), memory path %s, async scheduling %s, graphs %s",
                 P->backend, P->device, P->memory_path, e->async_on ? "on" : "off",
                 e->graphs_on ? "on" : "off");
    }
    *out = e;
    return LLMRT_OK;
cleanup:
    llmrt_engine_destroy(e);
    return st;
}

void llmrt_engine_destroy(llmrt_engine *e)
{
    if (!e)
        return;
    if (e->bvt && e->b) {
        llmrt_error err = {0};
        e->bvt->synchronize(e->b, &err);
    }
    /* Everything still held ends as cancelled; results in the air are dropped. */
    if (e->sched_ok) {
        eseq **cancels = NULL;
        int32_t n_cancels = 0;
        engine_drain_inbox(e, &cancels, &n_cancels);
        free(cancels);
    }
    engine_end_all(e, LLMRT_FINISH_CANCELLED, NULL);
    engine_grammar_free_all(e); /* after every request (and its grammar handle) is gone */
    free(e->repick_words);
    free(e->row_fate);
    free(e->zombies);
    for (int i = 0; i < e->n_graphs; i++)
        if (e->graphs[i].g)
            e->bvt->graph_destroy(e->b, e->graphs[i].g);
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < EV_COUNT; k++)
            if (e->ev[f][k])
                e->bvt->event_destroy(e->b, e->ev[f][k]);
        free(e->fl[f].items);
        free(e->fl[f].row_host);
    }
    llmrt_sampler_free(e->sampler);
    free(e->row_scratch);
    free(e->sampled);
    free(e->lp_buf);
    free(e->top_ids);
    free(e->top_lps);
    if (e->sched_ok)
        llmrt_sched_free(&e->sched);
    if (e->kv_ok)
        llmrt_kv_free(&e->kv);
    if (e->sb_ok)
        llmrt_step_buffers_free(&e->sb);
    free(e->eos);
    free(e->cancels);
    free(e->text);
    HASH_CLEAR(hh, e->by_id);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    if (e->parts.release)
        e->parts.release(e->parts.release_ctx);
    free(e);
}
