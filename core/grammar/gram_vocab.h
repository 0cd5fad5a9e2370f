/* gram_vocab.h — the vocabulary trie's layout, shared by gram_vocab.c (building it) and
 * gram_mask.c (walking it). Not for other users: grammar.h has the API. */
#ifndef LLMRT_CORE_GRAM_VOCAB_H
#define LLMRT_CORE_GRAM_VOCAB_H

#include <stdint.h>

struct llmrt_gram_vocab {
    int32_t n_tokens;    /* ids [0, n_tokens) have entries below */
    int32_t n_bits;      /* ids a mask covers (the model's vocabulary) */
    int32_t n_words;     /* (n_bits + 31) / 32 */
    const uint8_t **tb;  /* [n_tokens] a token's bytes; NULL: never allowed */
    uint32_t *tl;        /* [n_tokens] their lengths */
    uint8_t *arena;      /* the bytes */
    int32_t max_len;     /* longest token */
    /* the trie, nodes in preorder */
    int32_t n_nodes;
    uint8_t *byte;       /* [n_nodes] the byte that leads into the node */
    uint16_t *depth;     /* [n_nodes] 1 for the root's children */
    int32_t *end;        /* [n_nodes] preorder index just past the node's subtree */
    int32_t *tstart;     /* [n_nodes + 1] tokens ending at node i: tids[tstart[i], tstart[i+1]) */
    int32_t *tids;       /* token ids in preorder of their nodes */
};

#endif
