/* cpu_memory.c — memory mechanisms of the CPU backend: device memory, page-locked and
 * "mapped" host memory, copies and timing events.
 *
 * Why: memory plugins (pinned, uva, pageable) run unchanged on every backend; on the CPU
 * the mechanisms are simple but real: PINNED is mlock (limited by RLIMIT_MEMLOCK, and the
 * failure is reported so memory.fallback can act on it), MAPPED means the host pointer is the
 * device pointer. Every host allocation and registration is recorded so host_free knows
 * what to munlock and host_device_ptr can refuse memory that was never mapped. */
#include "cpu_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

#define CPU_DEV_ALIGN 64
#define CPU_PAGE_ALIGN ((size_t)4096)

struct cpu_host_range {
    void *p;          /* key */
    size_t bytes;
    size_t locked;    /* bytes passed to mlock (0 = not locked) */
    uint32_t flags;   /* LLMRT_HOST_* */
    int registered;   /* 1: host_register (caller's memory); 0: host_alloc (ours) */
    UT_hash_handle hh;
};

struct llmrt_event {
    struct timespec t;
    int recorded;
};

/* Allocations this large start on a 2 MiB boundary, and the ones filled by a copy (weights)
 * ask for transparent huge pages just before it: a decode step streams every weight once, and
 * with 4 KiB pages that is one TLB miss per 4 KiB, which held the streaming GEMVs well below
 * the memory's bandwidth. Not at allocation: the KV cache is written a few rows at a time, and
 * its first touches would each zero 2 MiB (5 ms of every tiny-model run's 12). Where THP is
 * off ("never") madvise fails and the pages stay small. */
#define CPU_HUGE_MIN ((size_t)4 << 20)
#define CPU_HUGE_PAGE ((size_t)2 << 20)

void cpu_advise_huge(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes < CPU_HUGE_MIN)
        return;
    uintptr_t lo = ((uintptr_t)p + CPU_HUGE_PAGE - 1) & ~(uintptr_t)(CPU_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(CPU_HUGE_PAGE - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)bytes;
#endif
}

llmrt_status cpu_dev_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err)
{
    void *p = NULL;
    /* round up so vector loops may read whole 64-byte lines at the end */
    size_t rounded = (bytes + CPU_DEV_ALIGN - 1) / CPU_DEV_ALIGN * CPU_DEV_ALIGN;
    if (rounded == 0)
        rounded = CPU_DEV_ALIGN;
    /* Every buffer starts on a page (huge pages from CPU_HUGE_MIN): where a buffer lies modulo
     * 4 KiB decides which of its loads alias others' in the L1 (4K aliasing), so with heap
     * alignment two engines of one config ran a few percent apart in an A/A bench; page
     * alignment makes that placement the same in every instance. */
    const int huge = rounded >= CPU_HUGE_MIN;
    if (posix_memalign(&p, huge ? CPU_HUGE_PAGE : CPU_PAGE_ALIGN, rounded) != 0) {
        *out = NULL;
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: out of memory allocating %zu bytes",
                          bytes);
    }
    *out = p;
    return LLMRT_OK;
}

void cpu_dev_free(llmrt_backend *b, void *p)
{
    free(p);
}

static size_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    return ps > 0 ? (size_t)ps : 4096;
}

/* mlock with a message naming the limit when the kernel refuses. */
static llmrt_status lock_range(void *p, size_t bytes, const char *what, llmrt_error *err)
{
    if (mlock(p, bytes) == 0)
        return LLMRT_OK;
    int e = errno;
    struct rlimit rl;
    char limit[64] = "unknown";
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        if (rl.rlim_cur == RLIM_INFINITY)
            snprintf(limit, sizeof limit, "unlimited");
        else
            snprintf(limit, sizeof limit, "%llu bytes", (unsigned long long)rl.rlim_cur);
    }
    if (e == ENOMEM || e == EPERM || e == EAGAIN)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "cpu backend: cannot page-lock (mlock) %zu bytes for %s: %s; "
                          "RLIMIT_MEMLOCK soft limit is %s (raise it with `ulimit -l`, "
                          "or use memory.plugin = pageable / memory.fallback = pageable)",
                          bytes, what, strerror(e), limit);
    return llmrt_fail(err, LLMRT_ERR_DEVICE, "cpu backend: mlock of %zu bytes for %s failed: %s",
                      bytes, what, strerror(e));
}

static llmrt_status add_range(llmrt_backend *b, void *p, size_t bytes, size_t locked,
                              uint32_t flags, int registered, llmrt_error *err)
{
    cpu_host_range *r = calloc(1, sizeof *r);
    if (!r)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: out of memory recording host memory");
    r->p = p;
    r->bytes = bytes;
    r->locked = locked;
    r->flags = flags;
    r->registered = registered;
    pthread_mutex_lock(&b->mem_mu);
    cpu_host_range *old = NULL;
    HASH_FIND_PTR(b->ranges, &p, old);
    if (old) {
        pthread_mutex_unlock(&b->mem_mu);
        free(r);
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "cpu backend: host memory at %p is already registered", p);
    }
    HASH_ADD_PTR(b->ranges, p, r);
    pthread_mutex_unlock(&b->mem_mu);
    return LLMRT_OK;
}

/* Remove and return the record of p (NULL when unknown). */
static cpu_host_range *take_range(llmrt_backend *b, void *p)
{
    cpu_host_range *r = NULL;
    pthread_mutex_lock(&b->mem_mu);
    HASH_FIND_PTR(b->ranges, &p, r);
    if (r)
        HASH_DEL(b->ranges, r);
    pthread_mutex_unlock(&b->mem_mu);
    return r;
}

llmrt_status cpu_host_alloc(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                            llmrt_error *err)
{
    *out = NULL;
    if (flags & ~(uint32_t)(LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: host_alloc flags 0x%x has unknown bits (known: PINNED=1, "
                          "MAPPED=2)", flags);
    /* Pinned memory gets whole pages of its own: munlock of one buffer must not unlock a
     * neighbour sharing its first or last page. */
    size_t align = (flags & LLMRT_HOST_PINNED) ? page_size() : CPU_DEV_ALIGN;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0)
        rounded = align;
    void *p = NULL;
    if (posix_memalign(&p, align, rounded) != 0)
        return llmrt_fail(err, LLMRT_ERR_NOMEM,
                          "cpu backend: out of memory allocating %zu bytes of host memory", bytes);
    size_t locked = 0;
    if (flags & LLMRT_HOST_PINNED) {
        llmrt_status st = lock_range(p, rounded, "pinned host memory", err);
        if (st != LLMRT_OK) {
            free(p);
            return st;
        }
        locked = rounded;
    }
    llmrt_status st = add_range(b, p, bytes, locked, flags, 0, err);
    if (st != LLMRT_OK) {
        if (locked)
            munlock(p, locked);
        free(p);
        return st;
    }
    *out = p;
    return LLMRT_OK;
}

void cpu_host_free(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    cpu_host_range *r = take_range(b, p);
    if (!r) /* not from host_alloc: not ours to free */
        return;
    if (r->locked)
        munlock(p, r->locked);
    if (!r->registered) /* registered memory is the caller's: forget it only */
        free(p);
    free(r);
}

llmrt_status cpu_host_register(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                               llmrt_error *err)
{
    if (!p || bytes == 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: host_register needs a non-NULL pointer and bytes > 0");
    if (flags & ~(uint32_t)(LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: host_register flags 0x%x has unknown bits", flags);
    size_t locked = 0;
    if (flags & LLMRT_HOST_PINNED) {
        llmrt_status st = lock_range(p, bytes, "registered host memory", err);
        if (st != LLMRT_OK)
            return st;
        locked = bytes;
    }
    llmrt_status st = add_range(b, p, bytes, locked, flags, 1, err);
    if (st != LLMRT_OK && locked)
        munlock(p, locked);
    return st;
}

void cpu_host_unregister(llmrt_backend *b, void *p)
{
    if (!p)
        return;
    cpu_host_range *r = take_range(b, p);
    if (!r)
        return;
    if (!r->registered) { /* host_alloc'd memory: keep the record, host_free needs it */
        pthread_mutex_lock(&b->mem_mu);
        HASH_ADD_PTR(b->ranges, p, r);
        pthread_mutex_unlock(&b->mem_mu);
        return;
    }
    if (r->locked)
        munlock(p, r->locked);
    free(r);
}

llmrt_status cpu_host_device_ptr(llmrt_backend *b, void *host, void **dev, llmrt_error *err)
{
    *dev = NULL;
    llmrt_status st = LLMRT_OK;
    pthread_mutex_lock(&b->mem_mu);
    cpu_host_range *r, *tmp, *hit = NULL;
    HASH_ITER(hh, b->ranges, r, tmp) {
        const char *lo = r->p;
        if ((const char *)host >= lo && (const char *)host < lo + r->bytes) {
            hit = r;
            break;
        }
    }
    if (hit && (hit->flags & LLMRT_HOST_MAPPED))
        *dev = host; /* the CPU reads host memory directly: zero-copy is the identity */
    else if (hit)
        st = llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                        "cpu backend: host memory at %p was %s without LLMRT_HOST_MAPPED; only "
                        "mapped host memory has a device address",
                        host, hit->registered ? "registered" : "allocated");
    else
        st = llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                        "cpu backend: %p is not host memory from host_alloc or host_register "
                        "with LLMRT_HOST_MAPPED",
                        host);
    pthread_mutex_unlock(&b->mem_mu);
    return st;
}

void cpu_memory_release_all(llmrt_backend *b)
{
    cpu_host_range *r, *tmp;
    HASH_ITER(hh, b->ranges, r, tmp) {
        HASH_DEL(b->ranges, r);
        if (r->locked)
            munlock(r->p, r->locked);
        if (!r->registered)
            free(r->p);
        free(r);
    }
}

llmrt_status cpu_copy(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                      llmrt_copy_kind kind, llmrt_error *err)
{
    if (kind != LLMRT_COPY_H2D && kind != LLMRT_COPY_D2H && kind != LLMRT_COPY_D2D)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: copy kind %d is not H2D (1), D2H (2) or D2D (3)", (int)kind);
    if (bytes == 0 || dst == src)
        return LLMRT_OK;
    if (!dst || !src)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: copy of %zu bytes with a NULL %s",
                          bytes, dst ? "source" : "destination");
    if (kind != LLMRT_COPY_D2H)
        cpu_advise_huge(dst, bytes); /* weights: see CPU_HUGE_MIN */
    memmove(dst, src, bytes);
    return LLMRT_OK;
}

/* ---- events: host timestamps (ops are synchronous) ---- */

llmrt_status cpu_event_create(llmrt_backend *b, llmrt_event **out, llmrt_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: out of memory creating an event");
    return LLMRT_OK;
}

void cpu_event_destroy(llmrt_backend *b, llmrt_event *e)
{
    free(e);
}

llmrt_status cpu_event_record(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    clock_gettime(CLOCK_MONOTONIC, &e->t);
    e->recorded = 1;
    return LLMRT_OK;
}

llmrt_status cpu_event_sync(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    return LLMRT_OK;
}

llmrt_status cpu_event_elapsed_ms(llmrt_backend *b, llmrt_event *start, llmrt_event *end,
                                  float *ms, llmrt_error *err)
{
    if (!start->recorded || !end->recorded)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "cpu backend: event_elapsed_ms on an event that was never recorded (%s)",
                          start->recorded ? "end" : "start");
    double d = (double)(end->t.tv_sec - start->t.tv_sec) * 1e3 +
               (double)(end->t.tv_nsec - start->t.tv_nsec) * 1e-6;
    *ms = (float)d;
    return LLMRT_OK;
}

llmrt_status cpu_meminfo(uint64_t *total, uint64_t *available, llmrt_error *err)
{
    *total = *available = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) {
        /* not Linux-like: fall back to sysconf */
        long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
        if (pages <= 0)
            return llmrt_fail(err, LLMRT_ERR_IO,
                              "cpu backend: cannot read /proc/meminfo (%s) nor sysconf memory sizes",
                              strerror(errno));
        *total = (uint64_t)pages * page_size();
        *available = avail > 0 ? (uint64_t)avail * page_size() : *total;
        return LLMRT_OK;
    }
    char line[256];
    int have_avail = 0;
    uint64_t free_kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            *total = kb * 1024ull;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            *available = kb * 1024ull, have_avail = 1;
        else if (sscanf(line, "MemFree: %llu kB", &kb) == 1)
            free_kb = kb;
    }
    fclose(f);
    if (!have_avail) /* kernels before 3.14 */
        *available = free_kb * 1024ull;
    if (*total == 0)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "cpu backend: /proc/meminfo has no MemTotal line");
    return LLMRT_OK;
}
