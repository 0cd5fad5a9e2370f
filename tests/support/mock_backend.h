/* mock_backend.h — a backend with no device, for testing memory plugins' policy.
 * Device memory is separate malloc'd memory (so a missing copy shows up as wrong data),
 * every mechanism call is counted, and pinning can be made to fail on demand. */
#ifndef LLMRT_TEST_MOCK_BACKEND_H
#define LLMRT_TEST_MOCK_BACKEND_H

#include <llmrt/backend.h>

typedef struct mock_backend_stats {
    int host_alloc_calls, host_alloc_pinned, host_alloc_mapped, host_free_calls;
    int dev_alloc_calls, dev_free_calls;
    int copies_h2d, copies_d2h, copies_d2d;
    size_t bytes_h2d, bytes_d2h;
    int live_host, live_dev; /* allocations not yet freed */
} mock_backend_stats;

/* The mock's vtable, and a ready instance. fail_pinned_after: pinned/mapped host_alloc
 * fails with LLMRT_ERR_LIMIT once this many bytes are pinned (-1: never). */
extern const llmrt_backend_vtable mock_backend_vtable;
llmrt_backend_ref mock_backend_new(long long fail_pinned_after, int supports_mapped);
void mock_backend_free(llmrt_backend_ref *ref);
mock_backend_stats mock_backend_get_stats(const llmrt_backend_ref *ref);
/* 1 when p lies inside host memory this backend allocated (host_alloc), 0 otherwise. */
int mock_backend_is_host_memory(const llmrt_backend_ref *ref, const void *p);
/* A host struct whose config_get answers from a small table ("memory.fallback" etc.). */
llmrt_host mock_host(const char *const *kv /* key, value, ..., NULL */);

#endif
