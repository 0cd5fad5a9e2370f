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
 * sample: the host sampler's rules (core/sampler.h): temperature, min-p (relative to the most
 * likely token), top-k, top-p over what is left. A token's weight is its relative probability
 * e = exp((x - max) / T) as 2^-40 fixed point, so every sum is an exact integer and the result
 * does not depend on thread timing. Thresholds are exact keys (order-preserving maps of the
 * logits): top-k keeps every token whose key is at least the k-th largest, top-p every token
 * at or above the key where the mass from the top first reaches ceil(top_p · q). The draw is
 * the inverse CDF at the request's uniform u over the kept tokens in the host sampler's order:
 * ascending token id when neither top-k nor top-p filters, most likely first (equal logits in
 * id order) when one does. Ties at a top-k / top-p threshold are all kept.
 *
 * How, fast (three launches, each a grid of slices x rows, so a row is spread over many SMs):
 *  1. max: each block the argmax of its slice of the row.
 *  2. histogram: each block bins its kept tokens by d = (x - max) / T in log-probability
 *     (SAMPLE_BINS bins over the span that can matter), counts and masses, into the row's
 *     histogram with global atomics, plus its slice's mass. The last block of the row reads
 *     the histogram and plans: which bins hold the top-k / top-p threshold and, for top-p,
 *     the bins the draw can land in for any total between the bounds the histogram gives.
 *     Greedy rows and the id-order draw (no top-k / top-p) finish here.
 *  3. pick: each block copies the tokens of the planned bins (a few dozen on real logits) into
 *     a candidate list; the last block sorts the candidates (key descending, id ascending =
 *     the draw order) in shared memory and finds the thresholds and the draw by prefix sums,
 *     adding the histogram's mass of the bins above the candidates.
 * Bins only coarsen the key order (a larger logit never lands in a later bin), so every
 * threshold and draw equals the one a full sort would give. A row whose planned bins hold more
 * than SAMPLE_SORT_CAP tokens (a top-k in the thousands, or thousands of logits within one bin
 * width) takes the one-block path over the whole row instead (full_row_pick: MSB-first radix
 * selection, the original algorithm; ~1.4 ms at 151936); [backend.cuda] tune sample_full=1 sends
 * every row there, which the tests use to check that both paths draw the same token. */
#include "cuda_common.cuh"

#include <cub/block/block_reduce.cuh>
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
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
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

/* ---- sample: the per-token rules (both paths) ---- */

#define SAMPLE_THREADS 512
#define SAMPLE_MASS_ONE 1099511627776.0f /* 2^40: fixed-point unit of probability mass */

typedef unsigned long long u64;

/* Order-preserving map of a float's bits to an unsigned key (larger float, larger key). */
__device__ __forceinline__ uint32_t float_key(float f)
{
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The float whose key is k (float_key's inverse, bit for bit). */
__device__ __forceinline__ float key_float(uint32_t k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* What every pass needs to decide whether token i is still in the running. */
struct sample_row {
    const float *x;
    int vocab;
    float m;       /* max logit */
    float inv_t;   /* 1 / temperature */
    float min_p;   /* 0 = off */
    uint32_t thr;  /* keys below are out (top-k / top-p so far); 0 = none */
    float scale;   /* histogram bins per unit of (m - x) / T (fast path only) */
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

/* The request's draw position in [0, total): u · total, rounded the same way on every path. */
__device__ __forceinline__ u64 draw_target(float u, u64 total)
{
    if (!(u >= 0.0f))
        u = 0.0f;
    const u64 t = (u64)((double)u * (double)total);
    return t >= total ? total - 1 : t;
}

/* ---- sample: the whole row in one block (the original algorithm) ----
 * Used for rows whose candidates do not fit the fast path's sort, and ([backend.cuda] tune
 * sample_full=1) for every row, as the reference the fast path is tested against. */

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

/* Shared memory of the one-block path. */
struct full_smem {
    typename cub::BlockScan<u64, SAMPLE_THREADS>::TempStorage scan;
    u64 bins[256];
    int sel;
    u64 above, total;
};

/* MSB-first radix selection over the keys of the kept tokens: the key K such that the
 * tokens with key > K weigh less than `want` and those with key >= K weigh at least `want`
 * (weight = 1 for top-k, mass for top-p and the sorted draw). *want_left (if not NULL) gets
 * want minus the weight of the tokens with key > K. Returns 0 when nothing needs cutting:
 * counting, when at most `want` tokens are kept; weighing, when they weigh less than `want`.
 * Called by the whole block. */
template <bool MASS>
__device__ uint32_t radix_select(const sample_row &r, u64 want, full_smem &sm, u64 *want_left)
{
    uint32_t prefix = 0;
    for (int pass = 0; pass < 4; pass++) {
        const int shift = 24 - 8 * pass;
        const uint32_t hi_mask = pass == 0 ? 0u : 0xffffffffu << (shift + 8);
        for (int i = threadIdx.x; i < 256; i += blockDim.x)
            sm.bins[i] = 0;
        if (threadIdx.x == 0) {
            sm.sel = -1;
            sm.above = 0;
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
            atomicAdd(&sm.bins[(key >> shift) & 255u], MASS ? mass_of(e) : (u64)1);
        }
        __syncthreads();
        if (threadIdx.x < 32)
            radix_find(sm.bins, want, &sm.sel, &sm.above, &sm.total);
        __syncthreads();
        const int sel = sm.sel;
        const u64 above = sm.above, total = sm.total;
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
__device__ u64 slice_masses(const sample_row &r, uint32_t eq, int lo, int hi, u64 *sum, u64 *excl,
                            full_smem &sm)
{
    u64 m = 0;
    for (int i = lo; i < hi; i++) {
        float e;
        const float x = r.x[i];
        if (kept(r, x, &e) && (eq == 0 || float_key(x) == eq))
            m += mass_of(e);
    }
    u64 total;
    cub::BlockScan<u64, SAMPLE_THREADS>(sm.scan).ExclusiveSum(m, *excl, total);
    __syncthreads(); /* the scan's storage may be reused right away */
    *sum = m;
    return total;
}

/* out[row] for a non-greedy row whose max logit r.m is finite (r.thr = 0); amax is the row's
 * argmax. Called by a whole block of SAMPLE_THREADS threads. */
__device__ void full_row_pick(int32_t *out, int row, sample_row r, const llmrt_sample_params &sp,
                              int amax, full_smem &sm)
{
    const int vocab = r.vocab;
    /* top-k, then top-p over what is left; either one makes the draw most-likely-first */
    bool sorted = false;
    if (sp.top_k > 0 && sp.top_k < vocab) {
        const uint32_t k = radix_select<false>(r, (u64)sp.top_k, sm, NULL);
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
        const u64 q = slice_masses(r, 0, lo, hi, &sum, &excl, sm);
        u64 want = (u64)ceil((double)sp.top_p * (double)q);
        if (want < 1)
            want = 1;
        if (q > 0) {
            const uint32_t p = radix_select<true>(r, want, sm, NULL);
            if (p > r.thr)
                r.thr = p;
        }
    }

    /* the draw: the token where the running mass (in draw order) first exceeds u * total */
    const u64 total = slice_masses(r, 0, lo, hi, &sum, &excl, sm);
    if (total == 0) { /* nothing has any mass left (e.g. all filtered): greedy */
        if (threadIdx.x == 0)
            out[row] = amax;
        return;
    }
    u64 target = draw_target(sp.uniform, total);
    uint32_t eq = 0;
    if (sorted) {
        /* most likely first: the key where the descending cumulative mass passes target, then
         * among the tokens with exactly that key, id order at what is left of the target */
        u64 left = 0;
        eq = radix_select<true>(r, target + 1, sm, &left);
        if (eq != 0) {
            target = left - 1; /* target - mass of the keys above eq */
            slice_masses(r, eq, lo, hi, &sum, &excl, sm);
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

/* ---- sample: the fast path (max → histogram → pick; see the top of the file) ---- */

#define SAMPLE_MAX_SLICES 64   /* blocks per row */
#define SAMPLE_MIN_SLICE 2048  /* fewest tokens per block worth a block of its own */
#define SAMPLE_BINS 2048       /* histogram bins per row; SAMPLE_THREADS x 4 */
#define SAMPLE_SORT_CAP 4096   /* candidates the last block sorts; SAMPLE_THREADS x ITEMS */
#define SAMPLE_ITEMS (SAMPLE_SORT_CAP / SAMPLE_THREADS)
#define SAMPLE_ROWS_PER_LAUNCH 256

static_assert(SAMPLE_BINS == 4 * SAMPLE_THREADS, "the plan scans 4 bins per thread");
static_assert(SAMPLE_ITEMS * SAMPLE_THREADS == SAMPLE_SORT_CAP, "sort cap per thread");

enum sample_route {
    SAMPLE_ROUTE_DONE = 0, /* out[row] written by the histogram pass */
    SAMPLE_ROUTE_TOPK = 1, /* candidates: bins [0, hi_bin] (they hold the top k) */
    SAMPLE_ROUTE_TOPP = 2, /* candidates: bins [lo_bin, hi_bin] (the draw) and split_bin (top-p) */
    SAMPLE_ROUTE_FULL = 3  /* one block over the whole row */
};

/* Per row, in the backend's scratch. Counters and the histogram start at zero (scratch is
 * zeroed when allocated; the max pass zeroes the histogram; the last block of a pass resets
 * its counter), so a captured launch can be replayed. */
struct sample_state {
    float pmax[SAMPLE_MAX_SLICES]; /* max pass: each slice's max and its index */
    int pidx[SAMPLE_MAX_SLICES];
    u64 pmass[SAMPLE_MAX_SLICES];  /* histogram pass: each slice's kept mass */
    unsigned int cnt[SAMPLE_BINS]; /* kept tokens per bin */
    u64 mass[SAMPLE_BINS];         /* their mass per bin */
    unsigned int hist_done;        /* histogram blocks finished */
    unsigned int pick_done;        /* pick blocks finished */
    unsigned int n_cand;           /* candidates appended */
    /* the plan (the histogram pass's last block) */
    int route;
    int amax;
    float m;
    int lo_bin, hi_bin, split_bin;
    float scale;   /* the histogram's bins (bin_of), as the histogram pass computed them */
    u64 off_lo;    /* TOPP: mass of the bins before lo_bin */
    u64 off_split; /* TOPP: mass of the bins before split_bin */
    u64 want;      /* TOPP: the mass the top-p threshold must reach */
    uint2 cand[SAMPLE_SORT_CAP]; /* (key, token id), in no particular order */
};

/* Slice s of `slices` of a row of `vocab`: tokens [*lo, *hi). */
__device__ __forceinline__ void slice_range(int vocab, int slices, int s, int *lo, int *hi)
{
    const int per = (vocab + slices - 1) / slices;
    *lo = min(vocab, s * per);
    *hi = min(vocab, *lo + per);
}

/* f(x[i], i) for every token of [lo, hi), thread t taking lo + t, lo + t + SAMPLE_THREADS, ...
 * in that order; four loads in flight before the first use. */
template <typename F>
__device__ __forceinline__ void for_slice(const float *__restrict__ x, int lo, int hi, F f)
{
    for (int i0 = lo + (int)threadIdx.x; i0 < hi; i0 += 4 * SAMPLE_THREADS) {
        float v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int i = i0 + k * SAMPLE_THREADS;
            v[k] = i < hi ? x[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int i = i0 + k * SAMPLE_THREADS;
            if (i < hi)
                f(v[k], i);
        }
    }
}

/* The rules for a non-greedy row with max logit m. */
__device__ __forceinline__ sample_row row_rules(const float *x, int vocab, float m,
                                                const llmrt_sample_params &sp)
{
    sample_row r;
    r.x = x;
    r.vocab = vocab;
    r.m = m;
    r.inv_t = 1.0f / sp.temperature;
    r.min_p = sp.min_p > 0.0f ? sp.min_p : 0.0f;
    r.thr = 0;
    /* The span of d = (m - x) / T the bins cover (beyond it, the last bin): past 104 every
     * probability is 0 in float; past 28 every mass is 0 in 2^-40 units, which is all that
     * top-p and the draw see, so without top-k counting tokens 28 is enough; min-p ends the
     * span at -ln(min_p). The span only sets the resolution, never the result. */
    float span = (sp.top_k > 0 && sp.top_k < vocab) ? 104.0f : 28.0f;
    if (r.min_p > 0.0f) /* _rn: never contracted into an fma, so every kernel gets the same */
        span = fminf(span, __fadd_rn(__fmul_rn(-logf(r.min_p), 1.001f), 1e-3f));
    r.scale = __fdiv_rn((float)SAMPLE_BINS, fmaxf(span, 1e-3f));
    return r;
}

/* Histogram bin of a token with logit x <= m (not NaN): a larger x never gets a larger bin.
 * The histogram and the pick kernels must agree on it to the bit: explicit roundings. */
__device__ __forceinline__ int bin_of(const sample_row &r, float x)
{
    const float f = __fmul_rn(__fmul_rn(__fsub_rn(r.m, x), r.inv_t), r.scale);
    return f < (float)(SAMPLE_BINS - 1) ? (int)f : SAMPLE_BINS - 1;
}

/* A kept token in the planned bins. */
__device__ __forceinline__ bool is_candidate(const sample_row &r, float x, int lo_bin, int hi_bin,
                                             int split_bin)
{
    const int b = bin_of(r, x);
    if ((b < lo_bin || b > hi_bin) && b != split_bin)
        return false;
    float e;
    return kept(r, x, &e);
}

/* First index b of the non-decreasing c[0..SAMPLE_BINS) with c[b] >= w (SAMPLE_BINS if none). */
template <typename T> __device__ int first_reaching(const T *c, T w)
{
    int lo = 0, hi = SAMPLE_BINS;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (c[mid] >= w)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* 1. max: grid (slices, rows). Each block: the argmax of its slice; and zero its share of the
 * row's histogram for pass 2. */
__global__ void __launch_bounds__(SAMPLE_THREADS)
sample_max_kernel(const float *__restrict__ logits, int vocab, int slices,
                  sample_state *__restrict__ states)
{
    __shared__ float rv[32];
    __shared__ int ri[32];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int row = blockIdx.y, s = blockIdx.x;
    sample_state *st = states + row;
    const float *x = logits + (int64_t)row * vocab;
    int lo, hi;
    slice_range(vocab, slices, s, &lo, &hi);
    float bv = -INFINITY;
    int bi = INT_MAX;
    for_slice(x, lo, hi, [&](float v, int i) {
        if (better(v, i, bv, bi))
            bv = v, bi = i;
    });
    block_argmax(bv, bi, rv, ri);
    if (threadIdx.x == 0) {
        st->pmax[s] = bv;
        st->pidx[s] = bi;
    }
    for (int b = s * SAMPLE_THREADS + threadIdx.x; b < SAMPLE_BINS; b += slices * SAMPLE_THREADS) {
        st->cnt[b] = 0;
        st->mass[b] = 0;
    }
}

/* 2. histogram: grid (slices, rows). Greedy rows are written by block 0 here. The last block
 * of a row plans the pick (sample_state), or draws in id order itself. force_full: every
 * sampled row takes the one-block path. */
__global__ void __launch_bounds__(SAMPLE_THREADS)
sample_hist_kernel(int32_t *__restrict__ out, const float *__restrict__ logits,
                   const llmrt_sample_params *__restrict__ params, int vocab, int slices,
                   int force_full, sample_state *__restrict__ states)
{
    typedef cub::BlockScan<u64, SAMPLE_THREADS> scan64_t;
    typedef cub::BlockScan<unsigned int, SAMPLE_THREADS> scan32_t;
    __shared__ union {
        typename scan64_t::TempStorage s64;
        typename scan32_t::TempStorage s32;
    } tmp;
    __shared__ unsigned int s_cnt[SAMPLE_BINS]; /* this block's bins; the last block: prefix sums */
    __shared__ u64 s_mass[SAMPLE_BINS];
    __shared__ float s_m;
    __shared__ int s_amax, s_draw_slice;
    __shared__ u64 s_draw_left;
    __shared__ bool s_last;

    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int row = blockIdx.y, s = blockIdx.x;
    sample_state *st = states + row;
    const llmrt_sample_params sp = params[row];

    /* the row's most likely token, from the slices' (every block the same) */
    if (threadIdx.x < 32) {
        float v = -INFINITY;
        int i = INT_MAX;
        for (int j = threadIdx.x; j < slices; j += 32) {
            const float pv = st->pmax[j];
            const int pi = st->pidx[j];
            if (better(pv, pi, v, i))
                v = pv, i = pi;
        }
        warp_argmax(v, i);
        if (threadIdx.x == 0) {
            s_m = v;
            s_amax = i == INT_MAX ? 0 : i;
        }
    }
    __syncthreads();
    const float m = s_m;
    const int amax = s_amax;
    if (!(sp.temperature >= 1e-5f) || !isfinite(m)) {
        if (s == 0 && threadIdx.x == 0) {
            out[row] = amax;
            st->route = SAMPLE_ROUTE_DONE;
        }
        return;
    }
    const sample_row r = row_rules(logits + (int64_t)row * vocab, vocab, m, sp);

    /* this slice's kept tokens by bin */
    for (int b = threadIdx.x; b < SAMPLE_BINS; b += SAMPLE_THREADS) {
        s_cnt[b] = 0;
        s_mass[b] = 0;
    }
    __syncthreads();
    int lo, hi;
    slice_range(vocab, slices, s, &lo, &hi);
    u64 mine = 0;
    for_slice(r.x, lo, hi, [&](float x, int) {
        float e;
        if (!kept(r, x, &e))
            return;
        const int b = bin_of(r, x);
        const u64 w = mass_of(e);
        atomicAdd(&s_cnt[b], 1u);
        if (w)
            atomicAdd(&s_mass[b], w);
        mine += w;
    });
    __syncthreads();
    for (int b = threadIdx.x; b < SAMPLE_BINS; b += SAMPLE_THREADS) {
        if (s_cnt[b]) {
            atomicAdd(&st->cnt[b], s_cnt[b]);
            if (s_mass[b])
                atomicAdd(&st->mass[b], s_mass[b]);
        }
    }
    u64 excl, slice_mass;
    scan64_t(tmp.s64).ExclusiveSum(mine, excl, slice_mass);
    if (threadIdx.x == 0)
        st->pmass[s] = slice_mass;
    __threadfence(); /* publish the bins and the slice mass before counting this block */
    __syncthreads();
    if (threadIdx.x == 0)
        s_last = atomicAdd(&st->hist_done, 1u) == (unsigned)slices - 1;
    __syncthreads();
    if (!s_last)
        return;

    /* ---- the last block of the row: the plan ---- */
    __threadfence();
    if (threadIdx.x == 0)
        st->hist_done = 0; /* every block has counted: ready for the next launch */
    {   /* inclusive prefix sums of the row's histogram (read past L1: other SMs added) */
        unsigned int c[4];
        u64 w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            c[k] = __ldcg(&st->cnt[4 * threadIdx.x + k]);
            w[k] = __ldcg(&st->mass[4 * threadIdx.x + k]);
        }
        scan32_t(tmp.s32).InclusiveSum(c, c);
        __syncthreads();
        scan64_t(tmp.s64).InclusiveSum(w, w);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s_cnt[4 * threadIdx.x + k] = c[k];
            s_mass[4 * threadIdx.x + k] = w[k];
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int n_kept = s_cnt[SAMPLE_BINS - 1];
        const u64 q = s_mass[SAMPLE_BINS - 1];
        const bool top_k = sp.top_k > 0 && sp.top_k < vocab;
        const bool top_p = sp.top_p > 0.0f && sp.top_p < 1.0f;
        int route = SAMPLE_ROUTE_DONE;
        s_draw_slice = -1;
        st->m = m;
        st->amax = amax;
        st->scale = r.scale;
        if (force_full) {
            route = SAMPLE_ROUTE_FULL;
        } else if (top_k && n_kept > (unsigned int)sp.top_k) {
            /* the k most likely tokens lie in bins [0, bk]: sort those */
            const int bk = first_reaching(s_cnt, (unsigned int)sp.top_k);
            route = s_cnt[bk] <= SAMPLE_SORT_CAP ? SAMPLE_ROUTE_TOPK : SAMPLE_ROUTE_FULL;
            st->lo_bin = 0;
            st->hi_bin = bk;
            st->split_bin = -1;
        } else if (top_p) {
            if (q == 0) {
                out[row] = amax; /* nothing has any mass: greedy, as the one-block path */
            } else {
                u64 want = (u64)ceil((double)sp.top_p * (double)q);
                if (want < 1)
                    want = 1;
                /* the threshold is in bin bp; the kept mass is then in [want, C(bp)], so the
                 * draw lands in bins [d_lo, d_hi] (<= bp): candidates are those and bp */
                const int bp = first_reaching(s_mass, want);
                const int d_lo = first_reaching(s_mass, draw_target(sp.uniform, want) + 1);
                const int d_hi = first_reaching(s_mass, draw_target(sp.uniform, s_mass[bp]) + 1);
                const unsigned int n = s_cnt[d_hi] - (d_lo > 0 ? s_cnt[d_lo - 1] : 0u) +
                                       (d_hi < bp ? s_cnt[bp] - s_cnt[bp - 1] : 0u);
                route = n <= SAMPLE_SORT_CAP ? SAMPLE_ROUTE_TOPP : SAMPLE_ROUTE_FULL;
                st->lo_bin = d_lo;
                st->hi_bin = d_hi;
                st->split_bin = bp;
                st->off_lo = d_lo > 0 ? s_mass[d_lo - 1] : 0;
                st->off_split = bp > 0 ? s_mass[bp - 1] : 0;
                st->want = want;
            }
        } else if (q == 0) {
            out[row] = amax;
        } else {
            /* id order over every kept token: find the slice, then the token, here */
            const u64 target = draw_target(sp.uniform, q);
            u64 run = 0;
            for (int j = 0; j < slices; j++) {
                const u64 pm = __ldcg(&st->pmass[j]);
                if (run + pm > target) {
                    s_draw_slice = j;
                    s_draw_left = target - run;
                    break;
                }
                run += pm;
            }
        }
        st->route = route;
    }
    __syncthreads();
    const int j = s_draw_slice;
    if (j < 0)
        return;
    slice_range(vocab, slices, j, &lo, &hi);
    const int per = (hi - lo + SAMPLE_THREADS - 1) / SAMPLE_THREADS;
    const int a = min(hi, lo + (int)threadIdx.x * per), z = min(hi, a + per);
    u64 sum = 0;
    for (int i = a; i < z; i++) {
        float e;
        if (kept(r, r.x[i], &e))
            sum += mass_of(e);
    }
    u64 total;
    scan64_t(tmp.s64).ExclusiveSum(sum, excl, total);
    const u64 left = s_draw_left;
    if (excl <= left && left < excl + sum) {
        u64 run = excl;
        for (int i = a; i < z; i++) {
            float e;
            if (!kept(r, r.x[i], &e))
                continue;
            run += mass_of(e);
            if (run > left) {
                out[row] = i;
                break;
            }
        }
    }
}

/* Sort s_key[0, n) (n a power of two) descending; the whole block calls it. */
__device__ void bitonic_sort_desc(u64 *key, int n)
{
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < n; i += SAMPLE_THREADS) {
                const int l = i ^ j;
                if (l > i) {
                    const u64 a = key[i], b = key[l];
                    if ((i & k) == 0 ? a < b : a > b) {
                        key[i] = b;
                        key[l] = a;
                    }
                }
            }
            __syncthreads();
        }
}

/* The lowest position any thread offers (INT_MAX: none); the whole block calls it. */
__device__ int block_first(int mine, int *s_first)
{
    __syncthreads(); /* the previous result has been read */
    if (threadIdx.x == 0)
        *s_first = INT_MAX;
    __syncthreads();
    if (mine != INT_MAX)
        atomicMin(s_first, mine);
    __syncthreads();
    return *s_first;
}

typedef cub::BlockScan<u64, SAMPLE_THREADS> pick_scan_t;

/* The sum of every thread's `mine`, to every thread. */
__device__ u64 block_total(u64 mine, typename pick_scan_t::TempStorage &tmp)
{
    u64 excl, total;
    pick_scan_t(tmp).ExclusiveSum(mine, excl, total);
    __syncthreads();
    return total;
}

/* 3. pick: grid (slices, rows). Each block appends its slice's candidates; the last block of
 * the row sorts them and draws. Rows routed FULL run the one-block path in block 0. */
__global__ void __launch_bounds__(SAMPLE_THREADS)
sample_pick_kernel(int32_t *__restrict__ out, const float *__restrict__ logits,
                   const llmrt_sample_params *__restrict__ params, int vocab, int slices,
                   sample_state *__restrict__ states)
{
    typedef cub::BlockScan<unsigned int, SAMPLE_THREADS> scan32_t;
    __shared__ union {
        u64 key[SAMPLE_SORT_CAP]; /* candidates: key << 32 | ~id, sorted descending */
        full_smem full;
    } sm;
    __shared__ union {
        typename pick_scan_t::TempStorage s64;
        typename scan32_t::TempStorage s32;
    } tmp;
    __shared__ unsigned int s_base;
    __shared__ int s_first;
    __shared__ bool s_last;

    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int row = blockIdx.y, s = blockIdx.x;
    sample_state *st = states + row;
    const int route = st->route;
    if (route == SAMPLE_ROUTE_DONE)
        return;
    const llmrt_sample_params sp = params[row];
    const int amax = st->amax;
    sample_row r = row_rules(logits + (int64_t)row * vocab, vocab, st->m, sp);
    r.scale = st->scale;
    if (route == SAMPLE_ROUTE_FULL) {
        if (s == 0)
            full_row_pick(out, row, r, sp, amax, sm.full);
        return;
    }

    /* append this slice's candidates: count, one atomic per block, write */
    const int lo_bin = st->lo_bin, hi_bin = st->hi_bin, split_bin = st->split_bin;
    int lo, hi;
    slice_range(vocab, slices, s, &lo, &hi);
    unsigned int n_mine = 0;
    for_slice(r.x, lo, hi,
              [&](float x, int) { n_mine += is_candidate(r, x, lo_bin, hi_bin, split_bin); });
    unsigned int before, n_block;
    scan32_t(tmp.s32).ExclusiveSum(n_mine, before, n_block);
    if (threadIdx.x == 0)
        s_base = n_block ? atomicAdd(&st->n_cand, n_block) : 0u;
    __syncthreads();
    if (n_mine) { /* the same tokens in the same order as the count */
        unsigned int slot = s_base + before;
        for_slice(r.x, lo, hi, [&](float x, int i) {
            if (!is_candidate(r, x, lo_bin, hi_bin, split_bin))
                return;
            if (slot < SAMPLE_SORT_CAP) /* always, by the plan's count */
                st->cand[slot] = make_uint2(float_key(x), (unsigned int)i);
            slot++;
        });
    }
    __threadfence(); /* publish the candidates before counting this block */
    __syncthreads();
    if (threadIdx.x == 0)
        s_last = atomicAdd(&st->pick_done, 1u) == (unsigned)slices - 1;
    __syncthreads();
    if (!s_last)
        return;

    /* ---- the last block of the row: sort the candidates, then thresholds and draw ---- */
    __threadfence();
    const int n = (int)min(__ldcg(&st->n_cand), (unsigned int)SAMPLE_SORT_CAP);
    __syncthreads(); /* everyone has read n */
    if (threadIdx.x == 0) {
        st->n_cand = 0; /* every block has appended: ready for the next launch */
        st->pick_done = 0;
    }
    if (n == 0) { /* cannot happen: the plan counted at least one */
        if (threadIdx.x == 0)
            out[row] = amax;
        return;
    }
    int p2 = 64;
    while (p2 < n)
        p2 <<= 1;
    for (int j = threadIdx.x; j < p2; j += SAMPLE_THREADS) {
        u64 v = 0; /* padding sorts last: a kept token's key is never 0 */
        if (j < n) {
            const uint2 c = __ldcg(&st->cand[j]);
            v = (u64)c.x << 32 | (u64)(~c.y);
        }
        sm.key[j] = v;
    }
    __syncthreads();
    bitonic_sort_desc(sm.key, p2);

    /* thread t: sorted positions [ITEMS t, ITEMS t + ITEMS) — keys and the cumulative mass
     * (made global below); masses are recomputed where needed (fewer registers) */
    uint32_t kk[SAMPLE_ITEMS];
    u64 incl[SAMPLE_ITEMS];
    const int base = SAMPLE_ITEMS * threadIdx.x;
    {
        u64 run = 0;
#pragma unroll
        for (int q = 0; q < SAMPLE_ITEMS; q++) {
            kk[q] = base + q < n ? (uint32_t)(sm.key[base + q] >> 32) : 0u;
            run += kk[q] ? mass_of(rel_prob(r, key_float(kk[q]))) : 0;
            incl[q] = run; /* within the thread; the positions before it are added next */
        }
        u64 excl, all;
        pick_scan_t(tmp.s64).ExclusiveSum(run, excl, all);
        __syncthreads();
#pragma unroll
        for (int q = 0; q < SAMPLE_ITEMS; q++)
            incl[q] += excl;
    }
#define MASS_AT(q) mass_of(rel_prob(r, key_float(kk[q])))
    int first = INT_MAX;
    uint32_t thr;
    u64 total, mine;
    if (route == SAMPLE_ROUTE_TOPK) {
        /* the candidates hold every token from the top down to the k-th: its key is the
         * threshold; top-p then runs over the kept prefix, whose global prefix sums are incl */
        thr = (uint32_t)(sm.key[min(sp.top_k, n) - 1] >> 32);
        if (sp.top_p > 0.0f && sp.top_p < 1.0f) {
            mine = 0;
#pragma unroll
            for (int q = 0; q < SAMPLE_ITEMS; q++)
                if (kk[q] >= thr)
                    mine += MASS_AT(q);
            const u64 q_mass = block_total(mine, tmp.s64);
            if (q_mass > 0) {
                u64 want = (u64)ceil((double)sp.top_p * (double)q_mass);
                if (want < 1)
                    want = 1;
#pragma unroll
                for (int q = SAMPLE_ITEMS - 1; q >= 0; q--)
                    if (base + q < n && incl[q] >= want)
                        first = base + q;
                const int j = block_first(first, &s_first);
                const uint32_t p = j < n ? (uint32_t)(sm.key[j] >> 32) : thr; /* j < n always */
                if (p > thr)
                    thr = p;
            }
        }
        mine = 0;
#pragma unroll
        for (int q = 0; q < SAMPLE_ITEMS; q++)
            if (kk[q] >= thr)
                mine += MASS_AT(q);
        total = block_total(mine, tmp.s64);
        if (total == 0) { /* nothing has any mass left: greedy, as the one-block path */
            if (threadIdx.x == 0)
                out[row] = amax;
            return;
        }
    } else {
        /* TOPP: the global cumulative mass is incl plus the bins above the candidates: off_lo
         * above the draw bins [lo_bin, hi_bin]; above the split bin, off_split minus the draw
         * bins' own mass (which incl already holds). Padding has key 0, which no threshold
         * keeps. */
        mine = 0;
#pragma unroll
        for (int q = 0; q < SAMPLE_ITEMS; q++)
            if (kk[q] && bin_of(r, key_float(kk[q])) < split_bin)
                mine += MASS_AT(q);
        const u64 in_draw_bins = block_total(mine, tmp.s64);
        const u64 off_lo = st->off_lo, off_split = st->off_split - in_draw_bins;
#pragma unroll
        for (int q = 0; q < SAMPLE_ITEMS; q++)
            incl[q] += bin_of(r, key_float(kk[q])) >= split_bin ? off_split : off_lo;
        const u64 want = st->want;
#pragma unroll
        for (int q = SAMPLE_ITEMS - 1; q >= 0; q--)
            if (base + q < n && incl[q] >= want)
                first = base + q;
        const int j = block_first(first, &s_first);
        thr = j < n ? (uint32_t)(sm.key[j] >> 32) : 1u; /* j < n always: C(split) >= want */
        mine = 0;
#pragma unroll
        for (int q = 0; q < SAMPLE_ITEMS; q++)
            if (kk[q] >= thr && bin_of(r, key_float(kk[q])) >= split_bin)
                mine += MASS_AT(q);
        total = st->off_split + block_total(mine, tmp.s64);
    }
#undef MASS_AT
    /* the draw: the first position (most likely first, ids ascending) whose cumulative mass
     * passes the target */
    const u64 target = draw_target(sp.uniform, total);
    first = INT_MAX;
#pragma unroll
    for (int q = SAMPLE_ITEMS - 1; q >= 0; q--)
        if (base + q < n && kk[q] >= thr && incl[q] > target)
            first = base + q;
    const int j = block_first(first, &s_first);
    if (threadIdx.x == 0)
        out[row] = j < n ? (int32_t)(~(uint32_t)sm.key[j]) : amax;
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
    const int32_t chunk = rows < SAMPLE_ROWS_PER_LAUNCH ? rows : SAMPLE_ROWS_PER_LAUNCH;
    /* enough blocks per row to spread one row over the GPU, fewer when many rows fill it */
    int64_t slices = ceil_div64(vocab, SAMPLE_MIN_SLICE);
    const int64_t fill = ceil_div64(2 * (int64_t)(b->sm_count > 0 ? b->sm_count : 1), chunk);
    if (slices > fill)
        slices = fill;
    if (slices > SAMPLE_MAX_SLICES)
        slices = SAMPLE_MAX_SLICES;
    if (slices < 1)
        slices = 1;
    void *scratch = NULL;
    if ((st = cuda_scratch_get(b, CUDA_SCRATCH_SAMPLE, (size_t)chunk * sizeof(sample_state),
                               &scratch, err)) != LLMRT_OK)
        return st;
    sample_state *states = (sample_state *)scratch;
    for (int32_t r0 = 0; r0 < rows; r0 += chunk) {
        const int32_t n = rows - r0 < chunk ? rows - r0 : chunk;
        const dim3 grid((unsigned)slices, (unsigned)n);
        const float *lg = logits + (int64_t)r0 * vocab;
        cuda_launch(b, sample_max_kernel, grid, SAMPLE_THREADS, 0, lg, vocab, (int)slices, states);
        if ((st = cuda_check_launch(err, "sample (max)")) != LLMRT_OK)
            return st;
        cuda_launch(b, sample_hist_kernel, grid, SAMPLE_THREADS, 0, out + r0, lg, params + r0,
                    vocab, (int)slices, b->tune.sample_full, states);
        if ((st = cuda_check_launch(err, "sample (histogram)")) != LLMRT_OK)
            return st;
        cuda_launch(b, sample_pick_kernel, grid, SAMPLE_THREADS, 0, out + r0, lg, params + r0,
                    vocab, (int)slices, states);
        if ((st = cuda_check_launch(err, "sample (pick)")) != LLMRT_OK)
            return st;
    }
    return LLMRT_OK;
}
