/* mock_backend.c — see mock_backend.h. */
#include "mock_backend.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ALLOCS 256

struct llmrt_backend {
    long long fail_pinned_after;
    int supports_mapped;
    long long pinned_bytes;
    mock_backend_stats st;
    struct {
        void *p;
        size_t bytes;
        uint32_t flags;
    } host[MAX_ALLOCS];
};

static llmrt_status m_probe(llmrt_device_info *out, int32_t max, int32_t *count, llmrt_error *err)
{
    *count = 0;
    return LLMRT_OK;
}

static llmrt_status m_create(const llmrt_host *h, const llmrt_section *cfg, llmrt_backend **out,
                             llmrt_error *err)
{
    *out = calloc(1, sizeof **out);
    (*out)->fail_pinned_after = -1;
    (*out)->supports_mapped = 1;
    return LLMRT_OK;
}

static void m_destroy(llmrt_backend *b) { free(b); }
static uint32_t m_caps(llmrt_backend *b)
{
    return LLMRT_BACKEND_CAP_ASYNC | (b->supports_mapped ? LLMRT_BACKEND_CAP_MAPPED_HOST : 0);
}
static llmrt_status m_info(llmrt_backend *b, llmrt_device_info *out, llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "mock");
    return LLMRT_OK;
}
static llmrt_status m_dev_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err)
{
    *out = malloc(bytes ? bytes : 1);
    b->st.dev_alloc_calls++;
    b->st.live_dev++;
    return *out ? LLMRT_OK : llmrt_fail(err, LLMRT_ERR_NOMEM, "mock dev_alloc");
}
static void m_dev_free(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    b->st.dev_free_calls++;
    b->st.live_dev--;
    free(p);
}
static llmrt_status m_host_alloc(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                                 llmrt_error *err)
{
    b->st.host_alloc_calls++;
    if ((flags & LLMRT_HOST_MAPPED) && !b->supports_mapped)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "mock: mapped host memory not supported");
    if (flags & (LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED)) {
        if (b->fail_pinned_after >= 0 && b->pinned_bytes + (long long)bytes > b->fail_pinned_after)
            return llmrt_fail(err, LLMRT_ERR_LIMIT, "mock: pinned memory limit (%lld bytes) reached",
                              b->fail_pinned_after);
        b->pinned_bytes += (long long)bytes;
    }
    if (flags & LLMRT_HOST_PINNED)
        b->st.host_alloc_pinned++;
    if (flags & LLMRT_HOST_MAPPED)
        b->st.host_alloc_mapped++;
    void *p = calloc(1, bytes ? bytes : 1);
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!b->host[i].p) {
            b->host[i].p = p, b->host[i].bytes = bytes, b->host[i].flags = flags;
            break;
        }
    b->st.live_host++;
    *out = p;
    return LLMRT_OK;
}
static void m_host_free(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (b->host[i].p == p) {
            if (b->host[i].flags)
                b->pinned_bytes -= (long long)b->host[i].bytes;
            b->host[i].p = NULL;
        }
    b->st.host_free_calls++;
    b->st.live_host--;
    free(p);
}
static llmrt_status m_host_register(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                                    llmrt_error *err)
{
    return LLMRT_OK;
}
static void m_host_unregister(llmrt_backend *b, void *p) {}
static llmrt_status m_host_device_ptr(llmrt_backend *b, void *host, void **dev, llmrt_error *err)
{
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (b->host[i].p == host && (b->host[i].flags & LLMRT_HOST_MAPPED)) {
            *dev = host;
            return LLMRT_OK;
        }
    return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "mock: %p is not mapped host memory", host);
}
static llmrt_status m_copy(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                           llmrt_copy_kind kind, llmrt_error *err)
{
    memcpy(dst, src, bytes);
    if (kind == LLMRT_COPY_H2D)
        b->st.copies_h2d++, b->st.bytes_h2d += bytes;
    else if (kind == LLMRT_COPY_D2H)
        b->st.copies_d2h++, b->st.bytes_d2h += bytes;
    else
        b->st.copies_d2d++;
    return LLMRT_OK;
}
static llmrt_status m_sync(llmrt_backend *b, llmrt_error *err) { return LLMRT_OK; }
static llmrt_status m_ev_create(llmrt_backend *b, llmrt_event **out, llmrt_error *err)
{
    *out = (llmrt_event *)calloc(1, 8);
    return LLMRT_OK;
}
static void m_ev_destroy(llmrt_backend *b, llmrt_event *e) { free(e); }
static llmrt_status m_ev_record(llmrt_backend *b, llmrt_event *e, llmrt_error *err) { return LLMRT_OK; }
static llmrt_status m_ev_sync(llmrt_backend *b, llmrt_event *e, llmrt_error *err) { return LLMRT_OK; }
static llmrt_status m_ev_elapsed(llmrt_backend *b, llmrt_event *s, llmrt_event *e, float *ms,
                                 llmrt_error *err)
{
    *ms = 0;
    return LLMRT_OK;
}

const llmrt_backend_vtable mock_backend_vtable = {
    .struct_size = sizeof(llmrt_backend_vtable),
    .probe = m_probe, .create = m_create, .destroy = m_destroy, .caps = m_caps,
    .device_info = m_info, .dev_alloc = m_dev_alloc, .dev_free = m_dev_free,
    .host_alloc = m_host_alloc, .host_free = m_host_free, .host_register = m_host_register,
    .host_unregister = m_host_unregister, .host_device_ptr = m_host_device_ptr, .copy = m_copy,
    .synchronize = m_sync, .event_create = m_ev_create, .event_destroy = m_ev_destroy,
    .event_record = m_ev_record, .event_sync = m_ev_sync, .event_elapsed_ms = m_ev_elapsed,
};

llmrt_backend_ref mock_backend_new(long long fail_pinned_after, int supports_mapped)
{
    llmrt_backend_ref r = {&mock_backend_vtable, NULL, "mock"};
    llmrt_error err;
    m_create(NULL, NULL, &r.b, &err);
    r.b->fail_pinned_after = fail_pinned_after;
    r.b->supports_mapped = supports_mapped;
    return r;
}

void mock_backend_free(llmrt_backend_ref *ref)
{
    m_destroy(ref->b);
    ref->b = NULL;
}

mock_backend_stats mock_backend_get_stats(const llmrt_backend_ref *ref) { return ref->b->st; }


static const char *mock_config_get(void *ctx, const char *key)
{
    const char *const *kv = ctx;
    for (int i = 0; kv && kv[i]; i += 2)
        if (strcmp(kv[i], key) == 0)
            return kv[i + 1];
    return NULL;
}
static void mock_log(void *ctx, llmrt_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[mock-host %d] %s: ", (int)level, who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

llmrt_host mock_host(const char *const *kv)
{

    llmrt_host h = {sizeof(llmrt_host), LLMRT_ABI_VERSION, (void *)kv, mock_log, mock_config_get};
    return h;
}

int mock_backend_is_host_memory(const llmrt_backend_ref *ref, const void *p)
{
    const char *c = p;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        const char *lo = ref->b->host[i].p;
        if (lo && c >= lo && c < lo + ref->b->host[i].bytes)
            return 1;
    }
    return 0;
}
