/* bpe.h — the BPE model of a Hugging Face tokenizer: vocabulary, ranked merges, and the
 * merge loop that turns one pre-tokenized word into ids.
 *
 * Why its own file: this is the hot loop. A word's symbols form a linked list and the
 * candidate merges sit in a binary heap keyed (rank, position), so a word of n symbols
 * costs O(n log n) — a 10,000-letter run is milliseconds, not seconds — and results are
 * kept in a lock-striped cache shared by all threads. Merge order is HF's exactly: lowest
 * rank first, leftmost first among equal ranks, stale heap entries skipped. */
#ifndef LLMRT_CORE_BPE_H
#define LLMRT_CORE_BPE_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

typedef struct llmrt_bpe llmrt_bpe;

typedef struct llmrt_bpe_options {
    int ignore_merges;  /* a word that is itself in the vocab is one token */
    int byte_fallback;  /* unknown chars become <0xXX> tokens */
    int32_t unk_id;     /* -1: unknown chars are dropped (as HF does without unk_token) */
    int fuse_unk;       /* consecutive unknowns become one unk */
    int cache;          /* 1: cache word → ids (default) */
} llmrt_bpe_options;

/* Capacity hints: number of vocab entries, their total bytes, number of merges. */
llmrt_status llmrt_bpe_new(size_t n_vocab, size_t vocab_bytes, size_t n_merges,
                           llmrt_bpe **out, llmrt_error *err);
void llmrt_bpe_free(llmrt_bpe *b);

/* Add a vocab entry; a string or id given twice is LLMRT_ERR_FORMAT. */
llmrt_status llmrt_bpe_add_token(llmrt_bpe *b, const char *s, size_t len, int32_t id,
                                 llmrt_error *err);
/* Id of a vocab string; -1 when absent. Valid before and after finish. */
int32_t llmrt_bpe_lookup(const llmrt_bpe *b, const char *s, size_t len);
/* Add merge (a, b) with the given rank; both halves and their concatenation must be in
 * the vocab (else LLMRT_ERR_FORMAT naming the missing one). A pair given twice keeps the
 * later rank, as HF does. */
llmrt_status llmrt_bpe_add_merge(llmrt_bpe *b, const char *a, size_t alen, const char *bb,
                                 size_t blen, int32_t rank, llmrt_error *err);
/* After the last add: builds the per-id tables. */
llmrt_status llmrt_bpe_finish(llmrt_bpe *b, const llmrt_bpe_options *opt, llmrt_error *err);

/* One more than the largest vocab id. */
int32_t llmrt_bpe_vocab_size(const llmrt_bpe *b);
/* A vocab id's string (not NUL-terminated: use *len); NULL for holes/out of range. */
const char *llmrt_bpe_token(const llmrt_bpe *b, int32_t id, size_t *len);
/* Number of merges. */
size_t llmrt_bpe_merge_count(const llmrt_bpe *b);

/* Per-call working memory (not shared between threads). Zero-initialise; free after. */
typedef struct llmrt_bpe_scratch {
    int32_t *sym, *prev, *next; /* [cap] */
    struct llmrt_bpe_heap_entry *heap;
    size_t cap, heap_cap;
} llmrt_bpe_scratch;
void llmrt_bpe_scratch_free(llmrt_bpe_scratch *s);

/* Encode one word (UTF-8, in the model's alphabet: byte-level chars for byte-level
 * tokenizers) and append its ids to the vector (*ids, *n, *cap; grown with realloc). */
llmrt_status llmrt_bpe_encode_word(const llmrt_bpe *b, llmrt_bpe_scratch *s, const char *word,
                                   size_t len, int32_t **ids, size_t *n, size_t *cap,
                                   llmrt_error *err);

#endif
