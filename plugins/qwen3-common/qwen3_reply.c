/* qwen3_reply.c — Qwen3's reply markup (llmrt/chat.h since 1.2): the `syntax` strings and a
 * streaming parser that splits a reply into reasoning, content and tool calls.
 *
 * The markup, as the Qwen3 template writes assistant turns back into a prompt (qwen3_chat.c):
 *   <think>\n REASONING \n</think>\n\n CONTENT \n<tool_call>\n{"name": N, "arguments": A}\n
 *   </tool_call>\n<tool_call>\n...</tool_call>
 * The parser is that rendering's inverse: reasoning is the text between <think> (only as the
 * reply's very first bytes, or from the start when the prompt left a think block open) and
 * </think>, without the newlines next to the tags; a call is the JSON between <tool_call> and
 * </tool_call>, and the newlines between calls, before the first and after the last (when
 * nothing else follows) belong to the calls. Everything else is content,
 * byte for byte — also a call whose JSON is not {"name": "<non-empty string>", "arguments":
 * {...}} (it stays text, with the newlines before it), and tags inside reasoning. The
 * arguments are reported as the model wrote them (the JSON text of the value, verbatim).
 *
 * Streaming: bytes that may still turn out to be markup (a suffix that begins a tag, the
 * newlines before a possible tag, a call until its closing tag) are held back; everything
 * else is reported at once. What is reported depends only on the bytes, never on how they
 * were split into pushes (tests/test_qwen3_reply.c pushes every split). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <llmrt/chat.h>

#include "qwen3_common.h"

#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define CALL_OPEN "<tool_call>"
#define CALL_CLOSE "</tool_call>"

static const llmrt_chat_syntax qwen3_syntax_table = {
    .tool_call_open = CALL_OPEN "\n",
    .tool_call_close = "\n" CALL_CLOSE,
    .think_open = THINK_OPEN,
    .think_close = THINK_CLOSE,
    .thinks_by_default = 1,
};

const llmrt_chat_syntax *qwen3_reply_syntax(const llmrt_chat *c)
{
    (void)c;
    return &qwen3_syntax_table;
}

typedef enum reply_state {
    ST_START,     /* nothing decided yet: the reply may open with <think> */
    ST_REASONING, /* inside <think> */
    ST_CONTENT,
    ST_CALL       /* after <tool_call>: held until </tool_call> */
} reply_state;

typedef struct bytes {
    char *p;
    size_t n, cap;
} bytes;

struct llmrt_reply_parser {
    llmrt_reply_options opt;
    reply_state st;
    int strip_nl;   /* drop the newlines that open what follows (after <think>, </think>) */
    int after_call; /* content since the last call is only newlines so far: they are the
                       call's when another call or the end follows */
    bytes held;     /* received, not yet reported */
    size_t scanned; /* ST_CALL: held[0, scanned) holds no CALL_CLOSE start */
    bytes pre;      /* ST_CALL: the newlines before <tool_call>, restored if it is malformed */
    uint32_t n_calls;
    int finished;
};

static int bytes_add(bytes *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *g = realloc(b->p, cap);
        if (!g)
            return -1;
        b->p = g;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

/* Drop the first n bytes of b. */
static void bytes_consume(bytes *b, size_t n)
{
    memmove(b->p, b->p + n, b->n - n);
    b->n -= n;
    if (b->p)
        b->p[b->n] = 0;
}

static const char *find_in(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (s[i] == needle[0] && memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

/* Length of the longest suffix of s[0, n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag)
{
    size_t k = strlen(tag);
    for (size_t len = k - 1 < n ? k - 1 : n; len > 0; len--)
        if (memcmp(s + n - len, tag, len) == 0)
            return len;
    return 0;
}

/* How many of s[0, n)'s bytes are certain not to be markup when `tag` may follow: all but a
 * suffix that begins the tag and the newlines just before it. */
static size_t certain(const char *s, size_t n, const char *tag)
{
    size_t j = n - partial_tag(s, n, tag);
    while (j > 0 && s[j - 1] == '\n')
        j--;
    return j;
}

static llmrt_status emit(const llmrt_reply_sink *k, int reasoning, const char *s, size_t n)
{
    llmrt_status (*f)(void *, const char *, size_t) = reasoning ? k->reasoning : k->content;
    if (!n || !f)
        return LLMRT_OK;
    return f(k->ctx, s, n);
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The verbatim JSON text of `args` inside the call body: the value after an "arguments" key
 * that parses to the same value (a "arguments" inside a string is skipped by the check). */
static int args_span(const char *body, size_t n, const json_t *args, const char **at,
                     size_t *len)
{
    const char *key = "\"arguments\"";
    for (const char *p = body; (p = find_in(p, (size_t)(body + n - p), key)) != NULL; p++) {
        const char *v = p + strlen(key);
        while (v < body + n && is_ws(*v))
            v++;
        if (v >= body + n || *v != ':')
            continue;
        v++;
        while (v < body + n && is_ws(*v))
            v++;
        json_error_t je;
        json_t *x = json_loadb(v, (size_t)(body + n - v), JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY,
                               &je);
        size_t span = je.position > 0 ? (size_t)je.position : 0;
        int same = x && json_equal(x, (json_t *)args) && span > 0 &&
                   span <= (size_t)(body + n - v);
        json_decref(x);
        if (same) { /* the span alone must parse to the same value */
            json_t *y = json_loadb(v, span, 0, &je);
            same = y && json_equal(y, (json_t *)args);
            json_decref(y);
        }
        if (same) {
            *at = v;
            *len = span;
            return 1;
        }
    }
    return 0;
}

/* A call body: {"name": "<non-empty>", "arguments": {...}} (arguments may be absent: {}; or a
 * string holding a JSON object, as some models double-encode). Reports the call and returns
 * 1; returns 0 when malformed (nothing reported), -1 on a sink failure (*st). */
static int report_call(llmrt_reply_parser *p, const char *body, size_t n,
                       const llmrt_reply_sink *k, llmrt_status *st)
{
    while (n && is_ws(*body))
        body++, n--;
    while (n && is_ws(body[n - 1]))
        n--;
    json_error_t je;
    /* jansson reads a NUL byte as blank space: a body with one is no call */
    json_t *root = n && !memchr(body, 0, n) ? json_loadb(body, n, 0, &je) : NULL;
    json_t *name = json_object_get(root, "name"), *args = json_object_get(root, "arguments");
    json_t *inner = NULL;
    int ok = json_is_object(root) && json_is_string(name) && json_string_length(name) > 0 &&
             strlen(json_string_value(name)) == json_string_length(name);
    const char *at = "{}";
    size_t len = 2;
    char *dumped = NULL;
    if (ok && args) {
        if (json_is_string(args)) {
            inner = json_loadb(json_string_value(args), json_string_length(args), 0, &je);
            ok = json_is_object(inner);
            at = json_string_value(args);
            len = json_string_length(args);
        } else if (json_is_object(args)) {
            if (!args_span(body, n, args, &at, &len)) {
                dumped = json_dumps(args, JSON_COMPACT);
                at = dumped;
                len = dumped ? strlen(dumped) : 0;
                ok = dumped != NULL;
            }
        } else {
            ok = 0;
        }
    }
    int rc = 0;
    if (ok) {
        uint32_t index = p->n_calls++;
        *st = LLMRT_OK;
        if (k->tool_call_begin)
            *st = k->tool_call_begin(k->ctx, index, json_string_value(name));
        if (*st == LLMRT_OK && k->tool_call_args)
            *st = k->tool_call_args(k->ctx, index, at, len);
        if (*st == LLMRT_OK && k->tool_call_end)
            *st = k->tool_call_end(k->ctx, index);
        rc = *st == LLMRT_OK ? 1 : -1;
    }
    free(dumped);
    json_decref(inner);
    json_decref(root);
    return rc;
}

/* A call that did not parse: the text it came from, as content. */
static llmrt_status report_as_text(llmrt_reply_parser *p, const char *body, size_t n, int closed,
                                   const llmrt_reply_sink *k)
{
    llmrt_status st;
    if ((st = emit(k, 0, p->pre.p, p->pre.n)) || (st = emit(k, 0, CALL_OPEN, strlen(CALL_OPEN))) ||
        (st = emit(k, 0, body, n)))
        return st;
    return closed ? emit(k, 0, CALL_CLOSE, strlen(CALL_CLOSE)) : LLMRT_OK;
}

/* Report what the held bytes decide; keep the rest. `final`: no more bytes will come. */
static llmrt_status advance(llmrt_reply_parser *p, const llmrt_reply_sink *k, int final)
{
    llmrt_status st = LLMRT_OK;
    bytes *h = &p->held;
    for (;;) {
        if (p->strip_nl && p->st != ST_CALL) {
            size_t i = 0;
            while (i < h->n && h->p[i] == '\n')
                i++;
            bytes_consume(h, i);
            if (h->n == 0)
                return LLMRT_OK;
            p->strip_nl = 0;
        }
        switch (p->st) {
        case ST_START: {
            size_t k0 = strlen(THINK_OPEN);
            if (h->n >= k0 && memcmp(h->p, THINK_OPEN, k0) == 0) {
                bytes_consume(h, k0);
                p->st = ST_REASONING;
                p->strip_nl = 1;
                continue;
            }
            if (!final && h->n < k0 && memcmp(h->p, THINK_OPEN, h->n) == 0)
                return LLMRT_OK; /* may still be <think> */
            p->st = ST_CONTENT;
            continue;
        }
        case ST_REASONING: {
            const char *end = find_in(h->p, h->n, THINK_CLOSE);
            if (end) {
                size_t j = (size_t)(end - h->p);
                while (j > 0 && h->p[j - 1] == '\n')
                    j--;
                if ((st = emit(k, 1, h->p, j)))
                    return st;
                bytes_consume(h, (size_t)(end - h->p) + strlen(THINK_CLOSE));
                p->st = ST_CONTENT;
                p->strip_nl = 1;
                continue;
            }
            size_t j = certain(h->p, h->n, THINK_CLOSE);
            if (final) /* an unclosed think block: its trailing newlines are markup too */
                j = partial_tag(h->p, h->n, THINK_CLOSE) ? h->n : j;
            if ((st = emit(k, 1, h->p, j)))
                return st;
            bytes_consume(h, final ? h->n : j);
            return LLMRT_OK;
        }
        case ST_CONTENT: {
            const char *call = p->opt.tool_calls ? find_in(h->p, h->n, CALL_OPEN) : NULL;
            if (call) {
                size_t j = (size_t)(call - h->p);
                while (j > 0 && h->p[j - 1] == '\n')
                    j--;
                if ((st = emit(k, 0, h->p, j)))
                    return st;
                p->pre.n = 0;
                if (bytes_add(&p->pre, h->p + j, (size_t)(call - h->p) - j))
                    return LLMRT_ERR_NOMEM;
                bytes_consume(h, (size_t)(call - h->p) + strlen(CALL_OPEN));
                p->st = ST_CALL;
                p->scanned = 0;
                continue;
            }
            size_t j = final || !p->opt.tool_calls ? h->n : certain(h->p, h->n, CALL_OPEN);
            if (final && p->after_call) { /* only newlines after the last call: markup */
                size_t i = 0;
                while (i < h->n && h->p[i] == '\n')
                    i++;
                if (i == h->n)
                    j = 0;
            }
            if (j)
                p->after_call = 0;
            if ((st = emit(k, 0, h->p, j)))
                return st;
            bytes_consume(h, final ? h->n : j);
            return LLMRT_OK;
        }
        case ST_CALL: {
            size_t from = p->scanned;
            const char *end = find_in(h->p + from, h->n - from, CALL_CLOSE);
            if (!end && !final) {
                size_t keep = strlen(CALL_CLOSE) - 1;
                p->scanned = h->n > keep ? h->n - keep : 0;
                return LLMRT_OK;
            }
            size_t body = end ? (size_t)(end - h->p) : h->n;
            int rc = report_call(p, h->p, body, k, &st);
            if (rc < 0)
                return st;
            if (rc == 0 && (st = report_as_text(p, h->p, body, end != NULL, k)))
                return st;
            bytes_consume(h, end ? body + strlen(CALL_CLOSE) : body);
            p->st = ST_CONTENT;
            p->after_call = rc == 1;
            continue;
        }
        }
    }
}

llmrt_status qwen3_reply_create(const llmrt_chat *c, const llmrt_reply_options *opt,
                                        llmrt_reply_parser **out, llmrt_error *err)
{
    (void)c;
    *out = NULL;
    llmrt_reply_parser *p = calloc(1, sizeof *p);
    if (!p)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for a reply parser");
    p->opt.struct_size = sizeof p->opt;
    if (opt) /* the host's options, as far as both know them */
        memcpy(&p->opt, opt, opt->struct_size < sizeof p->opt ? opt->struct_size : sizeof p->opt);
    p->opt.struct_size = sizeof p->opt;
    if (p->opt.reasoning && p->opt.starts_in_reasoning) {
        p->st = ST_REASONING;
        p->strip_nl = 1;
    } else {
        p->st = p->opt.reasoning ? ST_START : ST_CONTENT;
    }
    *out = p;
    return LLMRT_OK;
}

static llmrt_status nomem(llmrt_status st, llmrt_error *err)
{
    if (st == LLMRT_OK)
        return st;
    return llmrt_fail(err, st, st == LLMRT_ERR_NOMEM ? "out of memory parsing the reply"
                                                     : "the reply's sink failed (%s)",
                      llmrt_status_str(st));
}

llmrt_status qwen3_reply_push(llmrt_reply_parser *p, const char *text, size_t n,
                                      const llmrt_reply_sink *sink, llmrt_error *err)
{
    if (p->finished)
        return llmrt_fail(err, LLMRT_ERR_STATE, "reply parser: push after finish");
    if (bytes_add(&p->held, text, n))
        return nomem(LLMRT_ERR_NOMEM, err);
    return nomem(advance(p, sink, 0), err);
}

llmrt_status qwen3_reply_finish(llmrt_reply_parser *p, const llmrt_reply_sink *sink,
                                        llmrt_error *err)
{
    if (p->finished)
        return llmrt_fail(err, LLMRT_ERR_STATE, "reply parser: finished twice");
    p->finished = 1;
    return nomem(advance(p, sink, 1), err);
}

void qwen3_reply_destroy(llmrt_reply_parser *p)
{
    if (!p)
        return;
    free(p->held.p);
    free(p->pre.p);
    free(p);
}
