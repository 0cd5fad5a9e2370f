/* memory_uva.c — the "uva" host-memory strategy plugin.
 * Zero-copy mapped host memory: kernels read step inputs and write sampled ids through the bus; no copies.
 * The policy is the table below; the machinery is shared (../memory-common). */
#include <llmrt/memory.h>

#include "memory_common.h"

static const memc_policy policy = {
    .name = "uva",
    .host_flags = LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED,
    .double_buffer = 1,
    .zero_copy = 1,
    .copies_capturable = 0,
};

MEMC_PLUGIN(policy,
            "Zero-copy mapped host memory: kernels read step inputs and write sampled ids through the bus; no copies.",
            memc_double_buffer_keys, MEMC_N_DOUBLE_BUFFER_KEYS)
