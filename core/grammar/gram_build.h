/* gram_build.h — building a grammar: Thompson NFA fragments over bytes, with calls of other
 * rules, determinized rule by rule into the automaton of grammar.h.
 *
 * Why this shape: a JSON schema is mostly regular (strings, numbers, literals, objects of
 * known keys) but values nest, and a schema can refer to itself ($ref) or allow any JSON
 * value; a regular expression is regular. So a grammar is a set of rules, each a DFA over
 * bytes whose edges may also call another rule (a recursive transition network). The schema
 * and regex compilers (gram_schema.c, gram_regex.c) describe each rule as an NFA fragment
 * with these functions; llmrt_gram_builder_finish determinizes every rule, computes the
 * fewest bytes that finish each state, and drops what can never finish.
 *
 * Errors: the builder counts its NFA states against a budget (LLMRT_GRAM_MAX_NFA); past it,
 * out of memory, or when a compiler meets what it cannot do, every later call is a no-op and
 * finish fails with the status and reason recorded by llmrt_gram_builder_fail (the first one
 * wins). */
#ifndef LLMRT_CORE_GRAM_BUILD_H
#define LLMRT_CORE_GRAM_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "grammar.h"

/* Most NFA states one grammar may use (counted repetitions unroll). */
#define LLMRT_GRAM_MAX_NFA (1 << 21)
/* Most DFA states, and NFA states summed over them, one grammar may determinize into
 * (".*a.{20}" is small as an NFA and exponential as a DFA). */
#define LLMRT_GRAM_MAX_DFA 250000
#define LLMRT_GRAM_MAX_DFA_SETS (1 << 22)

typedef struct llmrt_gram_builder llmrt_gram_builder;

/* A piece of NFA: from `start` to `end` (end has no outgoing edges yet). */
typedef struct llmrt_gram_frag {
    int32_t start, end;
} llmrt_gram_frag;

llmrt_gram_builder *llmrt_gram_builder_new(void);
void llmrt_gram_builder_free(llmrt_gram_builder *b);
/* Record why building fails, with the status finish returns (first call wins); later calls
 * keep working as no-ops. */
void llmrt_gram_builder_fail(llmrt_gram_builder *b, llmrt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int llmrt_gram_builder_failed(const llmrt_gram_builder *b);

/* A new rule (its body is set later, so rules may call each other). */
int32_t llmrt_gram_rule_new(llmrt_gram_builder *b);
void llmrt_gram_rule_set(llmrt_gram_builder *b, int32_t rule, llmrt_gram_frag body);

/* Fragments. Each returns a fresh piece; pieces are used once. */
llmrt_gram_frag llmrt_gram_empty(llmrt_gram_builder *b);
llmrt_gram_frag llmrt_gram_bytes(llmrt_gram_builder *b, const void *s, size_t n);
llmrt_gram_frag llmrt_gram_str(llmrt_gram_builder *b, const char *s);
llmrt_gram_frag llmrt_gram_range(llmrt_gram_builder *b, uint8_t lo, uint8_t hi);
/* One byte of the set (bits[b >> 3] & (1 << (b & 7))); an empty set matches nothing. */
llmrt_gram_frag llmrt_gram_set(llmrt_gram_builder *b, const uint8_t bits[32]);
llmrt_gram_frag llmrt_gram_call(llmrt_gram_builder *b, int32_t rule);
llmrt_gram_frag llmrt_gram_cat(llmrt_gram_builder *b, llmrt_gram_frag x, llmrt_gram_frag y);
/* x | y, and a choice among n pieces (n == 0: matches nothing). */
llmrt_gram_frag llmrt_gram_alt(llmrt_gram_builder *b, llmrt_gram_frag x, llmrt_gram_frag y);
llmrt_gram_frag llmrt_gram_alts(llmrt_gram_builder *b, const llmrt_gram_frag *f, int n);
llmrt_gram_frag llmrt_gram_opt(llmrt_gram_builder *b, llmrt_gram_frag x);
llmrt_gram_frag llmrt_gram_star(llmrt_gram_builder *b, llmrt_gram_frag x);
llmrt_gram_frag llmrt_gram_plus(llmrt_gram_builder *b, llmrt_gram_frag x);
/* Matches nothing. */
llmrt_gram_frag llmrt_gram_none(llmrt_gram_builder *b);
/* Wiring by hand (loops that reuse one piece): a fresh NFA state, and an empty edge. */
int32_t llmrt_gram_junction(llmrt_gram_builder *b);
void llmrt_gram_link(llmrt_gram_builder *b, int32_t from, int32_t to);

/* Repetition {min, max} (max < 0: unbounded) of a piece made by `make` (called once per
 * copy: pieces cannot be reused). */
typedef llmrt_gram_frag (*llmrt_gram_make_fn)(llmrt_gram_builder *b, void *ctx);
llmrt_gram_frag llmrt_gram_repeat(llmrt_gram_builder *b, llmrt_gram_make_fn make, void *ctx,
                                  int32_t min, int32_t max);

/* One Unicode scalar value in [lo, hi] (surrogates excluded) as UTF-8. */
llmrt_gram_frag llmrt_gram_utf8_range(llmrt_gram_builder *b, uint32_t lo, uint32_t hi);

/* Determinize every rule; `root` is where a document starts. err names the failure. */
llmrt_status llmrt_gram_builder_finish(llmrt_gram_builder *b, int32_t root, llmrt_gram **out,
                                       llmrt_error *err);

#endif
