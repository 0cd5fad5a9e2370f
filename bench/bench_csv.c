/* bench_csv.c — --csv DIR of `llmrt bench`: the raw samples as two CSV files, for
 * spreadsheets and pandas.
 *
 *   tokens.csv  one row per generated token: which config, level, round, batch and request
 *               it belongs to, its index, its arrival time (seconds since the first measured
 *               batch), the time since its request was submitted (TTFT for token 0) and the
 *               gap since the previous token (ITL; empty for token 0).
 *   steps.csv   one row per engine step: the llmrt_step_record fields.
 * Columns are BENCH_CSV_TOKENS_HEADER and BENCH_CSV_STEPS_HEADER (bench_report.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_report.h"
#include "error.h"

static FILE *open_in(const char *dir, const char *name, char *path, size_t n, llmrt_error *err)
{
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        llmrt_fail(err, LLMRT_ERR_IO, "--csv %s: cannot create %s: %s", dir, path,
                   strerror(errno));
    return f;
}

/* A config name as a CSV field: quoted (RFC 4180) when it holds a comma or a quote. */
static void put_name(FILE *f, const char *name)
{
    if (!strpbrk(name, ",\"\n")) {
        fputs(name, f);
        return;
    }
    fputc('"', f);
    for (const char *p = name; *p; p++) {
        if (*p == '"')
            fputc('"', f);
        fputc(*p, f);
    }
    fputc('"', f);
}

llmrt_status bench_report_csv(const bench_result *r, const char *dir, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    FILE *ft = NULL, *fs = NULL;
    char pt[4200], ps[4200];
    const bench_data *d = r->data;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        FAIL(err, LLMRT_ERR_IO, "--csv %s: cannot create the folder: %s", dir, strerror(errno));
    ft = open_in(dir, "tokens.csv", pt, sizeof pt, err);
    fs = ft ? open_in(dir, "steps.csv", ps, sizeof ps, err) : NULL;
    if (!ft || !fs) {
        st = LLMRT_ERR_IO;
        goto cleanup;
    }

    fprintf(ft, "%s\n", BENCH_CSV_TOKENS_HEADER);
    for (size_t i = 0; i < d->n_req; i++) {
        const bench_request *q = &d->req[i];
        for (int32_t k = 0; k < q->n_tok; k++) {
            put_name(ft, r->configs[q->config].name);
            fprintf(ft, ",%d,%d,%d,%d,%d,%.9f,%.6f,", r->settings->levels[q->level], q->round, q->unit, q->slot, k,
                    q->t_tok[k] - d->t0, 1e3 * (q->t_tok[k] - q->t_submit));
            if (k > 0)
                fprintf(ft, "%.6f", 1e3 * (q->t_tok[k] - q->t_tok[k - 1]));
            fputc('\n', ft);
        }
    }
    fprintf(fs, "%s\n", BENCH_CSV_STEPS_HEADER);
    for (size_t i = 0; i < d->n_steps; i++) {
        const bench_step *s = &d->steps[i];
        const llmrt_step_record *x = &s->rec;
        put_name(fs, r->configs[s->config].name);
        fprintf(fs,
                ",%d,%d,%d,%llu,%d,%d,%d,%d,%d,%d,%.9f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,"
                "%llu,%llu\n",
                r->settings->levels[s->level], s->round, s->unit,
                (unsigned long long)x->step, x->n_seqs, x->n_tokens, x->n_prefill_tokens,
                x->n_decode_seqs, x->graph, x->async, x->t_start - d->t0, x->host_prepare_ms,
                x->h2d_ms, x->compute_ms, x->d2h_ms, x->gpu_busy_ms, x->wall_ms, x->idle_ms,
                (unsigned long long)x->h2d_bytes, (unsigned long long)x->d2h_bytes);
    }
    if (ferror(ft) || ferror(fs))
        FAIL(err, LLMRT_ERR_IO, "--csv %s: write error (disk full?)", dir);
cleanup:
    if (ft && fclose(ft) != 0 && st == LLMRT_OK)
        st = llmrt_fail(err, LLMRT_ERR_IO, "--csv %s: cannot finish writing %s", dir, pt);
    if (fs && fclose(fs) != 0 && st == LLMRT_OK)
        st = llmrt_fail(err, LLMRT_ERR_IO, "--csv %s: cannot finish writing %s", dir, ps);
    return st;
}
