/* cuda_sample.cu — picking the next token on the device: argmax and temperature / min-p /
 * top-k / top-p sampling over rows of logits [rows, vocab].
 *
 * Why on the device: the logits of a step are 151936 floats per sequence; reducing them where
 * they are leaves only the token ids to copy back, and keeps the whole decode step inside one
 * CUDA graph.
 *
 * argmax: one launch; blocks reduce slices of a row, the last block to finish (an atomic
 * counter, reset by that block so the launch can be replayed) reduces the slices.
 *
 * sample: one 512-thread block per row, in the host sampler's order (core/sampler.h):
 * temperature, min-p (relative to the most likely token), top-k, top-p over what is left.
 * Thresholds are found by MSB-first radix selection over order-preserving keys of the
 * logits — counts for top-k, probability mass for top-p — so nothing is sorted. Masses are
 * 2^-40 fixed point summed with integer atomics, so every pass is exact and the result does
 * not depend on thread timing. The draw is the inverse CDF at the request's uniform u over the
 * kept tokens in the host sampler's order: ascending token id when neither top-k nor top-p
 * filters, most likely first when one does (found by one more radix selection, on the
 * cumulative mass u * total). Ties at a top-k / top-p threshold are all kept, and equally
 * likely tokens are drawn in id order (the host breaks those ties by its heap). */
#include "cuda_common.cuh"

#include <cub/block/block_scan.cuh>
#include <limits.h>

/* ---- argmax ---- */

#define ARGMAX_THREADS 256
#define ARGMAX_MAX_BLOCKS 32    /* slices per row */
#define ARGMAX_ROWS_PER_LAUNCH 4096

/* (v, i) beats (bv, bi): larger value, lower index on ties; NaN never wins. */
__device__ __forceinline__ bool better(float v, int i, float bv, int bi)
{
    return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void warp_argmax(float &v, int &i)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(CUDA_FULL_MASK, v, o);
        const int oi = __shfl_xor_sync(CUDA_FULL_MASK, i, o);
        if (better(ov, oi, v, i))
            v = ov, i = oi;
    }
}

/* Whole-block argmax; every thread gets the result. rv/ri: 32 entries of shared memory. */
__device__ __forceinline__ void block_argmax(float &v, int &i, float *rv, int *ri)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n_warps = (blockDim.x + 31) >> 5;
    warp_argmax(v, i);
    __syncthreads();
    if (lane == 0) {
        rv[warp] = v;
        ri[warp] = i;
    }
    __syncthreads();
    v = lane < n_warps ? rv[lane] : -INFINITY;
    i = lane < n_warps ? ri[lane] : INT_MAX;
    warp_argmax(v, i);
}

/* grid (slices, rows). scratch: counters [ARGMAX_ROWS_PER_LAUNCH] u32, then per (row, slice)
 * value f32 and index i32. */
__global__ void __launch_bounds__(ARGMAX_THREADS)
argmax_kernel(int32_t *__restrict__ out, const float *__restrict__ logits, int vocab, int slices,
              unsigned int *counters, float *pv, int *pi)
{
    __shared__ float rv[32];
    __shared__ int ri[32];
    __shared__ bool last;
    pdl_wait();
    pdl_trigger();
    const int row = blockIdx.y;
    const float *x = logits + (int64_t)row * vocab;
    const int per = (vocab + slices - 1) / slices;
    const int lo = blockIdx.x * per, hi = min(vocab, lo + per);
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const float v = x[i];
        if (better(v, i, bv, bi))
            bv = v, bi = i;
    }
    block_argmax(bv, bi, rv, ri);
    if (slices == 1) {
        if (threadIdx.x == 0)
            out[row] = bi == INT_MAX ? 0 : bi;
        return;
    }
    if (threadIdx.x == 0) {
        pv[row * slices + blockIdx.x] = bv;
        pi[row * slices + blockIdx.x] = bi;
        __threadfence(); /* publish the slice result before counting it */
        last = atomicAdd(&counters[row], 1u) == (unsigned)slices - 1;
    }
    __syncthreads();
    if (!last)
        return;
    /* the last block of the row: reduce the slices (read past L1: other SMs wrote them) */
    bv = -INFINITY;
    bi = INT_MAX;
    for (int j = threadIdx.x; j < slices; j += blockDim.x) {
        const float v = __ldcg(&pv[row * slices + j]);
        const int i = __ldcg(&pi[row * slices + j]);
        if (better(v, i, bv, bi))
            bv = v, bi = i;
    }
    block_argmax(bv, bi, rv, ri);
    if (threadIdx.x == 0) {
        out[row] = bi == INT_MAX ? 0 : bi;
        counters[row] = 0; /* ready for the next launch (graph replay) */
    }
}

llmrt_status cuda_argmax(llmrt_backend *b, int32_t *out, const float *logits, int32_t rows,
                         int32_t vocab, llmrt_error *err)
{
    if (rows <= 0)
        return LLMRT_OK;
    if (vocab <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cuda argmax: vocab must be positive (got %d)",
                          vocab);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    int slices = (int)ceil_div64(vocab, ARGMAX_THREADS * 16);
    if (slices > ARGMAX_MAX_BLOCKS)
        slices = ARGMAX_MAX_BLOCKS;
    if (slices < 1)
        slices = 1;
    unsigned int *counters = NULL;
    float *pv = NULL;
    int *pi = NULL;
    if (slices > 1) {
        const int chunk_rows = rows < ARGMAX_ROWS_PER_LAUNCH ? rows : ARGMAX_ROWS_PER_LAUNCH;
        const size_t bytes = ARGMAX_ROWS_PER_LAUNCH * sizeof(unsigned int) +
                             (size_t)chunk_rows * slices * (sizeof(float) + sizeof(int));
        void *scratch = NULL;
        if ((st = cuda_scratch_get(b, CUDA_SCRATCH_ARGMAX, bytes, &scratch, err)) != LLMRT_OK)
            return st;
        counters = (unsigned int *)scratch;
        pv = (float *)(counters + ARGMAX_ROWS_PER_LAUNCH);
        pi = (int *)(pv + (size_t)chunk_rows * slices);
    }
    for (int32_t r0 = 0; r0 < rows; r0 += ARGMAX_ROWS_PER_LAUNCH) {
        const int32_t n = rows - r0 < ARGMAX_ROWS_PER_LAUNCH ? rows - r0 : ARGMAX_ROWS_PER_LAUNCH;
        cuda_launch(b, argmax_kernel, dim3((unsigned)slices, (unsigned)n), ARGMAX_THREADS, 0,
                    out + r0, logits + (int64_t)r0 * vocab, vocab, slices, counters, pv, pi);
        if ((st = cuda_check_launch(err, "argmax")) != LLMRT_OK)
            return st;
    }
    return LLMRT_OK;
}

/* ---- sample ---- */

#define SAMPLE_THREADS 512
#define SAMPLE_MASS_ONE 1099511627776.0f /* 2^40: fixed-point unit of probability mass */

typedef unsigned long long u64;

/* Order-preserving map of a float's bits to an unsigned key (larger float, larger key). */
__device__ __forceinline__ uint32_t float_key(float f)
{
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* What every pass needs to decide whether token i is still in the running. */
struct sample_row {
    const float *x;
    int vocab;
    float m;       /* max logit */
    float inv_t;   /* 1 / temperature */
    float min_p;   /* 0 = off */
    uint32_t thr;  /* keys below are out (top-k / top-p so far); 0 = none */
};

/* Relative probability e = exp((x - m) / T) in (0, 1]; the same expression in every pass. */
__device__ __forceinline__ float rel_prob(const sample_row &r, float x)
{
    return expf((x - r.m) * r.inv_t);
}

__device__ __forceinline__ u64 mass_of(float e)
{
    return (u64)(e * SAMPLE_MASS_ONE);
}

/* Token with logit x survives min-p and the current threshold; e gets its relative prob.
 * A token whose probability is 0 (-inf logit, or underflow) is out, as on the host. */
__device__ __forceinline__ bool kept(const sample_row &r, float x, float *e)
{
    if (isnan(x) || float_key(x) < r.thr)
        return false;
    *e = rel_prob(r, x);
    return *e > 0.0f && *e >= r.min_p;
}

/* Warp 0: scanning bins from 255 down, find the bin where the running total reaches `want`.
 * Writes the bin and the total of the bins above it; *total gets the sum of all bins. */
__device__ void radix_find(const u64 *bins, u64 want, int *sel, u64 *above, u64 *total)
{
    const int lane = threadIdx.x & 31;
    u64 local[8], lsum = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        local[j] = bins[255 - (8 * lane + j)];
        lsum += local[j];
    }
    u64 incl = lsum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const u64 t = __shfl_up_sync(CUDA_FULL_MASK, incl, o);
        if (lane >= o)
            incl += t;
    }
    const u64 excl = incl - lsum;
    if (lane == 31)
        *total = incl;
    if (excl < want && incl >= want) {
        u64 run = excl;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (run + local[j] >= want) {
                *sel = 255 - (8 * lane + j);
                *above = run;
                break;
            }
            run += local[j];
        }
    }
}

/* MSB-first radix selection over the keys of the kept tokens: the key K such that the
 * tokens with key > K weigh less than `want` and those with key >= K weigh at least `want`
 * (weight = 1 for top-k, mass for top-p and the sorted draw). *want_left (if not NULL) gets
 * want minus the weight of the tokens with key > K. Returns 0 when nothing needs cutting:
 * counting, when at most `want` tokens are kept; weighing, when they weigh less than `want`.
 * Called by the whole block. */
template <bool MASS>
__device__ uint32_t radix_select(const sample_row &r, u64 want, u64 *bins, int *s_sel,
                                 u64 *s_above, u64 *s_total, u64 *want_left)
{
    uint32_t prefix = 0;
    for (int pass = 0; pass < 4; pass++) {
        const int shift = 24 - 8 * pass;
        const uint32_t hi_mask = pass == 0 ? 0u : 0xffffffffu << (shift + 8);
        for (int i = threadIdx.x; i < 256; i += blockDim.x)
            bins[i] = 0;
        if (threadIdx.x == 0) {
            *s_sel = -1;
            *s_above = 0;
        }
        __syncthreads();
        for (int i = threadIdx.x; i < r.vocab; i += blockDim.x) {
            const float x = r.x[i];
            float e;
            if (!kept(r, x, &e))
                continue;
            const uint32_t key = float_key(x);
            if ((key & hi_mask) != prefix)
                continue;
            atomicAdd(&bins[(key >> shift) & 255u], MASS ? mass_of(e) : (u64)1);
        }
        __syncthreads();
        if (threadIdx.x < 32)
            radix_find(bins, want, s_sel, s_above, s_total);
        __syncthreads();
        const int sel = *s_sel;
        const u64 above = *s_above, total = *s_total;
        __syncthreads(); /* everyone has read them before anyone resets them */
        if (pass == 0 && (MASS ? total < want : total <= want))
            return 0;
        if (sel < 0)
            return 0; /* cannot happen when the weights add up; keep everything */
        prefix |= (uint32_t)sel << shift;
        want -= above;
    }
    if (want_left)
        *want_left = want;
    return prefix;
}

/* Block-wide: total mass of the kept tokens (with key == eq when eq != 0; no kept token has
 * key 0, which is a NaN's). Thread t owns the slice [lo, hi); *excl gets the mass before it. */
template <typename SCAN>
__device__ u64 slice_masses(const sample_row &r, uint32_t eq, int lo, int hi, u64 *sum, u64 *excl,
                            typename SCAN::TempStorage &tmp)
{
    u64 m = 0;
    for (int i = lo; i < hi; i++) {
        float e;
        const float x = r.x[i];
        if (kept(r, x, &e) && (eq == 0 || float_key(x) == eq))
            m += mass_of(e);
    }
    u64 total;
    SCAN(tmp).ExclusiveSum(m, *excl, total);
    __syncthreads(); /* tmp may be reused right away */
    *sum = m;
    return total;
}

__global__ void __launch_bounds__(SAMPLE_THREADS)
sample_kernel(int32_t *__restrict__ out, const float *__restrict__ logits,
              const llmrt_sample_params *__restrict__ params, int vocab)
{
    typedef cub::BlockScan<u64, SAMPLE_THREADS> scan_t;
    __shared__ typename scan_t::TempStorage scan_tmp;
    __shared__ u64 bins[256];
    __shared__ float rv[32];
    __shared__ int ri[32];
    __shared__ int s_sel;
    __shared__ u64 s_above, s_total;

    pdl_wait();
    pdl_trigger();
    const int row = blockIdx.x;
    const llmrt_sample_params sp = params[row];
    sample_row r;
    r.x = logits + (int64_t)row * vocab;
    r.vocab = vocab;

    /* the most likely token: the answer when greedy, and the reference for the rest */
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float v = r.x[i];
        if (better(v, i, bv, bi))
            bv = v, bi = i;
    }
    block_argmax(bv, bi, rv, ri);
    const int amax = bi == INT_MAX ? 0 : bi;
    if (!(sp.temperature >= 1e-5f) || !isfinite(bv)) {
        if (threadIdx.x == 0)
            out[row] = amax;
        return;
    }
    r.m = bv;
    r.inv_t = 1.0f / sp.temperature;
    r.min_p = sp.min_p > 0.0f ? sp.min_p : 0.0f;
    r.thr = 0;

    /* top-k, then top-p over what is left; either one makes the draw most-likely-first */
    bool sorted = false;
    if (sp.top_k > 0 && sp.top_k < vocab) {
        const uint32_t k = radix_select<false>(r, (u64)sp.top_k, bins, &s_sel, &s_above, &s_total,
                                               NULL);
        if (k != 0) {
            r.thr = k;
            sorted = true;
        }
    }
    const int per = (vocab + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int lo = min(vocab, (int)threadIdx.x * per), hi = min(vocab, lo + per);
    u64 sum, excl;
    if (sp.top_p > 0.0f && sp.top_p < 1.0f) {
        sorted = true;
        const u64 q = slice_masses<scan_t>(r, 0, lo, hi, &sum, &excl, scan_tmp);
        u64 want = (u64)ceil((double)sp.top_p * (double)q);
        if (want < 1)
            want = 1;
        if (q > 0) {
            const uint32_t p = radix_select<true>(r, want, bins, &s_sel, &s_above, &s_total, NULL);
            if (p > r.thr)
                r.thr = p;
        }
    }

    /* the draw: the token where the running mass (in draw order) first exceeds u * total */
    const u64 total = slice_masses<scan_t>(r, 0, lo, hi, &sum, &excl, scan_tmp);
    if (total == 0) { /* nothing has any mass left (e.g. all filtered): greedy */
        if (threadIdx.x == 0)
            out[row] = amax;
        return;
    }
    float u = sp.uniform;
    if (!(u >= 0.0f))
        u = 0.0f;
    u64 target = (u64)((double)u * (double)total);
    if (target >= total)
        target = total - 1;
    uint32_t eq = 0;
    if (sorted) {
        /* most likely first: the key where the descending cumulative mass passes target, then
         * among the tokens with exactly that key, id order at what is left of the target */
        u64 left = 0;
        eq = radix_select<true>(r, target + 1, bins, &s_sel, &s_above, &s_total, &left);
        if (eq != 0) {
            target = left - 1; /* target - mass of the keys above eq */
            slice_masses<scan_t>(r, eq, lo, hi, &sum, &excl, scan_tmp);
        }
    }
    if (excl <= target && target < excl + sum) {
        u64 run = excl;
        for (int i = lo; i < hi; i++) {
            float e;
            const float x = r.x[i];
            if (!kept(r, x, &e) || (eq != 0 && float_key(x) != eq))
                continue;
            run += mass_of(e);
            if (run > target) {
                out[row] = i;
                break;
            }
        }
    }
}

llmrt_status cuda_sample(llmrt_backend *b, int32_t *out, const float *logits,
                         const llmrt_sample_params *params, int32_t rows, int32_t vocab,
                         llmrt_error *err)
{
    if (rows <= 0)
        return LLMRT_OK;
    if (vocab <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cuda sample: vocab must be positive (got %d)",
                          vocab);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    for (int32_t r0 = 0; r0 < rows; r0 += 65535) {
        const int32_t n = rows - r0 < 65535 ? rows - r0 : 65535;
        cuda_launch(b, sample_kernel, (unsigned)n, SAMPLE_THREADS, 0, out + r0,
                    logits + (int64_t)r0 * vocab, params + r0, vocab);
        if ((st = cuda_check_launch(err, "sample")) != LLMRT_OK)
            return st;
    }
    return LLMRT_OK;
}
