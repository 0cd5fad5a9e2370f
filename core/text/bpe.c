/* bpe.c — BPE vocabulary, ranked merges and the O(n log n) merge loop (see bpe.h).
 *
 * Tables are open-addressed with linear probing: strings → ids (vocab) and
 * (left id, right id) → (rank, merged id) (merges). After llmrt_bpe_finish the model is
 * read-only except for the word cache, whose 16 shards each have their own mutex. */
#include "bpe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define CACHE_SHARDS 16
#define CACHE_SLOTS 1024    /* per shard: 16k cached words at most */
#define CACHE_MAX_WORD 128  /* longer words are not cached */
#define CHAR_TABLE 0x400    /* direct id lookup for code points below this */
#define EMPTY_KEY UINT64_MAX

typedef struct vocab_entry {
    uint32_t off, len; /* string in b->bytes */
    int32_t id;
    uint32_t hash;
} vocab_entry;

typedef struct merge_slot {
    uint64_t key; /* left id << 32 | right id; EMPTY_KEY when free */
    int32_t rank, new_id;
} merge_slot;

typedef struct cache_slot {
    uint64_t hash;
    uint32_t klen, n;
    int32_t *blob; /* n ids, then klen key bytes */
} cache_slot;

typedef struct cache_shard {
    pthread_mutex_t mu;
    cache_slot slot[CACHE_SLOTS];
} cache_shard;

struct llmrt_bpe_heap_entry {
    int32_t rank, pos, new_id;
};

struct llmrt_bpe {
    char *bytes; /* all vocab strings, back to back */
    size_t bytes_len, bytes_cap;
    vocab_entry *ent;
    size_t n_ent, ent_cap;
    int32_t *vslot; /* [vmask + 1] index into ent, -1 when free */
    size_t vmask;
    merge_slot *mslot; /* [mmask + 1] */
    size_t mmask, n_merges;
    int32_t vocab_size;
    int32_t *id_ent; /* [vocab_size] index into ent, -1 for holes */
    int32_t char_id[CHAR_TABLE];
    int32_t byte_fb[256]; /* id of "<0xXX>" or -1 */
    llmrt_bpe_options opt;
    cache_shard *cache; /* [CACHE_SHARDS], NULL when caching is off */
};

static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_pair(uint64_t key)
{
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 31);
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n)
        p <<= 1;
    return p;
}

llmrt_status llmrt_bpe_new(size_t n_vocab, size_t vocab_bytes, size_t n_merges,
                           llmrt_bpe **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    *out = NULL;
    llmrt_bpe *b = calloc(1, sizeof *b);
    TRY_ALLOC(err, b, "BPE model");
    b->bytes_cap = vocab_bytes ? vocab_bytes : 64;
    b->bytes = malloc(b->bytes_cap);
    TRY_ALLOC(err, b->bytes, "BPE vocabulary strings");
    b->ent_cap = n_vocab ? n_vocab : 16;
    b->ent = malloc(b->ent_cap * sizeof *b->ent);
    TRY_ALLOC(err, b->ent, "BPE vocabulary");
    size_t vs = pow2_at_least(2 * b->ent_cap);
    b->vslot = malloc(vs * sizeof *b->vslot);
    TRY_ALLOC(err, b->vslot, "BPE vocabulary index");
    memset(b->vslot, 0xff, vs * sizeof *b->vslot);
    b->vmask = vs - 1;
    size_t ms = pow2_at_least(2 * (n_merges ? n_merges : 8));
    b->mslot = malloc(ms * sizeof *b->mslot);
    TRY_ALLOC(err, b->mslot, "BPE merge table");
    for (size_t i = 0; i < ms; i++)
        b->mslot[i].key = EMPTY_KEY;
    b->mmask = ms - 1;
    *out = b;
    b = NULL;
cleanup:
    llmrt_bpe_free(b);
    return st;
}

void llmrt_bpe_free(llmrt_bpe *b)
{
    if (!b)
        return;
    if (b->cache) {
        for (int s = 0; s < CACHE_SHARDS; s++) {
            for (int i = 0; i < CACHE_SLOTS; i++)
                free(b->cache[s].slot[i].blob);
            pthread_mutex_destroy(&b->cache[s].mu);
        }
        free(b->cache);
    }
    free(b->bytes);
    free(b->ent);
    free(b->vslot);
    free(b->mslot);
    free(b->id_ent);
    free(b);
}

static int32_t vocab_find(const llmrt_bpe *b, const char *s, size_t len, uint32_t h)
{
    for (size_t i = h & b->vmask;; i = (i + 1) & b->vmask) {
        int32_t e = b->vslot[i];
        if (e < 0)
            return -1;
        const vocab_entry *v = &b->ent[e];
        if (v->hash == h && v->len == len && memcmp(b->bytes + v->off, s, len) == 0)
            return e;
    }
}

int32_t llmrt_bpe_lookup(const llmrt_bpe *b, const char *s, size_t len)
{
    int32_t e = vocab_find(b, s, len, (uint32_t)hash_bytes(s, len));
    return e < 0 ? -1 : b->ent[e].id;
}

static int vocab_rehash(llmrt_bpe *b)
{
    size_t vs = (b->vmask + 1) * 2;
    int32_t *slots = malloc(vs * sizeof *slots);
    if (!slots)
        return -1;
    memset(slots, 0xff, vs * sizeof *slots);
    for (size_t e = 0; e < b->n_ent; e++) {
        size_t i = b->ent[e].hash & (vs - 1);
        while (slots[i] >= 0)
            i = (i + 1) & (vs - 1);
        slots[i] = (int32_t)e;
    }
    free(b->vslot);
    b->vslot = slots;
    b->vmask = vs - 1;
    return 0;
}

llmrt_status llmrt_bpe_add_token(llmrt_bpe *b, const char *s, size_t len, int32_t id,
                                 llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (id < 0)
        FAIL(err, LLMRT_ERR_FORMAT, "vocab entry \"%.*s\" has a negative id %d", (int)len, s, id);
    if (len == 0 || len > UINT32_MAX / 2)
        FAIL(err, LLMRT_ERR_FORMAT, "vocab entry with id %d has an empty or huge string", id);
    uint32_t h = (uint32_t)hash_bytes(s, len);
    if (vocab_find(b, s, len, h) >= 0)
        FAIL(err, LLMRT_ERR_FORMAT, "vocab entry \"%.*s\" appears twice", (int)len, s);
    if (b->n_ent == b->ent_cap) {
        vocab_entry *g = realloc(b->ent, 2 * b->ent_cap * sizeof *g);
        TRY_ALLOC(err, g, "BPE vocabulary");
        b->ent = g;
        b->ent_cap *= 2;
    }
    if (2 * (b->n_ent + 1) > b->vmask + 1 && vocab_rehash(b) != 0)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory growing the BPE vocabulary index");
    if (b->bytes_len + len > b->bytes_cap) {
        size_t cap = b->bytes_cap;
        while (cap < b->bytes_len + len)
            cap *= 2;
        char *g = realloc(b->bytes, cap);
        TRY_ALLOC(err, g, "BPE vocabulary strings");
        b->bytes = g;
        b->bytes_cap = cap;
    }
    memcpy(b->bytes + b->bytes_len, s, len);
    b->ent[b->n_ent] = (vocab_entry){(uint32_t)b->bytes_len, (uint32_t)len, id, h};
    b->bytes_len += len;
    size_t i = h & b->vmask;
    while (b->vslot[i] >= 0)
        i = (i + 1) & b->vmask;
    b->vslot[i] = (int32_t)b->n_ent++;
    if (id >= b->vocab_size)
        b->vocab_size = id + 1;
cleanup:
    return st;
}

static merge_slot *merge_find(const llmrt_bpe *b, uint64_t key)
{
    for (size_t i = hash_pair(key) & b->mmask;; i = (i + 1) & b->mmask) {
        merge_slot *m = &b->mslot[i];
        if (m->key == key || m->key == EMPTY_KEY)
            return m;
    }
}

static int merge_rehash(llmrt_bpe *b)
{
    size_t ms = (b->mmask + 1) * 2;
    merge_slot *slots = malloc(ms * sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < ms; i++)
        slots[i].key = EMPTY_KEY;
    for (size_t j = 0; j <= b->mmask; j++) {
        if (b->mslot[j].key == EMPTY_KEY)
            continue;
        size_t i = hash_pair(b->mslot[j].key) & (ms - 1);
        while (slots[i].key != EMPTY_KEY)
            i = (i + 1) & (ms - 1);
        slots[i] = b->mslot[j];
    }
    free(b->mslot);
    b->mslot = slots;
    b->mmask = ms - 1;
    return 0;
}

llmrt_status llmrt_bpe_add_merge(llmrt_bpe *b, const char *a, size_t alen, const char *bb,
                                 size_t blen, int32_t rank, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char stack[256], *joined = NULL;
    int32_t ia = llmrt_bpe_lookup(b, a, alen);
    if (ia < 0)
        FAIL(err, LLMRT_ERR_FORMAT, "merge %d (\"%.*s\" + \"%.*s\") names \"%.*s\", which is not in the vocab",
             rank, (int)alen, a, (int)blen, bb, (int)alen, a);
    int32_t ib = llmrt_bpe_lookup(b, bb, blen);
    if (ib < 0)
        FAIL(err, LLMRT_ERR_FORMAT, "merge %d (\"%.*s\" + \"%.*s\") names \"%.*s\", which is not in the vocab",
             rank, (int)alen, a, (int)blen, bb, (int)blen, bb);
    joined = alen + blen <= sizeof stack ? stack : malloc(alen + blen);
    TRY_ALLOC(err, joined, "merge string");
    memcpy(joined, a, alen);
    memcpy(joined + alen, bb, blen);
    int32_t inew = llmrt_bpe_lookup(b, joined, alen + blen);
    if (inew < 0)
        FAIL(err, LLMRT_ERR_FORMAT, "merge %d (\"%.*s\" + \"%.*s\"): the merged token \"%.*s%.*s\" is not in the vocab",
             rank, (int)alen, a, (int)blen, bb, (int)alen, a, (int)blen, bb);
    if (2 * (b->n_merges + 1) > b->mmask + 1 && merge_rehash(b) != 0)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory growing the BPE merge table");
    uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
    merge_slot *m = merge_find(b, key);
    if (m->key == EMPTY_KEY)
        b->n_merges++;
    *m = (merge_slot){key, rank, inew};
cleanup:
    if (joined != stack)
        free(joined);
    return st;
}

static const merge_slot *merge_get(const llmrt_bpe *b, int32_t x, int32_t y)
{
    const merge_slot *m = merge_find(b, (uint64_t)(uint32_t)x << 32 | (uint32_t)y);
    return m->key == EMPTY_KEY ? NULL : m;
}

llmrt_status llmrt_bpe_finish(llmrt_bpe *b, const llmrt_bpe_options *opt, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    b->opt = *opt;
    free(b->id_ent);
    b->id_ent = malloc((size_t)(b->vocab_size ? b->vocab_size : 1) * sizeof *b->id_ent);
    TRY_ALLOC(err, b->id_ent, "BPE id table");
    for (int32_t i = 0; i < b->vocab_size; i++)
        b->id_ent[i] = -1;
    for (size_t e = 0; e < b->n_ent; e++) {
        if (b->id_ent[b->ent[e].id] >= 0) {
            const vocab_entry *o = &b->ent[b->id_ent[b->ent[e].id]], *v = &b->ent[e];
            FAIL(err, LLMRT_ERR_FORMAT, "vocab entries \"%.*s\" and \"%.*s\" share id %d",
                 (int)o->len, b->bytes + o->off, (int)v->len, b->bytes + v->off, v->id);
        }
        b->id_ent[b->ent[e].id] = (int32_t)e;
    }
    for (int32_t cp = 0; cp < CHAR_TABLE; cp++) {
        char u[3];
        size_t n;
        if (cp < 0x80) {
            u[0] = (char)cp;
            n = 1;
        } else {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
            n = 2;
        }
        b->char_id[cp] = llmrt_bpe_lookup(b, u, n);
    }
    for (int x = 0; x < 256; x++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", x);
        b->byte_fb[x] = llmrt_bpe_lookup(b, name, 6);
    }
    if (opt->cache && !b->cache) {
        b->cache = calloc(CACHE_SHARDS, sizeof *b->cache);
        TRY_ALLOC(err, b->cache, "BPE cache");
        for (int s = 0; s < CACHE_SHARDS; s++)
            pthread_mutex_init(&b->cache[s].mu, NULL);
    }
cleanup:
    return st;
}

int32_t llmrt_bpe_vocab_size(const llmrt_bpe *b) { return b->vocab_size; }
size_t llmrt_bpe_merge_count(const llmrt_bpe *b) { return b->n_merges; }

const char *llmrt_bpe_token(const llmrt_bpe *b, int32_t id, size_t *len)
{
    if (id < 0 || id >= b->vocab_size || !b->id_ent || b->id_ent[id] < 0)
        return NULL;
    const vocab_entry *v = &b->ent[b->id_ent[id]];
    *len = v->len;
    return b->bytes + v->off;
}

void llmrt_bpe_scratch_free(llmrt_bpe_scratch *s)
{
    free(s->sym);
    free(s->prev);
    free(s->next);
    free(s->heap);
    memset(s, 0, sizeof *s);
}

static int scratch_reserve(llmrt_bpe_scratch *s, size_t n)
{
    if (n > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < n)
            cap *= 2;
        int32_t *a = realloc(s->sym, cap * sizeof *a);
        if (a)
            s->sym = a;
        int32_t *p = realloc(s->prev, cap * sizeof *p);
        if (p)
            s->prev = p;
        int32_t *q = realloc(s->next, cap * sizeof *q);
        if (q)
            s->next = q;
        if (!a || !p || !q)
            return -1;
        s->cap = cap;
    }
    if (3 * n + 1 > s->heap_cap) {
        size_t cap = 3 * s->cap + 1;
        struct llmrt_bpe_heap_entry *h = realloc(s->heap, cap * sizeof *h);
        if (!h)
            return -1;
        s->heap = h;
        s->heap_cap = cap;
    }
    return 0;
}

static int push_ids(int32_t **ids, size_t *n, size_t *cap, const int32_t *src, size_t k)
{
    if (*n + k > *cap) {
        size_t c = *cap ? *cap : 64;
        while (c < *n + k)
            c *= 2;
        int32_t *g = realloc(*ids, c * sizeof *g);
        if (!g)
            return -1;
        *ids = g;
        *cap = c;
    }
    memcpy(*ids + *n, src, k * sizeof *src);
    *n += k;
    return 0;
}

/* Min-heap on (rank, pos). */
static int heap_less(const struct llmrt_bpe_heap_entry *a, const struct llmrt_bpe_heap_entry *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct llmrt_bpe_heap_entry *h, size_t *n, struct llmrt_bpe_heap_entry e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static struct llmrt_bpe_heap_entry heap_pop(struct llmrt_bpe_heap_entry *h, size_t *n)
{
    struct llmrt_bpe_heap_entry top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && heap_less(&h[c + 1], &h[c]))
            c++;
        if (!heap_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (m > 0)
        h[i] = last;
    return top;
}

static int utf8_len(uint8_t c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* Word → initial symbols (one per character, or per byte with byte_fallback). */
static size_t initial_symbols(const llmrt_bpe *b, const uint8_t *w, size_t len, int32_t *sym)
{
    size_t m = 0;
    int prev_unk = 0;
    for (size_t i = 0; i < len;) {
        size_t cl = (size_t)utf8_len(w[i]);
        if (cl > len - i)
            cl = len - i;
        int32_t id;
        if (cl == 1)
            id = b->char_id[w[i]];
        else if (cl == 2 && (((w[i] & 0x1F) << 6) | (w[i + 1] & 0x3F)) < CHAR_TABLE)
            id = b->char_id[((w[i] & 0x1F) << 6) | (w[i + 1] & 0x3F)];
        else
            id = llmrt_bpe_lookup(b, (const char *)w + i, cl);
        if (id < 0 && b->opt.byte_fallback) {
            int all = 1;
            for (size_t k = 0; k < cl; k++)
                all &= b->byte_fb[w[i + k]] >= 0;
            if (all) {
                for (size_t k = 0; k < cl; k++)
                    sym[m++] = b->byte_fb[w[i + k]];
                prev_unk = 0;
                i += cl;
                continue;
            }
        }
        if (id >= 0) {
            sym[m++] = id;
            prev_unk = 0;
        } else if (b->opt.unk_id >= 0) {
            if (!(b->opt.fuse_unk && prev_unk))
                sym[m++] = b->opt.unk_id;
            prev_unk = 1;
        }
        i += cl;
    }
    return m;
}

llmrt_status llmrt_bpe_encode_word(const llmrt_bpe *b, llmrt_bpe_scratch *s, const char *word,
                                   size_t len, int32_t **ids, size_t *n, size_t *cap,
                                   llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (len == 0)
        return LLMRT_OK;
    cache_slot *slot = NULL;
    cache_shard *shard = NULL;
    uint64_t h = 0;
    if (b->cache && len <= CACHE_MAX_WORD) {
        h = hash_bytes(word, len);
        shard = &b->cache[h % CACHE_SHARDS];
        slot = &shard->slot[(h / CACHE_SHARDS) % CACHE_SLOTS];
        pthread_mutex_lock(&shard->mu);
        int hit = slot->blob && slot->hash == h && slot->klen == len &&
                  memcmp(slot->blob + slot->n, word, len) == 0;
        int bad = hit && push_ids(ids, n, cap, slot->blob, slot->n) != 0;
        pthread_mutex_unlock(&shard->mu);
        if (bad)
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory growing the id list");
        if (hit)
            return LLMRT_OK;
    }
    if (b->opt.ignore_merges) {
        int32_t id = llmrt_bpe_lookup(b, word, len);
        if (id >= 0) {
            if (push_ids(ids, n, cap, &id, 1) != 0)
                FAIL(err, LLMRT_ERR_NOMEM, "out of memory growing the id list");
            return LLMRT_OK;
        }
    }
    if (scratch_reserve(s, len) != 0)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory for a %zu-byte word", len);
    int32_t *sym = s->sym, *prev = s->prev, *next = s->next;
    size_t m = initial_symbols(b, (const uint8_t *)word, len, sym);
    if (m == 0)
        return LLMRT_OK;
    size_t hn = 0;
    for (size_t k = 0; k < m; k++) {
        prev[k] = (int32_t)k - 1;
        next[k] = k + 1 < m ? (int32_t)k + 1 : -1;
        if (k + 1 < m) {
            const merge_slot *ms = merge_get(b, sym[k], sym[k + 1]);
            if (ms)
                heap_push(s->heap, &hn, (struct llmrt_bpe_heap_entry){ms->rank, (int32_t)k, ms->new_id});
        }
    }
    while (hn > 0) {
        struct llmrt_bpe_heap_entry top = heap_pop(s->heap, &hn);
        int32_t pos = top.pos, nx;
        if (sym[pos] < 0 || (nx = next[pos]) < 0)
            continue;
        const merge_slot *ms = merge_get(b, sym[pos], sym[nx]);
        if (!ms || ms->new_id != top.new_id)
            continue; /* stale: a neighbour changed since this entry was pushed */
        sym[pos] = top.new_id;
        sym[nx] = -1;
        next[pos] = next[nx];
        if (next[nx] >= 0)
            prev[next[nx]] = pos;
        if (prev[pos] >= 0 && (ms = merge_get(b, sym[prev[pos]], sym[pos])))
            heap_push(s->heap, &hn, (struct llmrt_bpe_heap_entry){ms->rank, prev[pos], ms->new_id});
        if (next[pos] >= 0 && (ms = merge_get(b, sym[pos], sym[next[pos]])))
            heap_push(s->heap, &hn, (struct llmrt_bpe_heap_entry){ms->rank, pos, ms->new_id});
    }
    /* Compact the survivors in place (symbol 0 is never merged away). */
    size_t k = 0;
    for (int32_t p = 0; p >= 0; p = next[p])
        sym[k++] = sym[p];
    if (push_ids(ids, n, cap, sym, k) != 0)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory growing the id list");
    if (slot) {
        int32_t *blob = malloc(k * sizeof *blob + len);
        if (blob) { /* a cache miss on allocation failure is harmless */
            memcpy(blob, sym, k * sizeof *blob);
            memcpy(blob + k, word, len);
            pthread_mutex_lock(&shard->mu);
            free(slot->blob);
            *slot = (cache_slot){h, (uint32_t)len, (uint32_t)k, blob};
            pthread_mutex_unlock(&shard->mu);
        }
    }
cleanup:
    return st;
}
