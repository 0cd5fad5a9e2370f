/* bench_configs.c — open, compare, load and check the configs of `llmrt bench`
 * (see bench_configs.h for which differences are allowed and why). */
#include "bench_configs.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bench_env.h"
#include "config.h"
#include "error.h"

const char *bench_key_class_str(bench_key_class c)
{
    switch (c) {
    case BENCH_KEY_SAME:
        return "same";
    case BENCH_KEY_KNOB:
        return "knob";
    case BENCH_KEY_UNUSED:
        return "unused";
    case BENCH_KEY_DIFF:
        return "differs";
    }
    return "?";
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bench_key_class bench_key_classify(const char *key, uint32_t flags)
{
    if (starts_with(key, "memory.") || strcmp(key, "scheduler.async_scheduling") == 0 ||
        strcmp(key, "scheduler.cuda_graphs") == 0 || strcmp(key, "backend.cpu.threads") == 0 ||
        (flags & LLMRT_KEY_DEVELOPER) || strcmp(key, "cache.prefix_caching") == 0)
        return BENCH_KEY_KNOB;
    if (strcmp(key, "runtime.log_level") == 0 || starts_with(key, "server."))
        return BENCH_KEY_UNUSED;
    return BENCH_KEY_DIFF;
}

/* ---- open / close ---- */

static void base_name(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    size_t len = strlen(b);
    if (len > 4 && strcmp(b + len - 4, ".ini") == 0)
        len -= 4;
    if (len >= n)
        len = n - 1;
    memcpy(out, b, len);
    out[len] = 0;
}

llmrt_status bench_configs_open(bench_config *cfgs, int n, const char *const *paths,
                                const char *const *sets, int n_sets, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    memset(cfgs, 0, (size_t)n * sizeof *cfgs);
    for (int i = 0; i < n; i++) {
        bench_config *c = &cfgs[i];
        c->ini_path = paths[i];
        char base[48];
        base_name(paths[i], base, sizeof base);
        int repeat = 1;
        for (int j = 0; j < i; j++) {
            char other[48];
            base_name(paths[j], other, sizeof other);
            repeat += strcmp(other, base) == 0;
        }
        if (repeat > 1)
            snprintf(c->name, sizeof c->name, "%s#%d", base, repeat);
        else
            snprintf(c->name, sizeof c->name, "%s", base);
        st = llmrt_runtime_open(paths[i], sets, n_sets, &c->rt, err);
        if (st != LLMRT_OK) {
            llmrt_error_prefix(err, "config %d (%s)", i + 1, paths[i]);
            goto cleanup;
        }
    }
cleanup:
    if (st != LLMRT_OK)
        bench_configs_close(cfgs, n);
    return st;
}

void bench_configs_close(bench_config *cfgs, int n)
{
    for (int i = 0; i < n; i++) {
        if (cfgs[i].engine)
            llmrt_engine_destroy(cfgs[i].engine);
        cfgs[i].engine = NULL;
        if (cfgs[i].rt)
            llmrt_runtime_close(cfgs[i].rt);
        cfgs[i].rt = NULL;
    }
}

/* ---- diff ---- */

/* Equal as settings: typed comparison for declared keys, resolved paths for PATH keys. */
static int same_value(const llmrt_config *ca, const llmrt_config *cb, const char *key)
{
    const char *a = llmrt_config_get(ca, key), *b = llmrt_config_get(cb, key);
    if (!a || !b)
        return a == b;
    const llmrt_key *k = llmrt_config_decl(ca, key);
    if (k) {
        switch (k->type) {
        case LLMRT_KEY_INT:
            return llmrt_config_int(ca, key) == llmrt_config_int(cb, key);
        case LLMRT_KEY_FLOAT:
            return llmrt_config_float(ca, key) == llmrt_config_float(cb, key);
        case LLMRT_KEY_BOOL:
            return llmrt_config_bool(ca, key) == llmrt_config_bool(cb, key);
        case LLMRT_KEY_PATH: {
            char ra[PATH_MAX], rb[PATH_MAX];
            if (realpath(a, ra) && realpath(b, rb))
                return strcmp(ra, rb) == 0;
            break;
        }
        default:
            break;
        }
    }
    return strcmp(a, b) == 0;
}

static llmrt_status add_row(bench_diff *d, const char *key, size_t *cap, llmrt_error *err)
{
    for (size_t i = 0; i < d->n_rows; i++)
        if (strcmp(d->rows[i].key, key) == 0)
            return LLMRT_OK;
    if (d->n_rows == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        bench_diff_row *nr = realloc(d->rows, nc * sizeof *nr);
        if (!nr)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory comparing configs");
        d->rows = nr;
        *cap = nc;
    }
    bench_diff_row *r = &d->rows[d->n_rows];
    memset(r, 0, sizeof *r);
    r->key = strdup(key);
    if (!r->key)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory comparing configs");
    d->n_rows++;
    return LLMRT_OK;
}

llmrt_status bench_configs_diff(const bench_config *cfgs, int n, bench_diff *out,
                                llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    size_t cap = 0;
    memset(out, 0, sizeof *out);
    for (int c = 0; c < n; c++) {
        const llmrt_config *cfg = cfgs[c].rt->cfg;
        llmrt_config_entry e;
        for (size_t i = 0; llmrt_config_entry_at(cfg, i, &e); i++) {
            char key[512];
            snprintf(key, sizeof key, "%s.%s", e.section, e.key);
            TRY(add_row(out, key, &cap, err));
        }
    }
    for (size_t r = 0; r < out->n_rows; r++) {
        bench_diff_row *row = &out->rows[r];
        int same = 1;
        uint32_t flags = 0;
        for (int c = 0; c < n; c++) {
            const llmrt_config *cfg = cfgs[c].rt->cfg;
            const llmrt_key *k = llmrt_config_decl(cfg, row->key);
            row->values[c] = llmrt_config_shown(cfg, row->key); /* secrets as set/unset */
            flags |= k ? k->flags : 0;
            if (c > 0 && !same_value(cfgs[0].rt->cfg, cfg, row->key))
                same = 0;
        }
        row->cls = same ? BENCH_KEY_SAME : bench_key_classify(row->key, flags);
        out->n_knob += row->cls == BENCH_KEY_KNOB;
        out->n_unused += row->cls == BENCH_KEY_UNUSED;
        out->n_diff += row->cls == BENCH_KEY_DIFF;
    }
cleanup:
    if (st != LLMRT_OK)
        bench_diff_free(out);
    return st;
}

void bench_diff_free(bench_diff *d)
{
    for (size_t i = 0; i < d->n_rows; i++)
        free(d->rows[i].key);
    free(d->rows);
    memset(d, 0, sizeof *d);
}

void bench_diff_print(const bench_diff *d, const bench_config *cfgs, int n, FILE *out)
{
    size_t differing = 0;
    for (size_t i = 0; i < d->n_rows; i++)
        differing += d->rows[i].cls != BENCH_KEY_SAME;
    if (differing == 0) {
        fprintf(out, "settings: the %d configs are identical in all %zu settings\n", n, d->n_rows);
        return;
    }
    fprintf(out, "settings that differ (%zu of %zu; knob = an A/B knob, unused = not used by "
                 "bench, differs = must be equal):\n",
            differing, d->n_rows);
    int kw = 3;
    for (size_t i = 0; i < d->n_rows; i++)
        if (d->rows[i].cls != BENCH_KEY_SAME && (int)strlen(d->rows[i].key) > kw)
            kw = (int)strlen(d->rows[i].key);
    fprintf(out, "  %-*s  %-7s", kw, "key", "class");
    for (int c = 0; c < n; c++)
        fprintf(out, "  %-16s", cfgs[c].name);
    fputc('\n', out);
    for (size_t i = 0; i < d->n_rows; i++) {
        const bench_diff_row *r = &d->rows[i];
        if (r->cls == BENCH_KEY_SAME)
            continue;
        fprintf(out, "  %-*s  %-7s", kw, r->key, bench_key_class_str(r->cls));
        for (int c = 0; c < n; c++)
            fprintf(out, "  %-16s", r->values[c] ? r->values[c] : "(unset)");
        fputc('\n', out);
    }
}

/* ---- load and check ---- */

llmrt_status bench_configs_load(bench_config *cfgs, int n, FILE *progress, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    for (int i = 0; i < n; i++) {
        bench_config *c = &cfgs[i];
        if (progress) {
            fprintf(progress, "bench: loading %s (%d/%d) from %s\n", c->name, i + 1, n, c->ini_path);
            fflush(progress);
        }
        llmrt_engine_options o;
        llmrt_engine_options_init(&o);
        o.quiet = 1;
        c->rss_before_load = bench_rss_bytes();
        st = llmrt_engine_create(c->rt, &o, &c->engine, err);
        if (st != LLMRT_OK) {
            c->engine = NULL;
            llmrt_error_prefix(err, "loading config %s (%s)", c->name, c->ini_path);
            return st;
        }
        c->rss_after_load = bench_rss_bytes();
        llmrt_engine_stats_get(c->engine, &c->stats);
    }
    return st;
}

static int same_path(const char *a, const char *b)
{
    char ra[PATH_MAX], rb[PATH_MAX];
    if (realpath(a, ra) && realpath(b, rb))
        return strcmp(ra, rb) == 0;
    return strcmp(a, b) == 0;
}

int bench_configs_check_loaded(const bench_config *cfgs, int n, FILE *out)
{
    int bad = 0;
    const llmrt_engine_stats *a = &cfgs[0].stats;
    for (int i = 1; i < n; i++) {
        const llmrt_engine_stats *b = &cfgs[i].stats;
        const char *an = cfgs[0].name, *bn = cfgs[i].name;
        if (a->kv_capacity_tokens != b->kv_capacity_tokens) {
            fprintf(out, "KV capacity differs: %s has %lld tokens (%s), %s has %lld tokens (%s); "
                         "set the same cache.kv_tokens in both configs\n",
                    an, (long long)a->kv_capacity_tokens, a->kv_capacity_source, bn,
                    (long long)b->kv_capacity_tokens, b->kv_capacity_source);
            bad++;
        }
        if (!same_path(a->model_path, b->model_path) || strcmp(a->model_arch, b->model_arch) ||
            strcmp(a->quant, b->quant)) {
            fprintf(out, "model differs: %s runs %s (%s, quant %s), %s runs %s (%s, quant %s)\n",
                    an, a->model_path, a->model_arch, a->quant, bn, b->model_path, b->model_arch,
                    b->quant);
            bad++;
        }
    }
    return bad;
}
