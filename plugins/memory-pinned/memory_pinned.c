/* memory_pinned.c — the "pinned" host-memory strategy plugin.
 * Page-locked host memory: truly async copies, double-buffered so the host prepares step N+1 while step N runs; copies captured in the decode graph.
 * The policy is the table below; the machinery is shared (../memory-common). */
#include <llmrt/memory.h>

#include "memory_common.h"

static const memc_policy policy = {
    .name = "pinned",
    .host_flags = LLMRT_HOST_PINNED,
    .double_buffer = 1,
    .zero_copy = 0,
    .copies_capturable = 1,
};

MEMC_PLUGIN(policy,
            "Page-locked host memory: truly async copies, double-buffered so the host prepares step N+1 while step N runs; copies captured in the decode graph.",
            memc_double_buffer_keys, MEMC_N_DOUBLE_BUFFER_KEYS)
