/* bench_summary.c — figures and verdicts from raw bench samples (see bench_summary.h). */
#include "bench_summary.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

const char *bench_metric_name(bench_metric m)
{
    static const char *const names[] = {"ITL", "TTFT", "throughput"};
    return m < BENCH_N_METRICS ? names[m] : "?";
}

const char *bench_metric_key(bench_metric m)
{
    static const char *const keys[] = {"itl", "ttft", "throughput"};
    return m < BENCH_N_METRICS ? keys[m] : "?";
}

const char *bench_metric_unit(bench_metric m)
{
    static const char *const units[] = {"ms", "ms", "tok/s"};
    return m < BENCH_N_METRICS ? units[m] : "?";
}

int bench_metric_higher_is_better(bench_metric m) { return m == BENCH_METRIC_TPUT; }

const bench_cell *bench_cell_at(const bench_result *r, int level, int config)
{
    return &r->cells[(size_t)level * (size_t)r->n_configs + (size_t)config];
}

/* ---- one cell ---- */

/* A growable array of doubles. */
typedef struct dvec {
    double *v;
    size_t n, cap;
} dvec;

static int dvec_push(dvec *a, double x)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 256;
        double *nv = realloc(a->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return 0;
}

static llmrt_status summarize_steps(const bench_data *d, int config, int level,
                                    bench_step_summary *out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    memset(out, 0, sizeof *out);
    size_t n = 0;
    for (size_t i = 0; i < d->n_steps; i++)
        n += d->steps[i].config == config && d->steps[i].level == level;
    double *cols[7] = {0};
    for (int k = 0; k < 7; k++) {
        cols[k] = malloc((n ? n : 1) * sizeof(double));
        TRY_ALLOC(err, cols[k], "step summaries");
    }
    size_t m = 0, graphs = 0, asyncs = 0;
    double h2d_sum = 0, d2h_sum = 0, off_sum = 0, busy_sum = 0;
    for (size_t i = 0; i < d->n_steps; i++) {
        const bench_step *s = &d->steps[i];
        if (s->config != config || s->level != level)
            continue;
        out->h2d_bytes += s->rec.h2d_bytes;
        out->d2h_bytes += s->rec.d2h_bytes;
        if (s->rec.n_prefill_tokens > 0) {
            out->n_prefill++;
            continue;
        }
        cols[0][m] = s->rec.host_prepare_ms;
        cols[1][m] = s->rec.h2d_ms;
        cols[2][m] = s->rec.compute_ms;
        cols[3][m] = s->rec.d2h_ms;
        cols[4][m] = s->rec.gpu_busy_ms;
        cols[5][m] = s->rec.wall_ms;
        cols[6][m] = s->rec.idle_ms;
        h2d_sum += (double)s->rec.h2d_bytes;
        off_sum += (double)s->rec.offload_bytes;
        busy_sum += s->rec.gpu_busy_ms;
        d2h_sum += (double)s->rec.d2h_bytes;
        graphs += s->rec.graph != 0;
        asyncs += s->rec.async != 0;
        m++;
    }
    out->n_decode = m;
    llmrt_summary *dst[7] = {&out->host_prepare_ms, &out->h2d_ms,  &out->compute_ms,
                             &out->d2h_ms,          &out->gpu_busy_ms, &out->wall_ms,
                             &out->idle_ms};
    for (int k = 0; k < 7; k++)
        TRY(llmrt_stats_summarize(cols[k], m, dst[k], err));
    out->h2d_bytes_per_step = m ? h2d_sum / (double)m : 0;
    out->d2h_bytes_per_step = m ? d2h_sum / (double)m : 0;
    out->offload_bytes_per_step = m ? off_sum / (double)m : 0;
    out->bus_gbps = busy_sum > 0 ? (h2d_sum + d2h_sum) / (busy_sum * 1e-3) / 1e9 : 0;
    out->graph_share = m ? (double)graphs / (double)m : 0;
    out->async_share = m ? (double)asyncs / (double)m : 0;
cleanup:
    for (int k = 0; k < 7; k++)
        free(cols[k]);
    return st;
}

static llmrt_status summarize_cell(const bench_result *r, int level, int config, bench_cell *c,
                                   llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const bench_data *d = r->data;
    size_t n_batches = (size_t)r->settings->rounds * (size_t)r->settings->requests;
    dvec itl = {0}, ttft = {0}, tpot = {0}, e2e = {0};
    c->config = config;
    c->level = level;
    c->concurrency = r->settings->levels[level];
    c->n_batches = n_batches;
    c->itl_off = calloc(n_batches + 1, sizeof *c->itl_off);
    c->ttft_off = calloc(n_batches + 1, sizeof *c->ttft_off);
    c->tput_off = calloc(n_batches + 1, sizeof *c->tput_off);
    c->tput = calloc(n_batches ? n_batches : 1, sizeof *c->tput);
    TRY_ALLOC(err, c->itl_off && c->ttft_off && c->tput_off && c->tput, "bench clusters");

    /* Requests of this cell appear in batch order (see bench_run). */
    double batch_time_sum = 0;
    int32_t cur = -1;
    double first_submit = 0, last_tok = 0;
    size_t batch_tokens = 0;
    for (size_t i = 0; i <= d->n_req; i++) {
        const bench_request *q = i < d->n_req ? &d->req[i] : NULL;
        if (q && (q->config != config || q->level != level))
            continue;
        if (cur >= 0 && (!q || q->unit != cur)) { /* close batch `cur` */
            double t = last_tok - first_submit;
            c->tput[cur] = t > 0 ? (double)batch_tokens / t : NAN;
            batch_time_sum += t;
            c->itl_off[cur + 1] = itl.n;
            c->ttft_off[cur + 1] = ttft.n;
            c->tput_off[cur + 1] = (size_t)cur + 1;
        }
        if (!q)
            break;
        if (q->unit != cur) {
            if (q->unit < 0 || (size_t)q->unit >= n_batches || q->unit != cur + 1)
                FAIL(err, LLMRT_ERR_INTERNAL, "bench samples out of order (batch %d after %d)",
                     q->unit, cur);
            cur = q->unit;
            first_submit = q->t_submit;
            last_tok = 0;
            batch_tokens = 0;
        }
        c->n_requests++;
        c->n_tokens += (size_t)q->n_tok;
        c->prompt_tokens += (uint64_t)r->settings->input_len;
        c->cached_tokens += (uint64_t)(q->cached_tokens > 0 ? q->cached_tokens : 0);
        batch_tokens += (size_t)q->n_tok;
        if (q->t_submit < first_submit)
            first_submit = q->t_submit;
        double t_last = q->t_tok[q->n_tok - 1];
        if (t_last > last_tok)
            last_tok = t_last;
        int bad = dvec_push(&ttft, 1e3 * (q->t_tok[0] - q->t_submit)) ||
                  dvec_push(&e2e, 1e3 * (t_last - q->t_submit));
        if (q->n_tok >= 2)
            bad = bad || dvec_push(&tpot, 1e3 * (t_last - q->t_tok[0]) / (double)(q->n_tok - 1));
        for (int32_t k = 1; k < q->n_tok && !bad; k++)
            bad = dvec_push(&itl, 1e3 * (q->t_tok[k] - q->t_tok[k - 1]));
        if (bad)
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory summarizing bench samples");
    }
    if ((size_t)(cur + 1) != n_batches)
        FAIL(err, LLMRT_ERR_INTERNAL, "config %d at level %d has %d batches, expected %zu",
             config, level, cur + 1, n_batches);
    TRY(llmrt_stats_summarize(itl.v, itl.n, &c->itl_ms, err));
    TRY(llmrt_stats_summarize(ttft.v, ttft.n, &c->ttft_ms, err));
    TRY(llmrt_stats_summarize(tpot.v, tpot.n, &c->tpot_ms, err));
    TRY(llmrt_stats_summarize(e2e.v, e2e.n, &c->e2e_ms, err));
    TRY(llmrt_stats_summarize(c->tput, n_batches, &c->batch_tok_s, err));
    c->output_tok_s = batch_time_sum > 0 ? (double)c->n_tokens / batch_time_sum : 0;
    TRY(summarize_steps(d, config, level, &c->steps, err));
    c->itl = itl.v;
    c->ttft = ttft.v;
    itl.v = ttft.v = NULL;
cleanup:
    free(itl.v);
    free(ttft.v);
    free(tpot.v);
    free(e2e.v);
    return st;
}

/* ---- verdicts ---- */

void bench_verdict_sentence(bench_verdict *v, const char *name, const char *baseline)
{
    const char *metric = bench_metric_name(v->metric);
    if (!v->ok) {
        snprintf(v->sentence, sizeof v->sentence, "%s vs %s in %s: no verdict (%s)", name,
                 baseline, metric, v->why);
        return;
    }
    const double m = 100 * v->margin;
    switch (v->outcome) {
    case LLMRT_OUTCOME_DIFFERENT:
        if (v->improvement > 0)
            snprintf(v->sentence, sizeof v->sentence,
                     "%s is %.1f%% faster than %s in %s [%.1f%%, %.1f%%]", name,
                     100 * v->improvement, baseline, metric, 100 * v->imp_lo, 100 * v->imp_hi);
        else
            snprintf(v->sentence, sizeof v->sentence,
                     "%s is %.1f%% slower than %s in %s [%.1f%%, %.1f%%]", name,
                     -100 * v->improvement, baseline, metric, -100 * v->imp_hi,
                     -100 * v->imp_lo);
        break;
    case LLMRT_OUTCOME_EQUIVALENT:
        snprintf(v->sentence, sizeof v->sentence,
                 "no meaningful difference between %s and %s in %s (%+.1f%% [%+.1f%%, "
                 "%+.1f%%], within ±%.4g%%)",
                 name, baseline, metric, 100 * v->d.rel, 100 * v->d.lo, 100 * v->d.hi, m);
        break;
    default:
        snprintf(v->sentence, sizeof v->sentence,
                 "inconclusive between %s and %s in %s (%+.1f%% [%+.1f%%, %+.1f%%], neither "
                 "within nor beyond ±%.4g%%)",
                 name, baseline, metric, 100 * v->d.rel, 100 * v->d.lo, 100 * v->d.hi, m);
        break;
    }
}

/* The per-batch values of metric m of cell c into out[n_batches] (0: some batch has none):
 * the median inter-token gap of the batch, the median TTFT of its requests, its
 * throughput. */
static int batch_values(const bench_cell *c, bench_metric m, double *out)
{
    const double *v = m == BENCH_METRIC_ITL ? c->itl : m == BENCH_METRIC_TTFT ? c->ttft : c->tput;
    const size_t *off = m == BENCH_METRIC_ITL    ? c->itl_off
                        : m == BENCH_METRIC_TTFT ? c->ttft_off
                                                 : c->tput_off;
    double *tmp = NULL;
    size_t cap = 0;
    int ok = 1;
    for (size_t k = 0; k < c->n_batches && ok; k++) {
        size_t n = off[k + 1] - off[k];
        if (n == 0) {
            ok = 0;
            break;
        }
        if (n > cap) {
            double *t = realloc(tmp, n * sizeof *t);
            if (!t) {
                ok = 0;
                break;
            }
            tmp = t;
            cap = n;
        }
        memcpy(tmp, v + off[k], n * sizeof *tmp);
        out[k] = llmrt_stats_median_inplace(tmp, n);
    }
    free(tmp);
    return ok;
}

static void compute_verdict(const bench_result *r, int level, int config, bench_metric m,
                            bench_verdict *v)
{
    const bench_cell *a = bench_cell_at(r, level, 0), *b = bench_cell_at(r, level, config);
    memset(v, 0, sizeof *v);
    v->config = config;
    v->baseline = 0;
    v->level = level;
    v->metric = m;
    v->margin = r->settings->margin;
    v->outcome = LLMRT_OUTCOME_INCONCLUSIVE;
    v->d.a = v->d.b = v->d.rel = v->d.lo = v->d.hi = NAN;
    const int32_t need = llmrt_stats_paired_min_pairs(r->interval_level);
    double *va = calloc(a->n_batches ? a->n_batches : 1, sizeof *va);
    double *vb = calloc(a->n_batches ? a->n_batches : 1, sizeof *vb);
    const char *unit = r->settings->load_mode ? "batches" : "requests";
    if (!va || !vb) {
        snprintf(v->why, sizeof v->why, "out of memory");
    } else if (a->n_batches < (size_t)need) {
        snprintf(v->why, sizeof v->why,
                 "%zu %s per config is too few for an interval at %.4g%%; run at least %d "
                 "(--rounds x --requests)",
                 a->n_batches, unit, 100 * r->interval_level, need);
    } else if (m == BENCH_METRIC_ITL && (a->itl_ms.n == 0 || b->itl_ms.n == 0)) {
        snprintf(v->why, sizeof v->why, "no inter-token gaps: every request produced one token");
    } else if (!batch_values(a, m, va) || !batch_values(b, m, vb)) {
        snprintf(v->why, sizeof v->why, "some %.8s has no %s value", unit, bench_metric_name(m));
    } else {
        llmrt_error err = {0};
        if (llmrt_stats_paired_rel_diff(va, vb, a->n_batches, r->interval_level, &v->d, &err) ==
            LLMRT_OK)
            v->ok = 1;
        else
            snprintf(v->why, sizeof v->why, "%.150s", err.msg);
    }
    free(va);
    free(vb);
    if (v->ok) {
        double s = bench_metric_higher_is_better(m) ? 1.0 : -1.0;
        v->improvement = s * v->d.rel;
        v->imp_lo = s > 0 ? v->d.lo : -v->d.hi;
        v->imp_hi = s > 0 ? v->d.hi : -v->d.lo;
        v->outcome = llmrt_stats_outcome(v->d.lo, v->d.hi, v->margin);
    }
    bench_verdict_sentence(v, r->configs[config].name, r->configs[0].name);
}

llmrt_status bench_summarize(bench_result *r, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int nl = r->settings->n_levels, nc = r->n_configs;
    r->cells = calloc((size_t)nl * (size_t)nc, sizeof *r->cells);
    TRY_ALLOC(err, r->cells, "bench summaries");
    for (int l = 0; l < nl; l++)
        for (int c = 0; c < nc; c++)
            TRY(summarize_cell(r, l, c, &r->cells[(size_t)l * (size_t)nc + (size_t)c], err));
    r->n_verdicts = (size_t)nl * (size_t)(nc - 1) * BENCH_N_METRICS;
    r->interval_level = llmrt_stats_bonferroni_level(r->settings->ci_level, r->n_verdicts);
    if (r->n_verdicts) {
        r->verdicts = calloc(r->n_verdicts, sizeof *r->verdicts);
        TRY_ALLOC(err, r->verdicts, "bench verdicts");
    }
    size_t k = 0;
    for (int l = 0; l < nl; l++)
        for (int c = 1; c < nc; c++)
            for (int m = 0; m < BENCH_N_METRICS; m++)
                compute_verdict(r, l, c, (bench_metric)m, &r->verdicts[k++]);
cleanup:
    return st;
}

void bench_result_free(bench_result *r)
{
    if (r->cells)
        for (int i = 0; i < r->settings->n_levels * r->n_configs; i++) {
            bench_cell *c = &r->cells[i];
            free(c->itl);
            free(c->ttft);
            free(c->tput);
            free(c->itl_off);
            free(c->ttft_off);
            free(c->tput_off);
        }
    free(r->cells);
    free(r->verdicts);
    r->cells = NULL;
    r->verdicts = NULL;
}
