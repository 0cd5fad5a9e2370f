/* gram_json.h — JSON pieces for the compilers: a JSON schema's values (gram_schema.c) and
 * the JSON tokens they are made of (gram_json.c). Internal to core/grammar. */
#ifndef LLMRT_CORE_GRAM_JSON_H
#define LLMRT_CORE_GRAM_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "gram_build.h"

/* Whitespace between JSON tokens: at most LLMRT_GRAM_JSON_WS_MAX of space, tab, newline. */
llmrt_gram_frag llmrt_gram_json_ws(llmrt_gram_builder *b);
/* One character of a JSON string's content: an unescaped one (valid UTF-8, no control
 * character, '"' or '\') or an escape (\" \\ \/ \b \f \n \r \t, \uXXXX other than a
 * surrogate or \u0000). */
llmrt_gram_frag llmrt_gram_json_char(llmrt_gram_builder *b, void *unused);
/* A whole JSON string with [min, max] characters (max < 0: any). */
llmrt_gram_frag llmrt_gram_json_string(llmrt_gram_builder *b, int32_t min, int32_t max);
/* An unbounded JSON number (digits capped as grammar.h says). */
llmrt_gram_frag llmrt_gram_json_number(llmrt_gram_builder *b);
/* The exact text of a JSON value (compact, as jansson writes it). */
llmrt_gram_frag llmrt_gram_json_literal(llmrt_gram_builder *b, const json_t *v);

/* A value of schema `schema` (inside document `root`, for $ref). strict: an object schema
 * without additionalProperties allows no other keys (else it allows any). */
typedef struct llmrt_gram_schema_ctx llmrt_gram_schema_ctx;
llmrt_gram_schema_ctx *llmrt_gram_schema_ctx_new(llmrt_gram_builder *b, const json_t *root,
                                                 int strict);
void llmrt_gram_schema_ctx_free(llmrt_gram_schema_ctx *c);
llmrt_gram_frag llmrt_gram_schema_value(llmrt_gram_schema_ctx *c, const json_t *schema,
                                        const char *path);
/* Any JSON object / any JSON value (rules made once per context). */
llmrt_gram_frag llmrt_gram_any_object(llmrt_gram_schema_ctx *c);
llmrt_gram_frag llmrt_gram_any_value(llmrt_gram_schema_ctx *c);

#endif
