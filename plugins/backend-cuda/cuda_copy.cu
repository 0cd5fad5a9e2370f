/* cuda_copy.cu — small copies between device memory and page-locked host memory, done by a
 * kernel instead of the copy engine.
 *
 * Why: a decode step of the pinned path starts with a ~4 KB copy of its inputs into device
 * memory and ends with a 4-byte copy of the sampled ids back; as copy-engine nodes inside a
 * CUDA graph each costs a hand-off between the copy engine and the SMs (H200 trace: the
 * embedding kernel started ~10 us after the input copy ended, and the ids' copy ~2-9 us after
 * the argmax). Page-locked memory is addressable by the device (unified addressing), so the
 * SMs can move those few bytes themselves over PCIe, as one more kernel in the chain
 * (programmatic dependent launch, like every kernel of this backend): the step boundary's
 * copies + embedding went from 35 to 19 us per step (decode 2.11 -> 2.10 ms). Large copies
 * keep the copy engine: there bandwidth counts, not latency. */
#include "cuda_common.cuh"

__global__ void copy_small_kernel(void *__restrict__ dst, const void *__restrict__ src,
                                  size_t bytes)
{
    llmrt_cuda_pdl_wait(); /* stream order: everything before this copy has completed */
    llmrt_cuda_pdl_trigger();
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0) {
        const size_t n16 = bytes / 16;
        for (size_t i = tid; i < n16; i += stride)
            reinterpret_cast<uint4 *>(dst)[i] = reinterpret_cast<const uint4 *>(src)[i];
        done = n16 * 16;
    }
    for (size_t i = done + tid; i < bytes; i += stride)
        static_cast<unsigned char *>(dst)[i] = static_cast<const unsigned char *>(src)[i];
}

/* The device address of page-locked host memory at p, or NULL when p is not page-locked
 * (pageable memory, or device memory). */
static void *pinned_device_ptr(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return a.type == cudaMemoryTypeHost ? a.devicePointer : NULL;
}

extern "C" int cuda_copy_by_kernel(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                                   llmrt_copy_kind kind, llmrt_error *err, llmrt_status *st)
{
    if (b->tune.copy_kernel < 0 || bytes > CUDA_COPY_KERNEL_MAX ||
        (kind != LLMRT_COPY_H2D && kind != LLMRT_COPY_D2H))
        return 0;
    void *d = dst;
    const void *s = src;
    if (kind == LLMRT_COPY_H2D)
        s = pinned_device_ptr(src);
    else
        d = pinned_device_ptr(dst);
    if (!d || !s)
        return 0;
    const int threads = 256; /* one 16-byte piece per thread */
    const unsigned blocks = (unsigned)ceil_div64(ceil_div64((int64_t)bytes, 16), threads);
    cuda_launch(b, copy_small_kernel, blocks, threads, 0, d, s, bytes);
    *st = cuda_check_launch(err, kind == LLMRT_COPY_H2D ? "copy kernel (host to device)"
                                                        : "copy kernel (device to host)");
    return 1;
}
