/* safetensors.c — the safetensors reader: header validation, mmapped files, model folders
 * (single file, every *.safetensors, or sharded through model.safetensors.index.json) and
 * the llmrt_checkpoint accessor handed to plugins (see safetensors.h).
 *
 * Why this much checking: a checkpoint is untrusted input, and a plugin that trusts a bad
 * header reads past the mapping or mixes up tensors. So every file is validated in full at
 * open time, and each message names the file, the tensor and what would be right.
 *
 * File format (as the reference implementation writes it): 8-byte little-endian header
 * length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 * optional "__metadata__": {string: string}} padded with spaces, then the data area;
 * offsets are relative to the data area's start. */
#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fileutil.h"
#include "jsonutil.h"
#include "progress.h"

/* uthash reports allocation failure through a local `oom` flag instead of exiting the
 * process (see build_table). */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(elt) (oom = 1)
#include <uthash.h>

/* The reference implementation's cap; a larger header is corrupt or hostile. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)

/* ---------------------------------------------------------------------------------------- */
/* Header parsing                                                                            */

static llmrt_dtype dtype_from_name(const char *s)
{
    for (int t = 1; t < LLMRT_DTYPE_COUNT; t++)
        if (strcmp(s, llmrt_dtype_name((llmrt_dtype)t)) == 0)
            return (llmrt_dtype)t;
    return LLMRT_DTYPE_INVALID;
}

void llmrt_st_views_free(llmrt_tensor_view *views, size_t n)
{
    if (!views)
        return;
    for (size_t i = 0; i < n; i++)
        free((char *)views[i].name);
    free(views);
}

/* Parse one tensor entry `v` of the header into *out (name not set). `data_size` is the
 * data area's length; *begin receives the span start. */
static llmrt_status parse_entry(const char *file, const char *tname, json_t *v, size_t data_size,
                                llmrt_tensor_view *out, uint64_t *begin, llmrt_error *err)
{
    if (!json_is_object(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': header entry is %s, expected an object with "
                          "\"dtype\", \"shape\" and \"data_offsets\"",
                          file, tname, llmrt_json_type_name(v));
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!jd || !js || !jo)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: tensor '%s': header entry lacks \"%s\"",
                          file, tname, !jd ? "dtype" : !js ? "shape" : "data_offsets");

    if (!json_is_string(jd))
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: tensor '%s': dtype is %s, expected a string",
                          file, tname, llmrt_json_type_name(jd));
    out->dtype = dtype_from_name(json_string_value(jd));
    if (out->dtype == LLMRT_DTYPE_INVALID)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': unknown dtype '%.40s' (supported: F64 F32 F16 BF16 "
                          "I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2)",
                          file, tname, json_string_value(jd));

    if (!json_is_array(js))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': shape is %s, expected an array of integers", file,
                          tname, llmrt_json_type_name(js));
    size_t nd = json_array_size(js);
    if (nd > LLMRT_MAX_DIMS)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: tensor '%s': shape has %zu dimensions; llmrt supports at most %d",
                          file, tname, nd, LLMRT_MAX_DIMS);
    out->ndim = (int32_t)nd;
    uint64_t bytes = llmrt_dtype_size(out->dtype);
    for (size_t d = 0; d < nd; d++) {
        json_t *e = json_array_get(js, d);
        if (!json_is_integer(e))
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "%s: tensor '%s': shape[%zu] is %s, expected a non-negative integer",
                              file, tname, d, llmrt_json_type_name(e));
        json_int_t x = json_integer_value(e);
        if (x < 0)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "%s: tensor '%s': shape[%zu] is %lld, expected a non-negative integer",
                              file, tname, d, (long long)x);
        out->shape[d] = (int64_t)x;
        if (__builtin_mul_overflow(bytes, (uint64_t)x, &bytes))
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "%s: tensor '%s': shape's byte size overflows 64 bits", file, tname);
    }
    for (size_t d = nd; d < LLMRT_MAX_DIMS; d++)
        out->shape[d] = 1;

    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets must be an array [begin, end]", file,
                          tname);
    json_int_t ob[2];
    for (int k = 0; k < 2; k++) {
        json_t *e = json_array_get(jo, (size_t)k);
        if (!json_is_integer(e) || json_integer_value(e) < 0)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "%s: tensor '%s': data_offsets[%d] must be a non-negative integer",
                              file, tname, k);
        ob[k] = json_integer_value(e);
    }
    uint64_t b = (uint64_t)ob[0], e = (uint64_t)ob[1];
    if (b > e)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] are reversed (begin > end)",
                          file, tname, (unsigned long long)b, (unsigned long long)e);
    if (e > data_size)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': data_offsets [%llu, %llu] out of range: the data "
                          "area is %zu bytes (file truncated?)",
                          file, tname, (unsigned long long)b, (unsigned long long)e, data_size);
    if (e - b != bytes) {
        char dims[128] = "";
        size_t off = 0;
        for (size_t d = 0; d < nd; d++)
            off += (size_t)snprintf(dims + off, sizeof dims - off, "%s%lld", d ? ", " : "",
                                    (long long)out->shape[d]);
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: tensor '%s': shape [%s] x %s is %llu bytes, but data_offsets "
                          "[%llu, %llu] span %llu bytes",
                          file, tname, dims, llmrt_dtype_name(out->dtype),
                          (unsigned long long)bytes, (unsigned long long)b,
                          (unsigned long long)e, (unsigned long long)(e - b));
    }
    out->bytes = (size_t)bytes;
    *begin = b;
    return LLMRT_OK;
}

typedef struct span {
    uint64_t begin, end;
    size_t index;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

llmrt_status llmrt_st_parse(const char *name, const uint8_t *data, size_t size,
                            llmrt_tensor_view **out, size_t *out_n, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_t *root = NULL;
    llmrt_tensor_view *views = NULL;
    span *spans = NULL;
    size_t n = 0;
    *out = NULL;
    *out_n = 0;

    if (size < 8)
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: truncated: the file is %zu bytes, but a safetensors file starts with an "
             "8-byte header length",
             name, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | data[i];
    if (hlen > ST_MAX_HEADER)
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: header length %llu is larger than the %u-byte limit (not a safetensors "
             "file, or corrupt)",
             name, (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > size - 8)
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: header length %llu runs past the end of the file (%zu bytes after the "
             "length field; file truncated?)",
             name, (unsigned long long)hlen, size - 8);
    json_error_t jerr;
    root = json_loadb((const char *)data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        FAIL(err, LLMRT_ERR_FORMAT, "%s: bad JSON header (%llu bytes) at line %d column %d: %s",
             name, (unsigned long long)hlen, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root))
        FAIL(err, LLMRT_ERR_FORMAT, "%s: header is %s, expected a JSON object", name,
             llmrt_json_type_name(root));

    size_t data_size = size - 8 - (size_t)hlen;
    const uint8_t *base = data + 8 + hlen;
    size_t cap = json_object_size(root);
    views = calloc(cap ? cap : 1, sizeof *views);
    spans = calloc(cap ? cap : 1, sizeof *spans);
    TRY_ALLOC(err, views && spans, "safetensors tensor table");

    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val))
                FAIL(err, LLMRT_ERR_FORMAT,
                     "%s: __metadata__ is %s, expected an object of strings", name,
                     llmrt_json_type_name(val));
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv))
                    FAIL(err, LLMRT_ERR_FORMAT,
                         "%s: __metadata__['%.80s'] is %s, expected a string", name, mk,
                         llmrt_json_type_name(mv));
            }
            continue;
        }
        llmrt_tensor_view *v = &views[n];
        uint64_t begin = 0;
        TRY(parse_entry(name, key, val, data_size, v, &begin, err));
        v->name = strdup(key);
        TRY_ALLOC(err, v->name, "tensor name");
        v->data = base + begin;
        v->file = name;
        spans[n] = (span){begin, begin + v->bytes, n};
        n++;
    }

    /* Spans must not overlap. Zero-byte tensors occupy nothing and are left out. */
    qsort(spans, n, sizeof *spans, span_cmp);
    const span *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const span *s = &spans[i];
        if (s->begin == s->end)
            continue;
        if (prev && prev->end > s->begin)
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap in the data area",
                 name, views[prev->index].name, (unsigned long long)prev->begin,
                 (unsigned long long)prev->end, views[s->index].name,
                 (unsigned long long)s->begin, (unsigned long long)s->end);
        prev = s;
    }

    *out = views;
    *out_n = n;
    views = NULL;
cleanup:
    llmrt_st_views_free(views, n);
    free(spans);
    json_decref(root);
    return st;
}

/* ---------------------------------------------------------------------------------------- */
/* One file                                                                                  */

struct llmrt_st_file {
    char *path;
    void *map;    /* whole file, PROT_READ */
    size_t size;
    llmrt_tensor_view *views;
    size_t n;
};

llmrt_status llmrt_st_file_open(const char *path, llmrt_st_file **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_st_file *f = NULL;
    int fd = -1;
    *out = NULL;

    f = calloc(1, sizeof *f);
    TRY_ALLOC(err, f, "safetensors file");
    f->path = strdup(path);
    TRY_ALLOC(err, f->path, "path");
    /* Any size (the data is mapped, not read); the header's length is bounded in parse. */
    uint64_t size = 0;
    TRY(llmrt_open_regular(path, O_RDONLY, 0, "safetensors file", &fd, &size, err));
    if (size > SIZE_MAX)
        FAIL(err, LLMRT_ERR_LIMIT, "%s: %llu bytes do not fit in this process's address space",
             path, (unsigned long long)size);
    f->size = (size_t)size;
    if (f->size < 8) /* also keeps mmap away from empty files */
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: truncated: the file is %zu bytes, but a safetensors file starts with an "
             "8-byte header length",
             path, f->size);
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        FAIL(err, LLMRT_ERR_IO, "%s: cannot mmap %zu bytes: %s", path, f->size, strerror(errno));
    }
    TRY(llmrt_st_parse(f->path, f->map, f->size, &f->views, &f->n, err));
    *out = f;
    f = NULL;
cleanup:
    if (fd >= 0)
        close(fd);
    llmrt_st_file_close(f);
    return st;
}

void llmrt_st_file_close(llmrt_st_file *f)
{
    if (!f)
        return;
    llmrt_st_views_free(f->views, f->n);
    if (f->map)
        munmap(f->map, f->size);
    free(f->path);
    free(f);
}

size_t llmrt_st_file_count(const llmrt_st_file *f) { return f->n; }

const llmrt_tensor_view *llmrt_st_file_at(const llmrt_st_file *f, size_t i)
{
    return i < f->n ? &f->views[i] : NULL;
}

const llmrt_tensor_view *llmrt_st_file_find(const llmrt_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->views[i].name, name) == 0)
            return &f->views[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* A model folder                                                                            */

typedef struct st_entry {
    const llmrt_tensor_view *view; /* key: view->name */
    int counted;                   /* already counted toward the progress display */
    void *aligned;                 /* heap copy when the mapped data is misaligned, else NULL */
    UT_hash_handle hh;
} st_entry;

struct llmrt_st_model {
    char *dir;
    char *config_json;
    llmrt_st_file **files;
    size_t n_files;
    st_entry *entries; /* [n_tensors] storage */
    st_entry *table;   /* uthash over entries, by name */
    size_t n_tensors;
    uint64_t total_bytes;
    llmrt_checkpoint ckpt;
    int show_progress;
    int progress_started;
    llmrt_progress progress;
    pthread_mutex_t lock; /* guards progress_started and entries[].counted */
};

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

/* Open one shard named by the index (or found in the folder) and append it to m->files.
 * `why` says who named the file, for the error message. */
static llmrt_status add_file(llmrt_st_model *m, const char *fname, const char *why,
                             llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *path = path_join(m->dir, fname);
    llmrt_st_file *f = NULL;
    TRY_ALLOC(err, path, "path");
    st = llmrt_st_file_open(path, &f, err);
    if (st != LLMRT_OK) {
        if (why)
            llmrt_error_prefix(err, "%s", why);
        goto cleanup;
    }
    llmrt_st_file **grown = realloc(m->files, (m->n_files + 1) * sizeof *grown);
    TRY_ALLOC(err, grown, "shard list");
    m->files = grown;
    m->files[m->n_files++] = f;
    f = NULL;
cleanup:
    llmrt_st_file_close(f);
    free(path);
    return st;
}

static int file_index(const llmrt_st_model *m, const char *fname)
{
    for (size_t i = 0; i < m->n_files; i++) {
        const char *p = strrchr(m->files[i]->path, '/');
        if (strcmp(p ? p + 1 : m->files[i]->path, fname) == 0)
            return (int)i;
    }
    return -1;
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: file}}. Opens every
 * named file once and checks that each file holds the tensors the index puts there. */
static llmrt_status open_indexed(llmrt_st_model *m, const char *index_path, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_t *root = NULL;
    json_error_t jerr;
    char why[512], *text = NULL;
    size_t len = 0;

    TRY(llmrt_read_file_bounded(index_path, LLMRT_MAX_INDEX_BYTES,
                                "model.safetensors.index.json", &text, &len, err));
    root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        FAIL(err, LLMRT_ERR_FORMAT, "%s: bad JSON at line %d column %d: %s", index_path,
             jerr.line, jerr.column, jerr.text);
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm))
        FAIL(err, LLMRT_ERR_FORMAT,
             "%s: \"weight_map\" is missing or not an object (expected {tensor name: file name})",
             index_path);
    if (json_object_size(wm) == 0)
        FAIL(err, LLMRT_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);

    const char *tname;
    json_t *fv;
    json_object_foreach(wm, tname, fv) {
        if (!json_is_string(fv))
            FAIL(err, LLMRT_ERR_FORMAT, "%s: weight_map['%s'] is %s, expected a file name",
                 index_path, tname, llmrt_json_type_name(fv));
        const char *fname = json_string_value(fv);
        if (!fname[0] || strchr(fname, '/') || strcmp(fname, "..") == 0 ||
            strcmp(fname, ".") == 0)
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: weight_map['%s'] is '%s', expected a plain file name in the model folder",
                 index_path, tname, fname);
        if (file_index(m, fname) < 0) {
            snprintf(why, sizeof why, "%s names shard '%s' (for tensor '%s')", index_path, fname,
                     tname);
            TRY(add_file(m, fname, why, err));
        }
    }
    /* Every tensor the index names must be in the file it names. */
    json_object_foreach(wm, tname, fv) {
        const char *fname = json_string_value(fv);
        const llmrt_st_file *f = m->files[file_index(m, fname)];
        if (!llmrt_st_file_find(f, tname))
            FAIL(err, LLMRT_ERR_FORMAT,
                 "%s: the index puts tensor '%s' in %s, but that file has no such tensor",
                 index_path, tname, f->path);
    }
cleanup:
    json_decref(root);
    free(text);
    return st;
}

static int is_safetensors_name(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 12 && strcmp(d->d_name + n - 12, ".safetensors") == 0;
}

/* No index: every *.safetensors in the folder, in name order. */
static llmrt_status open_folder(llmrt_st_model *m, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    struct dirent **list = NULL;
    int n = scandir(m->dir, &list, is_safetensors_name, alphasort);
    if (n < 0)
        FAIL(err, LLMRT_ERR_IO, "%s: cannot list the model folder: %s", m->dir, strerror(errno));
    if (n == 0)
        FAIL(err, LLMRT_ERR_NOT_FOUND,
             "%s: no *.safetensors files and no model.safetensors.index.json in the model folder",
             m->dir);
    for (int i = 0; i < n; i++)
        TRY(add_file(m, list[i]->d_name, NULL, err));
cleanup:
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
    return st;
}

/* One name → view table over all files; a name in two files is an error. */
static llmrt_status build_table(llmrt_st_model *m, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int oom = 0;
    size_t total = 0;
    for (size_t i = 0; i < m->n_files; i++)
        total += m->files[i]->n;
    m->entries = calloc(total ? total : 1, sizeof *m->entries);
    TRY_ALLOC(err, m->entries, "tensor table");
    for (size_t i = 0; i < m->n_files; i++) {
        const llmrt_st_file *f = m->files[i];
        for (size_t k = 0; k < f->n; k++) {
            const llmrt_tensor_view *v = &f->views[k];
            st_entry *dup = NULL;
            HASH_FIND_STR(m->table, v->name, dup);
            if (dup)
                FAIL(err, LLMRT_ERR_FORMAT,
                     "tensor '%s' is in both %s and %s (a tensor must be in exactly one file)",
                     v->name, dup->view->file, v->file);
            st_entry *e = &m->entries[m->n_tensors];
            e->view = v;
            HASH_ADD_KEYPTR(hh, m->table, v->name, strlen(v->name), e);
            if (oom)
                FAIL(err, LLMRT_ERR_NOMEM, "out of memory growing the tensor table");
            m->n_tensors++;
            m->total_bytes += v->bytes;
        }
    }
cleanup:
    return st;
}

static llmrt_status ckpt_find(void *ctx, const char *name, llmrt_tensor_view *out,
                              llmrt_error *err)
{
    llmrt_st_model *m = ctx;
    st_entry *e = NULL;
    HASH_FIND_STR(m->table, name, e);
    if (!e)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "tensor '%s' not found in the checkpoint %s (%zu tensors in %zu file%s)",
                          name, m->dir, m->n_tensors, m->n_files, m->n_files == 1 ? "" : "s");
    *out = *e->view;
    /* Files whose header length is not a multiple of 8 (old writers did not pad) leave
     * tensors misaligned in the mapping; plugins index data as uint16/int32/float arrays,
     * so they get an aligned copy instead, made once and kept until close. */
    size_t esize = llmrt_dtype_size(out->dtype);
    if (out->bytes && (uintptr_t)out->data % esize != 0) {
        pthread_mutex_lock(&m->lock);
        if (!e->aligned && (e->aligned = malloc(out->bytes)) != NULL)
            memcpy(e->aligned, e->view->data, out->bytes);
        pthread_mutex_unlock(&m->lock);
        if (!e->aligned)
            return llmrt_fail(err, LLMRT_ERR_NOMEM,
                              "out of memory copying misaligned tensor '%s' (%zu bytes) of %s",
                              name, out->bytes, out->file);
        out->data = e->aligned;
    }
    if (m->show_progress) {
        int count;
        pthread_mutex_lock(&m->lock);
        if (!m->progress_started) {
            llmrt_progress_init(&m->progress, stderr, llmrt_progress_is_tty(stderr), "loading",
                                "tensors", m->total_bytes, m->n_tensors);
            m->progress_started = 1;
        }
        count = !e->counted;
        e->counted = 1;
        pthread_mutex_unlock(&m->lock);
        if (count)
            llmrt_progress_add(&m->progress, e->view->bytes, 1);
    }
    return LLMRT_OK;
}

static int ckpt_has(void *ctx, const char *name)
{
    llmrt_st_model *m = ctx;
    st_entry *e = NULL;
    HASH_FIND_STR(m->table, name, e);
    return e != NULL;
}

llmrt_status llmrt_st_model_open(const char *dir, int show_progress, llmrt_st_model **out,
                                 llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_st_model *m = NULL;
    char *cfg_path = NULL, *index_path = NULL;
    *out = NULL;

    m = calloc(1, sizeof *m);
    TRY_ALLOC(err, m, "model");
    pthread_mutex_init(&m->lock, NULL);
    m->show_progress = show_progress;
    m->dir = strdup(dir);
    TRY_ALLOC(err, m->dir, "path");
    struct stat sb;
    if (stat(dir, &sb) != 0)
        FAIL(err, LLMRT_ERR_IO, "model folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        FAIL(err, LLMRT_ERR_IO, "model folder %s: not a directory (expected a folder holding "
             "config.json and *.safetensors)", dir);

    cfg_path = path_join(dir, "config.json");
    index_path = path_join(dir, "model.safetensors.index.json");
    TRY_ALLOC(err, cfg_path && index_path, "path");
    TRY(llmrt_read_file_bounded(cfg_path, LLMRT_MAX_CONFIG_BYTES, "config.json",
                                &m->config_json, NULL, err));

    if (llmrt_path_exists(index_path))
        TRY(open_indexed(m, index_path, err));
    else
        TRY(open_folder(m, err));
    TRY(build_table(m, err));

    m->ckpt.ctx = m;
    m->ckpt.dir = m->dir;
    m->ckpt.config_json = m->config_json;
    m->ckpt.find = ckpt_find;
    m->ckpt.has = ckpt_has;
    *out = m;
    m = NULL;
cleanup:
    free(cfg_path);
    free(index_path);
    llmrt_st_model_close(m);
    return st;
}

void llmrt_st_model_close(llmrt_st_model *m)
{
    if (!m)
        return;
    HASH_CLEAR(hh, m->table);
    for (size_t i = 0; i < m->n_tensors; i++)
        free(m->entries[i].aligned);
    free(m->entries);
    for (size_t i = 0; i < m->n_files; i++)
        llmrt_st_file_close(m->files[i]);
    free(m->files);
    if (m->progress_started)
        llmrt_progress_free(&m->progress);
    pthread_mutex_destroy(&m->lock);
    free(m->config_json);
    free(m->dir);
    free(m);
}

const llmrt_checkpoint *llmrt_st_model_checkpoint(llmrt_st_model *m) { return &m->ckpt; }

void llmrt_st_model_progress_done(llmrt_st_model *m)
{
    pthread_mutex_lock(&m->lock);
    int started = m->progress_started;
    pthread_mutex_unlock(&m->lock);
    if (started)
        llmrt_progress_done(&m->progress);
}

uint64_t llmrt_st_model_total_bytes(const llmrt_st_model *m) { return m->total_bytes; }

size_t llmrt_st_model_file_count(const llmrt_st_model *m) { return m->n_files; }

const llmrt_st_file *llmrt_st_model_file(const llmrt_st_model *m, size_t i)
{
    return i < m->n_files ? m->files[i] : NULL;
}
