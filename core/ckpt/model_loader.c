/* model_loader.c — model.path + config.json → backend, quant and model plugin instances.
 *
 * Why: see model_loader.h. The order matters for the user: config.json is read and the
 * plugins are chosen before the backend is opened, so "nothing supports this checkpoint"
 * shows up at once; the checkpoint is closed as soon as the model has copied its weights. */
#include "model_loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "safetensors.h"
#include "scheduler.h"
#include "tp_model.h"

static int is_auto(const char *s) { return !s || !s[0] || strcmp(s, "auto") == 0; }

/* config.json's "architectures" as compact JSON text, for messages. */
static void architectures_text(const char *config_json, char *buf, size_t n)
{
    snprintf(buf, n, "(none)");
    json_t *root = json_loads(config_json ? config_json : "", 0, NULL);
    json_t *a = root ? json_object_get(root, "architectures") : NULL;
    if (a) {
        char *s = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s)
            snprintf(buf, n, "%s", s);
        free(s);
    }
    json_decref(root);
}

/* quantization_config's "quant_method" (or the whole object when absent), for messages. */
static void quant_text(const char *quant_json, char *buf, size_t n)
{
    json_t *root = json_loads(quant_json ? quant_json : "", 0, NULL);
    json_t *m = root ? json_object_get(root, "quant_method") : NULL;
    if (json_is_string(m))
        snprintf(buf, n, "quant_method \"%s\"", json_string_value(m));
    else
        snprintf(buf, n, "%.200s", quant_json ? quant_json : "(none)");
    json_decref(root);
}

/* "name (description); other (...)" — each plugin of a kind with its description. */
static void describe_plugins(const llmrt_registry *reg, llmrt_plugin_kind kind, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < llmrt_registry_count(reg) && k < n; i++) {
        const llmrt_plugin_entry *e = llmrt_registry_at(reg, i);
        if (e->desc->kind != kind)
            continue;
        k += (size_t)snprintf(buf + k, n - k, "%s%s (%s)", k ? "; " : "", e->desc->name,
                              e->desc->description ? e->desc->description : "");
    }
    if (!buf[0])
        snprintf(buf, n, "none loaded: see `llmrt plugins`");
}

/* Append "name: message" of a plugin that recognised but rejected the checkpoint. */
static void add_reason(char *buf, size_t n, const char *who, const char *msg)
{
    size_t k = strlen(buf);
    if (k < n)
        snprintf(buf + k, n - k, "%s%s: %s", k ? "; " : "", who, msg);
}

static llmrt_status select_model(const llmrt_registry *reg, const char *config_json,
                                 const char *name, const llmrt_plugin_entry **out, llmrt_error *err)
{
    char list[1024];
    if (!is_auto(name)) {
        *out = llmrt_registry_find(reg, LLMRT_PLUGIN_MODEL, name);
        if (*out)
            return LLMRT_OK;
        llmrt_registry_names(reg, LLMRT_PLUGIN_MODEL, list, sizeof list);
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "model.plugin = %s: no model plugin of that name (available: %s)", name,
                          list[0] ? list : "none");
    }
    char reasons[LLMRT_ERROR_MSG_MAX] = "";
    for (size_t i = 0; i < llmrt_registry_count(reg); i++) {
        const llmrt_plugin_entry *e = llmrt_registry_at(reg, i);
        if (e->desc->kind != LLMRT_PLUGIN_MODEL)
            continue;
        const llmrt_model_vtable *vt = e->desc->vtable;
        llmrt_error perr = {0};
        llmrt_status st = vt->probe ? vt->probe(config_json, &perr) : LLMRT_ERR_NOT_FOUND;
        if (st == LLMRT_OK) {
            *out = e;
            return LLMRT_OK;
        }
        if (st != LLMRT_ERR_NOT_FOUND)
            add_reason(reasons, sizeof reasons, e->desc->name, perr.msg);
    }
    char archs[256];
    architectures_text(config_json, archs, sizeof archs);
    describe_plugins(reg, LLMRT_PLUGIN_MODEL, list, sizeof list);
    return llmrt_fail(err, reasons[0] ? LLMRT_ERR_UNSUPPORTED : LLMRT_ERR_NOT_FOUND,
                      "config.json: architectures %s is not supported%s%s; supported model "
                      "plugins: %s (model.plugin forces one)",
                      archs, reasons[0] ? " — " : "", reasons, list);
}

static llmrt_status select_quant(const llmrt_registry *reg, const char *quant_json,
                                 const char *name, const llmrt_plugin_entry **out, llmrt_error *err)
{
    char list[1024], what[256];
    *out = NULL;
    if (name && strcmp(name, "none") == 0) {
        if (quant_json)
            LOG_WARN("model.quant = none: ignoring config.json's quantization_config; every "
                     "linear must then have a dense .weight");
        return LLMRT_OK;
    }
    if (!is_auto(name)) {
        const llmrt_plugin_entry *e = llmrt_registry_find(reg, LLMRT_PLUGIN_QUANT, name);
        if (!e) {
            llmrt_registry_names(reg, LLMRT_PLUGIN_QUANT, list, sizeof list);
            return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                              "model.quant = %s: no quant plugin of that name (available: %s, or "
                              "none)",
                              name, list[0] ? list : "no quant plugins loaded");
        }
        if (!quant_json)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "model.quant = %s, but config.json has no quantization_config "
                              "(set model.quant = auto or none for a dense checkpoint)",
                              name);
        const llmrt_quant_vtable *vt = e->desc->vtable;
        llmrt_error perr = {0};
        llmrt_status st = vt->probe ? vt->probe(quant_json, &perr) : LLMRT_OK;
        if (st == LLMRT_ERR_NOT_FOUND) {
            quant_text(quant_json, what, sizeof what);
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "model.quant = %s: the %s plugin does not handle config.json's "
                              "quantization_config (%s)",
                              name, name, what);
        }
        if (st != LLMRT_OK)
            return llmrt_fail(err, st, "quant plugin '%s': %s", name, perr.msg);
        *out = e;
        return LLMRT_OK;
    }
    if (!quant_json)
        return LLMRT_OK; /* dense checkpoint */
    char reasons[LLMRT_ERROR_MSG_MAX] = "";
    for (size_t i = 0; i < llmrt_registry_count(reg); i++) {
        const llmrt_plugin_entry *e = llmrt_registry_at(reg, i);
        if (e->desc->kind != LLMRT_PLUGIN_QUANT)
            continue;
        const llmrt_quant_vtable *vt = e->desc->vtable;
        llmrt_error perr = {0};
        llmrt_status st = vt->probe ? vt->probe(quant_json, &perr) : LLMRT_ERR_NOT_FOUND;
        if (st == LLMRT_OK) {
            *out = e;
            return LLMRT_OK;
        }
        if (st != LLMRT_ERR_NOT_FOUND)
            add_reason(reasons, sizeof reasons, e->desc->name, perr.msg);
    }
    quant_text(quant_json, what, sizeof what);
    describe_plugins(reg, LLMRT_PLUGIN_QUANT, list, sizeof list);
    return llmrt_fail(err, reasons[0] ? LLMRT_ERR_UNSUPPORTED : LLMRT_ERR_NOT_FOUND,
                      "config.json: quantization_config (%s) is not supported%s%s; supported "
                      "quant plugins: %s (model.quant forces one, or none)",
                      what, reasons[0] ? " — " : "", reasons, list);
}

llmrt_status llmrt_model_select(const llmrt_registry *reg, const char *config_json,
                                const char *quant_json, const char *model_name,
                                const char *quant_name, const llmrt_plugin_entry **model_out,
                                const llmrt_plugin_entry **quant_out, llmrt_error *err)
{
    llmrt_status st = select_model(reg, config_json, model_name, model_out, err);
    if (st)
        return st;
    return select_quant(reg, quant_json, quant_name, quant_out, err);
}

void llmrt_model_unload(llmrt_loaded_model *m)
{
    if (!m)
        return;
    if (m->model)
        m->model_vt->destroy(m->model);
    if (m->quant.q)
        m->quant.vt->destroy(m->quant.q);
    llmrt_runtime_memory_close(&m->memory); /* after the weights it may hold */
    llmrt_runtime_backend_close(&m->backend);
    llmrt_hf_config_free(&m->hf);
    free(m->dir);
    free(m);
}

static int32_t param_or(int32_t given, const llmrt_config *cfg, const char *key)
{
    return given > 0 ? given : (int32_t)llmrt_config_int(cfg, key);
}

static int backend_is_gpu(const llmrt_backend_ref *be)
{
    llmrt_device_info di;
    llmrt_error e = {0};
    memset(&di, 0, sizeof di);
    return be->vt->device_info(be->b, &di, &e) == LLMRT_OK && di.is_gpu;
}

/* memory.cpu_offload_gb: what the model is handed (lm->offload.bytes 0: nothing). Where
 * device memory is host memory there is nothing to offload: said once, not an error. */
static llmrt_status plan_offload(llmrt_runtime *rt, llmrt_loaded_model *lm, llmrt_error *err)
{
    const double gb = llmrt_config_float(rt->cfg, "memory.cpu_offload_gb");
    if (!(gb > 0))
        return LLMRT_OK;
    const llmrt_backend_ref *be = &lm->backend;
    if (be->vt->caps(be->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) {
        LOG_WARN("memory.cpu_offload_gb = %g has no meaning on the %s backend (its device "
                 "memory is host memory): ignored",
                 gb, be->name);
        return LLMRT_OK;
    }
    const llmrt_memory_vtable *mv = lm->memory.vt;
    if (!LLMRT_VT_HAS(mv, llmrt_memory_vtable, offload_init) ||
        !LLMRT_VT_HAS(mv, llmrt_memory_vtable, offload_place) ||
        !LLMRT_VT_HAS(mv, llmrt_memory_vtable, offload_fetch))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "memory.cpu_offload_gb = %g: memory plugin '%s' cannot hold weights "
                          "in host memory (no offload_init/place/fetch); use pinned, uva or "
                          "pageable, or set memory.cpu_offload_gb = 0",
                          gb, lm->memory.name ? lm->memory.name : "?");
    lm->offload.struct_size = sizeof lm->offload;
    lm->offload.vt = mv;
    lm->offload.m = lm->memory.m;
    lm->offload.bytes = (uint64_t)(gb * 1e9);
    return LLMRT_OK;
}

llmrt_status llmrt_model_load(llmrt_runtime *rt, const llmrt_model_load_opts *opts,
                              llmrt_loaded_model **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_model_load_opts o = {0};
    llmrt_st_model *stm = NULL;
    const llmrt_plugin_entry *me = NULL, *qe = NULL;
    char section[96];
    if (opts)
        o = *opts;
    *out = NULL;
    const char *dir = llmrt_config_get(rt->cfg, "model.path");
    if (!dir || !dir[0])
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "no model: set model.path or pass --model DIR");
    double t0 = llmrt_now_s();
    llmrt_loaded_model *lm = calloc(1, sizeof *lm);
    TRY_ALLOC(err, lm, "the loaded model");
    lm->dir = strdup(dir);
    TRY_ALLOC(err, lm->dir, "the model path");

    TRY(llmrt_hf_config_load(dir, &lm->hf, err));
    TRY(llmrt_st_model_open(dir, !o.quiet, &stm, err));
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(stm);
    TRY(llmrt_model_select(rt->reg, ck->config_json, lm->hf.quant_json,
                           llmrt_config_get(rt->cfg, "model.plugin"),
                           llmrt_config_get(rt->cfg, "model.quant"), &me, &qe, err));
    TRY(llmrt_runtime_backend_open(rt, &lm->backend, err));
    if (lm->backend.vt->mem_info) { /* what this model's engine takes is measured from here */
        uint64_t fr = 0, tot = 0;
        llmrt_error merr = {0};
        if (lm->backend.vt->mem_info(lm->backend.b, &fr, &tot, &merr) == LLMRT_OK)
            lm->device_free_before = fr;
    }

    TRY(llmrt_runtime_memory_open(rt, &lm->backend, &lm->memory, err));
    TRY(plan_offload(rt, lm, err));

    if (qe) {
        const llmrt_quant_vtable *qvt = qe->desc->vtable;
        snprintf(section, sizeof section, "quant.%s", qe->desc->name);
        st = qvt->create(&rt->host, llmrt_config_plugin_section(rt->cfg, section),
                         lm->hf.quant_json, &lm->backend, &lm->quant.q, err);
        if (st) {
            llmrt_error_prefix(err, "quant plugin '%s'", qe->desc->name);
            goto cleanup;
        }
        lm->quant.vt = qvt;
        lm->quant.name = qe->desc->name;
    }

    lm->params.max_tokens = param_or(o.max_tokens, rt->cfg, "scheduler.max_num_batched_tokens");
    lm->params.max_seqs = param_or(o.max_seqs, rt->cfg, "scheduler.max_num_seqs");
    /* 0 (the keys' default): the engine's by-backend limits, llmrt_sched_default_limits */
    llmrt_sched_default_limits(backend_is_gpu(&lm->backend), &lm->params.max_seqs,
                               &lm->params.max_tokens);
    lm->params.offload = lm->offload.bytes ? &lm->offload : NULL;
    lm->model_vt = me->desc->vtable;
    lm->model_plugin = me->desc->name;
    snprintf(section, sizeof section, "model.%s", me->desc->name);
    const int32_t tp = (int32_t)llmrt_config_int(rt->cfg, "runtime.tensor_parallel");
    if (tp > 1) /* one shard per rank, joined into one model (core/engine/tp_model.c) */
        st = llmrt_tp_model_create(rt, tp, ck, me, qe, lm->hf.quant_json, &lm->backend,
                                   qe ? &lm->quant : NULL, &lm->params, &lm->model_vt,
                                   &lm->model, err);
    else
        st = lm->model_vt->create(&rt->host, llmrt_config_plugin_section(rt->cfg, section), ck,
                                  &lm->backend, qe ? &lm->quant : NULL, &lm->params, &lm->model,
                                  err);
    if (st) {
        llmrt_error_prefix(err, "model plugin '%s'", me->desc->name);
        goto cleanup;
    }
    if (!o.quiet)
        llmrt_st_model_progress_done(stm);
    llmrt_st_model_close(stm);
    stm = NULL;
    lm->model_vt->info(lm->model, &lm->info);
    lm->load_seconds = llmrt_now_s() - t0;
    if (!o.quiet)
        LOG_INFO("loaded %s: %s (%s), %d layers, %.1f MB of %s%s%s weights on %s in %.2f s",
                 dir, lm->info.arch, lm->model_plugin, lm->info.n_layers,
                 (double)lm->info.weight_bytes / 1e6, llmrt_dtype_name(lm->info.weight_dtype),
                 qe ? " + " : "", qe ? qe->desc->name : "", lm->backend.name, lm->load_seconds);
    *out = lm;
    return LLMRT_OK;
cleanup:
    llmrt_st_model_close(stm);
    llmrt_model_unload(lm);
    if (st != LLMRT_ERR_NOMEM && !strstr(err->msg, dir))
        llmrt_error_prefix(err, "loading %s", dir);
    return st;
}
