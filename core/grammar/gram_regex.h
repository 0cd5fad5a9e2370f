/* gram_regex.h — the regex compiler's entry for other compilers (gram_schema.c uses it for
 * a string's "pattern"); grammar.h has llmrt_gram_regex for a whole reply. */
#ifndef LLMRT_CORE_GRAM_REGEX_H
#define LLMRT_CORE_GRAM_REGEX_H

#include "gram_build.h"

/* The strings that match `pattern` (len bytes of UTF-8) as a whole. json_chars: only
 * characters a JSON string holds without escapes (the pattern then describes a JSON string's
 * content, and the bytes are the same decoded or not). *anchor_start / *anchor_end: the
 * pattern began with ^ / ended with $ (both are taken off). Failure goes to the builder
 * (llmrt_gram_builder_fail: UNSUPPORTED names the construct, INVALID_ARG a malformed one). */
llmrt_gram_frag llmrt_gram_regex_frag(llmrt_gram_builder *b, const char *pattern, size_t len,
                                      int json_chars, int *anchor_start, int *anchor_end);

#endif
