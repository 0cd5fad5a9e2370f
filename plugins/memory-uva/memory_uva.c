/* memory_uva.c — the "uva" host-memory strategy plugin.
 * Mapped host memory, as vLLM's Model Runner V2 uses it: the device reads the step inputs over
 * the bus once per step, at the step's start, into device buffers (captured in the decode
 * graph), and writes the sampled ids straight into host memory.
 * The policy is the table below; the machinery is shared (../memory-common). */
#include <llmrt/memory.h>

#include "memory_common.h"

static const memc_policy policy = {
    .name = "uva",
    .host_flags = LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED,
    .double_buffer = 1,
    .zero_copy = 1,
    .copies_capturable = 1,
    .gather_inputs = 1,
};

MEMC_PLUGIN(policy,
            "Mapped host memory: the device gathers the step inputs once per step over the bus (in the decode graph) and writes sampled ids in place.",
            memc_double_buffer_keys, MEMC_N_DOUBLE_BUFFER_KEYS)
