/* open.c — llmrt_engine_create: runtime.ini → parts → a running engine. Reads the [cache]
 * and [scheduler] keys into engine settings, loads the model through the model loader
 * (model.path, plugins, backend), opens memory.plugin on that backend, loads the folder's
 * tokenizer when it has one, opens its chat format, merges the eos ids of config.json,
 * generation_config.json and tokenizer_config.json, and hands everything to
 * llmrt_engine_create_from_parts (create.c), which owns it from then on. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "engine_parts.h"
#include "error.h"
#include "log.h"
#include "model_loader.h"
#include "scheduler.h"

void llmrt_engine_settings_default(llmrt_engine_settings *s)
{
    memset(s, 0, sizeof *s);
    s->block_size = 16;
    s->gpu_memory_utilization = 0.80;
    s->kv_dtype = LLMRT_DTYPE_INVALID;
    s->prefix_caching = 1;
    s->max_num_seqs = LLMRT_SCHED_CPU_MAX_SEQS; /* the keys' 0 = by backend: see create */
    s->max_num_batched_tokens = LLMRT_SCHED_CPU_MAX_TOKENS;
    s->async_scheduling = 1;
    s->cuda_graphs = 1;
}

void llmrt_engine_settings_from_config(const llmrt_config *cfg, llmrt_engine_settings *s)
{
    llmrt_engine_settings_default(s);
    s->block_size = (int32_t)llmrt_config_int(cfg, "cache.block_size");
    s->kv_tokens = llmrt_config_int(cfg, "cache.kv_tokens");
    s->gpu_memory_utilization = llmrt_config_float(cfg, "cache.gpu_memory_utilization");
    s->max_model_len = (int32_t)llmrt_config_int(cfg, "cache.max_model_len");
    const char *dt = llmrt_config_get(cfg, "cache.dtype");
    s->kv_dtype = !dt || !strcmp(dt, "auto") ? LLMRT_DTYPE_INVALID
                  : !strcmp(dt, "f32")       ? LLMRT_DTYPE_F32
                  : !strcmp(dt, "f16")       ? LLMRT_DTYPE_F16
                  : !strcmp(dt, "bf16")      ? LLMRT_DTYPE_BF16
                                             : LLMRT_DTYPE_INVALID;
    s->prefix_caching = llmrt_config_bool(cfg, "cache.prefix_caching");
    s->max_num_seqs = (int32_t)llmrt_config_int(cfg, "scheduler.max_num_seqs");
    s->max_num_batched_tokens = (int32_t)llmrt_config_int(cfg, "scheduler.max_num_batched_tokens");
    s->async_scheduling = llmrt_config_bool(cfg, "scheduler.async_scheduling");
    s->cuda_graphs = llmrt_config_bool(cfg, "scheduler.cuda_graphs");
    /* tensor parallel: the engine captures rank 0's stream only, so decode steps run without
     * graphs (the other ranks' threads enqueue theirs eagerly, core/engine/tp_model.c) */
    if (llmrt_config_int(cfg, "runtime.tensor_parallel") > 1)
        s->cuda_graphs = 0;
}

/* What the engine owns through parts.release. */
typedef struct owned {
    llmrt_loaded_model *lm;
    llmrt_tokenizer *tok;
    llmrt_chat_ref chat;
    int32_t eos[2 * LLMRT_MAX_EOS + 8];
} owned;

static void release_owned(void *ctx)
{
    owned *o = ctx;
    if (!o)
        return;
    llmrt_chat_close(&o->chat);
    llmrt_tokenizer_free(o->tok);
    llmrt_model_unload(o->lm);
    free(o);
}

static int add_eos(int32_t *ids, int n, int cap, int32_t id)
{
    if (id < 0)
        return n;
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return n;
    if (n < cap)
        ids[n++] = id;
    return n;
}

llmrt_status llmrt_engine_create(llmrt_runtime *rt, const llmrt_engine_options *opts,
                                 llmrt_engine **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_engine_options o;
    if (opts)
        o = *opts;
    else
        llmrt_engine_options_init(&o);
    double t0 = llmrt_now_s();
    owned *own = calloc(1, sizeof *own);
    if (!own)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");

    llmrt_model_load_opts lo = {0};
    lo.quiet = o.quiet || !o.show_progress;
    TRY(llmrt_model_load(rt, &lo, &own->lm, err));
    llmrt_loaded_model *lm = own->lm; /* its memory plugin was opened before the model */

    if (!o.no_tokenizer) {
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/tokenizer.json", lm->dir);
        if (stat(path, &sb) == 0) {
            st = llmrt_tokenizer_load(lm->dir, &own->tok, err);
            if (st) {
                llmrt_error_prefix(err, "loading the tokenizer of %s", lm->dir);
                goto cleanup;
            }
            /* ids the tokenizer can produce must be rows of the embedding (which may be
             * padded past the tokenizer's size to a round number): a mismatch is found
             * here, not on the first prompt that happens to hold a high id */
            int32_t tv = llmrt_tokenizer_vocab_size(own->tok);
            if (tv > lm->info.vocab)
                FAIL(err, LLMRT_ERR_INVALID_ARG,
                     "%s: tokenizer.json has ids up to %d but the model's vocabulary "
                     "(config.json vocab_size) has %d rows: this tokenizer is not the model's "
                     "(copy the tokenizer of the checkpoint it was trained with, or remove "
                     "tokenizer.json to work with token ids)",
                     lm->dir, tv - 1, lm->info.vocab);
        } else if (!o.quiet) {
            LOG_INFO("%s has no tokenizer.json: token ids only (no text prompts, text output "
                     "or stop strings)",
                     lm->dir);
        }
    }

    {
        llmrt_error cerr = {0}; /* no chat format is not an error: why says why */
        llmrt_chat_open(&rt->host, lm->model_vt, lm->model_plugin, own->tok, lm->dir, &own->chat,
                        &cerr);
    }

    int n_eos = 0, cap = (int)(sizeof own->eos / sizeof own->eos[0]);
    for (int32_t i = 0; i < lm->hf.n_eos; i++)
        n_eos = add_eos(own->eos, n_eos, cap, lm->hf.eos_ids[i]);
    if (own->tok) {
        const int32_t *tids = NULL;
        size_t nt = llmrt_tokenizer_eos_ids(own->tok, &tids);
        for (size_t i = 0; i < nt; i++)
            n_eos = add_eos(own->eos, n_eos, cap, tids[i]);
    }

    llmrt_engine_settings set;
    llmrt_engine_settings_from_config(rt->cfg, &set);
    llmrt_engine_parts parts;
    memset(&parts, 0, sizeof parts);
    parts.backend = lm->backend;
    parts.memory = lm->memory;
    parts.model_vt = lm->model_vt;
    parts.model = lm->model;
    parts.tokenizer = own->tok;
    parts.chat = &own->chat;
    parts.eos_ids = own->eos;
    parts.n_eos = n_eos;
    parts.model_path = lm->dir;
    parts.quant_name = lm->quant.vt ? lm->quant.name : NULL;
    parts.load_time_s = llmrt_now_s() - t0;
    parts.device_free_before = lm->device_free_before;
    parts.sampling = lm->hf.gen;
    parts.release = release_owned;
    parts.release_ctx = own;
    if (lo.quiet && !o.quiet) /* otherwise the loader said it */
        LOG_INFO("loaded %s (%s%s%s) from %s on %s in %.2f s", lm->info.arch, lm->model_plugin,
                 lm->quant.vt ? " + " : "", lm->quant.vt ? lm->quant.name : "", lm->dir,
                 lm->backend.name, lm->load_seconds);
    own = NULL; /* from here the engine owns it, also when create fails */
    return llmrt_engine_create_from_parts(&parts, &set, &o, out, err);
cleanup:
    release_owned(own);
    return st;
}
