/* bench_json.c — the --json document of `llmrt bench` (schema "llmrt-bench/1"; prose in
 * docs/bench-json.md, JSON Schema in docs/bench.schema.json): settings, environment, configs,
 * the settings difference, per-level summaries and verdicts, and every raw sample.
 *
 * Numbers that do not exist (a p99 of no values) are null, never NaN. Sample times are
 * seconds since the first measured batch began, on the monotonic clock. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "bench_report.h"
#include "error.h"

/* Builder state: any failed allocation or insertion sets oom, checked once at the end. */
typedef struct jb {
    int oom;
} jb;

static void put(jb *b, json_t *obj, const char *key, json_t *v)
{
    if (!v || json_object_set_new(obj, key, v) != 0)
        b->oom = 1;
}

static void push(jb *b, json_t *arr, json_t *v)
{
    if (!v || json_array_append_new(arr, v) != 0)
        b->oom = 1;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }
static json_t *juint(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *summary(jb *b, const llmrt_summary *s)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = 1;
        return NULL;
    }
    put(b, o, "n", juint(s->n));
    put(b, o, "mean", num(s->mean));
    put(b, o, "stdev", num(s->stdev));
    put(b, o, "min", num(s->min));
    put(b, o, "p50", num(s->p50));
    put(b, o, "p90", num(s->p90));
    put(b, o, "p99", num(s->p99));
    put(b, o, "max", num(s->max));
    return o;
}

/* argv[i] as the report records it: the value of a --set of a secret key is masked
 * ("server.api_key=(set)"), as everywhere else. */
static json_t *arg_str(const bench_result *r, int i)
{
    const char *a = r->argv[i], *kv = NULL;
    if (strncmp(a, "--set=", 6) == 0)
        kv = a + 6;
    else if (i > 0 && strcmp(r->argv[i - 1], "--set") == 0)
        kv = a;
    const char *eq = kv ? strchr(kv, '=') : NULL;
    char key[512];
    if (!eq || (size_t)(eq - kv) >= sizeof key || r->n_configs < 1)
        return json_string(a);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    const llmrt_key *k = llmrt_config_decl(r->configs[0].rt->cfg, key);
    if (!k || !(k->flags & LLMRT_KEY_SECRET))
        return json_string(a);
    char masked[1100];
    snprintf(masked, sizeof masked, "%.*s%s", (int)(eq + 1 - a), a, eq[1] ? "(set)" : "(unset)");
    return json_string(masked);
}

static json_t *settings_obj(jb *b, const bench_result *r)
{
    const bench_settings *s = r->settings;
    json_t *o = json_object(), *conc = json_array(), *boot = json_object(), *cmd = json_array(),
           *iv = json_object();
    if (!o || !conc || !boot || !cmd || !iv) {
        b->oom = 1;
        json_decref(o), json_decref(conc), json_decref(boot), json_decref(cmd), json_decref(iv);
        return NULL;
    }
    put(b, o, "mode", json_string(s->load_mode ? "load" : "latency"));
    put(b, o, "input_len", json_integer(s->input_len));
    put(b, o, "prefix_len", json_integer(s->prefix_len));
    put(b, o, "output_len", json_integer(s->output_len));
    put(b, o, "ignore_eos", json_boolean(s->ignore_eos));
    put(b, o, "warmup", json_integer(s->warmup));
    put(b, o, "rounds", json_integer(s->rounds));
    put(b, o, "requests", json_integer(s->requests));
    put(b, o, "order", json_string(s->order == BENCH_ORDER_ABAB ? "abab" : "random"));
    put(b, o, "seed", juint(s->seed));
    for (int l = 0; l < s->n_levels; l++)
        push(b, conc, json_integer(s->levels[l]));
    put(b, o, "concurrency", conc);
    put(b, boot, "resamples", json_integer(s->resamples));
    put(b, boot, "level", json_real(s->ci_level));
    put(b, boot, "paired", json_true());
    put(b, boot, "cluster", json_string(s->load_mode ? "batch" : "request"));
    put(b, boot, "statistic", json_string("median"));
    put(b, o, "bootstrap", boot);
    put(b, iv, "method", json_string("wilcoxon-signed-rank"));
    put(b, iv, "statistic", json_string("hodges-lehmann"));
    put(b, iv, "unit", json_string(s->load_mode ? "batch" : "request"));
    put(b, iv, "level", json_real(s->ci_level));
    put(b, iv, "correction", json_string("bonferroni"));
    put(b, iv, "family_size", juint(r->n_verdicts));
    put(b, iv, "interval_level", num(r->interval_level));
    put(b, iv, "min_pairs", json_integer(llmrt_stats_paired_min_pairs(r->interval_level)));
    put(b, o, "interval", iv);
    put(b, o, "margin", json_real(s->margin));
    put(b, o, "allow_diff", json_boolean(s->allow_diff));
    for (int i = 0; i < r->argc; i++)
        push(b, cmd, arg_str(r, i));
    put(b, o, "command_line", cmd);
    return o;
}

static json_t *environment_obj(jb *b, const bench_env *e)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = 1;
        return NULL;
    }
    put(b, o, "llmrt_version", json_string(e->version));
    put(b, o, "commit", json_string(e->commit));
    put(b, o, "date_utc", json_string(e->date_utc));
    put(b, o, "hostname", json_string(e->hostname));
    put(b, o, "os", json_string(e->os));
    put(b, o, "cpu", json_string(e->cpu));
    put(b, o, "cpus", json_integer(e->n_cpus));
    return o;
}

/* {"value": ..., "origin": ...} of one key (a secret as set/unset). */
static json_t *key_record(jb *b, const llmrt_config_entry *e)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = 1;
        return NULL;
    }
    put(b, o, "value", json_string(e->shown));
    put(b, o, "origin", json_string(e->origin));
    return o;
}

/* The keys a config changed from their defaults (a key of a plugin section without a table
 * has no known default: each is recorded), and every developer key even at its default. */
static void recorded_keys(jb *b, const llmrt_config *cfg, json_t *non_default, json_t *dev)
{
    llmrt_config_entry e;
    for (size_t i = 0; llmrt_config_entry_at(cfg, i, &e); i++) {
        char key[512];
        snprintf(key, sizeof key, "%s.%s", e.section, e.key);
        if (!e.decl || !llmrt_config_is_default(cfg, key))
            put(b, non_default, key, key_record(b, &e));
        if (e.decl && (e.decl->flags & LLMRT_KEY_DEVELOPER))
            put(b, dev, key, key_record(b, &e));
    }
}

/* hits / queries, null when nothing was looked up (or caching is off) */
static json_t *hit_rate(uint64_t hits, uint64_t queries)
{
    return queries ? json_real((double)hits / (double)queries) : json_null();
}

static json_t *config_obj(jb *b, const bench_result *r, int ci)
{
    const bench_config *k = &r->configs[ci];
    const llmrt_engine_stats *s = &k->stats, *e = &k->stats_end;
    json_t *o = json_object(), *set = json_object(), *model = json_object(), *kv = json_object(),
           *mem = json_object(), *nondef = json_object(), *dev = json_object(), *pc = json_object();
    if (!o || !set || !model || !kv || !mem || !nondef || !dev || !pc) {
        b->oom = 1;
        json_decref(o), json_decref(set), json_decref(model), json_decref(kv), json_decref(mem);
        json_decref(nondef), json_decref(dev), json_decref(pc);
        return NULL;
    }
    put(b, o, "name", json_string(k->name));
    put(b, o, "ini", json_string(k->ini_path));
    for (size_t i = 0; i < r->diff->n_rows; i++) {
        const char *v = r->diff->rows[i].values[ci];
        put(b, set, r->diff->rows[i].key, v ? json_string(v) : json_null());
    }
    put(b, o, "settings", set);
    recorded_keys(b, k->rt->cfg, nondef, dev);
    put(b, o, "non_default", nondef);
    put(b, o, "developer_keys", dev);
    put(b, o, "backend", json_string(s->backend));
    put(b, o, "device", json_string(s->device));
    put(b, o, "memory_plugin", json_string(s->memory_plugin));
    put(b, o, "memory_path", json_string(e->mem.path_in_use[0] ? e->mem.path_in_use : s->memory_path));
    put(b, o, "async_scheduling", json_boolean(s->async_scheduling));
    put(b, o, "cuda_graphs", json_boolean(s->cuda_graphs));
    put(b, o, "prefix_caching", json_boolean(s->prefix_caching));
    put(b, model, "path", json_string(s->model_path));
    put(b, model, "arch", json_string(s->model_arch));
    put(b, model, "quant", json_string(s->quant));
    put(b, model, "weight_bytes", juint(s->weight_bytes));
    put(b, o, "model", model);
    put(b, kv, "capacity_tokens", json_integer(s->kv_capacity_tokens));
    put(b, kv, "blocks", json_integer(s->kv_blocks_total));
    put(b, kv, "block_size", json_integer(s->kv_block_size));
    put(b, kv, "bytes", juint(s->kv_bytes));
    put(b, kv, "dtype", json_string(s->kv_dtype));
    put(b, kv, "source", json_string(s->kv_capacity_source));
    put(b, kv, "max_model_len", json_integer(s->max_model_len));
    put(b, o, "kv", kv);
    put(b, mem, "host_pinned_bytes", juint(e->mem.host_pinned_bytes));
    put(b, mem, "host_mapped_bytes", juint(e->mem.host_mapped_bytes));
    put(b, mem, "host_pageable_bytes", juint(e->mem.host_pageable_bytes));
    put(b, mem, "device_step_buffer_bytes", juint(e->mem.device_bytes));
    put(b, mem, "h2d_copies", juint(e->mem.h2d_copies));
    put(b, mem, "h2d_bytes", juint(e->mem.h2d_bytes));
    put(b, mem, "d2h_copies", juint(e->mem.d2h_copies));
    put(b, mem, "d2h_bytes", juint(e->mem.d2h_bytes));
    put(b, mem, "fallbacks", juint(e->mem.fallbacks));
    put(b, mem, "rss_before_load_bytes", juint(k->rss_before_load));
    put(b, mem, "rss_after_load_bytes", juint(k->rss_after_load));
    put(b, mem, "rss_end_bytes", juint(k->rss_end));
    put(b, mem, "device_total_bytes", s->device_mem_total ? juint(s->device_mem_total) : json_null());
    put(b, mem, "device_used_bytes",
        s->device_mem_total ? juint(s->device_mem_total - s->device_mem_free) : json_null());
    put(b, mem, "device_engine_bytes", s->device_mem_engine ? juint(s->device_mem_engine) : json_null());
    put(b, o, "memory", mem);
    /* the engine's prefix-cache counters over the whole run, warm-up included */
    put(b, pc, "queries", juint(e->prefix_cache_queries - s->prefix_cache_queries));
    put(b, pc, "hits", juint(e->prefix_cache_hits - s->prefix_cache_hits));
    put(b, pc, "hit_rate", hit_rate(e->prefix_cache_hits - s->prefix_cache_hits,
                                    e->prefix_cache_queries - s->prefix_cache_queries));
    put(b, pc, "evictions", juint(e->prefix_cache_evictions - s->prefix_cache_evictions));
    put(b, pc, "blocks_end", json_integer(e->prefix_cache_blocks));
    put(b, o, "prefix_cache", pc);
    put(b, o, "load_time_s", num(s->load_time_s));
    return o;
}

static json_t *diff_arr(jb *b, const bench_result *r)
{
    json_t *a = json_array();
    if (!a) {
        b->oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < r->diff->n_rows; i++) {
        const bench_diff_row *row = &r->diff->rows[i];
        if (row->cls == BENCH_KEY_SAME)
            continue;
        json_t *o = json_object(), *vals = json_array();
        if (!o || !vals) {
            b->oom = 1;
            json_decref(o), json_decref(vals);
            continue;
        }
        put(b, o, "key", json_string(row->key));
        put(b, o, "class", json_string(bench_key_class_str(row->cls)));
        for (int c = 0; c < r->n_configs; c++)
            push(b, vals, row->values[c] ? json_string(row->values[c]) : json_null());
        put(b, o, "values", vals);
        push(b, a, o);
    }
    return a;
}

static json_t *steps_obj(jb *b, const bench_step_summary *s)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = 1;
        return NULL;
    }
    put(b, o, "decode_steps", juint(s->n_decode));
    put(b, o, "prefill_steps", juint(s->n_prefill));
    put(b, o, "host_prepare_ms", summary(b, &s->host_prepare_ms));
    put(b, o, "h2d_ms", summary(b, &s->h2d_ms));
    put(b, o, "compute_ms", summary(b, &s->compute_ms));
    put(b, o, "d2h_ms", summary(b, &s->d2h_ms));
    put(b, o, "gpu_busy_ms", summary(b, &s->gpu_busy_ms));
    put(b, o, "wall_ms", summary(b, &s->wall_ms));
    put(b, o, "idle_ms", summary(b, &s->idle_ms));
    put(b, o, "h2d_bytes_per_step", num(s->h2d_bytes_per_step));
    put(b, o, "offload_bytes_per_step", num(s->offload_bytes_per_step));
    put(b, o, "bus_gbps", num(s->bus_gbps));
    put(b, o, "d2h_bytes_per_step", num(s->d2h_bytes_per_step));
    put(b, o, "h2d_bytes", juint(s->h2d_bytes));
    put(b, o, "d2h_bytes", juint(s->d2h_bytes));
    put(b, o, "graph_share", num(s->graph_share));
    put(b, o, "async_share", num(s->async_share));
    return o;
}

static json_t *cell_obj(jb *b, const bench_result *r, const bench_cell *c)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = 1;
        return NULL;
    }
    put(b, o, "config", json_string(r->configs[c->config].name));
    put(b, o, "requests", juint(c->n_requests));
    put(b, o, "batches", juint(c->n_batches));
    put(b, o, "tokens", juint(c->n_tokens));
    put(b, o, "prompt_tokens", juint(c->prompt_tokens));
    put(b, o, "cached_tokens", juint(c->cached_tokens));
    put(b, o, "prefix_hit_rate", r->configs[c->config].stats.prefix_caching
                                     ? hit_rate(c->cached_tokens, c->prompt_tokens)
                                     : json_null());
    put(b, o, "itl_ms", summary(b, &c->itl_ms));
    put(b, o, "ttft_ms", summary(b, &c->ttft_ms));
    put(b, o, "tpot_ms", summary(b, &c->tpot_ms));
    put(b, o, "e2e_ms", summary(b, &c->e2e_ms));
    put(b, o, "batch_tok_s", summary(b, &c->batch_tok_s));
    put(b, o, "output_tok_s", num(c->output_tok_s));
    put(b, o, "steps", steps_obj(b, &c->steps));
    return o;
}

/* "difference", "no_meaningful_difference", "inconclusive", or "no_verdict" (no interval) */
static const char *outcome_str(const bench_verdict *v)
{
    if (!v->ok)
        return "no_verdict";
    switch (v->outcome) {
    case LLMRT_OUTCOME_DIFFERENT:
        return "difference";
    case LLMRT_OUTCOME_EQUIVALENT:
        return "no_meaningful_difference";
    default:
        return "inconclusive";
    }
}

static json_t *verdict_obj(jb *b, const bench_result *r, const bench_verdict *v)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = 1;
        return NULL;
    }
    put(b, o, "config", json_string(r->configs[v->config].name));
    put(b, o, "baseline", json_string(r->configs[v->baseline].name));
    put(b, o, "metric", json_string(bench_metric_key(v->metric)));
    put(b, o, "unit", json_string(bench_metric_unit(v->metric)));
    put(b, o, "higher_is_better", json_boolean(bench_metric_higher_is_better(v->metric)));
    put(b, o, "ok", json_boolean(v->ok));
    put(b, o, "reason", v->ok ? json_null() : json_string(v->why));
    put(b, o, "baseline_median", v->ok ? num(v->d.a) : json_null());
    put(b, o, "median", v->ok ? num(v->d.b) : json_null());
    put(b, o, "rel_change", v->ok ? num(v->d.rel) : json_null());
    put(b, o, "ci_low", v->ok ? num(v->d.lo) : json_null());
    put(b, o, "ci_high", v->ok ? num(v->d.hi) : json_null());
    put(b, o, "improvement", v->ok ? num(v->improvement) : json_null());
    put(b, o, "improvement_ci_low", v->ok ? num(v->imp_lo) : json_null());
    put(b, o, "improvement_ci_high", v->ok ? num(v->imp_hi) : json_null());
    put(b, o, "significant", json_boolean(v->ok && v->d.significant));
    put(b, o, "outcome", json_string(outcome_str(v)));
    put(b, o, "margin", json_real(v->margin));
    put(b, o, "resamples", json_integer(0));
    put(b, o, "pairs", json_integer(v->d.n));
    put(b, o, "coverage", v->ok ? num(v->d.coverage) : json_null());
    put(b, o, "sentence", json_string(v->sentence));
    return o;
}

static json_t *levels_arr(jb *b, const bench_result *r)
{
    json_t *a = json_array();
    if (!a) {
        b->oom = 1;
        return NULL;
    }
    for (int l = 0; l < r->settings->n_levels; l++) {
        json_t *o = json_object(), *cells = json_array(), *verdicts = json_array();
        if (!o || !cells || !verdicts) {
            b->oom = 1;
            json_decref(o), json_decref(cells), json_decref(verdicts);
            continue;
        }
        put(b, o, "concurrency", json_integer(r->settings->levels[l]));
        for (int c = 0; c < r->n_configs; c++)
            push(b, cells, cell_obj(b, r, bench_cell_at(r, l, c)));
        put(b, o, "configs", cells);
        for (size_t i = 0; i < r->n_verdicts; i++)
            if (r->verdicts[i].level == l)
                push(b, verdicts, verdict_obj(b, r, &r->verdicts[i]));
        put(b, o, "verdicts", verdicts);
        push(b, a, o);
    }
    return a;
}

static json_t *samples_obj(jb *b, const bench_result *r)
{
    const bench_data *d = r->data;
    json_t *o = json_object(), *reqs = json_array(), *steps = json_array();
    if (!o || !reqs || !steps) {
        b->oom = 1;
        json_decref(o), json_decref(reqs), json_decref(steps);
        return NULL;
    }
    for (size_t i = 0; i < d->n_req; i++) {
        const bench_request *q = &d->req[i];
        json_t *x = json_object(), *t = json_array();
        if (!x || !t) {
            b->oom = 1;
            json_decref(x), json_decref(t);
            continue;
        }
        put(b, x, "config", json_string(r->configs[q->config].name));
        put(b, x, "concurrency", json_integer(r->settings->levels[q->level]));
        put(b, x, "round", json_integer(q->round));
        put(b, x, "batch", json_integer(q->unit));
        put(b, x, "request", json_integer(q->slot));
        put(b, x, "submit_s", json_real(q->t_submit - d->t0));
        for (int32_t k = 0; k < q->n_tok; k++)
            push(b, t, json_real(q->t_tok[k] - d->t0));
        put(b, x, "token_s", t);
        put(b, x, "finish", json_string(llmrt_finish_reason_str((llmrt_finish_reason)q->finish)));
        put(b, x, "cached_tokens", json_integer(q->cached_tokens));
        push(b, reqs, x);
    }
    for (size_t i = 0; i < d->n_steps; i++) {
        const bench_step *s = &d->steps[i];
        const llmrt_step_record *rec = &s->rec;
        json_t *x = json_object();
        if (!x) {
            b->oom = 1;
            continue;
        }
        put(b, x, "config", json_string(r->configs[s->config].name));
        put(b, x, "concurrency", json_integer(r->settings->levels[s->level]));
        put(b, x, "round", json_integer(s->round));
        put(b, x, "batch", json_integer(s->unit));
        put(b, x, "step", juint(rec->step));
        put(b, x, "n_seqs", json_integer(rec->n_seqs));
        put(b, x, "n_tokens", json_integer(rec->n_tokens));
        put(b, x, "n_prefill_tokens", json_integer(rec->n_prefill_tokens));
        put(b, x, "n_decode_seqs", json_integer(rec->n_decode_seqs));
        put(b, x, "graph", json_boolean(rec->graph));
        put(b, x, "async", json_boolean(rec->async));
        put(b, x, "t_start_s", json_real(rec->t_start - d->t0));
        put(b, x, "host_prepare_ms", num(rec->host_prepare_ms));
        put(b, x, "h2d_ms", num(rec->h2d_ms));
        put(b, x, "compute_ms", num(rec->compute_ms));
        put(b, x, "d2h_ms", num(rec->d2h_ms));
        put(b, x, "gpu_busy_ms", num(rec->gpu_busy_ms));
        put(b, x, "wall_ms", num(rec->wall_ms));
        put(b, x, "idle_ms", num(rec->idle_ms));
        put(b, x, "h2d_bytes", juint(rec->h2d_bytes));
        put(b, x, "d2h_bytes", juint(rec->d2h_bytes));
        push(b, steps, x);
    }
    put(b, o, "requests", reqs);
    put(b, o, "steps", steps);
    return o;
}

llmrt_status bench_report_json(const bench_result *r, const char *path, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    jb b = {0};
    json_t *root = json_object(), *configs = json_array();
    if (!root || !configs) {
        json_decref(configs);
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory building the JSON report");
    }
    put(&b, root, "schema", json_string("llmrt-bench/1"));
    put(&b, root, "settings", settings_obj(&b, r));
    put(&b, root, "environment", environment_obj(&b, &r->env));
    for (int c = 0; c < r->n_configs; c++)
        push(&b, configs, config_obj(&b, r, c));
    put(&b, root, "configs", configs);
    put(&b, root, "settings_diff", diff_arr(&b, r));
    put(&b, root, "levels", levels_arr(&b, r));
    put(&b, root, "samples", samples_obj(&b, r));
    if (b.oom)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory building the JSON report");
    size_t flags = JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10);
    int rc = strcmp(path, "-") == 0 ? json_dumpf(root, stdout, flags)
                                    : json_dump_file(root, path, flags);
    if (rc != 0)
        FAIL(err, LLMRT_ERR_IO, "--json %s: cannot write the file (check the folder exists and "
                                "is writable)", path);
    if (strcmp(path, "-") == 0)
        fputc('\n', stdout);
cleanup:
    json_decref(root);
    return st;
}
