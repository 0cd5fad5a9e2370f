/* cmd_logits.c — `llmrt logits`: teacher-forced logits of a token sequence, for checking the
 * runtime against references (tools/make_fixtures.py writes transformers' logits).
 *
 * Why a separate command: it is the shortest path from ids to logits — one forward with
 * all_logits over a small paged KV cache allocated here, no engine, no scheduler, no sampling —
 * so a mismatch points at the model, quant or backend plugins and nothing else. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "commands.h"
#include "common.h"
#include "error.h"
#include "model_loader.h"

static const char usage[] =
    "usage: llmrt logits [-c FILE] [--model DIR] --ids 1,2,3 --out FILE\n\n"
    "Runs the model once over the ids (teacher forcing) and writes the logits of every\n"
    "position to FILE: float32 little-endian, [n_ids, vocab], row i predicting id i+1.\n"
    "A one-line summary goes to stderr.\n\n"
    "options:\n"
    "  --ids LIST             token ids, comma or space separated\n"
    "  --out FILE             where to write the logits\n\n" CLI_COMMON_USAGE;

enum { OPT_IDS = CLI_OPT_FIRST_OWN, OPT_OUT };

/* cache.dtype: auto = f32 on a backend whose memory is host memory (cpu), else the model's
 * dense dtype when it is f16/bf16 (the engine's rule, so both see the same precision). */
static llmrt_dtype kv_dtype(const llmrt_runtime *rt, const llmrt_loaded_model *lm)
{
    const char *s = llmrt_config_get(rt->cfg, "cache.dtype");
    if (strcmp(s, "f32") == 0)
        return LLMRT_DTYPE_F32;
    if (strcmp(s, "f16") == 0)
        return LLMRT_DTYPE_F16;
    if (strcmp(s, "bf16") == 0)
        return LLMRT_DTYPE_BF16;
    if (lm->backend.vt->caps(lm->backend.b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE)
        return LLMRT_DTYPE_F32;
    llmrt_dtype w = lm->info.weight_dtype;
    return w == LLMRT_DTYPE_F16 || w == LLMRT_DTYPE_BF16 ? w : LLMRT_DTYPE_F32;
}

static int write_f32_le(const char *path, const float *x, size_t n, llmrt_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        llmrt_fail(err, LLMRT_ERR_IO, "cannot write --out %s: %m", path);
        return -1;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = __builtin_bswap32(u);
        fwrite(&u, 4, 1, f);
    }
#else
    fwrite(x, sizeof *x, n, f);
#endif
    if (ferror(f) | fclose(f)) {
        llmrt_fail(err, LLMRT_ERR_IO, "writing --out %s failed: %m", path);
        return -1;
    }
    return 0;
}

/* One all_logits forward over ids [n]; fills logits (host) [n, vocab]. */
static llmrt_status run_forward(llmrt_runtime *rt, llmrt_loaded_model *lm, const int32_t *ids,
                                int32_t n, float *logits, llmrt_dtype *kvd_out, double *ms,
                                llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const llmrt_backend_vtable *be = lm->backend.vt;
    llmrt_backend *b = lm->backend.b;
    const llmrt_model_info *mi = &lm->info;
    const int32_t L = mi->n_layers, bs = (int32_t)llmrt_config_int(rt->cfg, "cache.block_size");
    const int32_t nb = (n + bs - 1) / bs;
    const llmrt_dtype kvd = kv_dtype(rt, lm);
    void **k = calloc((size_t)L, sizeof *k), **v = calloc((size_t)L, sizeof *v);
    int32_t *host = NULL;
    void *dev = NULL, *dlogits = NULL;
    TRY_ALLOC(err, k, "KV cache pointers");
    TRY_ALLOC(err, v, "KV cache pointers");

    /* KV cache: nb blocks of bs tokens, block j of the sequence is block j of the cache. */
    size_t layer_bytes = (size_t)nb * bs * mi->n_kv_heads * mi->head_dim * llmrt_dtype_size(kvd);
    for (int32_t l = 0; l < L; l++) {
        TRY(be->dev_alloc(b, layer_bytes, &k[l], err));
        TRY(be->dev_alloc(b, layer_bytes, &v[l], err));
    }
    llmrt_kv_cache kv = {.n_layers = L, .n_blocks = nb, .block_size = bs,
                         .n_kv_heads = mi->n_kv_heads, .head_dim = mi->head_dim, .dtype = kvd,
                         .k = k, .v = v};

    /* Step inputs, one int32 buffer: ids [n] | positions [n] | slots [n] | query_start [2] |
     * seq_lens [1] | block_table [nb] | logits_rows [1]. */
    size_t n_ints = 3 * (size_t)n + 2 + 1 + (size_t)nb + 1;
    host = malloc(n_ints * sizeof *host);
    TRY_ALLOC(err, host, "step inputs");
    int32_t *h_ids = host, *h_pos = h_ids + n, *h_slot = h_pos + n, *h_qs = h_slot + n;
    int32_t *h_sl = h_qs + 2, *h_bt = h_sl + 1, *h_rows = h_bt + nb;
    memcpy(h_ids, ids, (size_t)n * sizeof *ids);
    for (int32_t i = 0; i < n; i++)
        h_pos[i] = h_slot[i] = i;
    h_qs[0] = 0, h_qs[1] = n, h_sl[0] = n, h_rows[0] = n - 1;
    for (int32_t j = 0; j < nb; j++)
        h_bt[j] = j;
    TRY(be->dev_alloc(b, n_ints * sizeof *host, &dev, err));
    TRY(be->copy(b, dev, host, n_ints * sizeof *host, LLMRT_COPY_H2D, err));
    int32_t *d = dev;
    llmrt_batch batch = {.n_tokens = n, .n_seqs = 1, .token_ids = d, .positions = d + n,
                         .slot_mapping = d + 2 * n, .query_start = d + 3 * n,
                         .seq_lens = d + 3 * n + 2, .block_tables = d + 3 * n + 3,
                         .logits_rows = d + 3 * n + 3 + nb, .max_blocks_per_seq = nb,
                         .max_seq_len = n, .max_query_len = n, .all_logits = 1};

    size_t logit_bytes = (size_t)n * mi->vocab * sizeof(float);
    TRY(be->dev_alloc(b, logit_bytes, &dlogits, err));
    TRY(be->synchronize(b, err));
    double t0 = llmrt_now_s();
    TRY(lm->model_vt->forward(lm->model, &batch, &kv, dlogits, err));
    TRY(be->synchronize(b, err));
    *ms = (llmrt_now_s() - t0) * 1e3;
    TRY(be->copy(b, logits, dlogits, logit_bytes, LLMRT_COPY_D2H, err));
    TRY(be->synchronize(b, err));
    *kvd_out = kvd;
cleanup:
    if (dlogits)
        be->dev_free(b, dlogits);
    if (dev)
        be->dev_free(b, dev);
    for (int32_t l = 0; l < L; l++) {
        if (k && k[l])
            be->dev_free(b, k[l]);
        if (v && v[l])
            be->dev_free(b, v[l]);
    }
    free(k);
    free(v);
    free(host);
    return st;
}

int cmd_logits(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"ids", required_argument, 0, OPT_IDS},
                                         {"out", required_argument, 0, OPT_OUT},
                                         {0, 0, 0, 0}};
    cli_common c = {0};
    const char *ids_arg = NULL, *out_path = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        int r = cli_common_opt(&c, opt, optarg, "logits", usage);
        if (r < 0)
            return 2;
        if (r == 1)
            continue;
        if (opt == OPT_IDS)
            ids_arg = optarg;
        else if (opt == OPT_OUT)
            out_path = optarg;
        else
            return cli_bad_option("logits", opts, argv);
    }
    if (optind < argc)
        return cli_usage_error("logits", usage, "unexpected argument '%s'", argv[optind]);
    if (!ids_arg)
        return cli_usage_error("logits", usage, "--ids is required");
    if (!out_path)
        return cli_usage_error("logits", usage, "--out is required");
    int32_t *ids = NULL;
    int n = cli_parse_ids(ids_arg, &ids);
    if (n < 0)
        return cli_usage_error("logits", usage,
                               "--ids: '%s' is not a list of non-negative integers (e.g. 1,2,3)",
                               ids_arg);
    if (n == 0) {
        free(ids);
        return cli_usage_error("logits", usage, "--ids is empty");
    }

    int rc = 1;
    llmrt_runtime *rt = NULL;
    llmrt_loaded_model *lm = NULL;
    float *logits = NULL;
    llmrt_error err = {0};
    if (cli_open_runtime(&c, &rt))
        goto done;
    llmrt_model_load_opts lo = {.max_tokens = n, .max_seqs = 1};
    if (llmrt_model_load(rt, &lo, &lm, &err)) {
        rc = cli_fail("logits", &err);
        goto done;
    }
    const llmrt_model_info *mi = &lm->info;
    for (int i = 0; i < n; i++)
        if (ids[i] >= mi->vocab) {
            fprintf(stderr, "llmrt logits: error: --ids: id %d (position %d) is outside the "
                            "vocabulary (vocab_size %d: ids 0..%d)\n",
                    ids[i], i, mi->vocab, mi->vocab - 1);
            goto done;
        }
    if (n > mi->max_position) {
        fprintf(stderr, "llmrt logits: error: --ids has %d ids but the model's "
                        "max_position_embeddings is %d\n", n, mi->max_position);
        goto done;
    }
    logits = malloc((size_t)n * mi->vocab * sizeof *logits);
    if (!logits) {
        fprintf(stderr, "llmrt logits: error: out of memory for %d x %d logits\n", n, mi->vocab);
        goto done;
    }
    llmrt_dtype kvd = LLMRT_DTYPE_F32;
    double ms = 0;
    if (run_forward(rt, lm, ids, n, logits, &kvd, &ms, &err)) {
        rc = cli_fail("logits", &err);
        goto done;
    }
    size_t total = (size_t)n * mi->vocab, bad = 0;
    for (size_t i = 0; i < total; i++)
        bad += !isfinite(logits[i]);
    if (write_f32_le(out_path, logits, total, &err)) {
        rc = cli_fail("logits", &err);
        goto done;
    }
    fprintf(stderr,
            "llmrt logits: %d ids -> %s [%d x %d] float32; %s (%s%s%s), KV %s, backend %s; "
            "load %.2f s, forward %.1f ms\n",
            n, out_path, n, mi->vocab, lm->dir, lm->model_plugin, lm->quant.name ? "+" : "",
            lm->quant.name ? lm->quant.name : "", llmrt_dtype_name(kvd), lm->backend.name,
            lm->load_seconds, ms);
    if (bad) {
        fprintf(stderr, "llmrt logits: error: %zu of %zu logits are not finite (NaN or inf)\n",
                bad, total);
        goto done;
    }
    rc = 0;
done:
    free(logits);
    llmrt_model_unload(lm);
    llmrt_runtime_close(rt);
    free(ids);
    return rc;
}
