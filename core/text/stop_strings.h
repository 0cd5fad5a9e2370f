/* stop_strings.h — streaming stop-string matching over generated text.
 *
 * Why: stop strings are matched on detokenized text, and a stop string can span several
 * tokens ("\n\nUser:" arriving as "\n", "\nUser", ":"). Text that could still be the start
 * of a stop string is held back, so the caller never streams text that later turns out to be
 * part of a stop, and a stop string never appears in the output. Text is UTF-8 made of whole
 * characters (the detokenizer guarantees it), so the split points — where a stop string
 * could begin — are character boundaries too. */
#ifndef LLMRT_CORE_STOP_STRINGS_H
#define LLMRT_CORE_STOP_STRINGS_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

typedef struct llmrt_stopper llmrt_stopper;

/* Copies the strings [n]; every one must be non-empty. n == 0 gives a pass-through. */
llmrt_status llmrt_stopper_new(const char *const *stops, int32_t n, llmrt_stopper **out,
                               llmrt_error *err);
void llmrt_stopper_free(llmrt_stopper *s);

/* Feed newly generated text [len]. *out / *out_len: the text now safe to emit (valid until
 * the next call). Returns the index of the stop string that matched (the text before it is
 * in *out; the stop string and anything after it are dropped), or -1. After a match the
 * stopper ignores further input. */
int32_t llmrt_stopper_push(llmrt_stopper *s, const char *text, size_t len, const char **out,
                           size_t *out_len);
/* End of stream: release what is held back (it can no longer become a stop string). */
void llmrt_stopper_flush(llmrt_stopper *s, const char **out, size_t *out_len);
/* The matched stop string, or NULL. */
const char *llmrt_stopper_matched(const llmrt_stopper *s);

#endif
