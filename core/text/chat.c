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

/* ---- llmrt_chat_encode: contents stay text ---- */

#define MARK_OPEN "\xEE\x80\x80"  /* U+E000, private use: opens a marker */
#define MARK_CLOSE "\xEE\x80\x81" /* U+E001: closes it */
#define MARK_LEN 3

typedef struct defuse {
    const char **spec;  /* [n_spec] what may not reach the template as is: special tokens'
                           text, and MARK_OPEN itself (so a client's U+E000 is no marker) */
    size_t *spec_len;
    size_t n_spec;
    char **piece;       /* [n] the text each marker stands for */
    size_t *piece_len;
    size_t n, cap;
    char **owned;       /* [n_owned] the marked copies */
    size_t n_owned, cap_owned;
} defuse;

static void defuse_free(defuse *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->piece[i]);
    for (size_t i = 0; i < d->n_owned; i++)
        free(d->owned[i]);
    free(d->piece);
    free(d->piece_len);
    free(d->owned);
    free(d->spec);
    free(d->spec_len);
}

static int grow_ptrs(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 16;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, c * elem);
    if (!g)
        return -1;
    *p = g;
    *cap = c;
    return 0;
}

/* Append a marker for s[len] to b. */
static llmrt_status add_marker(defuse *d, text_buf *b, const char *s, size_t len)
{
    size_t cap = d->cap;
    if (grow_ptrs((void **)&d->piece, &cap, d->n + 1, sizeof *d->piece) ||
        grow_ptrs((void **)&d->piece_len, &d->cap, d->n + 1, sizeof *d->piece_len))
        return LLMRT_ERR_NOMEM;
    char *copy = malloc(len + 1);
    if (!copy)
        return LLMRT_ERR_NOMEM;
    memcpy(copy, s, len);
    copy[len] = 0;
    d->piece[d->n] = copy;
    d->piece_len[d->n] = len;
    char mark[32];
    int ml = snprintf(mark, sizeof mark, MARK_OPEN "%zu" MARK_CLOSE, d->n++);
    return buf_write(b, mark, (size_t)ml);
}

/* The longest k (< the token's length) such that s's first k bytes end a special token
 * (lead) or its last k bytes begin one (!lead): text the template's neighbouring text could
 * complete into a token. */
static size_t edge_partial(const defuse *d, const char *s, size_t n, int lead)
{
    size_t best = 0;
    for (size_t i = 0; i < d->n_spec; i++) {
        size_t sl = d->spec_len[i];
        for (size_t k = (sl - 1 < n ? sl - 1 : n); k > best; k--)
            if (lead ? memcmp(s, d->spec[i] + sl - k, k) == 0
                     : memcmp(s + n - k, d->spec[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

/* s with markers for the special tokens in it (or s itself when it needs none); NULL stays
 * NULL. *out is valid while d lives. */
static llmrt_status defuse_str(defuse *d, const char *s, const char **out)
{
    *out = s;
    if (!s || !s[0])
        return LLMRT_OK;
    size_t n = strlen(s);
    size_t lead = edge_partial(d, s, n, 1), trail = edge_partial(d, s, n, 0);
    int any = lead || trail;
    for (size_t i = 0; !any && i < n; i++)
        for (size_t k = 0; k < d->n_spec && !any; k++)
            any = d->spec_len[k] <= n - i && memcmp(s + i, d->spec[k], d->spec_len[k]) == 0;
    if (!any)
        return LLMRT_OK;
    text_buf b = {0};
    llmrt_status st = buf_write(&b, "", 0);
    if (lead + trail >= n) {
        if (st == LLMRT_OK)
            st = add_marker(d, &b, s, n);
    } else {
        if (lead && st == LLMRT_OK)
            st = add_marker(d, &b, s, lead);
        size_t i = lead, plain = lead;
        while (st == LLMRT_OK && i < n - trail) {
            size_t hit = 0;
            for (size_t k = 0; k < d->n_spec; k++)
                if (d->spec_len[k] <= n - trail - i &&
                    memcmp(s + i, d->spec[k], d->spec_len[k]) == 0 && d->spec_len[k] > hit)
                    hit = d->spec_len[k];
            if (!hit) {
                i++;
                continue;
            }
            st = buf_write(&b, s + plain, i - plain);
            if (st == LLMRT_OK)
                st = add_marker(d, &b, s + i, hit);
            i += hit;
            plain = i;
        }
        if (st == LLMRT_OK)
            st = buf_write(&b, s + plain, n - trail - plain);
        if (trail && st == LLMRT_OK)
            st = add_marker(d, &b, s + n - trail, trail);
    }
    size_t cap = d->cap_owned;
    if (st == LLMRT_OK && grow_ptrs((void **)&d->owned, &cap, d->n_owned + 1, sizeof *d->owned))
        st = LLMRT_ERR_NOMEM;
    d->cap_owned = cap;
    if (st != LLMRT_OK) {
        free(b.p);
        return st;
    }
    d->owned[d->n_owned++] = b.p;
    *out = b.p;
    return LLMRT_OK;
}

/* The rendered text with every marker replaced by its piece, and the pieces' spans. */
static llmrt_status restore(const defuse *d, const char *marked, text_buf *out,
                            llmrt_text_span **spans, size_t *n_spans, llmrt_error *err)
{
    size_t cap = 0;
    *spans = NULL;
    *n_spans = 0;
    llmrt_status st = buf_write(out, "", 0);
    for (const char *p = marked; st == LLMRT_OK && *p;) {
        const char *m = strstr(p, MARK_OPEN);
        if (!m)
            return buf_write(out, p, strlen(p));
        st = buf_write(out, p, (size_t)(m - p));
        char *end;
        unsigned long idx = strtoul(m + MARK_LEN, &end, 10);
        if (end == m + MARK_LEN || strncmp(end, MARK_CLOSE, MARK_LEN) != 0 || idx >= d->n)
            return llmrt_fail(err, LLMRT_ERR_INTERNAL,
                              "the chat template changed a message's text in a way llmrt "
                              "cannot follow (a content marker came out altered); set "
                              "server.allow_special_tokens_in_content = true to render it "
                              "unmarked");
        if (st == LLMRT_OK &&
            grow_ptrs((void **)spans, &cap, *n_spans + 1, sizeof **spans))
            st = LLMRT_ERR_NOMEM;
        if (st == LLMRT_OK) {
            (*spans)[(*n_spans)++] = (llmrt_text_span){out->n, d->piece_len[idx]};
            st = buf_write(out, d->piece[idx], d->piece_len[idx]);
        }
        p = end + MARK_LEN;
    }
    return st;
}

llmrt_status llmrt_chat_encode(const llmrt_chat_ref *c, const llmrt_tokenizer *tok,
                               const llmrt_chat_message *msgs, uint32_t n,
                               const llmrt_chat_options *opt, uint32_t flags, int32_t **ids,
                               size_t *n_ids, char **text, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    uint32_t tf = (flags & LLMRT_CHAT_ADD_SPECIAL) ? LLMRT_ENCODE_ADD_SPECIAL : 0;
    llmrt_chat_options defaults = {sizeof defaults, 1, 1, NULL, 0};
    defuse d = {0};
    llmrt_chat_message *dm = NULL;
    llmrt_chat_tool_call *calls = NULL;
    const char **tools = NULL;
    char *marked = NULL;
    text_buf out = {0};
    llmrt_text_span *spans = NULL;
    size_t n_spans = 0;
    *ids = NULL;
    *n_ids = 0;
    if (text)
        *text = NULL;
    if (!tok)
        FAIL(err, LLMRT_ERR_STATE, "chat needs a tokenizer, and the model folder has none");
    if (!opt)
        opt = &defaults;
    if (flags & LLMRT_CHAT_CONTENT_SPECIAL) {
        TRY(llmrt_chat_render_text(c, msgs, n, opt, &marked, err));
        TRY(llmrt_tokenizer_encode(tok, marked, strlen(marked), tf, ids, n_ids, err));
        if (text)
            *text = marked, marked = NULL;
        goto cleanup;
    }

    /* what must not reach the template as is */
    size_t na = llmrt_tokenizer_added_count(tok);
    d.spec = calloc(na + 1, sizeof *d.spec);
    d.spec_len = calloc(na + 1, sizeof *d.spec_len);
    TRY_ALLOC(err, d.spec && d.spec_len ? d.spec : NULL, "the chat's special tokens");
    for (size_t i = 0; i < na; i++) {
        int special = 0;
        size_t len = 0;
        const char *t = llmrt_tokenizer_added_at(tok, i, &len, &special);
        if (special && len > 0) {
            d.spec[d.n_spec] = t;
            d.spec_len[d.n_spec++] = len;
        }
    }
    d.spec[d.n_spec] = MARK_OPEN;
    d.spec_len[d.n_spec++] = MARK_LEN;

    /* the messages and tools with markers */
    size_t n_calls = 0;
    for (uint32_t i = 0; i < n; i++)
        n_calls += msgs[i].n_tool_calls;
    dm = calloc(n ? n : 1, sizeof *dm);
    calls = calloc(n_calls ? n_calls : 1, sizeof *calls);
    tools = calloc(opt->n_tools ? opt->n_tools : 1, sizeof *tools);
    TRY_ALLOC(err, dm && calls && tools ? dm : NULL, "the chat's messages");
    size_t k = 0;
    for (uint32_t i = 0; i < n && st == LLMRT_OK; i++) {
        dm[i] = msgs[i];
        if ((st = defuse_str(&d, msgs[i].content, &dm[i].content)) ||
            (st = defuse_str(&d, msgs[i].reasoning_content, &dm[i].reasoning_content)))
            break;
        dm[i].tool_calls = msgs[i].n_tool_calls ? &calls[k] : NULL;
        for (uint32_t j = 0; j < msgs[i].n_tool_calls && st == LLMRT_OK; j++, k++) {
            calls[k] = msgs[i].tool_calls[j];
            if ((st = defuse_str(&d, msgs[i].tool_calls[j].name, &calls[k].name)) == LLMRT_OK)
                st = defuse_str(&d, msgs[i].tool_calls[j].arguments, &calls[k].arguments);
        }
    }
    for (uint32_t i = 0; i < opt->n_tools && st == LLMRT_OK; i++)
        st = defuse_str(&d, opt->tools[i], &tools[i]);
    if (st != LLMRT_OK)
        FAIL(err, st, "out of memory marking the chat's contents");
    llmrt_chat_options mo = *opt;
    mo.struct_size = sizeof mo;
    mo.tools = opt->n_tools ? tools : NULL;

    TRY(llmrt_chat_render_text(c, dm, n, &mo, &marked, err));
    st = restore(&d, marked, &out, &spans, &n_spans, err);
    if (st == LLMRT_ERR_NOMEM)
        FAIL(err, st, "out of memory rendering the chat");
    if (st)
        goto cleanup;
    TRY(llmrt_tokenizer_encode_spans(tok, out.p, out.n, tf, spans, n_spans, ids, n_ids, err));
    if (text)
        *text = out.p, out.p = NULL;
cleanup:
    free(out.p);
    free(spans);
    free(marked);
    free(dm);
    free(calls);
    free(tools);
    defuse_free(&d);
    return st;
}
