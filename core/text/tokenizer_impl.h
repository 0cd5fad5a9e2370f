/* tokenizer_impl.h — internals shared by the tokenizer's files (tokenizer.c loads,
 * tokenizer_encode.c encodes, tokenizer_pretok.c normalizes and pre-tokenizes,
 * tokenizer_decode.c and detok_stream.c decode, bpe.c is the model). Not a public header.
 *
 * Why one struct: the tokenizer is loaded once and then read by many threads; keeping
 * everything it needs in plain arrays (per-id strings, bytes and flags) makes every
 * lookup a bounds check and an index. */
#ifndef LLMRT_CORE_TOKENIZER_IMPL_H
#define LLMRT_CORE_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>

#include "bpe.h"
#include "tokenizer.h"

#define TOK_MAX_STAGES 16 /* normalizers or pre-tokenizers after flattening Sequence */
#define TOK_MAX_EOS 8

typedef enum tok_norm_kind {
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_LOWERCASE
} tok_norm_kind;

typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_WITH_PREVIOUS,
    TOK_SPLIT_MERGED_WITH_NEXT,
    TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

typedef enum tok_pre_kind { TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL } tok_pre_kind;

typedef struct tok_pre {
    tok_pre_kind kind;
    pcre2_code *re;              /* SPLIT: the pattern; BYTELEVEL: GPT-2 regex or NULL */
    tok_split_behavior behavior; /* SPLIT */
    int invert;                  /* SPLIT */
    int add_prefix_space;        /* BYTELEVEL */
} tok_pre;

typedef struct tok_added {
    int32_t id;
    char *content; /* as written in tokenizer.json */
    size_t len;
    char *match;   /* what is searched for: content, normalized when `normalized` */
    size_t match_len;
    uint8_t special, lstrip, rstrip, normalized, single_word;
} tok_added;

/* Added tokens matched in one pass: [n] indices into tok->added, bucketed by first byte,
 * longest first inside a bucket (so the first hit at a position is the longest). */
typedef struct tok_added_set {
    uint32_t *idx;        /* [n] */
    uint32_t start[257];  /* bucket b is idx[start[b] .. start[b+1]) */
    size_t n;
} tok_added_set;

typedef enum tok_decoder_kind { TOK_DECODER_NONE, TOK_DECODER_BYTELEVEL } tok_decoder_kind;

struct llmrt_tokenizer {
    char *where; /* file name for messages */

    tok_norm_kind norm[TOK_MAX_STAGES];
    int n_norm;
    tok_pre pre[TOK_MAX_STAGES];
    int n_pre;
    tok_decoder_kind decoder;
    int32_t *post_prefix, *post_suffix; /* TemplateProcessing single: ids around sequence A */
    size_t n_post_prefix, n_post_suffix;

    llmrt_bpe *bpe;
    uint8_t bytelevel_utf8[256][2]; /* byte → its ByteLevel char, UTF-8 (1 or 2 bytes) */

    tok_added *added; /* [n_added] */
    size_t n_added;
    tok_added_set raw_set;  /* normalized == false: matched on the input text */
    tok_added_set norm_set; /* normalized == true: matched on normalized segments */

    int32_t vocab_size;     /* max id + 1 over model and added tokens */
    const char **id_str;    /* [vocab_size] tokenizer.json spelling; NULL for holes */
    const uint8_t **id_bytes; /* [vocab_size] bytes after the decoder */
    uint32_t *id_len;       /* [vocab_size] */
    uint8_t *id_special;    /* [vocab_size] */
    int32_t *id_added;      /* [vocab_size] index in added[] or -1 */
    char *arena;            /* backing store of the decoded bytes */

    /* tokenizer_config.json */
    int32_t eos_ids[TOK_MAX_EOS];
    size_t n_eos;
    int32_t bos_id, pad_id;
    char *chat_template;
};

/* ---- tokenizer_utf8.c ---- */

/* Length of the valid UTF-8 prefix of s[0..n) (n when all valid). */
size_t llmrt__utf8_valid_prefix(const uint8_t *s, size_t n);
/* Length of the UTF-8 sequence starting at s[0..n): 1..4 when it is a complete valid
 * character; 0 when s is a valid but incomplete prefix of one (more bytes needed); -k
 * when the first k bytes are a maximal invalid subpart (each such subpart is one U+FFFD,
 * as Rust's from_utf8_lossy and WHATWG do). n must be > 0. */
int llmrt__utf8_next(const uint8_t *s, size_t n);
/* Append s[0..n) to a growing buffer with invalid sequences replaced by U+FFFD. When
 * `hold_incomplete`, a valid-but-incomplete tail is not appended and its length is
 * returned in *held (else it becomes U+FFFD). Returns 0, or -1 when out of memory. */
int llmrt__utf8_lossy_append(char **buf, size_t *len, size_t *cap, const uint8_t *s, size_t n,
                             int hold_incomplete, size_t *held);
/* Decode one code point at s (valid UTF-8 assumed); returns its byte length. */
int llmrt__utf8_decode(const uint8_t *s, int32_t *cp);
/* Encode a code point; returns the byte length (1..4). */
int llmrt__utf8_encode(int32_t cp, uint8_t out[4]);
/* The GPT-2 byte-level alphabet: byte → code point, and code point → byte (-1 if none). */
int32_t llmrt__bytelevel_char(uint8_t b);
int llmrt__bytelevel_byte(int32_t cp);
/* Unicode predicates as Rust's char methods define them (used for added-token options). */
int llmrt__is_whitespace(int32_t cp); /* White_Space */
int llmrt__is_word_char(int32_t cp);  /* regex \w: L, N, M, Pc, Join_Control */
/* Grow *buf (cap doubling) to hold at least `need` bytes; 0 or -1 (no memory). */
int llmrt__grow(char **buf, size_t *cap, size_t need);

/* ---- tokenizer_pretok.c ---- */

/* Compile a Hugging Face (Oniguruma-dialect) regex with PCRE2 UTF+UCP and JIT. `literal`
 * compiles the text as a plain string (Split's {"String": ...}). */
pcre2_code *llmrt__tok_regex(const char *pattern, size_t len, int literal, const char *where,
                             const char *json_path, llmrt_error *err);
/* Normalize text with every normalizer in order. *out is malloc'd (caller frees). */
llmrt_status llmrt__tok_normalize(const llmrt_tokenizer *tok, const char *text, size_t len,
                                  char **out, size_t *out_len, llmrt_error *err);

/* Run the pre-tokenizers over `text` and call `word` for each final piece. */
typedef llmrt_status (*llmrt__tok_word_fn)(void *ctx, const char *piece, size_t len);
typedef struct llmrt__pretok_scratch {
    pcre2_match_data *md;
    char *buf[2 * TOK_MAX_STAGES]; /* per stage: prefix-space copy, byte-level output */
    size_t cap[2 * TOK_MAX_STAGES];
} llmrt__pretok_scratch;
llmrt_status llmrt__tok_pretokenize(const llmrt_tokenizer *tok, llmrt__pretok_scratch *s,
                                    const char *text, size_t len, llmrt__tok_word_fn word,
                                    void *ctx, llmrt_error *err);
void llmrt__pretok_scratch_free(llmrt__pretok_scratch *s);
void llmrt__tok_pre_free(tok_pre *p);

#endif
