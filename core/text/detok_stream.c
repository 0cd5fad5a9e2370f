/* detok_stream.c — streaming detokenizer: push generated ids one at a time, get back only
 * text that is complete.
 *
 * Why: a byte-level token can end in the middle of a UTF-8 character (an emoji is often
 * split over two or three tokens). Printing such bytes as they come shows mojibake, and
 * an HTTP stream must not carry invalid UTF-8. The detokenizer holds the (at most 3) bytes
 * of an unfinished character until it completes; bytes that can never complete become
 * U+FFFD at once, so the concatenated stream equals llmrt_tokenizer_decode of all ids. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer_impl.h"

struct llmrt_detok {
    const llmrt_tokenizer *tok;
    int skip_special;
    int first;       /* no token emitted yet (decoder NONE joins with spaces) */
    uint8_t held[4]; /* incomplete UTF-8 tail */
    size_t n_held;
    char *in;        /* held bytes + this token's bytes */
    size_t in_cap;
    char *out;       /* text returned by the last call */
    size_t out_cap;
};

llmrt_status llmrt_detok_new(const llmrt_tokenizer *tok, int skip_special, llmrt_detok **out,
                             llmrt_error *err)
{
    llmrt_detok *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for a detokenizer");
    d->tok = tok;
    d->skip_special = skip_special;
    d->first = 1;
    if (llmrt__grow(&d->out, &d->out_cap, 64) != 0) {
        free(d);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for a detokenizer");
    }
    d->out[0] = 0;
    *out = d;
    return LLMRT_OK;
}

llmrt_status llmrt_detok_push(llmrt_detok *d, int32_t id, const char **text, size_t *len,
                              llmrt_error *err)
{
    const llmrt_tokenizer *t = d->tok;
    size_t ol = 0;
    d->out[0] = 0;
    *text = d->out;
    if (len)
        *len = 0;
    if (id < 0 || id >= t->vocab_size || !t->id_str[id] || (d->skip_special && t->id_special[id]))
        return LLMRT_OK;
    size_t k = t->id_len[id], n = d->n_held;
    int sep = t->decoder == TOK_DECODER_NONE && !d->first;
    if (llmrt__grow(&d->in, &d->in_cap, n + k + 1) != 0)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory in the detokenizer");
    memcpy(d->in, d->held, n);
    if (sep)
        d->in[n++] = ' ';
    memcpy(d->in + n, t->id_bytes[id], k);
    n += k;
    d->first = 0;
    size_t held;
    if (llmrt__utf8_lossy_append(&d->out, &ol, &d->out_cap, (const uint8_t *)d->in, n, 1,
                                 &held) != 0)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory in the detokenizer");
    memcpy(d->held, d->in + n - held, held);
    d->n_held = held;
    d->out[ol] = 0;
    *text = d->out;
    if (len)
        *len = ol;
    return LLMRT_OK;
}

const char *llmrt_detok_flush(llmrt_detok *d, size_t *len)
{
    size_t ol = 0;
    d->out[0] = 0;
    if (d->n_held &&
        llmrt__utf8_lossy_append(&d->out, &ol, &d->out_cap, d->held, d->n_held, 0, NULL) == 0)
        d->out[ol] = 0;
    d->n_held = 0;
    d->first = 1;
    if (len)
        *len = ol;
    return d->out;
}

void llmrt_detok_reset(llmrt_detok *d)
{
    d->n_held = 0;
    d->first = 1;
    d->out[0] = 0;
}

void llmrt_detok_free(llmrt_detok *d)
{
    if (!d)
        return;
    free(d->in);
    free(d->out);
    free(d);
}
