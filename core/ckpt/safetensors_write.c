/* safetensors_write.c — the safetensors writer (mkmodel, tests): declare every tensor, write
 * the header, then stream the data (see safetensors.h).
 *
 * Why streaming: mkmodel writes multi-GB checkpoints from a fill buffer and never holds a
 * whole tensor, let alone the model, in memory. The file is exactly what the reference
 * implementation writes: 8-byte little-endian header length, compact JSON header with
 * "__metadata__": {"format": "pt"} (transformers checks it), padded with spaces to a
 * multiple of 8 bytes, then the tensors back to back in declaration order. The format
 * requires the spans to tile the data area with no gaps, so there is no padding between
 * tensors: declare tensors with larger element sizes first when alignment matters. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

typedef struct wr_tensor {
    char *name;
    uint64_t bytes;
} wr_tensor;

struct llmrt_st_writer {
    char *path;
    int fd;
    json_t *header;       /* built as tensors are declared */
    wr_tensor *tensors;
    size_t n, cap;
    uint64_t data_bytes;  /* sum of declared sizes */
    uint64_t written;     /* data bytes written so far */
    int began;
};

llmrt_status llmrt_st_writer_open(const char *path, llmrt_st_writer **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_st_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    TRY_ALLOC(err, w, "safetensors writer");
    w->fd = -1;
    w->path = strdup(path);
    w->header = json_object();
    json_t *meta = json_pack("{s:s}", "format", "pt");
    TRY_ALLOC(err, w->path && w->header && meta, "safetensors header");
    json_object_set_new(w->header, "__metadata__", meta);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        FAIL(err, LLMRT_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    *out = w;
    w = NULL;
cleanup:
    if (w) {
        json_decref(w->header);
        free(w->path);
        free(w);
    }
    return st;
}

llmrt_status llmrt_st_writer_add(llmrt_st_writer *w, const char *name, llmrt_dtype dtype,
                                 int32_t ndim, const int64_t *shape /* [ndim] */,
                                 llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_t *entry = NULL;
    if (w->began)
        FAIL(err, LLMRT_ERR_STATE, "%s: tensor '%s' declared after the data began", w->path,
             name);
    if (!strcmp(name, "__metadata__") || json_object_get(w->header, name))
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: tensor '%s' declared twice (or reserved name)",
             w->path, name);
    if (llmrt_dtype_size(dtype) == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: tensor '%s': invalid dtype %d", w->path, name,
             (int)dtype);
    if (ndim < 0 || ndim > LLMRT_MAX_DIMS)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions (0..%d allowed)",
             w->path, name, (int)ndim, LLMRT_MAX_DIMS);
    uint64_t bytes = llmrt_dtype_size(dtype);
    json_t *jshape = json_array();
    entry = json_object();
    TRY_ALLOC(err, entry, "safetensors header");
    json_object_set_new(entry, "dtype", json_string(llmrt_dtype_name(dtype)));
    json_object_set_new(entry, "shape", jshape);
    TRY_ALLOC(err, jshape, "safetensors header");
    for (int32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0 || __builtin_mul_overflow(bytes, (uint64_t)shape[d], &bytes))
            FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: tensor '%s': bad shape[%d] = %lld", w->path,
                 name, (int)d, (long long)shape[d]);
        json_array_append_new(jshape, json_integer(shape[d]));
    }
    json_object_set_new(entry, "data_offsets",
                        json_pack("[I,I]", (json_int_t)w->data_bytes,
                                  (json_int_t)(w->data_bytes + bytes)));
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        wr_tensor *g = realloc(w->tensors, cap * sizeof *g);
        TRY_ALLOC(err, g, "tensor list");
        w->tensors = g;
        w->cap = cap;
    }
    w->tensors[w->n].name = strdup(name);
    TRY_ALLOC(err, w->tensors[w->n].name, "tensor name");
    w->tensors[w->n].bytes = bytes;
    if (json_object_set_new(w->header, name, entry) != 0) {
        entry = NULL;
        free(w->tensors[w->n].name);
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory adding '%s' to the header", name);
    }
    entry = NULL;
    w->n++;
    w->data_bytes += bytes;
cleanup:
    json_decref(entry);
    return st;
}

static llmrt_status write_all(llmrt_st_writer *w, const void *data, size_t bytes,
                              llmrt_error *err)
{
    const char *p = data;
    while (bytes) {
        ssize_t got = write(w->fd, p, bytes);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return llmrt_fail(err, LLMRT_ERR_IO, "%s: write failed: %s", w->path,
                              strerror(errno));
        }
        p += got;
        bytes -= (size_t)got;
    }
    return LLMRT_OK;
}

llmrt_status llmrt_st_writer_begin_data(llmrt_st_writer *w, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *text = NULL, *buf = NULL;
    if (w->began)
        FAIL(err, LLMRT_ERR_STATE, "%s: begin_data called twice", w->path);
    text = json_dumps(w->header, JSON_COMPACT);
    TRY_ALLOC(err, text, "safetensors header text");
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    buf = malloc(8 + padded);
    TRY_ALLOC(err, buf, "safetensors header");
    for (int i = 0; i < 8; i++)
        buf[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
    memcpy(buf + 8, text, len);
    memset(buf + 8 + len, ' ', padded - len);
    TRY(write_all(w, buf, 8 + padded, err));
    w->began = 1;
cleanup:
    free(buf);
    free(text);
    return st;
}

/* Name of the tensor that byte `off` of the data area belongs to (for messages). */
static const char *tensor_at(const llmrt_st_writer *w, uint64_t off)
{
    uint64_t end = 0;
    for (size_t i = 0; i < w->n; i++) {
        end += w->tensors[i].bytes;
        if (off < end)
            return w->tensors[i].name;
    }
    return w->n ? w->tensors[w->n - 1].name : "(none)";
}

llmrt_status llmrt_st_writer_write(llmrt_st_writer *w, const void *data, size_t bytes,
                                   llmrt_error *err)
{
    if (!w->began)
        return llmrt_fail(err, LLMRT_ERR_STATE, "%s: data written before begin_data", w->path);
    if (bytes > w->data_bytes - w->written)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: %zu bytes written past the declared %llu-byte data area "
                          "(after tensor '%s')",
                          w->path, bytes, (unsigned long long)w->data_bytes,
                          w->n ? w->tensors[w->n - 1].name : "(none)");
    llmrt_status st = write_all(w, data, bytes, err);
    if (st == LLMRT_OK)
        w->written += bytes;
    return st;
}

llmrt_status llmrt_st_writer_close(llmrt_st_writer *w, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (!w)
        return LLMRT_OK;
    if (w->fd >= 0 && w->written != w->data_bytes)
        st = llmrt_fail(err, LLMRT_ERR_STATE,
                        "%s: closed after %llu of %llu data bytes (tensor '%s' incomplete)",
                        w->path, (unsigned long long)w->written,
                        (unsigned long long)w->data_bytes, tensor_at(w, w->written));
    if (w->fd >= 0 && close(w->fd) != 0 && st == LLMRT_OK)
        st = llmrt_fail(err, LLMRT_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
    for (size_t i = 0; i < w->n; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    json_decref(w->header);
    free(w->path);
    free(w);
    return st;
}
