/* fuzz_serve_request.c — libFuzzer target for `llmrt serve`'s request-body parser
 * (llmrt_serve_request_parse). The first input byte picks the endpoint (completions, chat,
 * tokenize, detokenize); the rest is the body.
 *
 * Why: request bodies come from the network; whatever a client sends must end in a parsed
 * request whose values are in range, or a 400 with a message, never a crash or a leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    llmrt_serve_kind kind = (llmrt_serve_kind)(data[0] % 4);
    llmrt_serve_request *r = NULL;
    llmrt_serve_error e = {0};
    if (llmrt_serve_request_parse(kind, (const char *)data + 1, size - 1, &r, &e) != LLMRT_OK) {
        if (r || e.status != 400 || !e.message[0])
            abort();
        return 0;
    }
    if (!r || r->kind != kind)
        abort();
    const llmrt_sampling *s = &r->sampling;
    switch (kind) {
    case LLMRT_SERVE_COMPLETIONS:
    case LLMRT_SERVE_TOKENIZE:
        if (kind == LLMRT_SERVE_COMPLETIONS || !r->messages) {
            if (r->n_prompts < 1)
                abort();
            for (int32_t i = 0; i < r->n_prompts; i++) {
                const llmrt_serve_prompt *p = &r->prompts[i];
                if (p->text ? (p->text_len == 0 || p->ids) : (!p->ids || p->n_ids < 1))
                    abort();
                for (int32_t k = 0; p->ids && k < p->n_ids; k++)
                    if (p->ids[k] < 0)
                        abort();
            }
        }
        break;
    case LLMRT_SERVE_CHAT:
        if (!r->messages)
            abort();
        /* a required or named tool choice comes with tools; a named one with its name */
        if ((r->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_REQUIRED ||
             r->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_FUNCTION) && !r->tools)
            abort();
        if ((r->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_FUNCTION) != (r->tool_choice.name != NULL))
            abort();
        break;
    case LLMRT_SERVE_DETOKENIZE:
        if (r->n_tokens < 0 || (r->n_tokens > 0 && !r->tokens))
            abort();
        break;
    }
    if (kind == LLMRT_SERVE_COMPLETIONS || kind == LLMRT_SERVE_CHAT) {
        if (r->n < 1 || s->max_tokens < 1 || s->min_tokens < 0 || s->temperature < 0 ||
            !(s->top_p > 0 && s->top_p <= 1) || s->min_p < 0 || s->min_p > 1 || s->top_k < 0 ||
            s->logprobs < -1 || s->logprobs > LLMRT_MAX_TOP_LOGPROBS || s->n_stop < 0 ||
            s->n_stop_ids < 0 || !(s->repetition_penalty > 0) || (r->include_usage && !r->stream))
            abort();
        for (int32_t i = 0; i < s->n_stop; i++)
            if (!s->stop[i] || !s->stop[i][0])
                abort();
    }
    if (r->n_unknown < 0 || r->n_unknown > LLMRT_SERVE_MAX_UNKNOWN)
        abort();
    for (int i = 0; i < r->n_unknown; i++)
        if (!r->unknown[i])
            abort();
    llmrt_serve_request_free(r);
    return 0;
}
