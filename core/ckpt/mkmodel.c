/* mkmodel.c — synthetic Qwen3 checkpoints in Hugging Face layout (see mkmodel.h).
 *
 * Plan, then write: the tensor list (names, dtypes, shapes exactly as transformers' Qwen3 and
 * AutoAWQ name them, in state_dict order) is built first and split into shards the way
 * transformers does (a new shard when the next tensor would overflow the current one). Each
 * shard is then streamed: while the main thread write()s one 32 MB buffer, worker threads
 * fill the other.
 *
 * Values: random words are fmix64(key + k * golden) with key derived from the seed and the
 * tensor's name (splitmix64's output function over a counter), so any element can be
 * computed on its own and the bytes do not depend on thread count or chunking (fill_range).
 *   dense weights  uniform(-a, a), a = 0.02 * sqrt(3): std 0.02 (like initializer_range)
 *   norm weights   1 + uniform(-0.05, 0.05)
 *   AWQ qweight/qzeros  random 32-bit words: every 4-bit weight q and zero point z uniform
 *                  in 0..15, so q - z has variance 2 * (16^2 - 1) / 12 = 42.5
 *   AWQ scales     0.02 / sqrt(42.5) * uniform(0.75, 1.25): dequantized (q - z) * s has
 *                  std ~0.02 like the dense weights */
#include "mkmodel.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "progress.h"
#include "safetensors.h"

#define CHUNK_BYTES (32u << 20) /* one fill buffer; a multiple of every element size */
#define MIN_ELEMS_PER_THREAD 65536
#define MAX_THREADS 64
#define GOLDEN 0x9e3779b97f4a7c15ull

/* ---- presets ---- */

typedef struct preset {
    const char *name;
    int32_t vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos;
    double theta;
    int tie;
    int32_t bos, eos;
} preset;

static const preset presets[] = {
    /* head_dim 32 != hidden/heads = 16 on purpose: catches code that derives it */
    {"tiny", 512, 64, 128, 2, 4, 2, 32, 512, 1000000.0, 0, 510, 511},
    {"qwen3-0.6b", 151936, 1024, 3072, 28, 16, 8, 128, 40960, 1000000.0, 1, 151643, 151645},
    {"qwen3-8b", 151936, 4096, 12288, 36, 32, 8, 128, 40960, 1000000.0, 0, 151643, 151645},
};

const char *llmrt_mkmodel_preset_names(void) { return "tiny, qwen3-0.6b, qwen3-8b"; }

llmrt_status llmrt_mkmodel_preset(const char *name, llmrt_hf_config *out, llmrt_error *err)
{
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
        const preset *p = &presets[i];
        if (strcmp(name, p->name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->architecture, sizeof out->architecture, "Qwen3ForCausalLM");
        snprintf(out->model_type, sizeof out->model_type, "qwen3");
        out->vocab_size = p->vocab;
        out->hidden_size = p->hidden;
        out->intermediate_size = p->inter;
        out->num_hidden_layers = p->layers;
        out->num_attention_heads = p->heads;
        out->num_key_value_heads = p->kv_heads;
        out->head_dim = p->head_dim;
        out->max_position_embeddings = p->max_pos;
        out->rms_norm_eps = 1e-6;
        out->rope_theta = p->theta;
        out->tie_word_embeddings = p->tie;
        out->dtype = LLMRT_DTYPE_BF16;
        out->eos_ids[0] = p->eos;
        out->n_eos = 1;
        out->bos_id = p->bos;
        return LLMRT_OK;
    }
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "unknown preset '%s' (presets: %s)", name,
                      llmrt_mkmodel_preset_names());
}

void llmrt_mkmodel_opts_init(llmrt_mkmodel_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cfg.bos_id = -1;
    o->dtype = LLMRT_DTYPE_BF16;
    o->group_size = 128;
    o->shard_bytes = LLMRT_MKMODEL_DEFAULT_SHARD_BYTES;
}

/* ---- the plan ---- */

typedef enum fill_kind { FILL_DENSE, FILL_NORM, FILL_BITS, FILL_SCALE } fill_kind;

typedef struct plan_tensor {
    char name[96];
    llmrt_dtype dtype;
    int32_t ndim;
    int64_t shape[2];
    fill_kind fill;
    const void *table; /* value table for float fills (set before writing) */
    uint64_t key;   /* generator key from seed and name */
    uint64_t bytes;
    uint32_t shard; /* 0-based */
} plan_tensor;

typedef struct plan {
    plan_tensor *t;
    size_t n, cap;
    uint32_t n_shards;
    uint64_t total_bytes;
} plan;

static inline uint64_t fmix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return fmix64(h ^ fmix64(seed + GOLDEN));
}

static llmrt_status plan_add(plan *p, uint64_t seed, const char *name, llmrt_dtype dtype,
                             int64_t d0, int64_t d1, fill_kind fill, llmrt_error *err)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        plan_tensor *g = realloc(p->t, cap * sizeof *g);
        if (!g)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning tensors");
        p->t = g;
        p->cap = cap;
    }
    plan_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 1;
    t->fill = fill;
    t->key = name_key(seed, name);
    t->bytes = (uint64_t)d0 * (uint64_t)(d1 > 0 ? d1 : 1) * llmrt_dtype_size(dtype);
    p->total_bytes += t->bytes;
    return LLMRT_OK;
}

/* One decoder linear: a dense [out, in] weight, or AutoAWQ gemm's qweight [in, out/8],
 * qzeros [in/group, out/8] (int32, eight 4-bit values each) and scales [in/group, out]. */
static llmrt_status plan_linear(plan *p, const llmrt_mkmodel_opts *o, const char *prefix,
                                int64_t in, int64_t out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char name[128];
    if (!o->awq) {
        snprintf(name, sizeof name, "%s.weight", prefix);
        return plan_add(p, o->seed, name, o->dtype, out, in, FILL_DENSE, err);
    }
    int64_t g = o->group_size;
    snprintf(name, sizeof name, "%s.qweight", prefix);
    TRY(plan_add(p, o->seed, name, LLMRT_DTYPE_I32, in, out / 8, FILL_BITS, err));
    snprintf(name, sizeof name, "%s.qzeros", prefix);
    TRY(plan_add(p, o->seed, name, LLMRT_DTYPE_I32, in / g, out / 8, FILL_BITS, err));
    snprintf(name, sizeof name, "%s.scales", prefix);
    TRY(plan_add(p, o->seed, name, LLMRT_DTYPE_F16, in / g, out, FILL_SCALE, err));
cleanup:
    return st;
}

/* Shapes must suit Qwen3 (and AWQ); say which dimension is wrong and why. */
static llmrt_status check_opts(const llmrt_mkmodel_opts *o, llmrt_error *err)
{
    const llmrt_hf_config *c = &o->cfg;
    if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->intermediate_size <= 0 ||
        c->num_hidden_layers <= 0 || c->num_attention_heads <= 0 ||
        c->num_key_value_heads <= 0 || c->head_dim <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: every size (vocab, hidden, intermediate, layers, heads, kv "
                          "heads, head_dim) must be positive");
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: num_attention_heads %d is not a multiple of "
                          "num_key_value_heads %d (grouped-query attention needs it)",
                          (int)c->num_attention_heads, (int)c->num_key_value_heads);
    if (o->dtype != LLMRT_DTYPE_F16 && o->dtype != LLMRT_DTYPE_BF16 &&
        o->dtype != LLMRT_DTYPE_F32)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: dtype %s is not a weight dtype (f16, bf16 or f32)",
                          llmrt_dtype_name(o->dtype));
    if (!o->awq)
        return LLMRT_OK;
    if (o->dtype != LLMRT_DTYPE_F16)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: AWQ checkpoints are float16 (AutoAWQ's scales and dense "
                          "tensors are fp16); use dtype f16, not %s",
                          llmrt_dtype_name(o->dtype));
    if (o->group_size <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mkmodel: AWQ group size %d must be positive",
                          (int)o->group_size);
    int64_t q = (int64_t)c->num_attention_heads * c->head_dim;
    int64_t kv = (int64_t)c->num_key_value_heads * c->head_dim;
    const struct {
        const char *what;
        int64_t in, out;
    } lin[] = {{"self_attn.q_proj", c->hidden_size, q},
               {"self_attn.k_proj", c->hidden_size, kv},
               {"self_attn.o_proj", q, c->hidden_size},
               {"mlp.gate_proj", c->hidden_size, c->intermediate_size},
               {"mlp.down_proj", c->intermediate_size, c->hidden_size}};
    for (size_t i = 0; i < sizeof lin / sizeof *lin; i++) {
        if (lin[i].in % o->group_size != 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "mkmodel: AWQ group size %d does not divide %s's in_features %lld",
                              (int)o->group_size, lin[i].what, (long long)lin[i].in);
        if (lin[i].out % 8 != 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "mkmodel: %s's out_features %lld is not a multiple of 8 (AWQ packs "
                              "eight 4-bit values per int32)",
                              lin[i].what, (long long)lin[i].out);
    }
    return LLMRT_OK;
}

static llmrt_status build_plan(const llmrt_mkmodel_opts *o, plan *p, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const llmrt_hf_config *c = &o->cfg;
    int64_t h = c->hidden_size, q = (int64_t)c->num_attention_heads * c->head_dim;
    int64_t kv = (int64_t)c->num_key_value_heads * c->head_dim, ff = c->intermediate_size;
    char name[128];

    TRY(plan_add(p, o->seed, "model.embed_tokens.weight", o->dtype, c->vocab_size, h,
                 FILL_DENSE, err));
    for (int32_t i = 0; i < c->num_hidden_layers; i++) {
        char pre[96];
        const struct {
            const char *sub;
            int64_t in, out;
        } attn[] = {{"q_proj", h, q}, {"k_proj", h, kv}, {"v_proj", h, kv}, {"o_proj", q, h}},
          mlp[] = {{"gate_proj", h, ff}, {"up_proj", h, ff}, {"down_proj", ff, h}};
        for (int k = 0; k < 4; k++) {
            snprintf(pre, sizeof pre, "model.layers.%d.self_attn.%s", (int)i, attn[k].sub);
            TRY(plan_linear(p, o, pre, attn[k].in, attn[k].out, err));
        }
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", (int)i);
        TRY(plan_add(p, o->seed, name, o->dtype, c->head_dim, 0, FILL_NORM, err));
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", (int)i);
        TRY(plan_add(p, o->seed, name, o->dtype, c->head_dim, 0, FILL_NORM, err));
        for (int k = 0; k < 3; k++) {
            snprintf(pre, sizeof pre, "model.layers.%d.mlp.%s", (int)i, mlp[k].sub);
            TRY(plan_linear(p, o, pre, mlp[k].in, mlp[k].out, err));
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", (int)i);
        TRY(plan_add(p, o->seed, name, o->dtype, h, 0, FILL_NORM, err));
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", (int)i);
        TRY(plan_add(p, o->seed, name, o->dtype, h, 0, FILL_NORM, err));
    }
    TRY(plan_add(p, o->seed, "model.norm.weight", o->dtype, h, 0, FILL_NORM, err));
    if (!c->tie_word_embeddings || o->tied_lm_head) {
        TRY(plan_add(p, o->seed, "lm_head.weight", o->dtype, c->vocab_size, h, FILL_DENSE, err));
        if (c->tie_word_embeddings) /* the same values as embed_tokens */
            p->t[p->n - 1].key = p->t[0].key;
    }

    /* Shards, as transformers splits them: a new shard when the next tensor would overflow a
     * non-empty one. Everything in one file when it all fits. */
    uint64_t max = o->shard_bytes ? o->shard_bytes : LLMRT_MKMODEL_DEFAULT_SHARD_BYTES;
    uint64_t cur = 0;
    uint32_t shard = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (cur > 0 && cur + p->t[i].bytes > max) {
            shard++;
            cur = 0;
        }
        p->t[i].shard = shard;
        cur += p->t[i].bytes;
    }
    p->n_shards = shard + 1;
cleanup:
    return st;
}

/* ---- filling ---- */

static const double DENSE_A = 0.034641016151377546; /* 0.02 * sqrt(3): std 0.02 */
static const double NORM_A = 0.05;
static const double AWQ_SCALE = 0.0030678599553894816; /* 0.02 / sqrt(42.5) */

/* Float values come from 16 random bits through a 65536-entry table: r -> the value for
 * uniform u = (r + 0.5) / 65536, already in the tensor's dtype. Four elements per 64-bit
 * random word, a table lookup each: no float conversion in the loop. */
typedef struct fill_tables {
    uint16_t dense16[65536], norm16[65536], scale16[65536]; /* F16 or BF16 as planned */
    float dense32[65536], norm32[65536];
} fill_tables;

static void build_tables(fill_tables *ft, llmrt_dtype dtype)
{
    for (uint32_t r = 0; r < 65536; r++) {
        double u = ((double)r + 0.5) / 65536.0;
        float dense = (float)(DENSE_A * (2.0 * u - 1.0));
        float norm = (float)(1.0 + NORM_A * (2.0 * u - 1.0));
        ft->dense32[r] = dense;
        ft->norm32[r] = norm;
        ft->dense16[r] = dtype == LLMRT_DTYPE_BF16 ? llmrt_f32_to_bf16(dense) : llmrt_f32_to_f16(dense);
        ft->norm16[r] = dtype == LLMRT_DTYPE_BF16 ? llmrt_f32_to_bf16(norm) : llmrt_f32_to_f16(norm);
        ft->scale16[r] = llmrt_f32_to_f16((float)(AWQ_SCALE * (0.75 + 0.5 * u)));
    }
}

/* Elements [start, start + count) of tensor t into out (which holds exactly those).
 * Element i is lane i % L of word fmix64(key + (i / L) * GOLDEN), L = 2 for 32-bit random
 * words (AWQ qweight/qzeros) and 4 for 16-bit table indices. */
static void fill_range(const plan_tensor *t, uint64_t start, uint64_t count, void *out)
{
    uint64_t i = start, end = start + count;
    if (t->fill == FILL_BITS) {
        uint32_t *o = (uint32_t *)out - start;
        while (i < end) {
            uint64_t w = fmix64(t->key + (i >> 1) * GOLDEN);
            if (!(i & 1) && i + 1 < end) {
                o[i] = (uint32_t)w;
                o[i + 1] = (uint32_t)(w >> 32);
                i += 2;
            } else {
                o[i] = (uint32_t)(w >> (32 * (i & 1)));
                i++;
            }
        }
        return;
    }
    if (t->dtype == LLMRT_DTYPE_F32) {
        const float *tab = t->table;
        float *o = (float *)out - start;
        for (; i < end; i++)
            o[i] = tab[(fmix64(t->key + (i >> 2) * GOLDEN) >> (16 * (i & 3))) & 0xffff];
        return;
    }
    const uint16_t *tab = t->table;
    uint16_t *o = (uint16_t *)out - start;
    for (; i < end && (i & 3); i++) /* up to a word boundary */
        o[i] = tab[(fmix64(t->key + (i >> 2) * GOLDEN) >> (16 * (i & 3))) & 0xffff];
    for (; i + 4 <= end; i += 4) {
        uint64_t w = fmix64(t->key + (i >> 2) * GOLDEN);
        o[i] = tab[w & 0xffff];
        o[i + 1] = tab[(w >> 16) & 0xffff];
        o[i + 2] = tab[(w >> 32) & 0xffff];
        o[i + 3] = tab[w >> 48];
    }
    for (; i < end; i++)
        o[i] = tab[(fmix64(t->key + (i >> 2) * GOLDEN) >> (16 * (i & 3))) & 0xffff];
}

typedef struct fill_task {
    const plan_tensor *t;
    uint64_t start, count;
    void *out;
} fill_task;

static void *fill_main(void *arg)
{
    fill_task *k = arg;
    fill_range(k->t, k->start, k->count, k->out);
    return NULL;
}

/* A chunk being filled by up to MAX_THREADS workers. */
typedef struct filler {
    pthread_t th[MAX_THREADS];
    fill_task task[MAX_THREADS];
    int started[MAX_THREADS];
    int n;
} filler;

/* Start filling elements [start, start + count) of t into out; parts that cannot get a
 * thread are filled right here, so the result never depends on thread creation. */
static void filler_start(filler *f, const plan_tensor *t, uint64_t start, uint64_t count,
                         void *out, int threads)
{
    size_t esize = llmrt_dtype_size(t->dtype);
    uint64_t parts = count / MIN_ELEMS_PER_THREAD;
    if (parts < 1)
        parts = 1;
    if (parts > (uint64_t)threads)
        parts = (uint64_t)threads;
    f->n = (int)parts;
    uint64_t per = count / parts, rem = count % parts, off = 0;
    for (int i = 0; i < f->n; i++) {
        uint64_t c = per + ((uint64_t)i < rem ? 1 : 0);
        f->task[i] = (fill_task){t, start + off, c, (char *)out + off * esize};
        off += c;
        f->started[i] = f->n > 1 && pthread_create(&f->th[i], NULL, fill_main, &f->task[i]) == 0;
        if (!f->started[i])
            fill_main(&f->task[i]);
    }
}

static void filler_join(filler *f)
{
    for (int i = 0; i < f->n; i++)
        if (f->started[i])
            pthread_join(f->th[i], NULL);
    f->n = 0;
}

/* ---- files ---- */

static void shard_name(char *buf, size_t n, uint32_t shard, uint32_t n_shards)
{
    if (n_shards == 1)
        snprintf(buf, n, "model.safetensors");
    else
        snprintf(buf, n, "model-%05u-of-%05u.safetensors", shard + 1, n_shards);
}

static int cmp_esize_desc(const void *a, const void *b)
{
    const plan_tensor *x = *(plan_tensor *const *)a, *y = *(plan_tensor *const *)b;
    size_t ex = llmrt_dtype_size(x->dtype), ey = llmrt_dtype_size(y->dtype);
    if (ex != ey)
        return ex > ey ? -1 : 1;
    return x < y ? -1 : x > y; /* stable: plan order */
}

/* Write one shard: header, then the data streamed through two buffers. */
static llmrt_status write_shard(const char *dir, const plan *p, uint32_t shard,
                                uint8_t *buf[2], int threads,
                                llmrt_progress *prog, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_st_writer *w = NULL;
    plan_tensor **order = NULL;
    filler f = {0};
    char fname[64], path[4200], tmp[4210];
    size_t n = 0;

    shard_name(fname, sizeof fname, shard, p->n_shards);
    snprintf(path, sizeof path, "%s/%s", dir, fname);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);

    /* Larger elements first, so every tensor is aligned to its element size in the file. */
    order = malloc(p->n * sizeof *order);
    TRY_ALLOC(err, order, "shard tensor order");
    for (size_t i = 0; i < p->n; i++)
        if (p->t[i].shard == shard)
            order[n++] = &p->t[i];
    qsort(order, n, sizeof *order, cmp_esize_desc);

    TRY(llmrt_st_writer_open(tmp, &w, err));
    for (size_t i = 0; i < n; i++)
        TRY(llmrt_st_writer_add(w, order[i]->name, order[i]->dtype, order[i]->ndim,
                                order[i]->shape, err));
    TRY(llmrt_st_writer_begin_data(w, err));

    /* Chunks in file order; chunk k+1 fills while chunk k is written. */
    size_t ti = 0;
    uint64_t elem = 0;
    int cur = 0, have = 0;
    const plan_tensor *ct = NULL;
    uint64_t cbytes = 0;
    int ends_tensor = 0;
    for (;;) {
        const plan_tensor *nt = NULL;
        uint64_t nstart = 0, ncount = 0;
        if (ti < n) { /* the next chunk */
            nt = order[ti];
            size_t es = llmrt_dtype_size(nt->dtype);
            uint64_t numel = nt->bytes / es;
            nstart = elem;
            ncount = numel - elem;
            if (ncount > CHUNK_BYTES / es)
                ncount = CHUNK_BYTES / es;
            filler_start(&f, nt, nstart, ncount, buf[cur ^ have], threads);
            elem += ncount;
            if (elem == numel) {
                ti++;
                elem = 0;
            }
        }
        if (have) { /* write the previous chunk meanwhile */
            llmrt_status ws = llmrt_st_writer_write(w, buf[cur], cbytes, err);
            if (ws != LLMRT_OK) {
                filler_join(&f);
                TRY(ws);
            }
            if (prog)
                llmrt_progress_add(prog, cbytes, ends_tensor ? 1 : 0);
            cur ^= 1;
        }
        filler_join(&f);
        if (!nt)
            break;
        ct = nt;
        cbytes = ncount * llmrt_dtype_size(ct->dtype);
        ends_tensor = nstart + ncount == ct->bytes / llmrt_dtype_size(ct->dtype);
        have = 1;
    }
    st = llmrt_st_writer_close(w, err);
    w = NULL;
    TRY(st);
    if (rename(tmp, path) != 0)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot rename %s to %s: %s", tmp, path, strerror(errno));
cleanup:
    if (w) {
        llmrt_st_writer_close(w, NULL);
        unlink(tmp);
    } else if (st != LLMRT_OK) {
        unlink(tmp);
    }
    free(order);
    return st;
}

/* Write JSON (and a final newline, as transformers does) to dir/name through a temporary
 * file and a rename. */
static llmrt_status write_json(const char *dir, const char *name, json_t *j, size_t flags,
                               llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char path[4200], tmp[4210];
    char *text = NULL;
    FILE *fp = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (j)
        text = json_dumps(j, flags | JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    TRY_ALLOC(err, text, name);
    fp = fopen(tmp, "w");
    if (!fp)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot create %s: %s", tmp, strerror(errno));
    int bad = fputs(text, fp) < 0 || fputc('\n', fp) == EOF;
    bad |= fclose(fp) != 0;
    fp = NULL;
    if (bad)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot write %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot rename %s to %s: %s", tmp, path, strerror(errno));
cleanup:
    if (fp)
        fclose(fp);
    if (st != LLMRT_OK)
        unlink(tmp);
    free(text);
    return st;
}

static const char *hf_dtype_name(llmrt_dtype d)
{
    return d == LLMRT_DTYPE_F16 ? "float16" : d == LLMRT_DTYPE_F32 ? "float32" : "bfloat16";
}

static json_t *eos_json(const llmrt_hf_config *c, int as_list)
{
    if (c->n_eos == 0)
        return json_null();
    if (c->n_eos == 1 && !as_list)
        return json_integer(c->eos_ids[0]);
    json_t *a = json_array();
    for (int32_t i = 0; i < c->n_eos; i++)
        json_array_append_new(a, json_integer(c->eos_ids[i]));
    return a;
}

/* config.json as transformers writes a Qwen3 config (the keys of the released checkpoints). */
static json_t *config_json(const llmrt_mkmodel_opts *o)
{
    const llmrt_hf_config *c = &o->cfg;
    json_t *j = json_object();
    json_object_set_new(j, "architectures", json_pack("[s]", "Qwen3ForCausalLM"));
    json_object_set_new(j, "attention_bias", json_false());
    json_object_set_new(j, "attention_dropout", json_real(0.0));
    json_object_set_new(j, "bos_token_id", c->bos_id >= 0 ? json_integer(c->bos_id) : json_null());
    json_object_set_new(j, "eos_token_id", eos_json(c, 0));
    json_object_set_new(j, "head_dim", json_integer(c->head_dim));
    json_object_set_new(j, "hidden_act", json_string("silu"));
    json_object_set_new(j, "hidden_size", json_integer(c->hidden_size));
    json_object_set_new(j, "initializer_range", json_real(0.02));
    json_object_set_new(j, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(j, "max_position_embeddings", json_integer(c->max_position_embeddings));
    json_object_set_new(j, "max_window_layers", json_integer(c->num_hidden_layers));
    json_object_set_new(j, "model_type", json_string("qwen3"));
    json_object_set_new(j, "num_attention_heads", json_integer(c->num_attention_heads));
    json_object_set_new(j, "num_hidden_layers", json_integer(c->num_hidden_layers));
    json_object_set_new(j, "num_key_value_heads", json_integer(c->num_key_value_heads));
    if (o->awq)
        json_object_set_new(j, "quantization_config",
                            json_pack("{s:s, s:i, s:i, s:b, s:s, s:n}", "quant_method", "awq",
                                      "bits", 4, "group_size", (int)o->group_size, "zero_point",
                                      1, "version", "gemm", "modules_to_not_convert"));
    json_object_set_new(j, "rms_norm_eps", json_real(c->rms_norm_eps));
    json_object_set_new(j, "rope_scaling", json_null());
    json_object_set_new(j, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(j, "sliding_window", json_null());
    json_object_set_new(j, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
    json_object_set_new(j, "torch_dtype", json_string(hf_dtype_name(o->dtype)));
    json_object_set_new(j, "use_cache", json_true());
    json_object_set_new(j, "use_sliding_window", json_false());
    json_object_set_new(j, "vocab_size", json_integer(c->vocab_size));
    return j;
}

/* Greedy by default: a synthetic model has no tuned sampling settings. */
static json_t *generation_json(const llmrt_mkmodel_opts *o)
{
    const llmrt_hf_config *c = &o->cfg;
    json_t *j = json_object();
    json_object_set_new(j, "bos_token_id", c->bos_id >= 0 ? json_integer(c->bos_id) : json_null());
    json_object_set_new(j, "do_sample", json_false());
    json_object_set_new(j, "eos_token_id", eos_json(c, 1));
    return j;
}

static json_t *index_json(const plan *p)
{
    json_t *j = json_object(), *meta = json_object(), *wm = json_object();
    char fname[64];
    json_object_set_new(meta, "total_size", json_integer((json_int_t)p->total_bytes));
    for (size_t i = 0; i < p->n; i++) {
        shard_name(fname, sizeof fname, p->t[i].shard, p->n_shards);
        json_object_set_new(wm, p->t[i].name, json_string(fname));
    }
    json_object_set_new(j, "metadata", meta);
    json_object_set_new(j, "weight_map", wm);
    return j;
}

/* model.safetensors and model-NNNNN-of-NNNNN.safetensors: the names mkmodel writes. */
static int is_our_weights(const struct dirent *d)
{
    unsigned a, b;
    char tail[32];
    if (strcmp(d->d_name, "model.safetensors") == 0)
        return 1;
    return strlen(d->d_name) == 32 && /* model-00001-of-00004.safetensors */
           sscanf(d->d_name, "model-%5u-of-%5u%31s", &a, &b, tail) == 3 &&
           strcmp(tail, ".safetensors") == 0;
}

/* Remove what an earlier run may have left: config.json first (so the folder never looks
 * complete while it is not), then weights and the index (a stale shard would otherwise be
 * picked up next to the new ones). */
static llmrt_status clear_old(const char *dir, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const char *fixed[] = {"config.json", "model.safetensors.index.json", "generation_config.json"};
    char path[4200];
    struct dirent **list = NULL;
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fixed[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot remove the old %s: %s", path, strerror(errno));
    }
    n = scandir(dir, &list, is_our_weights, alphasort);
    if (n < 0)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot list %s: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot remove the old %s: %s", path, strerror(errno));
    }
cleanup:
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    return st;
}

/* mkdir -p: create `dir` and any missing parents. 0 on success (or when it exists). */
static int mkdir_parents(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

llmrt_status llmrt_mkmodel_write(const char *dir, const llmrt_mkmodel_opts *o,
                                 llmrt_mkmodel_result *res, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    plan p = {0};
    uint8_t *buf[2] = {NULL, NULL};
    fill_tables *tables = NULL;
    llmrt_progress prog;
    int prog_on = 0;
    json_t *j = NULL;
    double t0 = llmrt_progress_now();

    TRY(check_opts(o, err));
    TRY(build_plan(o, &p, err));

    if (mkdir_parents(dir) != 0)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot create the output folder %s: %s", dir,
             strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        FAIL(err, LLMRT_ERR_IO, "mkmodel: %s exists and is not a folder", dir);
    TRY(clear_old(dir, err));

    int threads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    buf[0] = malloc(CHUNK_BYTES);
    buf[1] = malloc(CHUNK_BYTES);
    tables = malloc(sizeof *tables);
    TRY_ALLOC(err, buf[0] && buf[1] && tables, "mkmodel fill buffers");
    build_tables(tables, o->dtype);
    for (size_t i = 0; i < p.n; i++) {
        plan_tensor *t = &p.t[i];
        int f32 = t->dtype == LLMRT_DTYPE_F32;
        if (t->fill == FILL_DENSE)
            t->table = f32 ? (const void *)tables->dense32 : tables->dense16;
        else if (t->fill == FILL_NORM)
            t->table = f32 ? (const void *)tables->norm32 : tables->norm16;
        else if (t->fill == FILL_SCALE)
            t->table = tables->scale16;
    }

    if (o->show_progress) {
        llmrt_progress_init(&prog, stderr, llmrt_progress_is_tty(stderr), "writing", "tensors",
                            p.total_bytes, p.n);
        prog_on = 1;
    }
    for (uint32_t s = 0; s < p.n_shards; s++)
        TRY(write_shard(dir, &p, s, buf, threads, prog_on ? &prog : NULL, err));
    if (p.n_shards > 1) {
        j = index_json(&p);
        TRY(write_json(dir, "model.safetensors.index.json", j, JSON_SORT_KEYS, err));
        json_decref(j);
    }
    j = generation_json(o);
    TRY(write_json(dir, "generation_config.json", j, 0, err));
    json_decref(j);
    j = config_json(o);
    TRY(write_json(dir, "config.json", j, 0, err));
    if (prog_on)
        llmrt_progress_done(&prog);
    if (res) {
        res->bytes = p.total_bytes;
        res->n_tensors = (uint32_t)p.n;
        res->n_shards = p.n_shards;
        res->seconds = llmrt_progress_now() - t0;
    }
cleanup:
    json_decref(j);
    if (prog_on)
        llmrt_progress_free(&prog);
    free(buf[0]);
    free(buf[1]);
    free(tables);
    free(p.t);
    return st;
}
