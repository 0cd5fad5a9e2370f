/* engine_text.c — the engine's text API for embedders (llmrt/engine.h): tokenize and
 * detokenize with the model folder's tokenizer, without reaching into core/text. */
#include <llmrt/engine.h>

#include "tokenizer.h"

static llmrt_status no_tokenizer(llmrt_error *err)
{
    return llmrt_fail(err, LLMRT_ERR_STATE,
                      "the model folder has no tokenizer.json: this engine takes and gives token "
                      "ids only");
}

llmrt_status llmrt_engine_tokenize(llmrt_engine *e, const char *text, size_t len, uint32_t flags,
                                   int32_t **ids, size_t *n_ids, llmrt_error *err)
{
    const llmrt_tokenizer *tok = llmrt_engine_tokenizer(e);
    *ids = NULL;
    *n_ids = 0;
    if (!tok)
        return no_tokenizer(err);
    uint32_t tf = (flags & LLMRT_TEXT_SPECIAL_AS_TEXT) ? LLMRT_ENCODE_SPECIAL_AS_TEXT : 0;
    return llmrt_tokenizer_encode(tok, text, len, tf, ids, n_ids, err);
}

llmrt_status llmrt_engine_detokenize(llmrt_engine *e, const int32_t *ids, size_t n_ids,
                                     int skip_special, char **text, size_t *len,
                                     llmrt_error *err)
{
    const llmrt_tokenizer *tok = llmrt_engine_tokenizer(e);
    size_t n = 0;
    *text = NULL;
    if (!tok)
        return no_tokenizer(err);
    llmrt_status st = llmrt_tokenizer_decode(tok, ids, n_ids, skip_special, text, &n, err);
    if (len)
        *len = n;
    return st;
}
