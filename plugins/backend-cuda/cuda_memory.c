/* cuda_memory.c — memory mechanisms of the CUDA backend: device memory, page-locked and
 * mapped host memory, registration of existing host memory, and the backend's own scratch.
 *
 * Why: memory plugins decide policy (what to pin, fallback); this file is the mechanism
 * they call. A refusal to pin is LLMRT_ERR_LIMIT (with CUDA's reason) so that
 * memory.fallback can act on it. host_alloc without flags is plain malloc, so host_free
 * must know which buffers came from cudaHostAlloc: those are recorded in b->pinned. */
#include "cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- device memory ---- */

llmrt_status cuda_dev_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err)
{
    *out = NULL;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t f = 0, t = 0;
        cudaMemGetInfo(&f, &t);
        cudaGetLastError();
        return llmrt_fail(err, LLMRT_ERR_NOMEM,
                          "cuda backend: cudaMalloc of %zu bytes failed: %s (device %d has %zu "
                          "of %zu MiB free)",
                          bytes, cudaGetErrorString(e), b->device, f >> 20, t >> 20);
    }
    *out = p;
    return LLMRT_OK;
}

void cuda_dev_free(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    cudaSetDevice(b->device);
    cudaFree(p);
    cudaGetLastError();
}

llmrt_status cuda_mem_info(llmrt_backend *b, uint64_t *free_bytes, uint64_t *total_bytes,
                           llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    size_t f = 0, t = 0;
    cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    return LLMRT_OK;
}

/* ---- host memory ---- */

static int pinned_add(llmrt_backend *b, void *p)
{
    int ok = 1;
    pthread_mutex_lock(&b->mu);
    if (b->n_pinned == b->cap_pinned) {
        size_t cap = b->cap_pinned ? 2 * b->cap_pinned : 16;
        void **np = realloc(b->pinned, cap * sizeof *np);
        if (np) {
            b->pinned = np;
            b->cap_pinned = cap;
        } else {
            ok = 0;
        }
    }
    if (ok)
        b->pinned[b->n_pinned++] = p;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

/* 1 when p was ours (and is now forgotten). */
static int pinned_remove(llmrt_backend *b, void *p)
{
    int found = 0;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->n_pinned; i++) {
        if (b->pinned[i] == p) {
            b->pinned[i] = b->pinned[--b->n_pinned];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return found;
}

llmrt_status cuda_host_alloc(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                             llmrt_error *err)
{
    *out = NULL;
    if (!(flags & (LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED))) {
        void *p = malloc(bytes ? bytes : 1);
        if (!p)
            return llmrt_fail(err, LLMRT_ERR_NOMEM,
                              "cuda backend: out of host memory allocating %zu bytes", bytes);
        *out = p;
        return LLMRT_OK;
    }
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    if ((flags & LLMRT_HOST_MAPPED) && !b->can_map_host)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda backend: device %d (%s) cannot map host memory", b->device,
                          b->name);
    /* Portable: usable by every context; Mapped: also addressable by kernels. */
    unsigned int cflags = cudaHostAllocPortable;
    if (flags & LLMRT_HOST_MAPPED)
        cflags |= cudaHostAllocMapped;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cflags);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "cuda backend: cudaHostAlloc(%s) of %zu bytes refused: %s (%s); the "
                          "platform limits page-locked memory (WSL2 caps it; see llmrt doctor)",
                          (flags & LLMRT_HOST_MAPPED) ? "mapped" : "pinned", bytes,
                          cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (!pinned_add(b, p)) {
        cudaFreeHost(p);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cuda backend: out of memory");
    }
    *out = p;
    return LLMRT_OK;
}

void cuda_host_free(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    if (pinned_remove(b, p)) {
        cudaSetDevice(b->device);
        cudaFreeHost(p);
        cudaGetLastError();
    } else {
        free(p);
    }
}

void cuda_pinned_release_all(llmrt_backend *b)
{
    for (size_t i = 0; i < b->n_pinned; i++)
        cudaFreeHost(b->pinned[i]);
    cudaGetLastError();
    free(b->pinned);
    b->pinned = NULL;
    b->n_pinned = b->cap_pinned = 0;
}

llmrt_status cuda_host_register(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                                llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    if ((flags & LLMRT_HOST_MAPPED) && !b->can_map_host)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda backend: device %d (%s) cannot map host memory", b->device,
                          b->name);
    unsigned int cflags = cudaHostRegisterPortable;
    if (flags & LLMRT_HOST_MAPPED)
        cflags |= cudaHostRegisterMapped;
    cudaError_t e = cudaHostRegister(p, bytes, cflags);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "cuda backend: cudaHostRegister of %zu bytes at %p refused: %s (%s)",
                          bytes, p, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return LLMRT_OK;
}

void cuda_host_unregister(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    cudaSetDevice(b->device);
    cudaHostUnregister(p);
    cudaGetLastError();
}

llmrt_status cuda_host_device_ptr(llmrt_backend *b, void *host, void **dev, llmrt_error *err)
{
    *dev = NULL;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    void *d = NULL;
    cudaError_t e = cudaHostGetDevicePointer(&d, host, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda backend: host memory at %p is not mapped (allocate it with "
                          "host_alloc(MAPPED) or register it with MAPPED): %s",
                          host, cudaGetErrorString(e));
    }
    *dev = d;
    return LLMRT_OK;
}

/* ---- scratch ---- */

llmrt_status cuda_scratch_get(llmrt_backend *b, cuda_scratch_slot slot, size_t bytes, void **out,
                              llmrt_error *err)
{
    cuda_scratch *s = &b->scratch[slot];
    if (s->p && s->bytes >= bytes) {
        *out = s->p;
        return LLMRT_OK;
    }
    /* grow by at least half again, so a slowly rising size does not reallocate each step */
    size_t want = bytes + bytes / 2;
    if (want < ((size_t)1 << 16))
        want = (size_t)1 << 16;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, want);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return llmrt_fail(err, LLMRT_ERR_NOMEM,
                          "cuda backend: cannot allocate %zu bytes of scratch (slot %d): %s", want,
                          (int)slot, cudaGetErrorString(e));
    }
    /* Zeroed before first use (the counters at its start are only ever left at zero by the
     * kernels that use them). Outside a capture, in stream order. Inside one, on a side stream,
     * waited for here: as a memset node of the graph it would zero the buffer only when the
     * graph is replayed (eager work before the first replay read whatever cudaMalloc returned:
     * backend-cuda.mem's graph-vs-eager test got a garbage argmax after an earlier test had
     * freed device memory) and again on every replay. */
    if (b->capturing) {
        cudaStream_t side = NULL;
        e = cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
        if (e == cudaSuccess)
            e = cudaMemsetAsync(p, 0, want, side);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(side);
        if (side)
            cudaStreamDestroy(side);
    } else {
        e = cudaMemsetAsync(p, 0, want, b->stream);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        cudaFree(p);
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaMemsetAsync(scratch)");
    }
    if (s->p) {
        if (b->n_retired == b->cap_retired) {
            size_t cap = b->cap_retired ? 2 * b->cap_retired : 8;
            void **np = realloc(b->retired, cap * sizeof *np);
            if (!np) {
                cudaFree(p);
                return llmrt_fail(err, LLMRT_ERR_NOMEM, "cuda backend: out of memory");
            }
            b->retired = np;
            b->cap_retired = cap;
        }
        b->retired[b->n_retired++] = s->p;
    }
    s->p = p;
    s->bytes = want;
    *out = p;
    return LLMRT_OK;
}

void cuda_scratch_release_all(llmrt_backend *b)
{
    for (int i = 0; i < CUDA_SCRATCH_COUNT; i++) {
        if (b->scratch[i].p)
            cudaFree(b->scratch[i].p);
        b->scratch[i].p = NULL;
        b->scratch[i].bytes = 0;
    }
    for (size_t i = 0; i < b->n_retired; i++)
        cudaFree(b->retired[i]);
    free(b->retired);
    b->retired = NULL;
    b->n_retired = b->cap_retired = 0;
    cudaGetLastError();
}
