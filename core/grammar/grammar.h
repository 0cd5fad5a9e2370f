/* grammar.h — grammar-constrained decoding: a grammar compiled to an automaton over bytes,
 * the state of one reply in it, the vocabulary as a byte trie, and token masks.
 *
 * Why over bytes: a token is a byte string (byte-level BPE), so "may this token come next?"
 * is "do its bytes continue a valid prefix?". The automaton (gram_build.h) is a set of rules,
 * each a DFA over bytes whose edges may call another rule; a reply's state is the set of call
 * stacks it may be in (usually one: the JSON grammars here are deterministic but for anyOf).
 *
 * Masks (gram_mask.c), as xgrammar does: the innermost rule state of a stack (its top) decides
 * most tokens alone. For each top state, computed once by one walk over the vocabulary trie
 * and cached, the tokens split into those accepted without leaving the top's rule (a bitset),
 * those rejected, and the few whose bytes could finish the rule and go on in the caller
 * (checked against the whole stack each step). A step's mask is then an OR of bitsets plus
 * those few checks.
 *
 * Compilers (gram_schema.c, gram_regex.c): a JSON-schema subset, a regex subset, a list of
 * choices; each can be wrapped (llmrt_gram_wrap: literal text around the document, repeats,
 * an optional leading free-text block such as a reasoning section).
 *
 * Threads: a compiled llmrt_gram is immutable. A masker (its cache) and a state belong to
 * one thread at a time. */
#ifndef LLMRT_CORE_GRAMMAR_H
#define LLMRT_CORE_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

struct json_t;
typedef struct llmrt_tokenizer llmrt_tokenizer;

/* Bytes of whitespace a JSON grammar allows between two of its tokens (spaces, tabs,
 * newlines): enough for ": " and a newline with a little indentation, never an endless run
 * of blanks. */
#define LLMRT_GRAM_JSON_WS_MAX 4
/* Most digits in a JSON number's integer part, fraction or exponent (integers stay exact in
 * a double; a reply cannot run on digits). */
#define LLMRT_GRAM_INT_DIGITS 15
#define LLMRT_GRAM_FRAC_DIGITS 15
#define LLMRT_GRAM_EXP_DIGITS 2
/* Most characters a string's minLength / maxLength may ask for (they unroll). */
#define LLMRT_GRAM_MAX_LENGTH 1000
/* Most items minItems / maxItems may ask for. */
#define LLMRT_GRAM_MAX_ITEMS 1024

/* ---- the automaton ---- */

typedef struct llmrt_gram_span {
    uint8_t lo, hi; /* bytes lo..hi */
    int32_t to;
} llmrt_gram_span;

typedef struct llmrt_gram_invoke {
    int32_t rule; /* match a whole `rule` ... */
    int32_t to;   /* ... then continue here */
} llmrt_gram_invoke;

typedef struct llmrt_gram_st {
    uint32_t r0, c0;  /* first range / call */
    uint16_t nr, nc;  /* ranges (sorted, disjoint) and calls */
    uint8_t accept;   /* the rule may end here */
    uint8_t simple;   /* ranges only: no accept, no calls */
    int32_t rule;
    int32_t dist;     /* fewest bytes from here to the end of the rule */
} llmrt_gram_st;

typedef struct llmrt_gram_rule {
    int32_t start;
    int32_t min_len; /* fewest bytes of a whole match */
} llmrt_gram_rule;

typedef struct llmrt_gram {
    llmrt_gram_st *st;
    int32_t n_st;
    llmrt_gram_span *rg;
    int32_t n_rg;
    llmrt_gram_invoke *cl;
    int32_t n_cl;
    llmrt_gram_rule *rules;
    int32_t n_rules;
    int32_t root;
} llmrt_gram;

void llmrt_gram_free(llmrt_gram *g);

/* The state a byte leads to from state s, or -1. */
static inline int32_t llmrt_gram_next(const llmrt_gram *g, int32_t s, uint8_t b)
{
    const llmrt_gram_st *x = &g->st[s];
    const llmrt_gram_span *r = g->rg + x->r0;
    for (uint32_t i = 0; i < x->nr; i++) {
        if (b < r[i].lo)
            return -1;
        if (b <= r[i].hi)
            return r[i].to;
    }
    return -1;
}

/* ---- compilers ---- */

/* A JSON schema (the subset of gram_schema.c) given as JSON text; a schema outside it fails
 * with LLMRT_ERR_UNSUPPORTED naming the keyword and where it is ("/properties/age"), a
 * malformed one with LLMRT_ERR_INVALID_ARG. */
llmrt_status llmrt_gram_json_schema(const char *schema, size_t len, llmrt_gram **out,
                                    llmrt_error *err);
/* The same from parsed JSON. */
llmrt_status llmrt_gram_json_schema_value(const struct json_t *schema, llmrt_gram **out,
                                          llmrt_error *err);
/* The whole reply matches the pattern (gram_regex.c's subset of Python/PCRE syntax). */
llmrt_status llmrt_gram_regex(const char *pattern, size_t len, llmrt_gram **out,
                              llmrt_error *err);
/* The reply is exactly one of the strings. */
llmrt_status llmrt_gram_choice(const char *const *choices, const size_t *lens, int32_t n,
                               llmrt_gram **out, llmrt_error *err);

/* Around the document (any NULL / 0 member: not used). */
typedef struct llmrt_gram_wrap {
    const char *prefix;      /* before each document */
    const char *suffix;      /* after each document */
    const char *separator;   /* between documents */
    int32_t min_count;       /* documents: at least (default 1) ... */
    int32_t max_count;       /* ... at most (default 1) */
    const char *lead_open;   /* an optional block first: lead_open, free text that does not */
    const char *lead_close;  /* contain lead_close, lead_close, then at most a little
                                whitespace (a reasoning section before the answer) */
    int32_t strict;          /* JSON schema: an object without additionalProperties allows
                                no other keys (else it allows any other key) */
} llmrt_gram_wrap;

/* Compilers with a wrapper (wrap may be NULL): a JSON schema's text, a regex, or choices
 * [n] (lens may be NULL: NUL-terminated). */
typedef enum llmrt_gram_kind {
    LLMRT_GRAM_JSON_SCHEMA = 0,
    LLMRT_GRAM_REGEX = 1,
    LLMRT_GRAM_CHOICE = 2
} llmrt_gram_kind;

llmrt_status llmrt_gram_compile(llmrt_gram_kind kind, const char *text, size_t len,
                                const char *const *choices, const size_t *lens, int32_t n,
                                const llmrt_gram_wrap *wrap, llmrt_gram **out,
                                llmrt_error *err);

/* ---- a reply's state: the set of call stacks it may be in ---- */

typedef struct llmrt_gram_state {
    int32_t n;        /* stacks that can go on (each top has byte edges) */
    int32_t complete; /* the document may end here */
    int32_t len, cap; /* ints used / allocated in buf */
    int32_t *buf;     /* stacks back to back: [depth, bottom ... top] */
    int32_t overflow; /* a stack grew past LLMRT_GRAM_MAX_DEPTH and was dropped */
} llmrt_gram_state;

#define LLMRT_GRAM_MAX_DEPTH 4096

void llmrt_gram_state_init(llmrt_gram_state *s);
void llmrt_gram_state_free(llmrt_gram_state *s);
/* 0, or -1 when out of memory. */
int llmrt_gram_state_copy(llmrt_gram_state *dst, const llmrt_gram_state *src);
/* The state before the first byte. 0 or -1 (out of memory). */
int llmrt_gram_state_start(const llmrt_gram *g, llmrt_gram_state *s);
/* The state of the one stack [top] (top must have byte edges), where finishing top's rule
 * is `complete`: what the mask cache walks from. Unlike a reply's state it is not expanded
 * (a reply's state holds the stacks that top's pops and calls lead to on their own). */
int llmrt_gram_state_at(const llmrt_gram *g, int32_t top, llmrt_gram_state *s);
/* out = in after byte b (out != in). Returns 1 when out is alive (n > 0 or complete), 0 when
 * b is not allowed, -1 when out of memory. */
int llmrt_gram_advance(const llmrt_gram *g, const llmrt_gram_state *in, uint8_t c,
                       llmrt_gram_state *out);
/* In place over bytes, with a scratch state. 1 alive, 0 rejected (s is then dead), -1 no
 * memory. */
int llmrt_gram_advance_bytes(const llmrt_gram *g, llmrt_gram_state *s, const uint8_t *bytes,
                             size_t n, llmrt_gram_state *scratch);
/* 1 when the whole text is a complete document. */
int llmrt_gram_matches(const llmrt_gram *g, const void *text, size_t n);
/* Fewest more bytes to a complete document (0 when complete; INT32_MAX when dead). */
int32_t llmrt_gram_dist(const llmrt_gram *g, const llmrt_gram_state *s);
/* The i-th stack: its depth and elements (bottom first). */
static inline const int32_t *llmrt_gram_stack(const llmrt_gram_state *s, int32_t off,
                                              int32_t *depth)
{
    *depth = s->buf[off];
    return s->buf + off + 1;
}

/* ---- the vocabulary as a byte trie ---- */

typedef struct llmrt_gram_vocab llmrt_gram_vocab;

/* Tokens [n] by their bytes (NULL or length 0: never allowed); mask words cover n_bits
 * token ids (>= n: the model's vocabulary may be padded past the tokenizer's). */
llmrt_status llmrt_gram_vocab_new(const uint8_t *const *bytes, const uint32_t *lens, int32_t n,
                                  int32_t n_bits, llmrt_gram_vocab **out, llmrt_error *err);
/* A tokenizer's tokens: their decoded bytes; special added tokens are never allowed (eos
 * is the engine's to allow). */
llmrt_status llmrt_gram_vocab_from_tokenizer(const llmrt_tokenizer *tok, int32_t n_bits,
                                             llmrt_gram_vocab **out, llmrt_error *err);
void llmrt_gram_vocab_free(llmrt_gram_vocab *v);
/* 32-bit words of a mask. */
int32_t llmrt_gram_vocab_words(const llmrt_gram_vocab *v);
int32_t llmrt_gram_vocab_bits(const llmrt_gram_vocab *v);
int32_t llmrt_gram_vocab_nodes(const llmrt_gram_vocab *v);
/* A token's bytes (NULL when it is never allowed). */
const uint8_t *llmrt_gram_vocab_token(const llmrt_gram_vocab *v, int32_t id, uint32_t *len);

/* ---- masks ---- */

typedef struct llmrt_gram_masker llmrt_gram_masker;

typedef struct llmrt_gram_mask_stats {
    uint64_t masks;          /* llmrt_gram_mask calls */
    uint64_t tops_cached;    /* top states found in the cache */
    uint64_t tops_computed;  /* top states walked over the trie */
    uint64_t checks;         /* tokens checked against a whole stack */
    uint64_t cache_bytes;    /* held now */
    uint64_t cache_clears;   /* times the cache reached its limit and was emptied */
} llmrt_gram_mask_stats;

/* g and v must outlive the masker; max_cache_bytes bounds its cache. */
llmrt_status llmrt_gram_masker_new(const llmrt_gram *g, const llmrt_gram_vocab *v,
                                   size_t max_cache_bytes, llmrt_gram_masker **out,
                                   llmrt_error *err);
void llmrt_gram_masker_free(llmrt_gram_masker *m);
/* words [vocab words] = the tokens whose bytes continue s (eos is not among them: allow it
 * when s->complete). Returns the number of allowed tokens, or -1 when out of memory. */
int32_t llmrt_gram_mask(llmrt_gram_masker *m, const llmrt_gram_state *s, uint32_t *words);
/* The same, the slow way: every token checked on its own (tests, and the end-of-budget
 * filter). `max_dist` >= 0 also requires the state after the token to be within max_dist
 * bytes of a complete document. */
int32_t llmrt_gram_mask_exact(llmrt_gram_masker *m, const llmrt_gram_state *s,
                              int32_t max_dist, uint32_t *words);
/* Is token id allowed after s? (and, with max_dist >= 0, within max_dist of the end after
 * it). 1 / 0, -1 no memory. */
int llmrt_gram_token_ok(llmrt_gram_masker *m, const llmrt_gram_state *s, int32_t id,
                        int32_t max_dist);
void llmrt_gram_masker_stats(const llmrt_gram_masker *m, llmrt_gram_mask_stats *out);

static inline int llmrt_gram_bit(const uint32_t *w, int32_t i)
{
    return (int)((w[i >> 5] >> (i & 31)) & 1u);
}
static inline void llmrt_gram_set_bit(uint32_t *w, int32_t i)
{
    w[i >> 5] |= 1u << (i & 31);
}

#endif
