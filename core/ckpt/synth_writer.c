/* synth_writer.c — plan a synthetic checkpoint from a plugin's description, then write it
 * (see synth_writer.h).
 *
 * Plan, then write: the tensors are recorded in the order the plugin adds them (transformers'
 * state_dict order, for the plugins we ship) and split into shards the way transformers does
 * (a new shard when the next tensor would overflow a non-empty one). Each shard is streamed:
 * while the main thread write()s one 32 MB buffer, worker threads fill the other.
 *
 * Values: random words are fmix64(key + k * golden) with the key derived from the seed and a
 * tensor's name (splitmix64's output function over a counter), so any element can be computed
 * on its own and the bytes do not depend on thread count or chunking (fill_range). Uniform
 * floats come from 16 random bits through a 65536-entry table per (rule, dtype), already in
 * the tensor's dtype: four elements per 64-bit word, a table lookup each. */
#include "synth_writer.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "progress.h"
#include "safetensors.h"

#define CHUNK_BYTES (32u << 20) /* one fill buffer; a multiple of every element size */
#define MIN_ELEMS_PER_THREAD 65536
#define MAX_THREADS 64
#define GOLDEN 0x9e3779b97f4a7c15ull
#define MAX_TENSORS 1000000
#define MAX_NAME 512

/* One distinct uniform rule in one dtype: the 65536 values its random indices map to. */
typedef struct fill_table {
    llmrt_dtype dtype;
    double scale, center, half;
    void *values; /* [65536] of dtype (F32: float; F16/BF16: uint16_t; F8: uint8_t) */
} fill_table;

typedef struct plan_tensor {
    char *name;
    llmrt_dtype dtype;
    int32_t ndim;
    int64_t shape[LLMRT_MAX_DIMS];
    llmrt_fill_kind fill;
    size_t table;  /* UNIFORM: index into plan.tables */
    void *data;    /* DATA: the bytes (owned) */
    uint64_t key;  /* generator key from the seed and the name (or same_as) */
    uint64_t bytes;
    uint32_t shard; /* 0-based */
} plan_tensor;

typedef struct plan_json {
    char *name, *text;
} plan_json;

struct llmrt_synth_plan {
    uint64_t seed;
    plan_tensor *t;
    size_t n, cap;
    fill_table *tables;
    size_t n_tables;
    plan_json *json;
    size_t n_json;
    uint32_t n_shards;
    uint64_t total_bytes;
};

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

/* ---- the plan ---- */

llmrt_status llmrt_synth_plan_new(uint64_t seed, llmrt_synth_plan **out, llmrt_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning a checkpoint");
    (*out)->seed = seed;
    return LLMRT_OK;
}

void llmrt_synth_plan_free(llmrt_synth_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->t[i].name);
        free(p->t[i].data);
    }
    for (size_t i = 0; i < p->n_tables; i++)
        free(p->tables[i].values);
    for (size_t i = 0; i < p->n_json; i++) {
        free(p->json[i].name);
        free(p->json[i].text);
    }
    free(p->t);
    free(p->tables);
    free(p->json);
    free(p);
}

static int is_float_dtype(llmrt_dtype d)
{
    return d == LLMRT_DTYPE_F32 || d == LLMRT_DTYPE_F16 || d == LLMRT_DTYPE_BF16 ||
           d == LLMRT_DTYPE_F8_E4M3 || d == LLMRT_DTYPE_F8_E5M2;
}

/* The table of (rule, dtype), built on first use. r -> value for u = (r + 0.5) / 65536. */
static llmrt_status table_for(llmrt_synth_plan *p, llmrt_dtype dtype, const llmrt_fill *f,
                              size_t *index, llmrt_error *err)
{
    for (size_t i = 0; i < p->n_tables; i++) {
        const fill_table *t = &p->tables[i];
        if (t->dtype == dtype && t->scale == f->scale && t->center == f->center &&
            t->half == f->half) {
            *index = i;
            return LLMRT_OK;
        }
    }
    fill_table *g = realloc(p->tables, (p->n_tables + 1) * sizeof *g);
    if (!g)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning a checkpoint");
    p->tables = g;
    fill_table *t = &g[p->n_tables];
    size_t es = llmrt_dtype_size(dtype);
    t->values = malloc(65536 * es);
    if (!t->values)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning a checkpoint");
    t->dtype = dtype;
    t->scale = f->scale, t->center = f->center, t->half = f->half;
    for (uint32_t r = 0; r < 65536; r++) {
        double u = ((double)r + 0.5) / 65536.0;
        llmrt_store_f(t->values, dtype, r, (float)(f->scale * (f->center + f->half * (2.0 * u - 1.0))));
    }
    *index = p->n_tables++;
    return LLMRT_OK;
}

static llmrt_status plan_add_tensor(void *ctx, const char *name, llmrt_dtype dtype, int32_t ndim,
                                    const int64_t *shape, const llmrt_fill *fill, llmrt_error *err)
{
    llmrt_synth_plan *p = ctx;
    if (!name || !name[0] || strlen(name) >= MAX_NAME)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "synthetic checkpoint: a tensor name must have 1 to %d characters",
                          MAX_NAME - 1);
    if (ndim < 1 || ndim > LLMRT_MAX_DIMS || !shape || !fill)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "synthetic checkpoint: tensor %s: ndim %d (1..%d), shape and fill rule "
                          "are required",
                          name, (int)ndim, LLMRT_MAX_DIMS);
    size_t es = llmrt_dtype_size(dtype);
    if (es == 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "synthetic checkpoint: tensor %s: dtype %d",
                          name, (int)dtype);
    uint64_t numel = 1;
    for (int32_t i = 0; i < ndim; i++) {
        if (shape[i] < 1 || (uint64_t)shape[i] > (UINT64_MAX >> 8) / numel)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "synthetic checkpoint: tensor %s: dimension %d is %lld (must be "
                              "positive, and the tensor must fit in 2^56 elements)",
                              name, (int)i, (long long)shape[i]);
        numel *= (uint64_t)shape[i];
    }
    if (p->n >= MAX_TENSORS)
        return llmrt_fail(err, LLMRT_ERR_LIMIT, "synthetic checkpoint: more than %d tensors",
                          MAX_TENSORS);
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->t[i].name, name) == 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "synthetic checkpoint: tensor %s is added twice", name);
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        plan_tensor *g = realloc(p->t, cap * sizeof *g);
        if (!g)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning tensors");
        p->t = g;
        p->cap = cap;
    }
    plan_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    memcpy(t.shape, shape, sizeof *shape * (size_t)ndim);
    t.bytes = numel * es;
    t.fill = fill->kind;
    switch (fill->kind) {
    case LLMRT_FILL_UNIFORM: {
        if (!is_float_dtype(dtype))
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "synthetic checkpoint: tensor %s: a uniform fill needs a float "
                              "dtype, not %s",
                              name, llmrt_dtype_name(dtype));
        llmrt_status st = table_for(p, dtype, fill, &t.table, err);
        if (st)
            return st;
        break;
    }
    case LLMRT_FILL_BITS:
        if (es != 4)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "synthetic checkpoint: tensor %s: random words need a 32-bit dtype "
                              "(I32 or U32), not %s",
                              name, llmrt_dtype_name(dtype));
        break;
    case LLMRT_FILL_DATA:
        if (!fill->data || fill->bytes != t.bytes)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "synthetic checkpoint: tensor %s: %zu bytes of data given for a "
                              "tensor of %llu bytes",
                              name, fill->data ? fill->bytes : 0, (unsigned long long)t.bytes);
        t.data = malloc(t.bytes);
        if (!t.data)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory copying tensor %s", name);
        memcpy(t.data, fill->data, t.bytes);
        break;
    default:
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "synthetic checkpoint: tensor %s: unknown fill kind %d", name,
                          (int)fill->kind);
    }
    t.key = name_key(p->seed, fill->same_as ? fill->same_as : name);
    t.name = strdup(name);
    if (!t.name) {
        free(t.data);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning tensors");
    }
    p->t[p->n++] = t;
    p->total_bytes += t.bytes;
    return LLMRT_OK;
}

static int json_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 6 || n > 128 || strcmp(name + n - 5, ".json") != 0)
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' ||
              *c == '-'))
            return 0;
    return strcmp(name, "model.safetensors.index.json") != 0;
}

static llmrt_status plan_add_json(void *ctx, const char *name, const char *text, llmrt_error *err)
{
    llmrt_synth_plan *p = ctx;
    if (!json_name_ok(name))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "synthetic checkpoint: '%s' is not a JSON file name a plugin may write "
                          "(a-z, 0-9, _ . -, ending in .json; the index is the host's)",
                          name ? name : "(null)");
    for (size_t i = 0; i < p->n_json; i++)
        if (strcmp(p->json[i].name, name) == 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "synthetic checkpoint: %s is added twice", name);
    plan_json *g = realloc(p->json, (p->n_json + 1) * sizeof *g);
    if (!g)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning a checkpoint");
    p->json = g;
    g[p->n_json].name = strdup(name);
    g[p->n_json].text = strdup(text ? text : "");
    if (!g[p->n_json].name || !g[p->n_json].text) {
        free(g[p->n_json].name);
        free(g[p->n_json].text);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory planning a checkpoint");
    }
    p->n_json++;
    return LLMRT_OK;
}

void llmrt_synth_plan_writer(llmrt_synth_plan *p, llmrt_ckpt_writer *w)
{
    memset(w, 0, sizeof *w);
    w->struct_size = sizeof *w;
    w->ctx = p;
    w->add_tensor = plan_add_tensor;
    w->add_json = plan_add_json;
}

/* Shards, as transformers splits them: a new shard when the next tensor would overflow a
 * non-empty one. Everything in one file when it all fits. */
static void plan_shards(llmrt_synth_plan *p, uint64_t max)
{
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
}

/* ---- filling ---- */

/* Elements [start, start + count) of tensor t into out (which holds exactly those). Element i
 * is lane i % L of word fmix64(key + (i / L) * GOLDEN), L = 2 for 32-bit random words and 4 for
 * 16-bit table indices. */
static void fill_range(const llmrt_synth_plan *p, const plan_tensor *t, uint64_t start,
                       uint64_t count, void *out)
{
    uint64_t i = start, end = start + count;
    if (t->fill == LLMRT_FILL_DATA) {
        size_t es = llmrt_dtype_size(t->dtype);
        memcpy(out, (const char *)t->data + start * es, count * es);
        return;
    }
    if (t->fill == LLMRT_FILL_BITS) {
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
    const void *tab = p->tables[t->table].values;
#define FILL_LOOP(T)                                                                          \
    do {                                                                                      \
        const T *tb = tab;                                                                    \
        T *o = (T *)out - start;                                                              \
        for (; i < end && (i & 3); i++) /* up to a word boundary */                           \
            o[i] = tb[(fmix64(t->key + (i >> 2) * GOLDEN) >> (16 * (i & 3))) & 0xffff];       \
        for (; i + 4 <= end; i += 4) {                                                        \
            uint64_t w = fmix64(t->key + (i >> 2) * GOLDEN);                                  \
            o[i] = tb[w & 0xffff];                                                            \
            o[i + 1] = tb[(w >> 16) & 0xffff];                                                \
            o[i + 2] = tb[(w >> 32) & 0xffff];                                                \
            o[i + 3] = tb[w >> 48];                                                           \
        }                                                                                     \
        for (; i < end; i++)                                                                  \
            o[i] = tb[(fmix64(t->key + (i >> 2) * GOLDEN) >> (16 * (i & 3))) & 0xffff];       \
    } while (0)
    switch (llmrt_dtype_size(t->dtype)) {
    case 4: FILL_LOOP(float); break;
    case 2: FILL_LOOP(uint16_t); break;
    default: FILL_LOOP(uint8_t); break;
    }
#undef FILL_LOOP
}

typedef struct fill_task {
    const llmrt_synth_plan *p;
    const plan_tensor *t;
    uint64_t start, count;
    void *out;
} fill_task;

static void *fill_main(void *arg)
{
    fill_task *k = arg;
    fill_range(k->p, k->t, k->start, k->count, k->out);
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
static void filler_start(filler *f, const llmrt_synth_plan *p, const plan_tensor *t,
                         uint64_t start, uint64_t count, void *out, int threads)
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
        f->task[i] = (fill_task){p, t, start + off, c, (char *)out + off * esize};
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
static llmrt_status write_shard(const char *dir, const llmrt_synth_plan *p, uint32_t shard,
                                uint8_t *buf[2], int threads, llmrt_progress *prog,
                                llmrt_error *err)
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
    order = malloc((p->n ? p->n : 1) * sizeof *order);
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
            filler_start(&f, p, nt, nstart, ncount, buf[cur ^ have], threads);
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

/* Write text (and a final newline, as transformers does) to dir/name through a temporary
 * file and a rename. */
static llmrt_status write_text(const char *dir, const char *name, const char *text,
                               llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char path[4200], tmp[4210];
    FILE *fp = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
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
    return st;
}

static char *index_json(const llmrt_synth_plan *p)
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
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_INDENT(2) | JSON_REAL_PRECISION(15));
    json_decref(j);
    return text;
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

static llmrt_status remove_file(const char *dir, const char *name, llmrt_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (unlink(path) != 0 && errno != ENOENT)
        return llmrt_fail(err, LLMRT_ERR_IO, "mkmodel: cannot remove the old %s: %s", path,
                          strerror(errno));
    return LLMRT_OK;
}

/* Remove what an earlier run may have left: config.json first (so the folder never looks
 * complete while it is not), then the other JSON files, the weights and the index (a stale
 * shard would otherwise be picked up next to the new ones). */
static llmrt_status clear_old(const char *dir, const llmrt_synth_plan *p, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const char *fixed[] = {"config.json", "model.safetensors.index.json", "generation_config.json"};
    struct dirent **list = NULL;
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        TRY(remove_file(dir, fixed[i], err));
    for (size_t i = 0; i < p->n_json; i++)
        TRY(remove_file(dir, p->json[i].name, err));
    n = scandir(dir, &list, is_our_weights, alphasort);
    if (n < 0)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot list %s: %s", dir, strerror(errno));
    for (int i = 0; i < n; i++)
        TRY(remove_file(dir, list[i]->d_name, err));
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

llmrt_status llmrt_synth_plan_write(llmrt_synth_plan *p, const char *dir,
                                    const llmrt_synth_write_opts *o, llmrt_synth_result *res,
                                    llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    uint8_t *buf[2] = {NULL, NULL};
    llmrt_progress prog;
    int prog_on = 0;
    char *text = NULL;
    double t0 = llmrt_now_s();
    const plan_json *config = NULL;

    for (size_t i = 0; i < p->n_json; i++)
        if (strcmp(p->json[i].name, "config.json") == 0)
            config = &p->json[i];
    if (!config)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "mkmodel: the model plugin described no config.json (a plugin bug)");
    if (p->n == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "mkmodel: the model plugin described no tensors");
    plan_shards(p, o && o->shard_bytes ? o->shard_bytes : LLMRT_SYNTH_DEFAULT_SHARD_BYTES);

    if (mkdir_parents(dir) != 0)
        FAIL(err, LLMRT_ERR_IO, "mkmodel: cannot create the output folder %s: %s", dir,
             strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        FAIL(err, LLMRT_ERR_IO, "mkmodel: %s exists and is not a folder", dir);
    TRY(clear_old(dir, p, err));

    int threads = o && o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    buf[0] = malloc(CHUNK_BYTES);
    buf[1] = malloc(CHUNK_BYTES);
    TRY_ALLOC(err, buf[0] && buf[1], "mkmodel fill buffers");

    if (o && o->show_progress) {
        llmrt_progress_init(&prog, stderr, llmrt_progress_is_tty(stderr), "writing", "tensors",
                            p->total_bytes, p->n);
        prog_on = 1;
    }
    for (uint32_t s = 0; s < p->n_shards; s++)
        TRY(write_shard(dir, p, s, buf, threads, prog_on ? &prog : NULL, err));
    if (p->n_shards > 1) {
        text = index_json(p);
        TRY_ALLOC(err, text, "the shard index");
        TRY(write_text(dir, "model.safetensors.index.json", text, err));
    }
    for (size_t i = 0; i < p->n_json; i++) /* config.json last */
        if (&p->json[i] != config)
            TRY(write_text(dir, p->json[i].name, p->json[i].text, err));
    TRY(write_text(dir, config->name, config->text, err));
    if (prog_on)
        llmrt_progress_done(&prog);
    if (res) {
        res->bytes = p->total_bytes;
        res->n_tensors = (uint32_t)p->n;
        res->n_shards = p->n_shards;
        res->seconds = llmrt_now_s() - t0;
    }
cleanup:
    free(text);
    if (prog_on)
        llmrt_progress_free(&prog);
    free(buf[0]);
    free(buf[1]);
    return st;
}
