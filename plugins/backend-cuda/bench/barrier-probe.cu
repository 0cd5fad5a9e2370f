/* barrier-probe.cu — what a grid-wide barrier among resident blocks costs, next to what a
 * kernel boundary costs (programmatic dependent launch, inside a CUDA graph).
 *
 * Why: a persistent decode kernel (NOTES.md "Next", item 1) replaces kernel boundaries by
 * barriers or flags; it only pays if those are cheaper than the boundaries they replace.
 * Standalone (not part of the build): build it here, carry it to the GPU machine (an ignored
 * folder named in the device call's carry), run it there:
 *   nvcc -O2 -arch=sm_90 -o .probe/barrier-probe plugins/backend-cuda/bench/barrier-probe.cu
 * H200 (2026-11-30): atomic + volatile spin 1.72 us (132 blocks), release/acquire with a
 * monotone count 0.90 us, an empty PDL kernel in a graph 0.67 us (132 blocks of 512). */
#include <cstdio>
#include <cuda_runtime.h>
__device__ unsigned int g_count, g_gen;
__device__ __forceinline__ void grid_barrier(unsigned int nblocks, unsigned int &gen)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        unsigned int g = gen;
        if (atomicAdd(&g_count, 1u) == nblocks - 1) {
            g_count = 0;
            __threadfence();
            atomicExch(&g_gen, g + 1);
        } else {
            while (*(volatile unsigned int *)&g_gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
    gen++;
}
/* release/acquire flavour: one arrival atomic with release semantics, acquire polling */
__device__ __forceinline__ void grid_barrier_ra(unsigned int nblocks, unsigned int &gen)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int old;
        asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(&g_count) : "memory");
        const unsigned int target = (gen + 1) * nblocks; /* count never reset: monotone */
        unsigned int v = old + 1;
        while (v < target)
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(&g_count) : "memory");
    }
    __syncthreads();
    gen++;
}
__global__ void barrier_ra_kernel(int reps, float *sink, unsigned int gen0)
{
    unsigned int gen = gen0;
    float acc = 0;
    for (int r = 0; r < reps; r++) {
        acc += sink[(blockIdx.x * 7 + r) & 1023];
        grid_barrier_ra(gridDim.x, gen);
    }
    if (acc == 12345.f) sink[0] = acc;
}
__global__ void barrier_kernel(int reps, float *sink)
{
    unsigned int gen = *(volatile unsigned int *)&g_gen;
    float acc = 0;
    for (int r = 0; r < reps; r++) {
        acc += sink[(blockIdx.x * 7 + r) & 1023];
        grid_barrier(gridDim.x, gen);
    }
    if (acc == 12345.f) sink[0] = acc;
}
__global__ void empty_kernel(float *sink, int i)
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" :::);
    if (sink[(blockIdx.x + i) & 1023] == 12345.f) sink[1] = 1;
}
int main()
{
    float *sink; cudaMalloc(&sink, 4096 * 4); cudaMemset(sink, 0, 4096 * 4);
    cudaStream_t s; cudaStreamCreate(&s);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const int reps = 2000;
    for (int mult = 1; mult <= 2; mult++)
        for (int threads = 256; threads <= 512; threads *= 2) {
            int nb = sms * mult;
            barrier_kernel<<<nb, threads, 0, s>>>(10, sink);
            cudaEventRecord(a, s);
            barrier_kernel<<<nb, threads, 0, s>>>(reps, sink);
            cudaEventRecord(b, s);
            cudaEventSynchronize(b);
            float ms; cudaEventElapsedTime(&ms, a, b);
            printf("grid barrier: %d blocks x %d threads: %.3f us per barrier (%s)\n", nb, threads,
                   ms * 1000 / reps, cudaGetErrorString(cudaGetLastError()));
        }
    for (int mult = 1; mult <= 2; mult++) {
        int nb = sms * mult;
        unsigned int zero = 0;
        cudaMemcpyToSymbol(g_count, &zero, 4);
        barrier_ra_kernel<<<nb, 512, 0, s>>>(10, sink, 0);
        cudaEventRecord(a, s);
        barrier_ra_kernel<<<nb, 512, 0, s>>>(reps, sink, 10);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b);
        printf("grid barrier (release/acquire, monotone count): %d blocks x 512: %.3f us (%s)\n", nb,
               ms * 1000 / reps, cudaGetErrorString(cudaGetLastError()));
    }
    for (int nb = sms; nb <= 4 * sms; nb *= 2) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = nb; cfg.blockDim = 512; cfg.stream = s;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1; cfg.attrs = at; cfg.numAttrs = 1;
        cudaGraph_t g; cudaGraphExec_t ge;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        for (int i = 0; i < 200; i++) cudaLaunchKernelEx(&cfg, empty_kernel, sink, i);
        cudaStreamEndCapture(s, &g); cudaGraphInstantiate(&ge, g, 0);
        cudaGraphLaunch(ge, s);
        cudaEventRecord(a, s);
        for (int k = 0; k < 10; k++) cudaGraphLaunch(ge, s);
        cudaEventRecord(b, s); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b);
        printf("PDL kernel boundary in a graph: %d blocks x 512: %.3f us per kernel (%s)\n", nb,
               ms * 1000 / 2000, cudaGetErrorString(cudaGetLastError()));
    }
    return 0;
}
