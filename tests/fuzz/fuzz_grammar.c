/* fuzz_grammar.c — libFuzzer target for structured outputs' compilers (core/grammar): the
 * JSON-schema compiler and the regex compiler, with the automata they build walked.
 *
 * Why: a schema or a pattern arrives in every structured-output request; whatever it holds
 * must end in a grammar or an error naming what is wrong — never a crash, a hang, a leak or
 * an absurd allocation — and a grammar's walk must stay consistent (every byte it allows
 * keeps it alive, a complete state is at distance 0).
 *
 * Input: the first byte picks the compiler (even: JSON schema, odd: regex); the rest is the
 * text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    llmrt_gram_kind kind = data[0] & 1 ? LLMRT_GRAM_REGEX : LLMRT_GRAM_JSON_SCHEMA;
    llmrt_status st = llmrt_gram_compile(kind, (const char *)data + 1, size - 1, NULL, NULL, 0,
                                         NULL, &g, &err);
    if (st != LLMRT_OK) {
        if (!err.msg[0] || g)
            abort();
        return 0;
    }
    /* walk: the lowest allowed byte each time, a bounded number of steps */
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    if (llmrt_gram_state_start(g, &s) == 0) {
        for (int step = 0; step < 256; step++) {
            if (s.complete && llmrt_gram_dist(g, &s) != 0)
                abort();
            if (!s.complete && s.n == 0)
                abort(); /* a live state always leads somewhere */
            int moved = 0;
            for (int c = 0; c < 256 && !moved; c++) {
                int r = llmrt_gram_advance(g, &s, (uint8_t)c, &t);
                if (r < 0)
                    break;
                if (r == 1) {
                    llmrt_gram_state x = s;
                    s = t, t = x;
                    moved = 1;
                }
            }
            if (!moved)
                break;
        }
    }
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    llmrt_gram_free(g);
    return 0;
}
