/* memory_pageable.c — the "pageable" host-memory strategy plugin.
 * Pageable host memory (malloc): the driver stages every copy; copies run outside CUDA graphs. The baseline.
 * The policy is the table below; the machinery is shared (../memory-common). */
#include <llmrt/memory.h>

#include "memory_common.h"

static const memc_policy policy = {
    .name = "pageable",
    .host_flags = 0,
    .double_buffer = 0,
    .zero_copy = 0,
    .copies_capturable = 0,
};

MEMC_PLUGIN(policy,
            "Pageable host memory (malloc): the driver stages every copy; copies run outside CUDA graphs. The baseline.",
            memc_plain_keys, MEMC_N_PLAIN_KEYS)
