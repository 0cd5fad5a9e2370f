/* fuzz_reply_parser.c — libFuzzer target for the Qwen3 reply parser (plugins/model-qwen3/
 * qwen3_reply.c, compiled in): model output is untrusted text. The first byte picks the
 * options (reasoning, starts_in_reasoning, tool_calls), the next two a split point; the rest
 * is the reply. The reply is parsed in one push, split in two at that point, and one byte
 * per push: the content, reasoning and calls must be the same every time, calls must come as
 * begin (a non-empty name), arguments that parse as a JSON object, end, in index order — and
 * nothing may crash or leak. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct out {
    char *text; /* "C" content / "R" reasoning / "B" begin / "A" args / "E" end records, joined */
    size_t n, cap;
    char *args;
    size_t an, acap;
    int open, next;
    char kind; /* of the last record */
} out;

static void add(char **p, size_t *n, size_t *cap, const char *s, size_t k)
{
    if (*n + k + 1 > *cap) {
        *cap = (*n + k + 1) * 2;
        *p = realloc(*p, *cap);
        if (!*p)
            abort();
    }
    memcpy(*p + *n, s, k);
    *n += k;
    (*p)[*n] = 0;
}

/* content and reasoning go in as-is; a kind record only when the kind changes, so the
 * record does not depend on how the text was split */
static void text(out *o, char kind, const char *s, size_t n)
{
    if (o->open >= 0 || n == 0)
        abort();
    if (o->kind != kind) {
        o->kind = kind;
        char tag[2] = {'\x01', kind};
        add(&o->text, &o->n, &o->cap, tag, 2);
    }
    add(&o->text, &o->n, &o->cap, s, n);
}

static llmrt_status on_content(void *c, const char *s, size_t n) { text(c, 'C', s, n); return LLMRT_OK; }
static llmrt_status on_reasoning(void *c, const char *s, size_t n) { text(c, 'R', s, n); return LLMRT_OK; }

static llmrt_status on_begin(void *c, uint32_t index, const char *name)
{
    out *o = c;
    if (o->open >= 0 || (int)index != o->next || !name[0])
        abort();
    o->open = (int)index;
    o->kind = 'B';
    char tag[2] = {'\x01', 'B'};
    add(&o->text, &o->n, &o->cap, tag, 2);
    add(&o->text, &o->n, &o->cap, name, strlen(name) + 1);
    o->an = 0;
    return LLMRT_OK;
}

static llmrt_status on_args(void *c, uint32_t index, const char *s, size_t n)
{
    out *o = c;
    if ((int)index != o->open)
        abort();
    add(&o->args, &o->an, &o->acap, s, n);
    return LLMRT_OK;
}

static llmrt_status on_end(void *c, uint32_t index)
{
    out *o = c;
    if ((int)index != o->open)
        abort();
    json_error_t je;
    json_t *v = json_loadb(o->args ? o->args : "", o->an, 0, &je);
    if (!json_is_object(v)) {
        fprintf(stderr, "args [%.*s] (%zu bytes): %s\n", (int)o->an, o->args ? o->args : "", o->an, je.text);
        abort();
    }
    json_decref(v);
    o->kind = 'E';
    char tag[2] = {'\x01', 'E'};
    add(&o->text, &o->n, &o->cap, tag, 2);
    add(&o->text, &o->n, &o->cap, o->args ? o->args : "", o->an);
    o->open = -1;
    o->next++;
    return LLMRT_OK;
}

static void run(const llmrt_reply_options *ro, const char *s, size_t n, size_t step, out *o)
{
    memset(o, 0, sizeof *o);
    o->open = -1;
    llmrt_reply_sink sink = {o, on_content, on_reasoning, on_begin, on_args, on_end};
    llmrt_reply_parser *p = NULL;
    llmrt_error err = {0};
    if (qwen3_reply_create(NULL, ro, &p, &err) != LLMRT_OK)
        abort();
    for (size_t at = 0; at < n; at += step) {
        size_t k = n - at < step ? n - at : step;
        if (qwen3_reply_push(p, s + at, k, &sink, &err) != LLMRT_OK)
            abort();
    }
    if (qwen3_reply_finish(p, &sink, &err) != LLMRT_OK || o->open >= 0)
        abort();
    qwen3_reply_destroy(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    llmrt_reply_options ro = {sizeof ro, data[0] & 1, (data[0] >> 1) & 1, (data[0] >> 2) & 1};
    size_t cut = ((size_t)data[1] << 8 | data[2]);
    const char *s = (const char *)data + 3;
    size_t n = size - 3;
    cut = n ? cut % (n + 1) : 0;
    out whole, split, bytes;
    run(&ro, s, n, n ? n : 1, &whole);
    /* split in two at `cut` */
    memset(&split, 0, sizeof split);
    split.open = -1;
    {
        llmrt_reply_sink sink = {&split, on_content, on_reasoning, on_begin, on_args, on_end};
        llmrt_reply_parser *p = NULL;
        llmrt_error err = {0};
        if (qwen3_reply_create(NULL, &ro, &p, &err) != LLMRT_OK ||
            qwen3_reply_push(p, s, cut, &sink, &err) != LLMRT_OK ||
            qwen3_reply_push(p, s + cut, n - cut, &sink, &err) != LLMRT_OK ||
            qwen3_reply_finish(p, &sink, &err) != LLMRT_OK)
            abort();
        qwen3_reply_destroy(p);
    }
    run(&ro, s, n, 1, &bytes);
    if (whole.n != split.n || (whole.n && memcmp(whole.text, split.text, whole.n)) ||
        whole.n != bytes.n || (whole.n && memcmp(whole.text, bytes.text, whole.n)))
        abort();
    free(whole.text), free(whole.args);
    free(split.text), free(split.args);
    free(bytes.text), free(bytes.args);
    return 0;
}
