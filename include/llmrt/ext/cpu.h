/* ext/cpu.h — the "llmrt.cpu" backend extension: what a plugin with its own CPU kernels
 * (a quant format, a model's special op) needs from a CPU backend.
 *
 * Why: such kernels should use the vector instructions the backend settled on
 * ([backend.cpu] simd: the CPU's best, or what the user forced) and the backend's thread
 * pool, instead of guessing or starting threads of their own. */
#ifndef LLMRT_EXT_CPU_H
#define LLMRT_EXT_CPU_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMRT_EXT_CPU "llmrt.cpu"
#define LLMRT_EXT_CPU_VERSION 1

typedef struct llmrt_cpu_ext {
    uint32_t struct_size; /* (required) */
    /* (required) The kernel path the backend runs ([backend.cpu] simd): "exact" or
     * "baseline" (the reference f32 arithmetic), or a fast path, "avx2", "avx512" or "amx"
     * (more names may come; treat an unknown one as "exact"). */
    const char *(*simd)(llmrt_backend *b);
    /* (required) Worker threads of the backend's pool (parallel_for splits across them). */
    int32_t (*threads)(llmrt_backend *b);
} llmrt_cpu_ext;

#ifdef __cplusplus
}
#endif
#endif
