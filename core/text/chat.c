/* chat.c — opening a model folder's chat format through its model plugin, rendering with it,
 * and parsing replies with it (see chat.h). */
#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "fileutil.h"
#include "hf_config.h"
#include "model_loader.h"

static llmrt_status none(llmrt_chat_ref *out, llmrt_status code, llmrt_error *err,
                         const char *fmt, const char *a, const char *b)
{
    snprintf(out->why, sizeof out->why, fmt, a, b);
    return llmrt_fail(err, code, "%s", out->why);
}

llmrt_status llmrt_chat_open(const llmrt_host *host, const llmrt_model_vtable *model_vt,
                             const char *plugin, const llmrt_tokenizer *tok, const char *dir,
                             llmrt_chat_ref *out, llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    dir = dir ? dir : "the model folder";
    if (!tok)
        return none(out, LLMRT_ERR_NOT_FOUND, err, "%s has no tokenizer.json%s", dir, "");
    const char *text = llmrt_tokenizer_chat_template(tok);
    if (!text)
        return none(out, LLMRT_ERR_NOT_FOUND, err,
                    "%s has no chat template (tokenizer_config.json has no chat_template and "
                    "there is no chat_template.jinja)%s",
                    dir, "");
    if (!LLMRT_VT_HAS(model_vt, llmrt_model_vtable, chat))
        return none(out, LLMRT_ERR_UNSUPPORTED, err,
                    "model plugin '%s' has no chat format (its vtable has no chat member)%s",
                    plugin ? plugin : "?", "");
    char where[4200];
    snprintf(where, sizeof where, "%s/tokenizer_config.json chat_template", dir);
    llmrt_error cerr = {0};
    llmrt_status st = model_vt->chat->create(host, text, where, &out->c, &cerr);
    if (st != LLMRT_OK) {
        out->c = NULL;
        return none(out, st == LLMRT_ERR_NOT_FOUND ? LLMRT_ERR_UNSUPPORTED : st, err, "%s%s",
                    cerr.msg[0] ? cerr.msg : "the chat template is not recognised", "");
    }
    out->vt = model_vt->chat;
    return LLMRT_OK;
}

/* Without a config.json (a tokenizer folder alone): the first model plugin whose chat format
 * recognises the template. */
static llmrt_status open_by_template(llmrt_runtime *rt, const char *dir, const llmrt_tokenizer *tok,
                                     llmrt_chat_ref *out, llmrt_error *err)
{
    char reasons[LLMRT_ERROR_MSG_MAX] = "";
    size_t used = 0;
    for (size_t i = 0; i < llmrt_registry_count(rt->reg); i++) {
        const llmrt_plugin_desc *d = llmrt_registry_at(rt->reg, i)->desc;
        if (d->kind != LLMRT_PLUGIN_MODEL ||
            !LLMRT_VT_HAS((const llmrt_model_vtable *)d->vtable, llmrt_model_vtable, chat))
            continue;
        llmrt_error perr = {0};
        llmrt_status st = llmrt_chat_open(&rt->host, d->vtable, d->name, tok, dir, out, &perr);
        if (st == LLMRT_OK || !llmrt_tokenizer_chat_template(tok))
            return st == LLMRT_OK ? st : (*err = perr, st);
        if (used < sizeof reasons)
            used += (size_t)snprintf(reasons + used, sizeof reasons - used, "%s%s: %s",
                                     used ? "; " : "", d->name, perr.msg);
    }
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why,
             "%s has no config.json, and no model plugin recognises its chat template (%s)",
             dir, used ? reasons : "no model plugin has a chat format");
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "%s", out->why);
}

llmrt_status llmrt_chat_open_dir(llmrt_runtime *rt, const char *dir, const llmrt_tokenizer *tok,
                                 llmrt_chat_ref *out, llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, F_OK) != 0)
        return open_by_template(rt, dir, tok, out, err);
    llmrt_hf_config hf;
    llmrt_status st = llmrt_hf_config_load(dir, &hf, err);
    if (st != LLMRT_OK) {
        snprintf(out->why, sizeof out->why, "%s", err->msg);
        return st;
    }
    const llmrt_plugin_entry *me = NULL, *qe = NULL;
    st = llmrt_model_select(rt->reg, hf.config_json, NULL,
                            llmrt_config_get(rt->cfg, "model.plugin"), "none", &me, &qe, err);
    llmrt_hf_config_free(&hf);
    if (st != LLMRT_OK) {
        snprintf(out->why, sizeof out->why, "%s", err->msg);
        return st;
    }
    return llmrt_chat_open(&rt->host, me->desc->vtable, me->desc->name, tok, dir, out, err);
}

typedef struct text_buf {
    char *p;
    size_t n, cap;
} text_buf;

static llmrt_status buf_write(void *ctx, const char *s, size_t n)
{
    text_buf *b = ctx;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *g = realloc(b->p, cap);
        if (!g)
            return LLMRT_ERR_NOMEM;
        b->p = g;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return LLMRT_OK;
}

llmrt_status llmrt_chat_render_text(const llmrt_chat_ref *c, const llmrt_chat_message *msgs,
                                    uint32_t n, const llmrt_chat_options *opt, char **text,
                                    llmrt_error *err)
{
    *text = NULL;
    if (!c || !c->vt)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "no chat format: %s",
                          c && c->why[0] ? c->why : "none was opened");
    llmrt_chat_options defaults = {sizeof defaults, 1, 1, NULL, 0};
    text_buf b = {0};
    llmrt_sink sink = {&b, buf_write};
    llmrt_status st = buf_write(&b, "", 0); /* a non-NULL text even when nothing is written */
    if (st == LLMRT_OK)
        st = c->vt->render(c->c, msgs, n, opt ? opt : &defaults, &sink, err);
    if (st != LLMRT_OK) {
        free(b.p);
        if (st == LLMRT_ERR_NOMEM && !err->msg[0])
            llmrt_fail(err, st, "out of memory rendering the chat");
        return st;
    }
    *text = b.p;
    return LLMRT_OK;
}

const llmrt_chat_syntax *llmrt_chat_syntax_of(const llmrt_chat_ref *c)
{
    if (!c || !c->vt || !LLMRT_VT_HAS(c->vt, llmrt_chat_vtable, syntax))
        return NULL;
    return c->vt->syntax(c->c);
}

/* Last occurrence of needle in s (NULL: none). */
static const char *last_of(const char *s, const char *needle)
{
    const char *hit = NULL;
    if (!needle || !needle[0])
        return NULL;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
        hit = p;
    return hit;
}

int llmrt_chat_prompt_in_reasoning(const llmrt_chat_ref *c, const char *prompt)
{
    const llmrt_chat_syntax *sx = llmrt_chat_syntax_of(c);
    if (!sx || !prompt || !sx->think_open || !sx->think_close)
        return 0;
    const char *open = last_of(prompt, sx->think_open);
    const char *close = last_of(prompt, sx->think_close);
    return open && (!close || open > close);
}

static int has_parser(const llmrt_chat_vtable *vt)
{
    return LLMRT_VT_HAS(vt, llmrt_chat_vtable, parser_create) &&
           LLMRT_VT_HAS(vt, llmrt_chat_vtable, parser_push) &&
           LLMRT_VT_HAS(vt, llmrt_chat_vtable, parser_finish) &&
           LLMRT_VT_HAS(vt, llmrt_chat_vtable, parser_destroy);
}

struct llmrt_chat_parser {
    const llmrt_chat_vtable *vt; /* NULL: everything is content */
    llmrt_reply_parser *p;
};

llmrt_status llmrt_chat_parser_open(const llmrt_chat_ref *c, const llmrt_reply_options *opt,
                                    llmrt_chat_parser **out, llmrt_error *err)
{
    *out = NULL;
    llmrt_chat_parser *cp = calloc(1, sizeof *cp);
    if (!cp)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for a reply parser");
    if (c && c->vt && has_parser(c->vt)) {
        llmrt_reply_options o = {sizeof o, 0, 0, 0};
        if (opt)
            memcpy(&o, opt, opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
        o.struct_size = sizeof o;
        llmrt_status st = c->vt->parser_create(c->c, &o, &cp->p, err);
        if (st != LLMRT_OK) {
            free(cp);
            return st;
        }
        cp->vt = c->vt;
    }
    *out = cp;
    return LLMRT_OK;
}

llmrt_status llmrt_chat_parser_push(llmrt_chat_parser *p, const char *text, size_t n,
                                    const llmrt_reply_sink *sink, llmrt_error *err)
{
    if (p->vt)
        return p->vt->parser_push(p->p, text, n, sink, err);
    llmrt_status st = n && sink->content ? sink->content(sink->ctx, text, n) : LLMRT_OK;
    return st == LLMRT_OK ? st : llmrt_fail(err, st, "the reply's sink failed (%s)", llmrt_status_str(st));
}

llmrt_status llmrt_chat_parser_finish(llmrt_chat_parser *p, const llmrt_reply_sink *sink,
                                      llmrt_error *err)
{
    return p->vt ? p->vt->parser_finish(p->p, sink, err) : LLMRT_OK;
}

void llmrt_chat_parser_free(llmrt_chat_parser *p)
{
    if (!p)
        return;
    if (p->vt)
        p->vt->parser_destroy(p->p);
    free(p);
}

const char *llmrt_chat_family(const llmrt_chat_ref *c)
{
    return c && c->vt ? c->vt->family(c->c) : "";
}

void llmrt_chat_close(llmrt_chat_ref *c)
{
    if (c && c->vt && c->c)
        c->vt->destroy(c->c);
    if (c) {
        c->vt = NULL;
        c->c = NULL;
    }
}
