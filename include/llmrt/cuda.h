/* cuda.h — CUDA interop for plugins with CUDA kernels of their own (a quant format, a
 * model's special ops): the "llmrt.cuda" backend extension, and the launch protocol every
 * kernel on the backend's stream follows.
 *
 * Why: a quant or model plugin's kernels must run on the backend's stream (so they are
 * ordered with its ops and captured in its graphs), on its device, and launch the way its
 * kernels launch (programmatic dependent launch on Hopper). This header gives all three
 * typed, and the launch helpers once, so a third-party plugin with CUDA code needs nothing
 * else from the backend. A plugin chooses its CUDA kernels when the backend offers this
 * extension, never by the backend's name.
 *
 * Include it from CUDA sources (it includes cuda_runtime.h); C files may include it too for
 * the table. Link the CUDA runtime as a shared library (CMake: CUDA_RUNTIME_LIBRARY Shared),
 * so the plugin shares one runtime — and one context — with the backend. */
#ifndef LLMRT_CUDA_H
#define LLMRT_CUDA_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMRT_EXT_CUDA "llmrt.cuda"
#define LLMRT_EXT_CUDA_VERSION 1

typedef struct llmrt_cuda_ext {
    uint32_t struct_size; /* (required) */
    /* (required) The stream every op of the backend is enqueued on. */
    cudaStream_t (*stream)(llmrt_backend *b);
    /* (required) The device ordinal the backend runs on (make it current before allocating). */
    int (*device)(llmrt_backend *b);
    /* (required) 1 when the backend launches kernels with programmatic dependent launch: then
     * every kernel on the stream — yours too — launches with llmrt_cuda_launch(..., pdl = 1),
     * calls llmrt_cuda_pdl_wait() before it reads anything an earlier kernel wrote (or writes
     * anything an earlier kernel may still read), and llmrt_cuda_pdl_trigger() after that
     * wait, to let the next kernel start. */
    int (*pdl)(llmrt_backend *b);
} llmrt_cuda_ext;

/* The backend's CUDA interop, or NULL when it offers none (not a CUDA backend). */
static inline const llmrt_cuda_ext *llmrt_cuda_ext_of(const llmrt_backend_ref *be)
{
    const llmrt_cuda_ext *x = (const llmrt_cuda_ext *)llmrt_backend_extension(
        be->vt, be->b, LLMRT_EXT_CUDA, LLMRT_EXT_CUDA_VERSION);
    return x && x->struct_size >= sizeof(llmrt_cuda_ext) ? x : NULL;
}

/* Fill err from a CUDA error ("<who>: <what>: cudaErrorX (text)"); returns LLMRT_ERR_DEVICE,
 * or `code` for an out-of-memory error when code is LLMRT_ERR_NOMEM. Clears the error. */
static inline llmrt_status llmrt_cuda_fail(llmrt_error *err, llmrt_status code, cudaError_t e,
                                           const char *who, const char *what)
{
    (void)cudaGetLastError();
    return llmrt_fail(err, e == cudaErrorMemoryAllocation ? code : LLMRT_ERR_DEVICE,
                      "%s: %s: %s (%s)", who, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* LLMRT_OK when the last launch succeeded; else err names the kernel. */
static inline llmrt_status llmrt_cuda_check_launch(llmrt_error *err, const char *who,
                                                   const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return LLMRT_OK;
    char what[160];
    snprintf(what, sizeof what, "launching %s", kernel);
    return llmrt_cuda_fail(err, LLMRT_ERR_DEVICE, e, who, what);
}

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* ---- the launch protocol (device side) ----
 * With programmatic dependent launch a kernel may start while the kernel before it on the
 * stream is still finishing (inside a CUDA graph too): launch latency and a kernel's
 * prologue (the first weight loads of a GEMV) overlap the previous kernel's tail. Both calls
 * are no-ops when the kernel was launched without it or built for sm < 90. Every kernel
 * triggers only after its own wait, so when a kernel starts, all work queued before the
 * kernel just before it has completed: data that work wrote (step inputs, KV-cache rows of
 * earlier steps, weights) may be read before the wait. */
__device__ __forceinline__ void llmrt_cuda_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void llmrt_cuda_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/* Launch kernel k on `stream` (cudaLaunchKernelEx), with programmatic dependent launch when
 * pdl is set. Errors surface in llmrt_cuda_check_launch. */
template <typename... KArgs, typename... Args>
static inline void llmrt_cuda_launch(cudaStream_t stream, int pdl, void (*k)(KArgs...),
                                     dim3 grid, dim3 block, size_t smem, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, k, static_cast<KArgs>(args)...);
}
#endif /* __CUDACC__ */

#endif
