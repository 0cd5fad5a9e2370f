/* qwen3_script.c — the tiny-chat preset: a one-layer Qwen3 checkpoint, with the real Qwen3
 * tokenizer, whose greedy reply to a chat is a given text.
 *
 *   llmrt mkmodel --preset tiny-chat --model-opt tokenizer=DIR --model-opt says=TEXT -o OUT
 *
 * DIR holds Qwen3's tokenizer.json and tokenizer_config.json (tools/fetch-qwen3-tokenizer.sh);
 * both are copied into OUT. Tests drive tool calls, reasoning and stop strings end to end
 * with it: the reply is TEXT token for token, with no sampling randomness to speak of.
 *
 * The script. The reply is a fixed token sequence: TEXT encoded by greedy longest match over
 * the vocabulary (the added tokens, such as <think> and <tool_call>, as themselves), then
 * <|im_end|>. Every chat the Qwen3 template renders with a generation prompt ends in the
 * anchor <|im_end|>\n<|im_start|>assistant\n (five tokens), so S = anchor + reply + <|im_end|>
 * is known from its first token, and the model only has to continue S: at position p the
 * next token is S[p+1]. It tells positions apart by their last k tokens (the context), with k
 * the smallest for which any two positions with different next tokens differ in a token both
 * know (a token before the anchor is unknown: the prompt's). A text that repeats a span of
 * 32 tokens followed by different tokens cannot be scripted: mkmodel says which span.
 *
 * The residual stream (hidden H, padded to a multiple of 8):
 *   dim 0        a constant c (every token's embedding has it)
 *   R  [n dims]  one-hot of the current token among the n distinct tokens of S
 *   C_j          for each offset j in 1..k-1 that is used: one-hot of the colour (below) of
 *                the token at offset -j, d_j dims
 * The embedding row of a token of S is c·e0 + e_R(token); any other token's is c·e0. lm_head
 * is tied to the embedding and the final norm's weight is w on R, 0 elsewhere, so a logit is
 * w·λ·R[token]: what the layer leaves in R decides the next token, and every token outside S
 * reads 0.
 *
 * Attention copies: one head per used offset j moves the one-hot of the token at -j (its
 * value: R of that position, so head_dim >= n) into C_j as that token's colour (o_proj maps
 * each token to its colour). Queries and keys come from the constant alone, so after q_norm /
 * k_norm they are the same vectors at every position, and RoPE makes the score a function of
 * the distance only: with key pairs (1, 0) and query pairs at angle -j·θ_i on the
 * high-frequency half of the rotary pairs (rope_theta 10), score(Δ) = S·mean_i cos(θ_i (Δ -
 * j)), peaked at Δ = j; the norm weights set S so that the weight off the peak, summed over
 * every distance up to max_position_embeddings, stays below 1e-3 (mkmodel computes the bound
 * and refuses otherwise). One key/value head serves all heads.
 *
 * The MLP looks the context up: one hidden unit per rule (context → next token), gate
 * G·(R[current] + Σ_j C_j[colour of the rule's token at -j] − (n_rule − ½)) — a matched
 * filter that is +½·G when the whole context matches and at most −½·G when one place does
 * not (the post-attention norm scales both alike), so SiLU passes the first and all but
 * zeroes the second; up is the constant; down writes +1 into R at the next token. One unit
 * per token of S cancels that token's R entry when it is the current one, and one always-on
 * unit writes ¼ into R at <|im_end|>, so a context no rule matches ends the turn at once.
 * Only the script's own contexts are guaranteed: a prompt off the script (one that does not
 * end in the anchor, such as enable_thinking=false's empty think block) gets whatever the
 * lookup finds — nothing when its last token is one the script never continues from, else
 * possibly the script from a place whose nearby tokens it shares (after </think>, say).
 *
 * Colours: two predictions with different next tokens and the same current token must differ
 * in the colour of a token both know at some used offset. One colouring per offset, greedy:
 * each pair not yet told apart adds an edge, at the nearest offset where its tokens differ,
 * to that offset's graph; colour the graphs; repeat until every pair is told apart. An
 * offset whose graph has no edge needs no colour and no head. Usual texts need few heads and
 * colours: hidden stays small (the checkpoint is ~15 MB: the 151,936-row embedding).
 *
 * What mkmodel checks (without a backend: plugins have none in synthesize): the contexts are
 * unambiguous, the colouring tells every such pair apart (so a wrong rule is at least one
 * place short, whatever the unknown prompt tokens before the anchor are), and the attention
 * bound. The rest is exact arithmetic of one-hot codes, so the margins hold by construction:
 * the firing rule leaves about 1 in R at the next token (1 to 1.125 as the norm's scale moves
 * with unknown prompt tokens), <|im_end|> gets ¼, everything else about 0: a logit gap of ~10.
 * tests/integration/test_tiny_chat.sh runs the real thing through `llmrt generate`, `chat`
 * and `serve`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include <llmrt/synth.h>

#include "qwen3.h"

#define ANCHOR "<|im_end|>\n<|im_start|>assistant\n"
#define END_TOKEN "<|im_end|>"
#define K_MAX 32                  /* longest context (attention heads + 1) */
#define MAX_REPLY_TOKENS 2048
#define MAX_SAYS_BYTES (64 * 1024)
#define MAX_TOKENIZER_BYTES (64u << 20)
#define VOCAB 151936              /* Qwen3's padded vocabulary */
#define MAX_POSITION 4096
#define ROPE_THETA 10.0
#define HEAD_DIM_MIN 32
#define ATTN_LEAK_MAX 1e-3
#define ATTN_SCORE 80.0           /* score at the peak */

#define FAIL(err, code, ...)                                                                  \
    do {                                                                                      \
        st = llmrt_fail((err), (code), __VA_ARGS__);                                          \
        goto cleanup;                                                                         \
    } while (0)
#define TRY_ADD(x)                                                                            \
    do {                                                                                      \
        if ((st = (x)) != LLMRT_OK)                                                           \
            goto cleanup;                                                                     \
    } while (0)

/* ---- the tokenizer, as far as the script needs it: vocabulary and added tokens ---- */

typedef struct vocab_entry {
    const char *s; /* the token's byte-level string (UTF-8), borrowed from the JSON */
    size_t n;
    int32_t id;
} vocab_entry;

typedef struct added_token {
    const char *s;
    size_t n;
    int32_t id;
    int special;
} added_token;

typedef struct tokenizer {
    json_t *root;
    vocab_entry *v; /* [nv] sorted by bytes */
    size_t nv, max_len;
    added_token *a; /* [na] */
    size_t na;
    char byte_char[256][3]; /* GPT-2's byte → printable character, UTF-8 */
    uint8_t byte_char_n[256];
} tokenizer;

typedef struct ids {
    int32_t *p;
    size_t n, cap;
} ids;

static int ids_push(ids *x, int32_t id)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        int32_t *g = realloc(x->p, cap * sizeof *g);
        if (!g)
            return -1;
        x->p = g;
        x->cap = cap;
    }
    x->p[x->n++] = id;
    return 0;
}

static int cmp_bytes(const char *a, size_t na, const char *b, size_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na < nb ? -1 : na > nb);
}

static int cmp_vocab(const void *x, const void *y)
{
    const vocab_entry *a = x, *b = y;
    return cmp_bytes(a->s, a->n, b->s, b->n);
}

static const vocab_entry *vocab_find(const tokenizer *t, const char *s, size_t n)
{
    size_t lo = 0, hi = t->nv;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = cmp_bytes(t->v[mid].s, t->v[mid].n, s, n);
        if (c == 0)
            return &t->v[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256 + i. */
static void byte_chars(tokenizer *t)
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        int cp = keep ? b : next++;
        if (cp < 0x80) {
            t->byte_char[b][0] = (char)cp;
            t->byte_char_n[b] = 1;
        } else {
            t->byte_char[b][0] = (char)(0xC0 | (cp >> 6));
            t->byte_char[b][1] = (char)(0x80 | (cp & 0x3F));
            t->byte_char_n[b] = 2;
        }
    }
}

static void tok_free(tokenizer *t)
{
    free(t->v);
    free(t->a);
    json_decref(t->root);
    memset(t, 0, sizeof *t);
}

static llmrt_status tok_load(tokenizer *t, const char *text, size_t len, const char *where,
                             llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_error_t je;
    memset(t, 0, sizeof *t);
    byte_chars(t);
    t->root = json_loadb(text, len, 0, &je);
    if (!t->root)
        FAIL(err, LLMRT_ERR_FORMAT, "%s: not valid JSON (line %d: %s)", where, je.line, je.text);
    json_t *model = json_object_get(t->root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(vocab) || !type || strcmp(type, "BPE") != 0)
        FAIL(err, LLMRT_ERR_FORMAT, "%s: expected a BPE tokenizer with model.vocab (Qwen3's)", where);
    t->v = calloc(json_object_size(vocab) + 1, sizeof *t->v);
    if (!t->v)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory reading %s", where);
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach(vocab, key, klen, val)
    {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= VOCAB)
            FAIL(err, LLMRT_ERR_FORMAT, "%s: model.vocab[\"%.40s\"] is not an id below %d", where,
                 key, VOCAB);
        t->v[t->nv++] = (vocab_entry){key, klen, (int32_t)json_integer_value(val)};
        if (klen > t->max_len)
            t->max_len = klen;
    }
    qsort(t->v, t->nv, sizeof *t->v, cmp_vocab);
    json_t *added = json_object_get(t->root, "added_tokens");
    t->a = calloc(json_array_size(added) + 1, sizeof *t->a);
    if (!t->a)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory reading %s", where);
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i), *c = json_object_get(a, "content");
        json_t *id = json_object_get(a, "id");
        if (!json_is_string(c) || !json_string_length(c) || !json_is_integer(id) ||
            json_integer_value(id) < 0 || json_integer_value(id) >= VOCAB)
            FAIL(err, LLMRT_ERR_FORMAT, "%s: added_tokens[%zu] needs a content and an id below %d",
                 where, i, VOCAB);
        t->a[t->na++] = (added_token){json_string_value(c), json_string_length(c),
                                      (int32_t)json_integer_value(id),
                                      json_is_true(json_object_get(a, "special"))};
    }
    for (int b = 0; b < 256; b++)
        if (!vocab_find(t, t->byte_char[b], t->byte_char_n[b]))
            FAIL(err, LLMRT_ERR_FORMAT, "%s: byte 0x%02x has no token (not a byte-level BPE)",
                 where, b);
cleanup:
    return st;
}

/* Plain text (no added tokens in it) by greedy longest match over the byte-level vocabulary. */
static llmrt_status encode_plain(const tokenizer *t, const char *s, size_t n, ids *out,
                                 llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    size_t cap = 2 * n + 1;
    char *bl = malloc(cap);
    size_t *end = malloc((n + 1) * sizeof *end); /* end[i]: byte-level offset after byte i-1 */
    if (!bl || !end)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory encoding the text");
    size_t m = 0;
    end[0] = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        memcpy(bl + m, t->byte_char[b], t->byte_char_n[b]);
        m += t->byte_char_n[b];
        end[i + 1] = m;
    }
    for (size_t i = 0; i < n;) {
        size_t best = 0; /* bytes */
        const vocab_entry *hit = NULL;
        for (size_t j = i + 1; j <= n && end[j] - end[i] <= t->max_len; j++) {
            const vocab_entry *v = vocab_find(t, bl + end[i], end[j] - end[i]);
            if (v)
                hit = v, best = j - i;
        }
        if (!hit) /* every byte has a token (checked at load) */
            FAIL(err, LLMRT_ERR_INTERNAL, "no token for byte 0x%02x", (uint8_t)s[i]);
        if (ids_push(out, hit->id))
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory encoding the text");
        i += best;
    }
cleanup:
    free(bl);
    free(end);
    return st;
}

/* Text with added tokens recognised (the longest at each place). A special one (<|im_end|>)
 * is refused unless allow_special. */
static llmrt_status encode(const tokenizer *t, const char *s, size_t n, int allow_special,
                           ids *out, llmrt_error *err)
{
    llmrt_status st;
    size_t from = 0;
    for (size_t i = 0; i < n;) {
        const added_token *hit = NULL;
        for (size_t k = 0; k < t->na; k++)
            if (t->a[k].n <= n - i && memcmp(s + i, t->a[k].s, t->a[k].n) == 0 &&
                (!hit || t->a[k].n > hit->n))
                hit = &t->a[k];
        if (!hit) {
            i++;
            continue;
        }
        if (hit->special && !allow_special)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "mkmodel: says= holds the special token %.*s at byte %zu; the reply "
                              "may hold text and the added tokens <think>, <tool_call>, ... but "
                              "not special ones",
                              (int)hit->n, hit->s, i);
        if ((st = encode_plain(t, s + from, i - from, out, err)))
            return st;
        if (ids_push(out, hit->id))
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory encoding the text");
        i += hit->n;
        from = i;
    }
    return encode_plain(t, s + from, n - from, out, err);
}

static llmrt_status read_file(const char *path, size_t max, char **out, size_t *len,
                              llmrt_error *err)
{
    struct stat sb;
    *out = NULL;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return llmrt_fail(err, LLMRT_ERR_IO, "mkmodel: %s is not a readable file", path);
    if ((uint64_t)sb.st_size > max)
        return llmrt_fail(err, LLMRT_ERR_LIMIT, "mkmodel: %s has %lld bytes, more than the %zu "
                          "expected of it", path, (long long)sb.st_size, max);
    FILE *f = fopen(path, "rb");
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t n = f && buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
    if (f)
        fclose(f);
    if (!buf || n != (size_t)sb.st_size) {
        free(buf);
        return llmrt_fail(err, buf ? LLMRT_ERR_IO : LLMRT_ERR_NOMEM, "mkmodel: cannot read %s", path);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return LLMRT_OK;
}

/* ---- the script: contexts, rules, colours ---- */

typedef struct script {
    int32_t *S;     /* [len] anchor + reply + <|im_end|> */
    int32_t len, A; /* A: anchor tokens; predictions at positions A-1 .. len-2 */
    int32_t k;      /* context length */
    int32_t *tok;   /* [n] the distinct tokens of S, in order of first appearance */
    int32_t n;
    int32_t *rid;   /* [len] index into tok of S[p] */
    int32_t *col;   /* [k * n] colour of each distinct token in each slot (slot 0 unused: the
                       current token is read as itself, from R) */
    int32_t d[K_MAX]; /* colours of slot j; a slot of one colour tells nothing and is not used */
    int32_t off[K_MAX]; /* the residual's dims of slot j start at c0 + off[j] */
    int32_t n_slots;  /* used slots (each is an attention head) */
    int32_t slot[K_MAX]; /* [n_slots] their offsets j */
    int32_t end_rid; /* rid of <|im_end|> */
    int32_t *rule;  /* [len] the rule of prediction position p (-1 before A-1), deduplicated */
    int32_t n_rules;
    int32_t *rule_pos; /* [n_rules] a position of each rule */
} script;

static void script_free(script *s)
{
    free(s->S);
    free(s->tok);
    free(s->rid);
    free(s->col);
    free(s->rule);
    free(s->rule_pos);
    memset(s, 0, sizeof *s);
}

/* Append token id's text to buf[0, used) (C-escaped, truncated with "..."); the new length. */
static size_t token_text(const tokenizer *t, int32_t id, char *buf, size_t cap, size_t used)
{
    const char *str = NULL;
    size_t n = 0;
    int byte_level = 0;
    for (size_t a = 0; a < t->na && !str; a++)
        if (t->a[a].id == id)
            str = t->a[a].s, n = t->a[a].n;
    for (size_t v = 0; v < t->nv && !str; v++)
        if (t->v[v].id == id)
            str = t->v[v].s, n = t->v[v].n, byte_level = 1;
    for (size_t i = 0; str && i < n && used + 8 < cap; i++) {
        unsigned char ch = (unsigned char)str[i];
        if (byte_level) { /* a byte-level character back to its byte */
            int cp = ch;
            if (ch >= 0xC0 && i + 1 < n)
                cp = ((ch & 0x1F) << 6) | ((unsigned char)str[++i] & 0x3F);
            ch = 0;
            for (int b = 0; b < 256; b++) {
                const char *bc = t->byte_char[b];
                int bcp = t->byte_char_n[b] == 1 ? (unsigned char)bc[0]
                                                 : ((bc[0] & 0x1F) << 6) | (bc[1] & 0x3F);
                if (bcp == cp)
                    ch = (unsigned char)b;
            }
        }
        if (ch == '\n')
            used += (size_t)snprintf(buf + used, cap - used, "\\n");
        else if (ch == '"' || ch == '\\')
            used += (size_t)snprintf(buf + used, cap - used, "\\%c", ch);
        else if (ch < 0x20)
            used += (size_t)snprintf(buf + used, cap - used, "\\x%02x", ch);
        else
            buf[used++] = (char)ch, buf[used] = 0;
    }
    if (used + 8 >= cap && used + 4 <= cap)
        memcpy(buf + cap - 4, "...", 4), used = cap - 1;
    return used;
}

/* The smallest k that tells every two predictions with different next tokens apart: the
 * largest, over such pairs, of 1 + the nearest offset where both know a token and differ. */
static llmrt_status choose_k(script *s, const tokenizer *t, llmrt_error *err)
{
    int32_t lo = s->A - 1, hi = s->len - 2;
    s->k = 1;
    for (int32_t p = lo; p <= hi; p++)
        for (int32_t q = p + 1; q <= hi; q++) {
            if (s->S[p + 1] == s->S[q + 1])
                continue;
            int32_t j = 0;
            while (j < K_MAX && p - j >= 0 && s->S[p - j] == s->S[q - j])
                j++;
            if (j < K_MAX && p - j >= 0) {
                if (j + 1 > s->k)
                    s->k = j + 1;
                continue;
            }
            /* name the span */
            char span[200] = "";
            size_t used = 0;
            for (int32_t x = q - K_MAX + 1; x <= q; x++)
                if (x >= 0)
                    used = token_text(t, s->S[x], span, sizeof span, used);
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "mkmodel: tiny-chat cannot script this text: reply tokens %d and "
                              "%d both follow \"%s\" (%d tokens) but differ; the model tells "
                              "places apart by their last %d tokens. Vary the repeated part",
                              (int)(p - s->A + 2), (int)(q - s->A + 2), span, K_MAX, K_MAX);
        }
    return LLMRT_OK;
}

/* Rules: one per distinct (context, next token); a context is the known tokens within k. */
static llmrt_status make_rules(script *s, llmrt_error *err)
{
    s->rule = malloc((size_t)s->len * sizeof *s->rule);
    s->rule_pos = malloc((size_t)s->len * sizeof *s->rule_pos);
    if (!s->rule || !s->rule_pos)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    for (int32_t p = 0; p < s->len; p++)
        s->rule[p] = -1;
    for (int32_t p = s->A - 1; p <= s->len - 2; p++) {
        int32_t found = -1;
        for (int32_t r = 0; r < s->n_rules && found < 0; r++) {
            int32_t q = s->rule_pos[r], j = 0;
            if (s->S[q + 1] != s->S[p + 1])
                continue;
            for (; j < s->k; j++) {
                int kp = p - j >= 0, kq = q - j >= 0;
                if (kp != kq || (kp && s->S[p - j] != s->S[q - j]))
                    break;
            }
            if (j == s->k)
                found = r;
        }
        if (found < 0) {
            found = s->n_rules++;
            s->rule_pos[found] = p;
        }
        s->rule[p] = found;
    }
    return LLMRT_OK;
}

/* Colours: two predictions with different next tokens and the same current token must differ
 * in the colour of a token both know at some offset j >= 1 (the current token is read as
 * itself). One colouring per offset. Greedy: every unmet pair adds an edge between its two
 * tokens at the nearest offset where they differ; colour each offset's graph (the smallest
 * colour no neighbour has); repeat until every pair is met. */
typedef struct edge {
    int32_t j, a, b;
} edge;

static llmrt_status colour(script *s, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int32_t n = s->n, k = s->k, lo = s->A - 1, hi = s->len - 2;
    edge *e = NULL;
    size_t ne = 0, cap = 0;
    s->col = calloc((size_t)k * (size_t)n, sizeof *s->col);
    if (!s->col)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory colouring the script");
    for (size_t round = 0;; round++) {
        for (int32_t j = 0; j < k; j++)
            s->d[j] = 1;
        memset(s->col, 0, (size_t)k * (size_t)n * sizeof *s->col);
        for (int32_t a = 0; a < n; a++)
            for (int32_t j = 1; j < k; j++) {
                int32_t c = 0;
                for (int again = 1; again;) {
                    again = 0;
                    for (size_t x = 0; x < ne; x++) {
                        int32_t other = e[x].a == a ? e[x].b : e[x].b == a ? e[x].a : -1;
                        if (e[x].j == j && other >= 0 && other < a &&
                            s->col[(size_t)j * n + other] == c) {
                            c++;
                            again = 1;
                        }
                    }
                }
                s->col[(size_t)j * n + a] = c;
                if (c + 1 > s->d[j])
                    s->d[j] = c + 1;
            }
        int unmet = 0;
        for (int32_t p = lo; p <= hi; p++)
            for (int32_t q = p + 1; q <= hi; q++) {
                if (s->S[p + 1] == s->S[q + 1] || s->S[p] != s->S[q])
                    continue;
                int32_t first = -1;
                int ok = 0;
                for (int32_t j = 1; j < k && p - j >= 0 && !ok; j++) {
                    int32_t a = s->rid[p - j], b = s->rid[q - j];
                    if (a == b)
                        continue;
                    if (s->col[(size_t)j * n + a] != s->col[(size_t)j * n + b])
                        ok = 1;
                    else if (first < 0)
                        first = j;
                }
                if (ok)
                    continue;
                if (first < 0)
                    FAIL(err, LLMRT_ERR_INTERNAL, "tiny-chat: contexts at %d and %d are equal",
                         (int)p, (int)q);
                if (ne == cap) {
                    cap = cap ? 2 * cap : 64;
                    edge *g = realloc(e, cap * sizeof *g);
                    if (!g)
                        FAIL(err, LLMRT_ERR_NOMEM, "out of memory colouring the script");
                    e = g;
                }
                e[ne++] = (edge){first, s->rid[p - first], s->rid[q - first]};
                unmet = 1;
            }
        if (!unmet)
            break;
        if (round > (size_t)n * (size_t)n * (size_t)k)
            FAIL(err, LLMRT_ERR_INTERNAL, "tiny-chat: colouring did not settle");
    }
    s->n_slots = 0;
    int32_t at = 0;
    for (int32_t j = 1; j < k; j++)
        if (s->d[j] > 1) {
            s->slot[s->n_slots++] = j;
            s->off[j] = at;
            at += s->d[j];
        }
cleanup:
    free(e);
    return st;
}

/* ---- attention: the rotary pattern and its bound ---- */

typedef struct attn_design {
    int32_t head_dim, n_active; /* rotary pairs 0 .. n_active-1 carry the pattern */
    float inv_freq[256];
    double norm_w;              /* q_norm and k_norm weight on the active dims */
    double leak;                /* bound of the weight off the peak, any head */
} attn_design;

/* The value is the attended token's one-hot among the n tokens of S: head_dim >= n. */
static llmrt_status design_attention(attn_design *a, int32_t n, int32_t k, llmrt_error *err)
{
    a->head_dim = n > HEAD_DIM_MIN ? n + (n & 1) : HEAD_DIM_MIN;
    if (a->head_dim > 512)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "mkmodel: says= has %d distinct tokens; tiny-chat takes at most 512",
                          (int)n);
    int32_t half = a->head_dim / 2;
    a->n_active = half / 2;
    for (int32_t i = 0; i < half; i++) /* as the backends compute it: in float */
        a->inv_freq[i] = 1.0f / powf((float)ROPE_THETA, (float)(2 * i) / (float)a->head_dim);
    /* f(Δ') = mean cos(θ_i Δ'): the score off the peak is ATTN_SCORE · f; a key of zero (a
     * position the layer sees as 0) scores 0, so f counts at least 0 */
    double leak = 0;
    for (int32_t dd = -(k - 1); dd < MAX_POSITION; dd++) {
        if (dd == 0)
            continue;
        double f = 0;
        for (int32_t i = 0; i < a->n_active; i++)
            f += cos((double)a->inv_freq[i] * dd);
        f /= a->n_active;
        if (f < 0)
            f = 0;
        leak += exp(ATTN_SCORE * (f - 1.0));
    }
    a->leak = leak;
    if (leak > ATTN_LEAK_MAX)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL,
                          "tiny-chat: the attention pattern leaks %.2g of its weight (at most "
                          "%g)", leak, ATTN_LEAK_MAX);
    /* score = sqrt(head_dim) · w_q · w_k at the peak */
    a->norm_w = sqrt(ATTN_SCORE / sqrt((double)a->head_dim));
    return LLMRT_OK;
}

/* ---- tensors ---- */

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xFFu, m = x & 0x7FFFFFu;
    if (e == 0xFF)
        return (uint16_t)(sign | 0x7C00u | (m ? 0x200u : 0));
    int32_t ee = (int32_t)e - 127 + 15;
    if (ee >= 31)
        return (uint16_t)(sign | 0x7C00u);
    if (ee <= 0) {
        if (ee < -10)
            return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - ee);
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)ee << 10) | (m >> 13), rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7FFFu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* A tensor of `n` floats, converted to dtype and handed to the writer. */
static llmrt_status add_data(const llmrt_ckpt_writer *w, const char *name, llmrt_dtype dt,
                             int64_t d0, int64_t d1, const float *v, llmrt_error *err)
{
    size_t n = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    size_t es = dt == LLMRT_DTYPE_F32 ? 4 : 2;
    void *buf = malloc(n * es);
    if (!buf)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for %s", name);
    for (size_t i = 0; i < n; i++) {
        if (dt == LLMRT_DTYPE_F32)
            ((float *)buf)[i] = v[i];
        else if (dt == LLMRT_DTYPE_F16)
            ((uint16_t *)buf)[i] = f32_to_f16(v[i]);
        else
            ((uint16_t *)buf)[i] = f32_to_bf16(v[i]);
    }
    int64_t shape[2] = {d0, d1};
    llmrt_fill fill = {.kind = LLMRT_FILL_DATA, .data = buf, .bytes = n * es};
    llmrt_status st = w->add_tensor(w->ctx, name, dt, d1 > 0 ? 2 : 1, shape, &fill, err);
    free(buf);
    return st;
}

/* The residual's layout. */
typedef struct layout {
    int32_t H, I, n_heads, hd;
    int32_t r0;  /* R starts here (n dims) */
    int32_t c0;  /* C_0 starts here (k slots of d dims) */
    double c;    /* the constant */
    double G;    /* matched-filter gain */
    double kappa_nom; /* the post-attention norm's scale when every context token is known
                         (the least it can be: unknown ones add at most as much) */
} layout;

/* The residual's dim of colour c in slot j (j >= 1 and used). */
static int32_t cdim(const layout *L, const script *s, int32_t j, int32_t c)
{
    return L->c0 + s->off[j] + c;
}

static int32_t colour_of(const script *s, int32_t j, int32_t rid)
{
    return s->col[(size_t)j * s->n + rid];
}

static llmrt_status add_tensors(const script *s, const attn_design *a, const layout *L,
                                llmrt_dtype dt, const llmrt_ckpt_writer *w, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int32_t H = L->H, I = L->I, hd = a->head_dim, nh = L->n_heads, half = hd / 2;
    float *buf = NULL;
    size_t big = (size_t)VOCAB * (size_t)H;
    size_t need = (size_t)I * H > big ? (size_t)I * H : big;
    if ((size_t)nh * hd * H > need)
        need = (size_t)nh * hd * H;
    buf = calloc(need, sizeof *buf);
    if (!buf)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory for the tiny-chat tensors");
#define ZERO(count) memset(buf, 0, (size_t)(count) * sizeof *buf)

    /* embed_tokens [V, H]: c·e0 for every token; S's tokens add their one-hot in R */
    ZERO(big);
    for (int32_t t = 0; t < VOCAB; t++)
        buf[(size_t)t * H] = (float)L->c;
    for (int32_t r = 0; r < s->n; r++)
        buf[(size_t)s->tok[r] * H + L->r0 + r] = 1.0f;
    TRY_ADD(add_data(w, "model.embed_tokens.weight", dt, VOCAB, H, buf, err));

    /* q_proj [nh·hd, H]: head h (slot offset j) from the constant, pairs at angle -j·θ_i */
    ZERO((size_t)nh * hd * H);
    for (int32_t h = 0; h < s->n_slots; h++)
        for (int32_t i = 0; i < a->n_active; i++) {
            double ang = -(double)s->slot[h] * (double)a->inv_freq[i];
            buf[(size_t)(h * hd + i) * H] = (float)cos(ang);
            buf[(size_t)(h * hd + i + half) * H] = (float)sin(ang);
        }
    TRY_ADD(add_data(w, "model.layers.0.self_attn.q_proj.weight", dt, (int64_t)nh * hd, H, buf, err));
    /* k_proj [hd, H]: pairs (1, 0) */
    ZERO((size_t)hd * H);
    for (int32_t i = 0; i < a->n_active; i++)
        buf[(size_t)i * H] = 1.0f;
    TRY_ADD(add_data(w, "model.layers.0.self_attn.k_proj.weight", dt, hd, H, buf, err));
    /* v_proj [hd, H]: the position's one-hot (R), undoing the input norm's scale for a token
     * of S (|x| = sqrt(c² + 1)) */
    ZERO((size_t)hd * H);
    double vs = sqrt(L->c * L->c + 1.0) / sqrt((double)H);
    for (int32_t r = 0; r < s->n; r++)
        buf[(size_t)r * H + L->r0 + r] = (float)vs;
    TRY_ADD(add_data(w, "model.layers.0.self_attn.v_proj.weight", dt, hd, H, buf, err));
    /* o_proj [H, nh·hd]: head h's one-hot into slot j's colour of that token */
    ZERO((size_t)H * nh * hd);
    for (int32_t h = 0; h < s->n_slots; h++)
        for (int32_t r = 0; r < s->n; r++) {
            int32_t j = s->slot[h];
            buf[(size_t)cdim(L, s, j, colour_of(s, j, r)) * nh * hd + (size_t)h * hd + r] = 1.0f;
        }
    TRY_ADD(add_data(w, "model.layers.0.self_attn.o_proj.weight", dt, H, (int64_t)nh * hd, buf, err));
    /* q_norm, k_norm [hd] */
    for (int32_t i = 0; i < hd; i++)
        buf[i] = 1.0f;
    for (int32_t i = 0; i < a->n_active; i++)
        buf[i] = buf[i + half] = (float)a->norm_w;
    TRY_ADD(add_data(w, "model.layers.0.self_attn.q_norm.weight", dt, hd, 0, buf, err));
    TRY_ADD(add_data(w, "model.layers.0.self_attn.k_norm.weight", dt, hd, 0, buf, err));

    /* MLP units: rules [0, n_rules), cancels [n_rules, n_rules + n), the default after them.
     * The post-attention norm scales x by kappa: the constant reads kappa·c. */
    const int32_t u_cancel = s->n_rules, u_default = s->n_rules + s->n;
    const double c = L->c, G = L->G, gd = 12.0;
    /* gate_proj [I, H] */
    ZERO((size_t)I * H);
    for (int32_t r = 0; r < s->n_rules; r++) {
        int32_t p = s->rule_pos[r], n_cons = 1;
        float *row = buf + (size_t)r * H;
        row[L->r0 + s->rid[p]] = (float)G; /* the current token, as itself */
        for (int32_t h = 0; h < s->n_slots; h++) {
            int32_t j = s->slot[h];
            if (p - j < 0)
                continue; /* before the anchor: the prompt's, unknown */
            row[cdim(L, s, j, colour_of(s, j, s->rid[p - j]))] = (float)G;
            n_cons++;
        }
        row[0] = (float)(-G * (n_cons - 0.5) / c);
    }
    for (int32_t t = 0; t < s->n; t++) {
        float *row = buf + (size_t)(u_cancel + t) * H;
        row[L->r0 + t] = (float)G;
        row[0] = (float)(-G * 0.5 / c);
    }
    buf[(size_t)u_default * H] = (float)(gd / c);
    TRY_ADD(add_data(w, "model.layers.0.mlp.gate_proj.weight", dt, I, H, buf, err));
    /* up_proj [I, H]: the constant, for every unit */
    ZERO((size_t)I * H);
    for (int32_t u = 0; u <= u_default; u++)
        buf[(size_t)u * H] = (float)(1.0 / c);
    TRY_ADD(add_data(w, "model.layers.0.mlp.up_proj.weight", dt, I, H, buf, err));
    /* down_proj [H, I]: a unit's output at the nominal scale is SiLU(g)·kappa; normalise it */
    ZERO((size_t)H * I);
    double kn = L->kappa_nom;
    double on = (0.5 * G * kn) / (1.0 + exp(-0.5 * G * kn)) * kn; /* SiLU(½Gκ)·κ */
    double dflt = (gd * kn) / (1.0 + exp(-gd * kn)) * kn;
    for (int32_t r = 0; r < s->n_rules; r++)
        buf[(size_t)(L->r0 + s->rid[s->rule_pos[r] + 1]) * I + r] = (float)(1.0 / on);
    for (int32_t t = 0; t < s->n; t++)
        buf[(size_t)(L->r0 + t) * I + u_cancel + t] = (float)(-1.0 / on);
    buf[(size_t)(L->r0 + s->end_rid) * I + u_default] = (float)(0.25 / dflt);
    TRY_ADD(add_data(w, "model.layers.0.mlp.down_proj.weight", dt, H, I, buf, err));

    /* norms [H]: the layer's are 1; the final one reads R only */
    for (int32_t i = 0; i < H; i++)
        buf[i] = 1.0f;
    TRY_ADD(add_data(w, "model.layers.0.input_layernorm.weight", dt, H, 0, buf, err));
    TRY_ADD(add_data(w, "model.layers.0.post_attention_layernorm.weight", dt, H, 0, buf, err));
    for (int32_t i = 0; i < H; i++)
        buf[i] = i >= L->r0 && i < L->r0 + s->n ? 16.0f : 0.0f;
    TRY_ADD(add_data(w, "model.norm.weight", dt, H, 0, buf, err));
#undef ZERO
cleanup:
    free(buf);
    return st;
}

/* ---- the preset ---- */

static const char *opt(const llmrt_section *o, const char *key)
{
    return llmrt_section_get(o, key);
}

llmrt_status qwen3_script_build(const llmrt_synth_request *req, const llmrt_ckpt_writer *w,
                                qwen3_config *cfg, llmrt_dtype *dtype, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    tokenizer t;
    script s;
    ids x = {0};
    char *tok_text = NULL, *cfg_text = NULL, path[4200];
    size_t tok_len = 0, cfg_len = 0;
    attn_design a;
    layout L;
    memset(&t, 0, sizeof t);
    memset(&s, 0, sizeof s);
    memset(&a, 0, sizeof a);
    memset(&L, 0, sizeof L);

    const llmrt_section *o = req->model_opts;
    for (size_t i = 0; o && i < o->n; i++)
        if (strcmp(o->keys[i], "says") != 0 && strcmp(o->keys[i], "tokenizer") != 0)
            FAIL(err, LLMRT_ERR_INVALID_ARG,
                 "mkmodel: unknown tiny-chat option '%s' (it takes says=TEXT and tokenizer=DIR)",
                 o->keys[i]);
    const char *says = opt(o, "says"), *dir = opt(o, "tokenizer");
    if (!says || !dir)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "mkmodel: the tiny-chat preset needs --model-opt says=TEXT (the reply) and "
             "--model-opt tokenizer=DIR (a folder with Qwen3's tokenizer.json and "
             "tokenizer_config.json: tools/fetch-qwen3-tokenizer.sh prints one)");
    if (strlen(says) > MAX_SAYS_BYTES)
        FAIL(err, LLMRT_ERR_LIMIT, "mkmodel: says= has %zu bytes (at most %d)", strlen(says),
             MAX_SAYS_BYTES);
    if (req->quant)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "mkmodel: the tiny-chat preset is dense (no --quant)");
    if (req->tie == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "mkmodel: the tiny-chat preset ties lm_head to the embedding (no --no-tie)");
    *dtype = req->dtype != LLMRT_DTYPE_INVALID ? req->dtype : LLMRT_DTYPE_F16;

    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    TRY_ADD(read_file(path, MAX_TOKENIZER_BYTES, &tok_text, &tok_len, err));
    TRY_ADD(tok_load(&t, tok_text, tok_len, path, err));
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    TRY_ADD(read_file(path, MAX_TOKENIZER_BYTES, &cfg_text, &cfg_len, err));

    /* S = anchor + reply + <|im_end|> */
    TRY_ADD(encode(&t, ANCHOR, strlen(ANCHOR), 1, &x, err));
    s.A = (int32_t)x.n;
    TRY_ADD(encode(&t, says, strlen(says), 0, &x, err));
    if (x.n - (size_t)s.A > MAX_REPLY_TOKENS)
        FAIL(err, LLMRT_ERR_LIMIT, "mkmodel: says= is %zu tokens (at most %d)", x.n - (size_t)s.A,
             MAX_REPLY_TOKENS);
    TRY_ADD(encode(&t, END_TOKEN, strlen(END_TOKEN), 1, &x, err));
    s.S = x.p;
    s.len = (int32_t)x.n;
    x.p = NULL;

    /* the distinct tokens */
    s.tok = malloc((size_t)s.len * sizeof *s.tok);
    s.rid = malloc((size_t)s.len * sizeof *s.rid);
    if (!s.tok || !s.rid)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory");
    for (int32_t p = 0; p < s.len; p++) {
        int32_t r = 0;
        while (r < s.n && s.tok[r] != s.S[p])
            r++;
        if (r == s.n)
            s.tok[s.n++] = s.S[p];
        s.rid[p] = r;
    }
    s.end_rid = s.rid[s.len - 1];

    TRY_ADD(choose_k(&s, &t, err));
    TRY_ADD(make_rules(&s, err));
    TRY_ADD(colour(&s, err));
    TRY_ADD(design_attention(&a, s.n, s.k, err));

    int32_t slot_dims = 0;
    for (int32_t h = 0; h < s.n_slots; h++)
        slot_dims += s.d[s.slot[h]];
    L.n_heads = s.n_slots > 0 ? s.n_slots : 1; /* a config needs a head; a spare one is 0 */
    L.hd = a.head_dim;
    L.r0 = 1;
    L.c0 = 1 + s.n;
    L.H = (1 + s.n + slot_dims + 7) / 8 * 8;
    L.I = (s.n_rules + s.n + 1 + 7) / 8 * 8;
    /* the post-attention residual: c² + 1 (R) + one per slot (a one-hot colour, or at most
     * that for a prompt token before the anchor) */
    L.c = sqrt(8.0 * (s.n_slots + 1));
    L.kappa_nom = sqrt((double)L.H) / sqrt(L.c * L.c + 1.0 + s.n_slots);
    L.G = 24.0 / L.kappa_nom;
    TRY_ADD(add_tensors(&s, &a, &L, *dtype, w, err));
    TRY_ADD(w->add_json(w->ctx, "tokenizer.json", tok_text, err));
    TRY_ADD(w->add_json(w->ctx, "tokenizer_config.json", cfg_text, err));

    memset(cfg, 0, sizeof *cfg);
    cfg->vocab = VOCAB;
    cfg->hidden = L.H;
    cfg->intermediate = L.I;
    cfg->n_layers = 1;
    cfg->n_heads = L.n_heads;
    cfg->n_kv_heads = 1;
    cfg->head_dim = L.hd;
    cfg->max_position = MAX_POSITION;
    cfg->eps = 1e-6;
    cfg->rope_theta = ROPE_THETA;
    cfg->tie = 1;
cleanup:
    free(x.p);
    free(tok_text);
    free(cfg_text);
    tok_free(&t);
    script_free(&s);
    return st;
}
