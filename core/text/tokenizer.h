/* tokenizer.h — Hugging Face tokenizer.json (byte-level BPE, as GPT-2-style vocabularies use it) in C:
 * text → ids, ids → text, streaming detokenization, and the special tokens of
 * tokenizer_config.json.
 *
 * Why: users give text, not ids, and the ids must be exactly those of HF `tokenizers`
 * (the model was trained on them). Supported components, each checked at load time:
 *   normalizer     NFC / NFD / NFKC / NFKD (utf8proc), Lowercase, Sequence, none
 *   pre_tokenizer  Split (Regex via PCRE2 UTF+UCP+JIT, or String; all five behaviors),
 *                  ByteLevel (use_regex true or false), Sequence, none
 *   model          BPE (vocab, merges as "a b" or ["a","b"], ignore_merges)
 *   decoder        ByteLevel
 *   post_processor ByteLevel, TemplateProcessing (single sequence), none
 *   added_tokens   special and non-special, matched before BPE, lstrip/rstrip/
 *                  normalized/single_word as HF does.
 * Anything else is an error naming the component type and its JSON path. ("truncation" and
 * "padding" are ignored: they shape training batches, and llmrt never truncates a prompt.)
 *
 * Thread safety: a loaded tokenizer is immutable except for its internal BPE cache, which
 * is lock-protected; encode/decode/lookups may be called from many threads at once. A
 * detokenizer (llmrt_detok) belongs to one thread (one per sequence). */
#ifndef LLMRT_CORE_TOKENIZER_H
#define LLMRT_CORE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

typedef struct llmrt_tokenizer llmrt_tokenizer;

/* ---- loading ---- */

/* `path` is a tokenizer.json file or a model folder holding one. When the folder (or the
 * file's folder) also holds tokenizer_config.json it is read too (eos/bos/pad tokens,
 * chat_template); a missing tokenizer_config.json is not an error. */
llmrt_status llmrt_tokenizer_load(const char *path, llmrt_tokenizer **out, llmrt_error *err);

/* Parse tokenizer.json text held in memory (`len` bytes, need not be NUL-terminated).
 * `where` names the source in messages ("model/tokenizer.json"). Used by load and by the
 * fuzz target. */
llmrt_status llmrt_tokenizer_parse(const char *json, size_t len, const char *where,
                                   llmrt_tokenizer **out, llmrt_error *err);

/* Read a tokenizer_config.json (file path) into an already loaded tokenizer, replacing
 * what an earlier call set. Token strings it names must exist in the vocabulary. */
llmrt_status llmrt_tokenizer_load_config(llmrt_tokenizer *tok, const char *path,
                                         llmrt_error *err);
/* Same, from text in memory. */
llmrt_status llmrt_tokenizer_parse_config(llmrt_tokenizer *tok, const char *json, size_t len,
                                          const char *where, llmrt_error *err);

void llmrt_tokenizer_free(llmrt_tokenizer *tok);

/* ---- vocabulary ---- */

/* One more than the largest id (model vocab and added tokens). */
int32_t llmrt_tokenizer_vocab_size(const llmrt_tokenizer *tok);
/* Id of a token given by its string as written in tokenizer.json (added token content such
 * as "<|im_end|>", or a vocab entry in its byte-level spelling such as "Ġthe"); -1 when the
 * token does not exist. */
int32_t llmrt_tokenizer_token_id(const llmrt_tokenizer *tok, const char *token);
/* The string of an id as tokenizer.json spells it (byte-level form for vocab entries);
 * NULL for an id out of range or unused. Valid while the tokenizer lives. */
const char *llmrt_tokenizer_token_str(const llmrt_tokenizer *tok, int32_t id);
/* 1 when the id is an added token marked "special" (skipped by skip_special decoding). */
int llmrt_tokenizer_is_special(const llmrt_tokenizer *tok, int32_t id);
/* The added tokens (tokenizer.json's added_tokens): how many, and the i-th one's text as
 * written (*len its length; *special 1 for a special one). NULL for i out of range. */
size_t llmrt_tokenizer_added_count(const llmrt_tokenizer *tok);
const char *llmrt_tokenizer_added_at(const llmrt_tokenizer *tok, size_t i, size_t *len,
                                     int *special);

/* ---- tokenizer_config.json ---- */

/* End-of-sequence ids known to the tokenizer: eos_token of tokenizer_config.json (the
 * engine adds config.json / generation_config.json ids itself). Returns the count and sets
 * *ids to an array valid while the tokenizer lives (count 0 when none is known). */
size_t llmrt_tokenizer_eos_ids(const llmrt_tokenizer *tok, const int32_t **ids);
/* bos_token / pad_token ids; -1 when not set (some vocabularies have no bos). */
int32_t llmrt_tokenizer_bos_id(const llmrt_tokenizer *tok);
int32_t llmrt_tokenizer_pad_id(const llmrt_tokenizer *tok);
/* tokenizer_config.json's chat_template text; NULL when absent. */
const char *llmrt_tokenizer_chat_template(const llmrt_tokenizer *tok);

/* ---- encoding ---- */

enum {
    /* Apply the post_processor's special tokens (e.g. a BOS from TemplateProcessing), as
     * HF's add_special_tokens=True. No effect without a post_processor. */
    LLMRT_ENCODE_ADD_SPECIAL = 1u << 0,
    /* Treat special added tokens in the text as plain text (HF split_special_tokens=True):
     * "<|im_end|>" typed by a user is then not the eos token. Non-special added tokens
     * (e.g. "<think>") are still matched, as in HF. */
    LLMRT_ENCODE_SPECIAL_AS_TEXT = 1u << 1
};

/* Encode `len` bytes of UTF-8 text (invalid UTF-8 is an error naming the byte offset).
 * On success *ids is a malloc'd array of *n_ids ids (caller frees; non-NULL even when
 * *n_ids is 0). `flags`: LLMRT_ENCODE_*. */
llmrt_status llmrt_tokenizer_encode(const llmrt_tokenizer *tok, const char *text, size_t len,
                                    uint32_t flags, int32_t **ids, size_t *n_ids,
                                    llmrt_error *err);

/* A byte range [start, start + len) of a text. */
typedef struct llmrt_text_span {
    size_t start, len;
} llmrt_text_span;

/* As llmrt_tokenizer_encode, where special added tokens are not matched where they would
 * overlap one of the `literal` spans ([n_literal], ascending, not overlapping): there they
 * are plain text, as with LLMRT_ENCODE_SPECIAL_AS_TEXT, and everywhere else they are
 * special tokens. The rest of the text is tokenized exactly as a whole (no cut at the spans'
 * edges). For a rendered chat prompt whose message contents are the spans. A special token
 * that is matched after normalization (normalized: true) is plain text in every segment
 * that touches a span. */
llmrt_status llmrt_tokenizer_encode_spans(const llmrt_tokenizer *tok, const char *text,
                                          size_t len, uint32_t flags,
                                          const llmrt_text_span *literal, size_t n_literal,
                                          int32_t **ids, size_t *n_ids, llmrt_error *err);

/* ---- decoding ---- */

/* Decode ids to UTF-8 text as HF does (decoder, then lossy UTF-8: each invalid sequence
 * becomes U+FFFD). skip_special: leave out special added tokens. *text is malloc'd and
 * NUL-terminated (caller frees); *len excludes the NUL and may be NULL. Ids that name no
 * token (negative, past the vocabulary, holes) are skipped, as HF skips them: a model's
 * embedding table is often padded past the tokenizer's vocabulary. */
llmrt_status llmrt_tokenizer_decode(const llmrt_tokenizer *tok, const int32_t *ids, size_t n,
                                    int skip_special, char **text, size_t *len,
                                    llmrt_error *err);

/* The bytes a single id stands for after the decoder (may be a partial UTF-8 sequence);
 * NULL for an invalid id. Valid while the tokenizer lives. */
const uint8_t *llmrt_tokenizer_token_bytes(const llmrt_tokenizer *tok, int32_t id,
                                           size_t *len);

/* ---- streaming detokenizer ----
 * Push ids one at a time as they are generated; each push returns the text that became
 * complete. Never returns part of a UTF-8 sequence: bytes of a character split across
 * tokens are held until the character is complete. A byte sequence that can never become
 * valid UTF-8 is returned as U+FFFD at once (matching llmrt_tokenizer_decode). */
typedef struct llmrt_detok llmrt_detok;

llmrt_status llmrt_detok_new(const llmrt_tokenizer *tok, int skip_special, llmrt_detok **out,
                             llmrt_error *err);
/* *text points to the newly complete text (NUL-terminated, possibly ""), valid until the
 * next call on this detokenizer; *len is its length (may be NULL). An id that names no
 * token adds nothing (as in decode). */
llmrt_status llmrt_detok_push(llmrt_detok *d, int32_t id, const char **text, size_t *len,
                              llmrt_error *err);
/* End of stream: held bytes that never completed come out as U+FFFD. Same lifetime rule
 * as push. The detokenizer is then empty and can be reused. */
const char *llmrt_detok_flush(llmrt_detok *d, size_t *len);
/* Drop held bytes (new sequence). */
void llmrt_detok_reset(llmrt_detok *d);
void llmrt_detok_free(llmrt_detok *d);

#endif
