/* memory_common.c — see memory_common.h. Policy only: every byte of memory and every copy
 * goes through the backend's mechanisms (host_alloc, dev_alloc, host_device_ptr, copy). */
#include "memory_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct llmrt_memory {
    memc_policy pol;      /* gather_inputs cleared where device memory is host memory */
    int64_t delay_ns;    /* [memory.<name>] delay_us */
    const llmrt_host *host;
    llmrt_backend_ref be;
    int fallback_error;  /* memory.fallback = error */
    int logged_fallback; /* the fallback is logged once */
    int n_buffers, n_fallback_buffers;
    llmrt_mem_stats st;
    /* CPU weight offload (offload_*) */
    int32_t off_n;          /* offloaded layers (0: none) */
    size_t off_bytes;       /* bytes held per layer */
    uint32_t off_flags;     /* host flags of the layers' memory (0 after a fallback) */
    void **off_host;        /* [off_n] each layer's host memory */
    size_t *off_used;       /* [off_n] bytes placed in it */
    int off_slots;          /* device staging slots: 2 (prefetch), 1 (sync), 0 (mapped) */
    void *slot[2];
    llmrt_event *done[2];   /* prefetch: the copy into slot i is done (copy_side) */
    int side;               /* the backend has copy_side and event_wait */
};

/* Per-buffer bookkeeping kept in llmrt_mem_buffer.priv. */
typedef struct buf_priv {
    uint32_t host_flags; /* what host[] was allocated with (0 after a fallback) */
    int halves;          /* 1 or 2 distinct host allocations */
    int zero_copy;
} buf_priv;

/* The host's booleans (config.c): true/false, yes/no, on/off, 1/0 in any case. */
static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 1;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 1;
    }
    return 0;
}

#define DELAY_KEY                                                                            \
    {"delay_us", LLMRT_KEY_INT, "0", "0..1000000",                                            \
     "Host time in microseconds added to each step's input transfer: a planted slowdown for "  \
     "testing A/B verdicts, never for use.",                                                   \
     LLMRT_KEY_DEVELOPER}
/* Where the section set `key` ("file:line"), or "default". */
static const char *where_of(const llmrt_section *cfg, const char *key)
{
    const char *where = "default";
    for (size_t i = 0; cfg && cfg->where && i < cfg->n; i++)
        if (strcmp(cfg->keys[i], key) == 0 && cfg->where[i])
            where = cfg->where[i];
    return where;
}

/* delay_us: spin until the monotonic clock has moved on by ns (a sleep would add the
 * scheduler's wake-up latency, which is neither fixed nor small). */
static void spin_ns(int64_t ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec) < ns);
}

const llmrt_key memc_double_buffer_keys[MEMC_N_DOUBLE_BUFFER_KEYS] = {
    {"double_buffer", LLMRT_KEY_BOOL, "true", NULL,
     "Two host buffers per step buffer, so the host fills step N+1 while step N runs.", 0},
    DELAY_KEY,
};
const llmrt_key memc_plain_keys[MEMC_N_PLAIN_KEYS] = {DELAY_KEY};

llmrt_status memc_create(const memc_policy *policy, const llmrt_host *host,
                         const llmrt_section *cfg, const llmrt_backend_ref *backend,
                         llmrt_memory **out, llmrt_error *err)
{
    memc_policy pol = *policy;
    const llmrt_key *keys = policy->double_buffer ? memc_double_buffer_keys : memc_plain_keys;
    const uint32_t n_keys =
        policy->double_buffer ? MEMC_N_DOUBLE_BUFFER_KEYS : MEMC_N_PLAIN_KEYS;
    if (policy->double_buffer) { /* validated by the host; absent (no host): the default */
        const char *v = llmrt_key_value(cfg, keys, n_keys, "double_buffer");
        if (!parse_bool(v, &pol.double_buffer)) {
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: [memory.%s] double_buffer = '%s' is not a boolean (use true "
                              "or false)",
                              where_of(cfg, "double_buffer"), pol.name, v);
        }
    }
    const char *dv = llmrt_key_value(cfg, keys, n_keys, "delay_us");
    char *end = NULL;
    long long delay_us = strtoll(dv, &end, 10);
    if (!dv[0] || *end || delay_us < 0 || delay_us > 1000000)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: [memory.%s] delay_us = '%s' is not an integer from 0 to 1000000",
                          where_of(cfg, "delay_us"), pol.name, dv);
    if ((pol.host_flags & LLMRT_HOST_MAPPED) &&
        !(backend->vt->caps(backend->b) & LLMRT_BACKEND_CAP_MAPPED_HOST) && host)
        host->log(host->ctx, LLMRT_LOG_WARN, pol.name,
                  "backend '%s' cannot map host memory for the device", backend->name);
    /* the mapped address is the host address: a gather would copy memory onto itself */
    if (backend->vt->caps(backend->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE)
        pol.gather_inputs = 0;
    llmrt_memory *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    m->pol = pol;
    m->delay_ns = (int64_t)delay_us * 1000;
    m->host = host;
    m->be = *backend;
    const char *fb = host && host->config_get ? host->config_get(host->ctx, "memory.fallback") : NULL;
    m->fallback_error = fb && strcmp(fb, "error") == 0;
    snprintf(m->st.path_in_use, sizeof m->st.path_in_use, "%s", pol.name);
    *out = m;
    return LLMRT_OK;
}

static void account(llmrt_memory *m, uint32_t flags, size_t bytes, int sign);

void memc_destroy(llmrt_memory *m)
{
    for (int32_t k = 0; k < m->off_n; k++)
        if (m->off_host[k])
            m->be.vt->host_free(m->be.b, m->off_host[k]);
    for (int i = 0; i < 2; i++) {
        if (m->slot[i])
            m->be.vt->dev_free(m->be.b, m->slot[i]);
        if (m->done[i])
            m->be.vt->event_destroy(m->be.b, m->done[i]);
    }
    free(m->off_host);
    free(m->off_used);
    free(m);
}

/* ---- CPU weight offload ---- */

static const char *offload_mode(const llmrt_memory *m)
{
    if (m->off_flags & LLMRT_HOST_MAPPED)
        return "mapped";
    if (m->off_flags & LLMRT_HOST_PINNED)
        return m->side ? "prefetch (pinned)" : "prefetch (pinned, one stream)";
    return m->pol.host_flags ? "sync (pageable, fallback)" : "sync (pageable)";
}

static llmrt_status offload_alloc_layers(llmrt_memory *m, uint32_t flags, llmrt_error *err)
{
    for (int32_t k = 0; k < m->off_n; k++) {
        llmrt_status st = m->be.vt->host_alloc(m->be.b, m->off_bytes, flags, &m->off_host[k], err);
        if (st) {
            for (int32_t j = 0; j < k; j++) {
                m->be.vt->host_free(m->be.b, m->off_host[j]);
                m->off_host[j] = NULL;
            }
            m->off_host[k] = NULL;
            return st;
        }
    }
    return LLMRT_OK;
}

llmrt_status memc_offload_init(llmrt_memory *m, int32_t n_layers, size_t layer_bytes,
                               llmrt_error *err)
{
    if (m->off_n || n_layers <= 0 || layer_bytes == 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: offload_init(%d layers of %zu bytes) %s", m->pol.name, n_layers,
                          layer_bytes, m->off_n ? "called twice" : "asks for nothing");
    m->off_host = calloc((size_t)n_layers, sizeof *m->off_host);
    m->off_used = calloc((size_t)n_layers, sizeof *m->off_used);
    if (!m->off_host || !m->off_used)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    m->off_n = n_layers;
    m->off_bytes = layer_bytes;
    m->off_flags = m->pol.host_flags;
    llmrt_status st = offload_alloc_layers(m, m->off_flags, err);
    if (st && m->off_flags) {
        const char *kind = (m->off_flags & LLMRT_HOST_MAPPED) ? "mapped" : "pinned";
        if (m->fallback_error) {
            char reason[LLMRT_ERROR_MSG_MAX / 2];
            snprintf(reason, sizeof reason, "%s", err->msg);
            m->off_n = 0;
            return llmrt_fail(err, st,
                              "%s: cannot allocate %d layers of %zu bytes of %s host memory for "
                              "memory.cpu_offload_gb (%s) and memory.fallback = error",
                              m->pol.name, n_layers, layer_bytes, kind, reason);
        }
        if (m->host)
            m->host->log(m->host->ctx, LLMRT_LOG_WARN, m->pol.name,
                         "cannot %s %d layers of %zu bytes of host memory for offloaded weights "
                         "(%s); copying them synchronously from pageable memory instead "
                         "(memory.fallback = pageable)",
                         (m->off_flags & LLMRT_HOST_MAPPED) ? "map" : "pin", n_layers,
                         layer_bytes, err->msg);
        m->st.fallbacks++;
        m->off_flags = 0;
        st = offload_alloc_layers(m, 0, err);
    }
    if (st) {
        m->off_n = 0;
        return st;
    }
    const llmrt_backend_vtable *bv = m->be.vt;
    m->side = (m->off_flags & LLMRT_HOST_PINNED) && !(m->off_flags & LLMRT_HOST_MAPPED) &&
              LLMRT_VT_HAS(bv, llmrt_backend_vtable, copy_side) &&
              LLMRT_VT_HAS(bv, llmrt_backend_vtable, event_wait);
    m->off_slots = (m->off_flags & LLMRT_HOST_MAPPED) ? 0 : (m->off_flags ? 2 : 1);
    for (int i = 0; i < m->off_slots && st == LLMRT_OK; i++) {
        st = bv->dev_alloc(m->be.b, layer_bytes, &m->slot[i], err);
        if (st == LLMRT_OK)
            m->st.device_bytes += layer_bytes;
        else {
            char why[LLMRT_ERROR_MSG_MAX / 2];
            snprintf(why, sizeof why, "%s", err->msg);
            llmrt_fail(err, st, "%s: the offloaded weights' staging slot %d (%zu bytes): %s",
                       m->pol.name, i, layer_bytes, why);
        }
    }
    for (int i = 0; m->side && i < 2 && st == LLMRT_OK; i++)
        st = bv->event_create(m->be.b, &m->done[i], err);
    if (st)
        return st; /* memc_destroy frees what was made */
    account(m, m->off_flags, layer_bytes * (size_t)n_layers, +1);
    m->st.offload_layers = n_layers;
    snprintf(m->st.offload_path, sizeof m->st.offload_path, "%s", offload_mode(m));
    return LLMRT_OK;
}

llmrt_status memc_offload_place(llmrt_memory *m, int32_t k, size_t off, const void *dev,
                                size_t bytes, void **kernel_ptr, llmrt_error *err)
{
    if (k < 0 || k >= m->off_n || off % 256 || off > m->off_bytes || bytes > m->off_bytes - off)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: offload_place(layer %d of %d, offset %zu, %zu bytes) outside the "
                          "%zu bytes per layer",
                          m->pol.name, k, m->off_n, off, bytes, m->off_bytes);
    const llmrt_backend_vtable *bv = m->be.vt;
    char *host = (char *)m->off_host[k] + off;
    llmrt_status st = bv->copy(m->be.b, host, dev, bytes, LLMRT_COPY_D2H, err);
    if (st == LLMRT_OK)
        st = bv->synchronize(m->be.b, err);
    if (st)
        return st;
    if (m->off_slots == 0) {
        void *d = NULL;
        if ((st = bv->host_device_ptr(m->be.b, m->off_host[k], &d, err)))
            return st;
        *kernel_ptr = (char *)d + off;
    } else {
        *kernel_ptr = (char *)m->slot[k % m->off_slots] + off;
    }
    if (off + bytes > m->off_used[k]) {
        m->st.offload_bytes += off + bytes - m->off_used[k];
        m->off_used[k] = off + bytes;
    }
    return LLMRT_OK;
}

llmrt_status memc_offload_fetch(llmrt_memory *m, int32_t k, llmrt_error *err)
{
    if (m->off_n == 0 || m->off_slots == 0 || k >= m->off_n || k < -1)
        return k >= m->off_n || k < -1 ? llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                                     "%s: offload_fetch(%d) of %d layers",
                                                     m->pol.name, k, m->off_n)
                                       : LLMRT_OK;
    const llmrt_backend_vtable *bv = m->be.vt;
    llmrt_status st = LLMRT_OK;
    if (!m->side) { /* one stream: the copy of layer k into its slot, in stream order */
        if (k < 0)
            return LLMRT_OK;
        return bv->copy(m->be.b, m->slot[k % m->off_slots], m->off_host[k], m->off_used[k],
                        LLMRT_COPY_H2D, err);
    }
    /* prefetch: the forward begins with layers 0 and 1 under way (the slots are free: the
     * stream is past the previous forward); before layer k, layer k + 1 goes into the slot
     * layer k - 1 used, whose kernels the stream has now passed; then wait for layer k. */
    if (k < 0) {
        for (int32_t j = 0; j < 2 && j < m->off_n && st == LLMRT_OK; j++)
            st = bv->copy_side(m->be.b, m->slot[j], m->off_host[j], m->off_used[j], m->done[j],
                               err);
        return st;
    }
    if (k >= 1 && k + 1 < m->off_n)
        st = bv->copy_side(m->be.b, m->slot[(k + 1) % 2], m->off_host[k + 1], m->off_used[k + 1],
                           m->done[(k + 1) % 2], err);
    if (st == LLMRT_OK)
        st = bv->event_wait(m->be.b, m->done[k % 2], err);
    return st;
}

static void free_halves(llmrt_memory *m, void *host[2], int halves)
{
    for (int h = 0; h < halves; h++)
        if (host[h])
            m->be.vt->host_free(m->be.b, host[h]);
}

/* Allocate `halves` host buffers with `flags`; on failure frees what it got. */
static llmrt_status alloc_halves(llmrt_memory *m, size_t bytes, uint32_t flags, int halves,
                                 void *host[2], llmrt_error *err)
{
    host[0] = host[1] = NULL;
    for (int h = 0; h < halves; h++) {
        llmrt_status st = m->be.vt->host_alloc(m->be.b, bytes, flags, &host[h], err);
        if (st) {
            free_halves(m, host, h);
            host[0] = host[1] = NULL;
            return st;
        }
    }
    if (halves == 1)
        host[1] = host[0];
    return LLMRT_OK;
}

static void account(llmrt_memory *m, uint32_t flags, size_t bytes, int sign)
{
    uint64_t *slot = (flags & LLMRT_HOST_MAPPED)   ? &m->st.host_mapped_bytes
                     : (flags & LLMRT_HOST_PINNED) ? &m->st.host_pinned_bytes
                                                   : &m->st.host_pageable_bytes;
    *slot += sign > 0 ? bytes : -(uint64_t)bytes;
}

llmrt_status memc_buffer_alloc(llmrt_memory *m, size_t bytes, llmrt_mem_dir dir,
                               llmrt_mem_buffer *out, llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    if (bytes == 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s: buffer of 0 bytes", m->pol.name);
    buf_priv *p = calloc(1, sizeof *p);
    if (!p)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    p->halves = m->pol.double_buffer ? 2 : 1;
    p->host_flags = m->pol.host_flags;
    p->zero_copy = m->pol.zero_copy && !(dir == LLMRT_MEM_TO_DEVICE && m->pol.gather_inputs);
    llmrt_status st = alloc_halves(m, bytes, p->host_flags, p->halves, out->host, err);
    if (st != LLMRT_OK && p->host_flags != 0) {
        if (m->fallback_error) {
            char reason[LLMRT_ERROR_MSG_MAX / 2];
            snprintf(reason, sizeof reason, "%s", err->msg);
            const char *kind = (p->host_flags & LLMRT_HOST_MAPPED) ? "mapped" : "pinned";
            free(p);
            return llmrt_fail(err, st,
                              "%s: cannot allocate %zu bytes of %s host memory (%s) and "
                              "memory.fallback = error",
                              m->pol.name, bytes, kind, reason);
        }
        if (!m->logged_fallback && m->host)
            m->host->log(m->host->ctx, LLMRT_LOG_WARN, m->pol.name,
                         "cannot %s host memory (%s); falling back to pageable memory "
                         "(memory.fallback = pageable)",
                         (p->host_flags & LLMRT_HOST_MAPPED) ? "map" : "pin", err->msg);
        m->logged_fallback = 1;
        m->st.fallbacks++;
        m->n_fallback_buffers++;
        p->host_flags = 0;
        p->halves = 1; /* pageable memory: the driver stages copies; one half suffices */
        p->zero_copy = 0;
        st = alloc_halves(m, bytes, 0, 1, out->host, err);
    }
    if (st) {
        free(p);
        return st;
    }
    if (p->zero_copy) {
        for (int h = 0; h < 2 && st == LLMRT_OK; h++)
            st = m->be.vt->host_device_ptr(m->be.b, out->host[h], &out->device[h], err);
    } else {
        st = m->be.vt->dev_alloc(m->be.b, bytes, &out->device[0], err);
        out->device[1] = out->device[0];
        if (st == LLMRT_OK)
            m->st.device_bytes += bytes;
    }
    if (st) {
        free_halves(m, out->host, p->halves);
        free(p);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->bytes = bytes;
    out->dir = dir;
    out->path = (p->host_flags & LLMRT_HOST_MAPPED)   ? LLMRT_MEM_PATH_MAPPED
                : (p->host_flags & LLMRT_HOST_PINNED) ? LLMRT_MEM_PATH_PINNED
                                                      : LLMRT_MEM_PATH_PAGEABLE;
    out->priv = p;
    account(m, p->host_flags, bytes * (size_t)p->halves, +1);
    m->n_buffers++;
    if (m->n_fallback_buffers == m->n_buffers)
        snprintf(m->st.path_in_use, sizeof m->st.path_in_use, "pageable (fallback from %s)",
                 m->pol.name);
    else if (m->n_fallback_buffers)
        snprintf(m->st.path_in_use, sizeof m->st.path_in_use, "%s (partial fallback to pageable)",
                 m->pol.name);
    return LLMRT_OK;
}

void memc_buffer_free(llmrt_memory *m, llmrt_mem_buffer *buf)
{
    buf_priv *p = buf->priv;
    if (!p)
        return;
    if (!p->zero_copy && buf->device[0]) {
        m->be.vt->dev_free(m->be.b, buf->device[0]);
        m->st.device_bytes -= buf->bytes;
    }
    free_halves(m, buf->host, p->halves);
    account(m, p->host_flags, buf->bytes * (size_t)p->halves, -1);
    m->n_buffers--;
    if (!p->host_flags && m->pol.host_flags)
        m->n_fallback_buffers--;
    free(p);
    memset(buf, 0, sizeof *buf);
}

static llmrt_status check_args(llmrt_memory *m, const llmrt_mem_buffer *buf, int half,
                               size_t bytes, llmrt_error *err)
{
    if (!buf->priv || half < 0 || half > 1 || bytes > buf->bytes)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: bad copy request (half %d, %zu of %zu bytes)", m->pol.name, half,
                          bytes, buf->bytes);
    return LLMRT_OK;
}

llmrt_status memc_to_device(llmrt_memory *m, llmrt_mem_buffer *buf, int half, size_t bytes,
                            llmrt_error *err)
{
    llmrt_status st = check_args(m, buf, half, bytes, err);
    if (st == LLMRT_OK && m->delay_ns > 0 && buf->dir == LLMRT_MEM_TO_DEVICE)
        spin_ns(m->delay_ns);
    if (st || ((buf_priv *)buf->priv)->zero_copy || bytes == 0)
        return st;
    st = m->be.vt->copy(m->be.b, buf->device[half], buf->host[half], bytes, LLMRT_COPY_H2D, err);
    if (st == LLMRT_OK)
        m->st.h2d_copies++, m->st.h2d_bytes += bytes;
    return st;
}

llmrt_status memc_to_host(llmrt_memory *m, llmrt_mem_buffer *buf, int half, size_t bytes,
                          llmrt_error *err)
{
    llmrt_status st = check_args(m, buf, half, bytes, err);
    if (st || ((buf_priv *)buf->priv)->zero_copy || bytes == 0)
        return st;
    st = m->be.vt->copy(m->be.b, buf->host[half], buf->device[half], bytes, LLMRT_COPY_D2H, err);
    if (st == LLMRT_OK)
        m->st.d2h_copies++, m->st.d2h_bytes += bytes;
    return st;
}

uint32_t memc_caps(llmrt_memory *m)
{
    if (m->n_fallback_buffers) /* any pageable buffer makes the whole step pageable */
        return 0;
    uint32_t caps = 0;
    if (m->pol.zero_copy)
        caps |= LLMRT_MEM_CAP_ZERO_COPY;
    if (m->pol.copies_capturable)
        caps |= LLMRT_MEM_CAP_COPIES_CAPTURABLE;
    if (m->pol.double_buffer)
        caps |= LLMRT_MEM_CAP_DOUBLE_BUFFERED;
    if (m->pol.zero_copy && m->pol.gather_inputs)
        caps |= LLMRT_MEM_CAP_INPUTS_GATHERED;
    if (m->pol.zero_copy && !m->pol.gather_inputs)
        caps &= ~(uint32_t)LLMRT_MEM_CAP_COPIES_CAPTURABLE; /* nothing to capture */
    if (m->off_n && m->off_flags) /* mapped: nothing; pinned: async copies (pageable: not) */
        caps |= LLMRT_MEM_CAP_OFFLOAD_CAPTURABLE;
    return caps;
}

void memc_stats(llmrt_memory *m, llmrt_mem_stats *out) { *out = m->st; }
