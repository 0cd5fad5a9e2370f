/* synth.c — choose the model and quant plugins for a synthetic checkpoint, let the model
 * plugin describe it, write it (see synth.h). */
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fileutil.h"
#include "hf_config.h"
#include "model_loader.h"

#define MAX_OPTS 64

void llmrt_synth_opts_init(llmrt_synth_opts *o)
{
    memset(o, 0, sizeof *o);
    o->dtype = LLMRT_DTYPE_INVALID;
    o->tie = -1;
}

static int is_auto(const char *s) { return !s || !s[0] || strcmp(s, "auto") == 0; }

/* "key=value" options as a plugin section; the strings point into a copy owned by *keep. */
typedef struct opt_section {
    llmrt_section sec;
    const char *keys[MAX_OPTS], *values[MAX_OPTS], *where[MAX_OPTS];
    char *copy[MAX_OPTS];
} opt_section;

static llmrt_status opt_section_make(opt_section *s, const char *name, const char *flag,
                                     const char *const *kv, int n, llmrt_error *err)
{
    memset(s, 0, sizeof *s);
    s->sec.name = name;
    if (n > MAX_OPTS)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mkmodel: more than %d %s options",
                          MAX_OPTS, flag);
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        if (!eq || eq == kv[i])
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mkmodel: %s '%s': expected KEY=VALUE",
                              flag, kv[i]);
        s->copy[i] = strdup(kv[i]);
        if (!s->copy[i])
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
        s->copy[i][eq - kv[i]] = 0;
        for (int j = 0; j < i; j++)
            if (strcmp(s->keys[j], s->copy[i]) == 0)
                return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mkmodel: %s %s is given twice",
                                  flag, s->copy[i]);
        s->keys[i] = s->copy[i];
        s->values[i] = s->copy[i] + (eq - kv[i]) + 1;
        s->where[i] = flag;
        s->sec.n = (size_t)i + 1;
    }
    s->sec.keys = s->keys;
    s->sec.values = s->values;
    s->sec.where = s->where;
    return LLMRT_OK;
}

static void opt_section_free(opt_section *s)
{
    for (int i = 0; i < MAX_OPTS; i++)
        free(s->copy[i]);
}

static const llmrt_model_vtable *model_vt(const llmrt_plugin_entry *e)
{
    return e->desc->vtable;
}

static int has_synth(const llmrt_plugin_entry *e)
{
    return e->desc->kind == LLMRT_PLUGIN_MODEL &&
           LLMRT_VT_HAS(model_vt(e), llmrt_model_vtable, synthesize);
}

/* The model plugin that has the preset (exactly one may), or the named one. */
static llmrt_status plugin_for_preset(const llmrt_registry *reg, const char *preset,
                                      const char *want, const llmrt_plugin_entry **out,
                                      llmrt_error *err)
{
    *out = NULL;
    char list[2048];
    for (size_t i = 0; i < llmrt_registry_count(reg); i++) {
        const llmrt_plugin_entry *e = llmrt_registry_at(reg, i);
        if (!has_synth(e) || (!is_auto(want) && strcmp(e->desc->name, want) != 0))
            continue;
        for (uint32_t k = 0; k < 1024; k++) {
            const llmrt_synth_preset *p = model_vt(e)->synth_preset(k);
            if (!p)
                break;
            if (strcmp(p->name, preset) != 0)
                continue;
            if (*out)
                return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                  "mkmodel: preset '%s' is offered by model plugins '%s' and "
                                  "'%s'; choose one with --model-plugin",
                                  preset, (*out)->desc->name, e->desc->name);
            *out = e;
        }
    }
    if (*out)
        return LLMRT_OK;
    llmrt_synth_preset_list(reg, list, sizeof list);
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "mkmodel: unknown preset '%s'%s%s; presets:\n%s",
                      preset, is_auto(want) ? "" : " of model plugin ", is_auto(want) ? "" : want,
                      list);
}

llmrt_status llmrt_synth_run(llmrt_runtime *rt, const char *dir, const llmrt_synth_opts *o,
                             llmrt_synth_result *res, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_synth_plan *plan = NULL;
    llmrt_hf_config hf = {0};
    int have_hf = 0;
    opt_section qs, ms;
    int have_qs = 0, have_ms = 0;
    const llmrt_plugin_entry *me = NULL, *qe = NULL;
    const char *where = NULL; /* the --config file, for messages */

    if (!o->preset == !o->config_path)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "mkmodel: give exactly one of a preset or a config.json");
    if (o->preset) {
        TRY(plugin_for_preset(rt->reg, o->preset, o->model, &me, err));
    } else {
        TRY(llmrt_hf_config_parse_file(o->config_path, &hf, err));
        where = o->config_path;
        have_hf = 1;
        const llmrt_plugin_entry *unused = NULL;
        st = llmrt_model_select(rt->reg, hf.config_json, NULL, o->model, "none", &me, &unused,
                                err);
        if (st != LLMRT_OK) { /* the file's architecture, not a name the user typed */
            llmrt_error_prefix(err, "mkmodel --config %s", o->config_path);
            if (st == LLMRT_ERR_NOT_FOUND && is_auto(o->model))
                st = err->code = LLMRT_ERR_UNSUPPORTED;
            goto cleanup;
        }
        if (!has_synth(me))
            FAIL(err, LLMRT_ERR_UNSUPPORTED,
                 "mkmodel: %s is for model plugin '%s', which cannot write synthetic "
                 "checkpoints",
                 o->config_path, me->desc->name);
    }
    if (o->quant && strcmp(o->quant, "none") != 0) {
        qe = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_QUANT, o->quant);
        char names[512];
        llmrt_registry_names(rt->reg, LLMRT_PLUGIN_QUANT, names, sizeof names);
        if (!qe)
            FAIL(err, LLMRT_ERR_NOT_FOUND, "mkmodel: --quant %s: no quant plugin of that name "
                 "(available: %s, or none)", o->quant, names);
        if (!LLMRT_VT_HAS((const llmrt_quant_vtable *)qe->desc->vtable, llmrt_quant_vtable,
                          synth_linear))
            FAIL(err, LLMRT_ERR_UNSUPPORTED,
                 "mkmodel: quant plugin '%s' cannot write synthetic checkpoints", o->quant);
    } else if (o->n_quant_opts > 0) {
        FAIL(err, LLMRT_ERR_INVALID_ARG, "mkmodel: --quant-opt needs --quant");
    }
    char qname[96], mname[96];
    snprintf(qname, sizeof qname, "quant.%s", qe ? qe->desc->name : "none");
    snprintf(mname, sizeof mname, "model.%s", me->desc->name);
    TRY(opt_section_make(&qs, qname, "--quant-opt", o->quant_opts, o->n_quant_opts, err));
    have_qs = 1;
    TRY(opt_section_make(&ms, mname, "--model-opt", o->model_opts, o->n_model_opts, err));
    have_ms = 1;

    llmrt_synth_request req;
    memset(&req, 0, sizeof req);
    req.struct_size = sizeof req;
    req.preset = o->preset;
    req.base_config_json = have_hf ? hf.config_json : NULL;
    req.dtype = o->dtype;
    req.tie = o->tie;
    req.tied_lm_head = o->tied_lm_head;
    req.quant = qe ? qe->desc->vtable : NULL;
    req.quant_name = qe ? qe->desc->name : NULL;
    req.quant_opts = &qs.sec;
    req.model_opts = &ms.sec;

    TRY(llmrt_synth_plan_new(o->seed, &plan, err));
    llmrt_ckpt_writer w;
    llmrt_synth_plan_writer(plan, &w);
    st = model_vt(me)->synthesize(&rt->host, &req, &w, err);
    if (st != LLMRT_OK) {
        if (where)
            llmrt_error_prefix(err, "mkmodel --config %s", where);
        else if (!strstr(err->msg, "mkmodel"))
            llmrt_error_prefix(err, "mkmodel (model plugin '%s')", me->desc->name);
        goto cleanup;
    }
    TRY(llmrt_synth_plan_write(plan, dir, &o->write, res, err));
cleanup:
    llmrt_synth_plan_free(plan);
    if (have_qs)
        opt_section_free(&qs);
    if (have_ms)
        opt_section_free(&ms);
    if (have_hf)
        llmrt_hf_config_free(&hf);
    return st;
}

void llmrt_synth_preset_list(const llmrt_registry *reg, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < llmrt_registry_count(reg); i++) {
        const llmrt_plugin_entry *e = llmrt_registry_at(reg, i);
        if (!has_synth(e))
            continue;
        for (uint32_t k = 0; k < 1024 && used < n; k++) {
            const llmrt_synth_preset *p = model_vt(e)->synth_preset(k);
            if (!p)
                break;
            used += (size_t)snprintf(buf + used, n - used, "  %-16s (%s) %s\n", p->name,
                                     e->desc->name, p->description ? p->description : "");
        }
    }
    if (!buf[0])
        snprintf(buf, n, "  (none: no installed model plugin writes synthetic checkpoints)\n");
}
