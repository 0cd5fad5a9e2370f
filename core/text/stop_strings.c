/* stop_strings.c — see stop_strings.h. The held-back text is the longest suffix of what was
 * seen that is a proper prefix of some stop string; everything before it is released. */
#include "stop_strings.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

struct llmrt_stopper {
    char **stops;   /* [n] */
    size_t *lens;   /* [n] */
    int32_t n;
    size_t max_len;
    char *buf;      /* held text followed by the new text */
    size_t held;    /* bytes of buf held back from the previous call */
    size_t cap;
    size_t out_off; /* where the released text of the last call starts in buf */
    int32_t matched;
};

llmrt_status llmrt_stopper_new(const char *const *stops, int32_t n, llmrt_stopper **out,
                               llmrt_error *err)
{
    llmrt_stopper *s = calloc(1, sizeof *s);
    if (!s)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    s->matched = -1;
    if (n > 0) {
        s->stops = calloc((size_t)n, sizeof *s->stops);
        s->lens = calloc((size_t)n, sizeof *s->lens);
        if (!s->stops || !s->lens)
            goto nomem;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0]) {
            llmrt_stopper_free(s);
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "stop string %d is empty (stop strings must have at least one "
                              "character)",
                              i);
        }
        s->lens[i] = strlen(stops[i]);
        /* whole characters only, so a match always starts on a character boundary */
        for (size_t off = 0; off < s->lens[i];) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)stops[i] + off,
                                                  (utf8proc_ssize_t)(s->lens[i] - off), &cp);
            if (k <= 0) {
                llmrt_stopper_free(s);
                return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                  "stop string %d is not valid UTF-8 (at byte %zu)", i, off);
            }
            off += (size_t)k;
        }
        if (!(s->stops[i] = malloc(s->lens[i] + 1)))
            goto nomem;
        memcpy(s->stops[i], stops[i], s->lens[i] + 1);
        s->n = i + 1;
        if (s->lens[i] > s->max_len)
            s->max_len = s->lens[i];
    }
    *out = s;
    return LLMRT_OK;
nomem:
    llmrt_stopper_free(s);
    return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
}

void llmrt_stopper_free(llmrt_stopper *s)
{
    if (!s)
        return;
    for (int32_t i = 0; i < s->n; i++)
        free(s->stops[i]);
    free(s->stops);
    free(s->lens);
    free(s->buf);
    free(s);
}

/* Length of the longest suffix of buf[0..n) that is a proper prefix of a stop string. */
static size_t held_suffix(const llmrt_stopper *s, const char *buf, size_t n)
{
    size_t most = s->max_len ? s->max_len - 1 : 0;
    if (most > n)
        most = n;
    for (size_t k = most; k > 0; k--)
        for (int32_t i = 0; i < s->n; i++)
            if (s->lens[i] > k && memcmp(buf + n - k, s->stops[i], k) == 0)
                return k;
    return 0;
}

int32_t llmrt_stopper_push(llmrt_stopper *s, const char *text, size_t len, const char **out,
                           size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (s->matched >= 0)
        return -1;
    if (s->n == 0) { /* pass-through */
        *out = text;
        *out_len = len;
        return -1;
    }
    if (s->held && s->out_off) /* the tail held back last time moves to the front */
        memmove(s->buf, s->buf + s->out_off, s->held);
    s->out_off = 0;
    size_t need = s->held + len + 1;
    if (need > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < need)
            cap *= 2;
        char *b = realloc(s->buf, cap);
        if (!b) { /* out of memory: stop holding back (the held bytes are dropped) */
            s->held = 0;
            *out = text;
            *out_len = len;
            return -1;
        }
        s->buf = b, s->cap = cap;
    }
    memcpy(s->buf + s->held, text, len);
    size_t n = s->held + len;
    s->buf[n] = 0;
    /* Earliest occurrence of any stop string; a match may start inside the held text. */
    size_t best_pos = (size_t)-1;
    int32_t best = -1;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->lens[i] > n)
            continue;
        for (size_t p = 0; p + s->lens[i] <= n && p < best_pos; p++)
            if (memcmp(s->buf + p, s->stops[i], s->lens[i]) == 0) {
                best_pos = p, best = i;
                break;
            }
    }
    if (best >= 0) {
        s->matched = best;
        s->held = 0;
        *out = s->buf;
        *out_len = best_pos;
        return best;
    }
    size_t keep = held_suffix(s, s->buf, n);
    /* buf = [released][held]: the released part is handed out in place (valid until the
     * next call, which first moves the held tail to the front). */
    *out = s->buf;
    *out_len = n - keep;
    s->out_off = n - keep;
    s->held = keep;
    return -1;
}

void llmrt_stopper_flush(llmrt_stopper *s, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (s->matched >= 0 || s->held == 0)
        return;
    /* the held text is at buf[out_off .. out_off + held) until the next push moves it */
    *out = s->buf + s->out_off;
    *out_len = s->held;
    s->held = 0;
    s->out_off = 0;
}

const char *llmrt_stopper_matched(const llmrt_stopper *s)
{
    return s->matched >= 0 ? s->stops[s->matched] : NULL;
}
