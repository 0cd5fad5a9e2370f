/* step.c — the step loop: one step from the scheduler's plan to the tokens delivered
 * (llmrt_engine_step, llmrt_engine_run).
 *
 * One step, as data (DESIGN.md §3): the scheduler picks the batch; the host writes token
 * ids, positions, slot mapping, query starts, sequence lengths, block tables and sampling
 * parameters into half h of the step buffers; the memory plugin moves them (or not, for
 * zero-copy); the model runs its forward into device logits; the backend samples on the
 * device (argmax / sample) into the output buffer; the host reads the sampled ids, appends,
 * detokenizes, checks stops, calls the request's callback, frees finished sequences.
 *
 * Async scheduling: while the same sequences keep decoding, step N+1 is launched before the
 * host has read step N's tokens — its token ids are copied on the device from step N's
 * sampled ids — and the host processes step N's tokens one step behind. A sequence that
 * stops at N has its N+1 result discarded. Anything else (new requests to admit, a
 * cancellation, host-side sampling, a length limit reached) falls back to the plain
 * synchronous step.
 *
 * CUDA graphs: decode steps of 1, 2, 4, ..., 32, 64, 96, ... sequences (padded with rows that
 * write nowhere and read the zero block) are captured once per shape and replayed.
 *
 * Structured outputs (constrain.c): a step with rows under a grammar launches its forward
 * (from a graph without the sampling), computes those rows' token masks on the host while
 * the device runs it, then uploads them, masks the logits on the device and samples; it is
 * never chained, since each mask depends on the token before. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/logits_mask.h>

#include "clock.h"
#include "engine_internal.h"
#include "error.h"
#include "log.h"

/* ---------------------------------------------------------------- one step: host side */

static int row_needs_host(const llmrt_engine *e, const eseq *s)
{
    if (s->sp.logprobs >= 0 || llmrt_sampler_has_penalties(&s->sp))
        return 1;
    if (s->grammar && !e->mask_ops)
        return 1;
    if (!llmrt_sampler_greedy(&s->sp))
        return e->bvt->sample == NULL;
    return e->bvt->argmax == NULL && e->bvt->sample == NULL;
}

/* The rows of the graph that serves n decode rows: 1, 2, 4, ..., 32, then multiples of 32 (a
 * step up to 256 rows costs about the same at any row count, but padding to the next power of
 * two would double the batch kernels' work past 128 rows), at most graph_max_rows. */
static int32_t graph_bucket(const llmrt_engine *e, int32_t n)
{
    int32_t b = 1;
    while (b < n && b < 32)
        b *= 2;
    if (b < n)
        b = (n + 31) / 32 * 32;
    return b < e->graph_max_rows ? b : e->graph_max_rows;
}

/* The uniform draw of the token sampled after s's first len tokens: generated token number
 * len - n_prompt, the same on the device and on the host. */
static float row_uniform(const eseq *s, int32_t len)
{
    return llmrt_sampler_uniform(s->seed, (uint64_t)(len - s->n_prompt));
}

/* Bytes of step inputs over the bus: copied, or gathered by the device from mapped memory;
 * none counted when kernels read them in place (how often is theirs to know). */
static uint64_t in_bus_bytes(const llmrt_engine *e, size_t bytes)
{
    return e->inputs_in_place ? 0 : bytes;
}

/* Bytes of outputs over the bus: copied, or written by the device into mapped memory; none
 * where device memory is host memory and nothing is copied. */
static uint64_t out_bus_bytes(const llmrt_engine *e, size_t bytes)
{
    return e->outputs_in_place && (e->be_caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) ? 0 : bytes;
}

/* The outputs' copy is enqueued (on its own or inside a graph): count its bytes. */
static void outputs_enqueued(const llmrt_engine *e, flight *f)
{
    f->d2h_done = 1;
    if (f->device_op != DEVICE_OP_NONE)
        f->d2h_bytes = out_bus_bytes(e, sizeof(int32_t) * (size_t)f->n_rows);
}

/* Fill half f->half's inputs for flight f (items set). */
static void fill_inputs(llmrt_engine *e, flight *f, int32_t *max_seq_len, int32_t *max_q)
{
    const int h = f->half;
    int32_t n_seqs = f->n_rows, n_tok = 0, width = 0, mq = 0, ms = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        n_tok += f->items[i].n_new;
        int32_t len = f->items[i].start + f->items[i].n_new;
        int32_t w = llmrt_kv_blocks_for(&e->kv, len);
        width = w > width ? w : width;
        mq = f->items[i].n_new > mq ? f->items[i].n_new : mq;
        ms = len > ms ? len : ms;
    }
    int32_t pad = f->n_rows - f->n_items; /* graph padding: one token each */
    if (f->graph)
        width = e->max_bt_width;
    if (width < 1)
        width = 1;
    llmrt_step_layout_make(&f->lay, n_tok + pad, n_seqs, width);
    const llmrt_step_layout *L = &f->lay;
    int32_t *tok = llmrt_step_host_i32(&e->sb, h, L->token_ids);
    int32_t *pos = llmrt_step_host_i32(&e->sb, h, L->positions);
    int32_t *slot = llmrt_step_host_i32(&e->sb, h, L->slot_mapping);
    int32_t *qs = llmrt_step_host_i32(&e->sb, h, L->query_start);
    int32_t *lens = llmrt_step_host_i32(&e->sb, h, L->seq_lens);
    int32_t *lrows = llmrt_step_host_i32(&e->sb, h, L->logits_rows);
    int32_t *bt = llmrt_step_host_i32(&e->sb, h, L->block_tables);
    llmrt_sample_params *sp =
        (llmrt_sample_params *)((char *)e->sb.in.host[h] + L->sample_params);
    int32_t row = 0;
    qs[0] = 0;
    f->any_host = 0;
    f->n_masked = 0;
    f->mask_ms = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        const llmrt_sched_item *it = &f->items[i];
        eseq *s = it->seq->owner;
        for (int32_t j = 0; j < it->n_new; j++, row++) {
            int32_t p = it->start + j;
            tok[row] = s->tokens[p];
            pos[row] = p;
            slot[row] = llmrt_kv_slot(&e->kv, &s->sched.table, p);
        }
        qs[i + 1] = row;
        int32_t len = it->start + it->n_new;
        lens[i] = len;
        lrows[i] = row - 1;
        int32_t nb = llmrt_kv_blocks_for(&e->kv, len);
        memcpy(bt + (size_t)i * (size_t)width, s->sched.table.ids, sizeof *bt * (size_t)nb);
        memset(bt + (size_t)i * (size_t)width + nb, 0, sizeof *bt * (size_t)(width - nb));
        llmrt_sample_params *q = &sp[i];
        memset(q, 0, sizeof *q);
        q->temperature = llmrt_sampler_greedy(&s->sp) ? 0.0f : s->sp.temperature;
        q->top_k = s->sp.top_k;
        q->top_p = s->sp.top_p;
        q->min_p = s->sp.min_p;
        q->uniform = row_uniform(s, len);
        f->row_host[i] = it->samples && row_needs_host(e, s);
        f->any_host |= f->row_host[i];
        f->n_masked += it->samples && s->grammar;
    }
    for (int32_t i = f->n_items; i < f->n_rows; i++, row++) { /* padding rows */
        tok[row] = 0;
        pos[row] = 0;
        slot[row] = -1;
        qs[i + 1] = row + 1;
        lens[i] = 1;
        lrows[i] = row;
        memset(bt + (size_t)i * (size_t)width, 0, sizeof *bt * (size_t)width);
        memset(&sp[i], 0, sizeof sp[i]);
        f->row_host[i] = 0;
    }
    f->n_tokens = row;
    *max_seq_len = f->graph ? e->max_model_len : ms;
    *max_q = f->graph ? 1 : mq;
}


/* Which device op samples this flight: none (all on the host), argmax, sample, or the
 * model's forward_argmax (every row greedy on the device and none sampled on the host, which
 * would read the logits: the model may find the argmax without them). A captured graph is
 * keyed by this op, so steps of the two argmax kinds never replay each other's graph. */
static device_op pick_device_op(const llmrt_engine *e, const flight *f)
{
    int any_dev = 0, any_temp = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        const eseq *s = f->items[i].seq->owner;
        if (!f->items[i].samples || f->row_host[i])
            continue;
        any_dev = 1;
        any_temp |= !llmrt_sampler_greedy(&s->sp);
    }
    if (!any_dev)
        return DEVICE_OP_NONE;
    if (any_temp)
        return DEVICE_OP_SAMPLE; /* row_needs_host guarantees sample exists for these rows */
    if (e->bvt->argmax && !f->any_host && !f->n_masked &&
        LLMRT_VT_HAS(e->parts.model_vt, llmrt_model_vtable, forward_argmax))
        return DEVICE_OP_FORWARD_ARGMAX;
    return e->bvt->argmax ? DEVICE_OP_ARGMAX : DEVICE_OP_SAMPLE;
}

/* argmax / sample over the flight's logits into its output buffer (op NONE: nothing). */
static llmrt_status enqueue_sampling(llmrt_engine *e, flight *f, device_op op, llmrt_error *err)
{
    int32_t *out = e->sb.out.device[f->half];
    llmrt_status st = LLMRT_OK;
    if (op == DEVICE_OP_ARGMAX)
        st = e->bvt->argmax(e->b, out, e->sb.logits, f->n_rows, e->info.vocab, err);
    else if (op == DEVICE_OP_SAMPLE)
        st = e->bvt->sample(e->b, out, e->sb.logits,
                            (const llmrt_sample_params *)llmrt_step_dev(&e->sb, f->half,
                                                                        f->lay.sample_params),
                            f->n_rows, e->info.vocab, err);
    if (st)
        llmrt_error_prefix(err, "sampling on the device");
    return st;
}

/* The forward, and the sampling `op` says (NONE: the forward alone). */
static llmrt_status enqueue_device_work(llmrt_engine *e, flight *f, const llmrt_batch *batch,
                                        device_op op, llmrt_error *err)
{
    int32_t *out = e->sb.out.device[f->half];
    llmrt_status st;
    if (op == DEVICE_OP_FORWARD_ARGMAX) {
        st = e->parts.model_vt->forward_argmax(e->parts.model, batch, &e->kv.view, e->sb.logits,
                                               out, err);
        if (st)
            llmrt_error_prefix(err, "model forward_argmax (%d tokens, %d sequences)",
                               batch->n_tokens, batch->n_seqs);
        return st;
    }
    st = e->parts.model_vt->forward(e->parts.model, batch, &e->kv.view, e->sb.logits, err);
    if (st) {
        llmrt_error_prefix(err, "model forward (%d tokens, %d sequences)", batch->n_tokens,
                           batch->n_seqs);
        return st;
    }
    return enqueue_sampling(e, f, op, err);
}

/* A flight with constrained rows, after its forward was enqueued: their masks (on the host,
 * while the device computes), to the device, applied to the logits; then the sampling. */
static llmrt_status constrained_tail(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    double t0 = llmrt_now_s();
    size_t bytes = 0;
    int32_t n_dev = engine_masks_fill(e, f, &bytes);
    f->mask_ms = (llmrt_now_s() - t0) * 1e3;
    if (n_dev > 0) {
        TRY(e->parts.memory.vt->to_device(e->parts.memory.m, &e->masks, f->half, bytes, err));
        f->h2d_bytes += in_bus_bytes(e, bytes);
        const char *dev = e->masks.device[f->half];
        st = e->mask_ops->apply(e->b, e->sb.logits, (const int32_t *)dev,
                                (const uint32_t *)(dev + e->mask_map_bytes), f->n_rows,
                                e->info.vocab, err);
        if (st) {
            llmrt_error_prefix(err, "masking %d rows of logits on the device", n_dev);
            goto cleanup;
        }
    }
    TRY(enqueue_sampling(e, f, f->device_op, err));
cleanup:
    return st;
}

/* The step inputs to the device. A chained step's token ids are not among them: its embedding
 * reads the previous step's sampled ids where that step wrote them (launch). */
static llmrt_status enqueue_inputs(llmrt_engine *e, flight *f, llmrt_error *err)
{
    return e->parts.memory.vt->to_device(e->parts.memory.m, &e->sb.in, f->half, f->lay.bytes,
                                         err);
}

static llmrt_status enqueue_outputs(llmrt_engine *e, flight *f, device_op op, llmrt_error *err)
{
    if (op == DEVICE_OP_NONE)
        return LLMRT_OK;
    return e->parts.memory.vt->to_host(e->parts.memory.m, &e->sb.out, f->half,
                                       sizeof(int32_t) * (size_t)f->n_rows, err);
}

/* What a graph of flight f holds: its device op, or the forward alone (NONE) when
 * constrained rows need their masks between the forward and the sampling. */
static device_op graph_op(const flight *f)
{
    return f->n_masked ? DEVICE_OP_NONE : f->device_op;
}

static graph_entry *find_graph(llmrt_engine *e, const flight *f)
{
    /* A graph bakes in addresses: those of the device buffers, and with the copies inside
     * it those of the host halves too. One graph per half when they differ. */
    int per_half = e->graph_events || /* it records the events of its half */
                   e->sb.in.device[0] != e->sb.in.device[1] ||
                   e->sb.out.device[0] != e->sb.out.device[1] ||
                   (e->copies_in_graph &&
                    (e->sb.in.host[0] != e->sb.in.host[1] || e->sb.out.host[0] != e->sb.out.host[1]));
    int half = per_half ? f->half : 0;
    for (int i = 0; i < e->n_graphs; i++) {
        graph_entry *g = &e->graphs[i];
        if (g->rows == f->n_rows && g->half == half && g->chained == f->chained &&
            g->op == graph_op(f))
            return g;
    }
    if (e->n_graphs == MAX_GRAPHS)
        return NULL;
    graph_entry *g = &e->graphs[e->n_graphs];
    memset(g, 0, sizeof *g);
    g->rows = f->n_rows, g->half = half, g->chained = f->chained, g->op = graph_op(f);
    return g;
}

/* Launch flight f: inputs already filled in its half. */
static llmrt_status launch(llmrt_engine *e, flight *f, const flight *prev, int32_t max_seq_len,
                           int32_t max_q, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int h = f->half;
    const llmrt_step_layout *L = &f->lay;
    llmrt_batch batch;
    memset(&batch, 0, sizeof batch);
    batch.n_tokens = f->n_tokens;
    batch.n_seqs = f->n_rows;
    /* chained: the previous step's sampled ids, one per row in row order (its half's output
     * buffer stays untouched until the step after this one) */
    batch.token_ids = f->chained ? (int32_t *)e->sb.out.device[prev->half]
                                 : llmrt_step_dev(&e->sb, h, L->token_ids);
    batch.positions = llmrt_step_dev(&e->sb, h, L->positions);
    batch.slot_mapping = llmrt_step_dev(&e->sb, h, L->slot_mapping);
    batch.query_start = llmrt_step_dev(&e->sb, h, L->query_start);
    batch.seq_lens = llmrt_step_dev(&e->sb, h, L->seq_lens);
    batch.block_tables = llmrt_step_dev(&e->sb, h, L->block_tables);
    batch.logits_rows = llmrt_step_dev(&e->sb, h, L->logits_rows);
    batch.max_blocks_per_seq = L->bt_width;
    batch.max_seq_len = max_seq_len;
    batch.max_query_len = max_q;
    batch.all_logits = 0;
    f->h2d_bytes = in_bus_bytes(e, L->bytes);
    f->d2h_bytes = 0;
    f->d2h_done = 0;
    TRY(e->bvt->event_record(e->b, e->ev[h][EV_START], err));
    graph_entry *g = f->graph ? find_graph(e, f) : NULL;
    if (f->graph && !g)
        f->graph = 0;
    const int in_graph_copies = f->graph && e->copies_in_graph;
    const device_op gop = graph_op(f);
    /* the graph records the events after its copies itself; EV_COMPUTE_DONE only a graph
     * that ends with the sampling (none: a constrained tail may follow it) */
    const int in_graph_events = in_graph_copies && e->graph_events;
    const int compute_event_in_graph = in_graph_events && gop != DEVICE_OP_NONE;
    if (!in_graph_copies)
        TRY(enqueue_inputs(e, f, err));
    if (!in_graph_events)
        TRY(e->bvt->event_record(e->b, e->ev[h][EV_INPUTS_DONE], err));
    if (f->graph) {
        if (!g->g) { /* capture this shape once */
            llmrt_error gerr = {0};
            llmrt_status gs = e->bvt->graph_begin(e->b, &gerr);
            if (gs == LLMRT_OK) {
                if (in_graph_copies)
                    gs = enqueue_inputs(e, f, &gerr);
                if (gs == LLMRT_OK && in_graph_events)
                    gs = e->bvt->event_record(e->b, e->ev[h][EV_INPUTS_DONE], &gerr);
                if (gs == LLMRT_OK)
                    gs = enqueue_device_work(e, f, &batch, gop, &gerr);
                if (gs == LLMRT_OK && compute_event_in_graph)
                    gs = e->bvt->event_record(e->b, e->ev[h][EV_COMPUTE_DONE], &gerr);
                if (gs == LLMRT_OK && in_graph_copies)
                    gs = enqueue_outputs(e, f, gop, &gerr);
                llmrt_graph *cg = NULL;
                llmrt_status es = e->bvt->graph_end(e->b, &cg, gs == LLMRT_OK ? &gerr : NULL);
                if (gs == LLMRT_OK && es == LLMRT_OK && cg) {
                    g->g = cg;
                    e->n_graphs++;
                } else {
                    if (cg)
                        e->bvt->graph_destroy(e->b, cg);
                    if (gs == LLMRT_OK)
                        gs = es ? es : LLMRT_ERR_DEVICE;
                }
            }
            if (gs != LLMRT_OK) {
                /* Capture failed: say so once, run this and every later step eagerly. */
                if (!e->warned_graph)
                    LOG_WARN("CUDA graph capture of a %d-sequence decode step failed (%s); "
                             "running decode steps without graphs",
                             f->n_rows, gerr.msg[0] ? gerr.msg : llmrt_status_str(gs));
                e->warned_graph = 1;
                e->graphs_on = 0;
                f->graph = 0;
                if (in_graph_copies)
                    TRY(enqueue_inputs(e, f, err));
                if (in_graph_events)
                    TRY(e->bvt->event_record(e->b, e->ev[h][EV_INPUTS_DONE], err));
                TRY(enqueue_device_work(e, f, &batch, gop, err));
                goto tail;
            }
        }
        st = e->bvt->graph_launch(e->b, g->g, err);
        if (st) {
            llmrt_error_prefix(err, "replaying the %d-sequence decode graph", f->n_rows);
            goto cleanup;
        }
        if (in_graph_copies && gop != DEVICE_OP_NONE)
            outputs_enqueued(e, f);
        if (compute_event_in_graph)
            goto cleanup; /* EV_COMPUTE_DONE is the graph's */
    } else {
        TRY(enqueue_device_work(e, f, &batch, gop, err));
    }
tail:
    if (f->n_masked)
        TRY(constrained_tail(e, f, err));
    TRY(e->bvt->event_record(e->b, e->ev[h][EV_COMPUTE_DONE], err));
cleanup:
    return st;
}

/* Enqueue the flight's output copy (unless it is already in the graph) and its last event. */
static llmrt_status finish_launch(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (!f->d2h_done) {
        TRY(enqueue_outputs(e, f, f->device_op, err));
        outputs_enqueued(e, f);
    }
    TRY(e->bvt->event_record(e->b, e->ev[f->half][EV_OUTPUTS_DONE], err));
cleanup:
    return st;
}

/* The host-side sampling of rows that need it (penalties, logprobs, a grammar without the
 * device mask op, no device op). */
static llmrt_status host_sample(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int32_t V = e->info.vocab;
    const int host_mem = (e->be_caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) != 0;
    /* Rows come to the host in chunks of the staging buffer's size. */
    int32_t chunk = host_mem ? f->n_items : e->sb.staging_rows;
    for (int32_t r0 = 0; r0 < f->n_items; r0 += chunk) {
        int32_t r1 = r0 + chunk < f->n_items ? r0 + chunk : f->n_items;
        int any = 0;
        for (int32_t i = r0; i < r1; i++)
            any |= f->row_host[i];
        if (!any)
            continue;
        const float *rows;
        if (host_mem) {
            rows = e->sb.logits + (size_t)r0 * (size_t)V;
        } else {
            size_t bytes = sizeof(float) * (size_t)V * (size_t)(r1 - r0);
            TRY(e->bvt->copy(e->b, e->sb.staging.device[0], e->sb.logits + (size_t)r0 * (size_t)V,
                             bytes, LLMRT_COPY_D2D, err));
            TRY(e->parts.memory.vt->to_host(e->parts.memory.m, &e->sb.staging, 0, bytes, err));
            TRY(e->bvt->synchronize(e->b, err));
            f->d2h_bytes += out_bus_bytes(e, bytes);
            rows = e->sb.staging.host[0];
        }
        for (int32_t i = r0; i < r1; i++) {
            if (!f->row_host[i])
                continue;
            eseq *s = f->items[i].seq->owner;
            const float *raw = rows + (size_t)(i - r0) * (size_t)V;
            const float *use = raw;
            const int masked = f->n_masked && e->mask_slot[i] >= 0;
            if (llmrt_sampler_has_penalties(&s->sp) || masked) {
                memcpy(e->row_scratch, raw, sizeof(float) * (size_t)V);
                if (llmrt_sampler_has_penalties(&s->sp))
                    llmrt_sampler_apply_penalties(e->sampler, e->row_scratch, &s->sp, s->tokens,
                                                  s->n_prompt, s->tokens + s->n_prompt,
                                                  s->n_generated);
                if (masked)
                    engine_mask_apply_host(e, f->half, e->mask_slot[i], e->row_scratch);
                use = e->row_scratch;
            }
            int32_t len = f->items[i].start + f->items[i].n_new;
            float u = row_uniform(s, len);
            int32_t t = llmrt_sampler_pick(e->sampler, use, &s->sp, u);
            e->sampled[i] = t;
            if (s->sp.logprobs >= 0)
                llmrt_sampler_logprobs(e->sampler, raw, t, s->sp.logprobs, &e->lp_buf[i],
                                       e->top_ids + (size_t)i * LLMRT_MAX_TOP_LOGPROBS,
                                       e->top_lps + (size_t)i * LLMRT_MAX_TOP_LOGPROBS);
        }
    }
cleanup:
    return st;
}

/* Row i's raw logits on the host (a copy through the staging buffer when device memory is
 * not host memory). */
static llmrt_status row_logits(llmrt_engine *e, flight *f, int32_t i, const float **row,
                               llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const size_t V = (size_t)e->info.vocab;
    if (e->be_caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) {
        *row = e->sb.logits + (size_t)i * V;
        return LLMRT_OK;
    }
    TRY(e->bvt->copy(e->b, e->sb.staging.device[0], e->sb.logits + (size_t)i * V,
                     sizeof(float) * V, LLMRT_COPY_D2D, err));
    TRY(e->parts.memory.vt->to_host(e->parts.memory.m, &e->sb.staging, 0, sizeof(float) * V,
                                    err));
    TRY(e->bvt->synchronize(e->b, err));
    f->d2h_bytes += out_bus_bytes(e, sizeof(float) * V);
    *row = e->sb.staging.host[0];
cleanup:
    return st;
}

/* A constrained row's sampled token must continue its grammar and leave room to finish
 * within the budget (constrain.c). When it does not (near the end of the budget), draw it
 * again on the host among the tokens that do; when none does, the reply ends here: stopped
 * when it is complete, else failed. */
static llmrt_status check_constrained(llmrt_engine *e, flight *f, int32_t i, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    eseq *s = f->items[i].seq->owner;
    e->row_fate[i] = ROW_TOKEN;
    if (engine_grammar_fits(e, s, e->sampled[i]))
        return LLMRT_OK;
    int32_t n = engine_grammar_allowed(e, s, e->repick_words);
    if (n < 0)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory checking a grammar");
    if (n == 0) {
        e->row_fate[i] = engine_grammar_complete(s->grammar) ? ROW_STOP : ROW_DEAD;
        return LLMRT_OK;
    }
    const float *raw;
    TRY(row_logits(e, f, i, &raw, err));
    const int32_t V = e->info.vocab;
    memcpy(e->row_scratch, raw, sizeof(float) * (size_t)V);
    if (llmrt_sampler_has_penalties(&s->sp))
        llmrt_sampler_apply_penalties(e->sampler, e->row_scratch, &s->sp, s->tokens, s->n_prompt,
                                      s->tokens + s->n_prompt, s->n_generated);
    for (int32_t v = 0; v < V; v++)
        if (!llmrt_gram_bit(e->repick_words, v))
            e->row_scratch[v] = -INFINITY;
    int32_t len = f->items[i].start + f->items[i].n_new;
    int32_t t = llmrt_sampler_pick(e->sampler, e->row_scratch, &s->sp, row_uniform(s, len));
    if (!llmrt_gram_bit(e->repick_words, t)) { /* every allowed logit was NaN: take one */
        for (t = 0; t < V && !llmrt_gram_bit(e->repick_words, t); t++)
            ;
    }
    e->sampled[i] = t;
    if (s->sp.logprobs >= 0) /* the raw row (a host row's logits were never masked) */
        llmrt_sampler_logprobs(e->sampler, raw, t, s->sp.logprobs, &e->lp_buf[i],
                               e->top_ids + (size_t)i * LLMRT_MAX_TOP_LOGPROBS,
                               e->top_lps + (size_t)i * LLMRT_MAX_TOP_LOGPROBS);
cleanup:
    return st;
}

static double elapsed_ms(llmrt_engine *e, llmrt_event *a, llmrt_event *b)
{
    float ms = 0;
    llmrt_error err = {0};
    if (e->bvt->event_elapsed_ms(e->b, a, b, &ms, &err) != LLMRT_OK || !(ms >= 0))
        return 0;
    return ms;
}

/* Wait for flight f, deliver its tokens, report its timing. */
static llmrt_status collect(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int h = f->half;
    TRY(e->bvt->event_sync(e->b, e->ev[h][EV_OUTPUTS_DONE], err));
    double t_out = llmrt_now_s();
    if (f->device_op != DEVICE_OP_NONE) {
        const int32_t *out = e->sb.out.host[h];
        for (int32_t i = 0; i < f->n_items; i++)
            if (!f->row_host[i])
                e->sampled[i] = out[i];
    }
    if (f->any_host)
        TRY(host_sample(e, f, err));
    if (f->n_masked)
        for (int32_t i = 0; i < f->n_items; i++)
            if (e->mask_slot[i] >= 0 && !((eseq *)f->items[i].seq->owner)->done)
                TRY(check_constrained(e, f, i, err));
    f->active = 0;
    if (e->cur != NO_FLIGHT && &e->fl[e->cur] == f)
        e->cur = NO_FLIGHT;

    llmrt_step_record rec;
    memset(&rec, 0, sizeof rec);
    rec.step = e->step_no++;
    rec.n_seqs = f->n_items;
    rec.n_tokens = f->n_tokens;
    rec.n_prefill_tokens = f->n_prefill;
    rec.n_decode_seqs = f->n_decode;
    rec.graph = f->graph;
    rec.async = f->chained;
    rec.t_start = f->t_start;
    rec.host_prepare_ms = (f->t_prepared - f->t_start) * 1e3;
    rec.h2d_ms = elapsed_ms(e, e->ev[h][EV_START], e->ev[h][EV_INPUTS_DONE]);
    rec.compute_ms = elapsed_ms(e, e->ev[h][EV_INPUTS_DONE], e->ev[h][EV_COMPUTE_DONE]);
    rec.d2h_ms = elapsed_ms(e, e->ev[h][EV_COMPUTE_DONE], e->ev[h][EV_OUTPUTS_DONE]);
    rec.gpu_busy_ms = rec.h2d_ms + rec.compute_ms + rec.d2h_ms;
    /* The step's period: from the previous step's outputs when work was waiting since then;
     * after the engine ran out of work, from when new work arrived (an idle server's pause
     * between requests is nobody's idle device time). */
    double from = f->t_start;
    if (e->t_prev_out > 0 && e->prev_left_work)
        from = e->t_prev_out;
    else if (e->t_prev_out > 0 && e->t_arrival > 0)
        from = e->t_arrival > e->t_prev_out ? e->t_arrival : e->t_prev_out;
    e->t_arrival = 0;
    rec.wall_ms = (t_out - from) * 1e3;
    rec.idle_ms = rec.wall_ms > rec.gpu_busy_ms ? rec.wall_ms - rec.gpu_busy_ms : 0;
    rec.offload_bytes = e->offload_bytes; /* every forward moves the offloaded layers */
    rec.h2d_bytes = f->h2d_bytes + e->offload_bytes;
    rec.d2h_bytes = f->d2h_bytes;
    rec.n_masked = f->n_masked;
    rec.mask_ms = f->mask_ms;
    e->t_prev_out = t_out;

    pthread_mutex_lock(&e->mu);
    e->pub.steps++;
    e->pub.busy_s += rec.wall_ms * 1e-3;
    e->pub.prefill_tokens += (uint64_t)f->n_prefill;
    pthread_mutex_unlock(&e->mu);

    for (int32_t i = 0; i < f->n_items; i++) {
        eseq *s = f->items[i].seq->owner;
        s->refs--;
        if (s->done || !f->items[i].samples)
            continue;
        if (f->n_masked && e->mask_slot[i] >= 0 && e->row_fate[i] != ROW_TOKEN) {
            engine_finish_without_token(e, s,
                                        e->row_fate[i] == ROW_STOP ? LLMRT_FINISH_STOP
                                                                   : LLMRT_FINISH_ERROR,
                                        e->row_fate[i] == ROW_STOP
                                            ? NULL
                                            : "structured output: no token of the vocabulary "
                                              "continues the reply's grammar here");
            continue;
        }
        int asked = s->sp.logprobs >= 0;
        int32_t n_top = asked ? s->sp.logprobs : 0;
        engine_accept_token(e, s, e->sampled[i], asked ? e->lp_buf[i] : 0, n_top,
                     e->top_ids + (size_t)i * LLMRT_MAX_TOP_LOGPROBS,
                     e->top_lps + (size_t)i * LLMRT_MAX_TOP_LOGPROBS);
    }
    engine_reap_zombies(e, REAP_UNREFERENCED);
    pthread_mutex_lock(&e->mu);
    e->prev_left_work = e->active_count > 0 || e->inbox != NULL;
    pthread_mutex_unlock(&e->mu);
    if (e->on_step)
        e->on_step(e->step_user, &rec);
cleanup:
    return st;
}

/* Shape bookkeeping shared by both ways of launching. */
static void count_rows(flight *f)
{
    f->n_prefill = f->n_decode = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        const llmrt_sched_item *it = &f->items[i];
        const eseq *s = it->seq->owner;
        if (it->n_new == 1 && it->start >= s->n_prompt)
            f->n_decode++;
        else
            f->n_prefill += it->n_new;
    }
}

static int all_sample(const flight *f)
{
    for (int32_t i = 0; i < f->n_items; i++)
        if (!f->items[i].samples)
            return 0;
    return 1;
}

static int active_count(llmrt_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->active_count;
    pthread_mutex_unlock(&e->mu);
    return n;
}

static int decode_only(const flight *f)
{
    for (int32_t i = 0; i < f->n_items; i++)
        if (f->items[i].n_new != 1 || !f->items[i].samples)
            return 0;
    return 1;
}

/* Shape flight f (items set) the same way for both ways of launching: a graph for a decode
 * step that fits one (rows padded to its bucket), the inputs, the counts, the device op. */
static void prepare(llmrt_engine *e, flight *f, int32_t *max_seq_len, int32_t *max_q)
{
    f->graph = e->graphs_on && decode_only(f) && f->n_items <= e->graph_max_rows;
    f->n_rows = f->graph ? graph_bucket(e, f->n_items) : f->n_items;
    fill_inputs(e, f, max_seq_len, max_q);
    count_rows(f);
    f->device_op = pick_device_op(e, f);
}

/* Can step N+1 be launched from the device-side ids of flight p, before collecting it?
 * Every sequence in p samples on the device, none stops by length at p, none is cancelled,
 * nobody waits to be admitted, and each one has room for one more token without
 * preemption. */
static int can_chain(llmrt_engine *e, const flight *p, int cancels_pending)
{
    if (!e->async_on || cancels_pending || p->any_host || p->device_op == DEVICE_OP_NONE ||
        p->n_masked)
        return 0;
    if (llmrt_sched_can_admit(&e->sched))
        return 0;
    if (e->sched.n_running != p->n_items)
        return 0;
    int32_t need = 0;
    for (int32_t i = 0; i < p->n_items; i++) {
        const eseq *s = p->items[i].seq->owner;
        if (!p->items[i].samples || s->done || s->placeholder)
            return 0;
        int32_t gen_after = s->n_generated + 1;
        if (gen_after >= s->sp.max_tokens || s->n_prompt + gen_after >= e->max_model_len)
            return 0;
        /* the next step computes the token sampled at p, at position n_tokens */
        need += llmrt_kv_blocks_needed(&e->kv, &s->sched.table, s->sched.n_tokens + 1);
    }
    return need <= e->kv.n_free;
}

/* Launch N+1 = the same sequences, one token each, ids from p's device output. */
static llmrt_status launch_chained(llmrt_engine *e, flight *p, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    flight *f = &e->fl[p->half ^ 1];
    f->t_start = llmrt_now_s();
    e->next_half = p->half;
    f->half = p->half ^ 1;
    f->chained = 1;
    f->n_items = p->n_items;
    for (int32_t i = 0; i < p->n_items; i++) {
        eseq *s = p->items[i].seq->owner;
        llmrt_kv_table_reserve(&e->kv, &s->sched.table, s->sched.n_tokens + 1, NULL);
        s->tokens[s->n_prompt + s->n_generated] = NO_TOKEN; /* filled when p is collected */
        s->placeholder = 1;
        s->sched.n_tokens++;
        f->items[i].seq = &s->sched;
        f->items[i].start = s->sched.n_tokens - 1;
        f->items[i].n_new = 1;
        f->items[i].samples = 1;
        s->sched.n_computed = s->sched.n_tokens;
        s->refs++;
    }
    int32_t max_seq_len, max_q;
    prepare(e, f, &max_seq_len, &max_q);
    /* Inputs shared between halves and copied asynchronously: wait until p consumed them
     * (its copy did, or with zero-copy its compute, which reads them in place). */
    if (e->in_shared_async) {
        step_event used = e->inputs_in_place ? EV_COMPUTE_DONE : EV_INPUTS_DONE;
        TRY(e->bvt->event_sync(e->b, e->ev[p->half][used], err));
    }
    f->t_prepared = llmrt_now_s();
    f->active = 1;
    TRY(launch(e, f, p, max_seq_len, max_q, err));
    if (!e->out_shared)
        TRY(finish_launch(e, f, err));
cleanup:
    return st;
}


llmrt_status llmrt_engine_step(llmrt_engine *e, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    eseq **cancels = NULL;
    int32_t n_cancels = 0;
    pthread_mutex_lock(&e->mu);
    int failed = e->failed;
    pthread_mutex_unlock(&e->mu);
    if (failed)
        return llmrt_fail(err, LLMRT_ERR_STATE, "the engine has failed (see the earlier error)");
    double t0 = llmrt_now_s();
    engine_drain_inbox(e, &cancels, &n_cancels);

    /* A step in the air: chain the next one behind it, or collect it first. */
    if (e->cur != NO_FLIGHT) {
        flight *p = &e->fl[e->cur];
        if (can_chain(e, p, n_cancels > 0)) {
            TRY(launch_chained(e, p, err));
            flight *f = &e->fl[p->half ^ 1];
            TRY(collect(e, p, err));
            if (e->out_shared) /* outputs share one host buffer: copy N+1's after reading N's */
                TRY(finish_launch(e, f, err));
            e->cur = f->half;
            e->next_half = f->half ^ 1;
            goto done;
        }
        TRY(collect(e, p, err));
    }
    engine_apply_cancels(e, cancels, n_cancels);

    /* The synchronous path: schedule, launch, and collect now unless the next step may be
     * chained behind this one. */
    int32_t n_tok = 0, n_pre = 0;
    flight *f = &e->fl[e->next_half];
    int32_t n = llmrt_sched_schedule(&e->sched, f->items, &n_tok, &n_pre);
    if (n_pre && !e->warned_preempt) {
        LOG_WARN("KV cache full (%d blocks of %d tokens): preempted %d sequence(s) for "
                 "recomputation; raise cache.kv_tokens or lower scheduler.max_num_seqs",
                 llmrt_kv_usable_blocks(&e->kv), e->kv.block_size, n_pre);
        e->warned_preempt = 1;
    }
    if (n == 0) {
        e->t_prev_out = 0; /* idle: the next step's period starts with it */
        goto done;
    }
    f->t_start = t0;
    f->half = e->next_half;
    e->next_half ^= 1;
    f->chained = 0;
    f->n_items = n;
    for (int32_t i = 0; i < n; i++) {
        eseq *s = f->items[i].seq->owner;
        s->refs++;
        if (!s->t_scheduled)
            s->t_scheduled = t0;
    }
    int32_t max_seq_len, max_q;
    prepare(e, f, &max_seq_len, &max_q);
    f->t_prepared = llmrt_now_s();
    f->active = 1;
    e->cur = f->half;
    TRY(launch(e, f, NULL, max_seq_len, max_q, err));
    TRY(finish_launch(e, f, err));
    if (!e->async_on || f->any_host || !all_sample(f) || f->n_masked)
        TRY(collect(e, f, err));
done:
    /* Nobody left to read a step still in the air (all of its sequences ended): collect it
     * now, so has_work can go false. */
    if (e->cur != NO_FLIGHT && active_count(e) == 0)
        TRY(collect(e, &e->fl[e->cur], err));
    free(cancels);
    engine_publish(e);
    return LLMRT_OK;
cleanup:
    free(cancels);
    engine_fail_all(e, err->msg);
    return st;
}

llmrt_status llmrt_engine_run(llmrt_engine *e, llmrt_error *err)
{
    while (llmrt_engine_has_work(e)) {
        llmrt_status st = llmrt_engine_step(e, err);
        if (st)
            return st;
    }
    return LLMRT_OK;
}
