/* cuda_common.cuh — device helpers shared by the backend's kernels: element conversions,
 * 16-byte vector loads, warp and block reductions, the kernel launch (through llmrt/cuda.h's
 * protocol) and launch arithmetic.
 *
 * Why: every kernel reads weights or caches in F32/F16/BF16 and accumulates in fp32; the
 * conversions and reductions are written once here so all kernels round the same way. */
#ifndef LLMRT_CUDA_COMMON_CUH
#define LLMRT_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <llmrt/cuda.h>

#include "cuda_backend.h"

#define CUDA_FULL_MASK 0xffffffffu

/* ---- element types ---- */

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/* Convert the 16 bytes of `raw` (16/sizeof(T) elements of T) to f32 into dst[]. */
template <typename T> __device__ __forceinline__ void vec_to_f32(const uint4 &raw, float *dst);

template <> __device__ __forceinline__ void vec_to_f32<float>(const uint4 &raw, float *dst)
{
    dst[0] = __uint_as_float(raw.x);
    dst[1] = __uint_as_float(raw.y);
    dst[2] = __uint_as_float(raw.z);
    dst[3] = __uint_as_float(raw.w);
}

template <> __device__ __forceinline__ void vec_to_f32<__half>(const uint4 &raw, float *dst)
{
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
        float2 f = __half22float2(h);
        dst[2 * i] = f.x;
        dst[2 * i + 1] = f.y;
    }
}

template <> __device__ __forceinline__ void vec_to_f32<__nv_bfloat16>(const uint4 &raw, float *dst)
{
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        /* bf16 → f32 is a 16-bit shift: exact, two integer ops */
        dst[2 * i] = __uint_as_float(w[i] << 16);
        dst[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}

/* 16-byte load through the read-only (non-coherent) path: for data no kernel of the same
 * launch writes (weights, caches during attention, activations read by a GEMV). */
__device__ __forceinline__ uint4 ldg16(const void *p)
{
    return __ldg(reinterpret_cast<const uint4 *>(p));
}

/* 16-byte load that streams past L1 (data read exactly once: GEMV weights). */
__device__ __forceinline__ uint4 ld_stream16(const void *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/* ---- reductions ---- */

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(CUDA_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(CUDA_FULL_MASK, v, o));
    return v;
}

/* Sum over the whole block (blockDim.x a multiple of 32, at most 1024). `red` is 32 floats
 * of shared memory. Every thread gets the result. */
__device__ __forceinline__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n_warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads(); /* red may still be read from a previous call */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = lane < n_warps ? red[lane] : 0.0f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n_warps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = lane < n_warps ? red[lane] : -INFINITY;
    return warp_max(v);
}

/* ---- asynchronous global -> shared copies (sm_80+) ---- */

/* Copy 16 bytes (both addresses 16-byte aligned) without passing through registers; visible
 * to the issuing thread after cp_async_wait_all(), to the block after a __syncthreads(). */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

/* ---- the launch protocol ----
 * Every kernel of this backend follows llmrt/cuda.h's protocol, the one other plugins' kernels
 * on the stream follow too: with b->pdl (programmatic dependent launch) a kernel may start
 * while the kernel before it is still finishing, so each kernel calls llmrt_cuda_pdl_wait()
 * before it reads anything an earlier kernel wrote (or writes anything an earlier kernel may
 * still read), and llmrt_cuda_pdl_trigger() after that wait. Every kernel triggers only after
 * its own wait, so when a kernel starts, all work queued before the kernel just before it has
 * completed: data that work wrote (step inputs copied in at the start of the step, KV-cache
 * rows of earlier steps, weights) may be read before the wait — attention and the attention
 * prologue do, to overlap their first round trips with the previous kernel. */

/* Launch kernel k on b's stream with b's launch protocol (errors surface in
 * cuda_check_launch). */
template <typename... KArgs, typename... Args>
static inline void cuda_launch(const llmrt_backend *b, void (*k)(KArgs...), dim3 grid,
                               dim3 block, size_t smem, Args... args)
{
    llmrt_cuda_launch(b->stream, b->pdl, k, grid, block, smem, args...);
}

/* ---- host-side launch arithmetic ---- */

static inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

static inline int is_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

#endif
