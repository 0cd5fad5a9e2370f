/* tokenizer_decode.c — ids → UTF-8 text, as HF's decode does: each id's decoder bytes
 * (added tokens included, special ones optionally left out), concatenated, then made valid
 * UTF-8 with one U+FFFD per maximal invalid sequence (Rust's from_utf8_lossy). Ids that
 * name no token are skipped, as HF skips them: a model's embedding table is often padded
 * past the tokenizer's vocabulary and a sampler may land there. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer_impl.h"

llmrt_status llmrt_tokenizer_decode(const llmrt_tokenizer *tok, const int32_t *ids, size_t n,
                                    int skip_special, char **text, size_t *len,
                                    llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *raw = NULL, *out = NULL;
    size_t rl = 0, rcap = 0, ol = 0, ocap = 0;
    int first = 1;
    *text = NULL;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->vocab_size || !tok->id_str[id])
            continue;
        if (skip_special && tok->id_special[id])
            continue;
        size_t k = tok->id_len[id];
        int sep = tok->decoder == TOK_DECODER_NONE && !first; /* HF joins with " " then */
        if (llmrt__grow(&raw, &rcap, rl + k + 1) != 0)
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory decoding %zu ids", n);
        if (sep)
            raw[rl++] = ' ';
        memcpy(raw + rl, tok->id_bytes[id], k);
        rl += k;
        first = 0;
    }
    if (llmrt__utf8_lossy_append(&out, &ol, &ocap, (const uint8_t *)raw, rl, 0, NULL) != 0)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory decoding %zu ids", n);
    out[ol] = 0;
    *text = out;
    if (len)
        *len = ol;
    out = NULL;
cleanup:
    free(raw);
    free(out);
    return st;
}
