/* cuda_fused.cu — the "llmrt.fused" extension (ext/fused.h): add + RMSNorm, the attention
 * prologue (per-head q/k RMSNorm + RoPE + KV-cache store over a fused qkv projection), and
 * SwiGLU over a fused gate|up projection.
 *
 * Why: at batch-1 decode these ops move a few kilobytes each, so each separate launch costs
 * its launch latency and a round trip through memory, not bandwidth: a Qwen3 layer had ten of
 * them. Fused, a layer has three. Each kernel does the arithmetic of the composition it
 * replaces the way the separate CUDA kernels do (fp32, accurate powf/sincosf/expf, normalise
 * then multiply by the weight), so results agree with the unfused path to fp32 rounding. */
#include "cuda_common.cuh"

#include <math.h>

/* ---- add + rmsnorm ---- */

/* Four consecutive weights as f32. */
template <typename T> __device__ __forceinline__ float4 load_w4(const T *w, int j);
template <> __device__ __forceinline__ float4 load_w4<float>(const float *w, int j)
{
    return __ldg(reinterpret_cast<const float4 *>(w + j));
}
template <> __device__ __forceinline__ float4 load_w4<__half>(const __half *w, int j)
{
    const uint2 u = __ldg(reinterpret_cast<const uint2 *>(w + j));
    const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&u.x));
    const float2 c = __half22float2(*reinterpret_cast<const __half2 *>(&u.y));
    return make_float4(a.x, a.y, c.x, c.y);
}
template <> __device__ __forceinline__ float4 load_w4<__nv_bfloat16>(const __nv_bfloat16 *w, int j)
{
    const uint2 u = __ldg(reinterpret_cast<const uint2 *>(w + j));
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                       __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u));
}

/* One block per row, the row held in registers: thread i owns float4 chunks i, i + blockDim,
 * ... (V of them). d % 4 == 0, d <= 4 * V * blockDim, pointers 16-byte aligned. */
template <typename T, int V>
__global__ void add_rmsnorm_vec_kernel(float *__restrict__ out, float *__restrict__ x,
                                       const float *__restrict__ res, const T *__restrict__ w,
                                       int32_t d, float eps)
{
    __shared__ float red[32];
    const int64_t row = blockIdx.x;
    float4 *xr = reinterpret_cast<float4 *>(x + row * d);
    const float4 *rr = res ? reinterpret_cast<const float4 *>(res + row * d) : nullptr;
    float4 *orow = reinterpret_cast<float4 *>(out + row * d);
    const int n4 = d / 4;
    float4 v[V], wv[V];
    /* the norm weight before the wait on the kernel before (weights never change) */
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int c = i * blockDim.x + threadIdx.x;
        if (c < n4)
            wv[i] = load_w4<T>(w, 4 * c);
    }
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int c = i * blockDim.x + threadIdx.x;
        if (c < n4) {
            v[i] = xr[c];
            if (rr) {
                const float4 r = rr[c];
                v[i] = make_float4(v[i].x + r.x, v[i].y + r.y, v[i].z + r.z, v[i].w + r.w);
                xr[c] = v[i];
            }
            ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
        }
    }
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int c = i * blockDim.x + threadIdx.x;
        if (c < n4)
            orow[c] = make_float4((v[i].x * inv) * wv[i].x, (v[i].y * inv) * wv[i].y,
                                  (v[i].z * inv) * wv[i].z, (v[i].w * inv) * wv[i].w);
    }
}

/* Any d and alignment: two passes over the row (the second reads x back from L1/L2). */
template <typename T>
__global__ void add_rmsnorm_any_kernel(float *__restrict__ out, float *__restrict__ x,
                                       const float *__restrict__ res, const T *__restrict__ w,
                                       int32_t d, float eps)
{
    __shared__ float red[32];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t row = blockIdx.x;
    float *xr = x + row * d;
    const float *rr = res ? res + row * d : nullptr;
    float *orow = out + row * d;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = xr[j];
        if (rr) {
            v += rr[j];
            xr[j] = v;
        }
        ss += v * v;
    }
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        orow[j] = (xr[j] * inv) * to_f32(w[j]); /* each thread reads back only what it wrote */
}

#define ARN_THREADS 256

template <typename T>
static void launch_add_rmsnorm(const llmrt_backend *b, float *out, float *x, const float *res,
                               const T *w, int32_t rows, int32_t d, float eps)
{
    const int vec = d % 4 == 0 && is_aligned16(out) && is_aligned16(x) &&
                    (!res || is_aligned16(res)) && ((uintptr_t)w % (4 * sizeof(T))) == 0;
    const int chunks = (d / 4 + ARN_THREADS - 1) / ARN_THREADS; /* float4 per thread */
    if (vec && chunks <= 8) {
        if (chunks <= 1)
            cuda_launch(b, add_rmsnorm_vec_kernel<T, 1>, rows, ARN_THREADS, 0, out, x, res, w, d, eps);
        else if (chunks <= 2)
            cuda_launch(b, add_rmsnorm_vec_kernel<T, 2>, rows, ARN_THREADS, 0, out, x, res, w, d, eps);
        else if (chunks <= 4)
            cuda_launch(b, add_rmsnorm_vec_kernel<T, 4>, rows, ARN_THREADS, 0, out, x, res, w, d, eps);
        else
            cuda_launch(b, add_rmsnorm_vec_kernel<T, 8>, rows, ARN_THREADS, 0, out, x, res, w, d, eps);
        return;
    }
    cuda_launch(b, add_rmsnorm_any_kernel<T>, rows, ARN_THREADS, 0, out, x, res, w, d, eps);
}

llmrt_status cuda_add_rmsnorm(llmrt_backend *b, float *out, float *x, const float *res,
                              const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                              llmrt_error *err)
{
    if (rows <= 0 || d <= 0)
        return LLMRT_OK;
    if (!w || !cuda_is_float_dtype(w->dtype) || llmrt_tensor_numel(w) != d)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda add_rmsnorm: weight must be F32/F16/BF16 with %d elements (got "
                          "%s with %lld)", d, w ? llmrt_dtype_name(w->dtype) : "NULL",
                          w ? (long long)llmrt_tensor_numel(w) : 0LL);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    switch (w->dtype) {
    case LLMRT_DTYPE_F32: launch_add_rmsnorm(b, out, x, res, (const float *)w->data, rows, d, eps); break;
    case LLMRT_DTYPE_F16: launch_add_rmsnorm(b, out, x, res, (const __half *)w->data, rows, d, eps); break;
    default: launch_add_rmsnorm(b, out, x, res, (const __nv_bfloat16 *)w->data, rows, d, eps); break;
    }
    return cuda_check_launch(err, "add_rmsnorm");
}

/* ---- q/k norm + rope + kv store ---- */

#define QKR_WARPS 4
#define QKR_MAX_PAIRS 4 /* rotation pairs per lane: head_dim <= 2 * 32 * 4 = 256 */

/* One warp per (token, head) of qkv [n, n_heads + 2 n_kv_heads, head_dim]: q heads go to
 * q_out [n, n_heads, head_dim] normed and rotated, k heads normed and rotated into the K
 * cache, v heads straight into the V cache (slot -1: k and v skipped). Lane l holds the
 * rotation pairs (i, i + half) for i = l, l + 32, ...: the norm's sum of squares and the
 * rotation need no shuffles but the final sum. WT: norm weight type; CT: cache type. */
template <typename WT, typename CT>
__global__ void __launch_bounds__(QKR_WARPS * 32)
qk_norm_rope_store_kernel(float *__restrict__ q_out, const float *__restrict__ qkv,
                          const WT *__restrict__ qn, const WT *__restrict__ kn,
                          const int32_t *__restrict__ positions, const int32_t *__restrict__ slots,
                          CT *__restrict__ kc, CT *__restrict__ vc, int32_t n, int32_t n_heads,
                          int32_t n_kv_heads, int32_t head_dim, float eps, float theta)
{
    const int heads = n_heads + 2 * n_kv_heads;
    const int64_t wid = (int64_t)blockIdx.x * QKR_WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    const bool live = wid < (int64_t)n * heads;
    const int64_t t = live ? wid / heads : 0;
    const int h = (int)(wid - t * heads);
    const int half = head_dim / 2;
    const int kind = h < n_heads ? 0 : h < n_heads + n_kv_heads ? 1 : 2; /* q, k, v */
    const WT *nw = kind == 0 ? qn : kn;

    /* Before the wait on the kernel before this one (see the launch protocol in
     * cuda_common.cuh): the step inputs (positions, slots) and the weights are complete, so
     * the cache slot, the norm weights and the RoPE angles (accurate powf / sincosf, as
     * rope_kernel) are ready when the projection's output arrives. */
    const int32_t slot = live && kind > 0 ? slots[t] : 0;
    float cs[QKR_MAX_PAIRS], sn[QKR_MAX_PAIRS], wlo[QKR_MAX_PAIRS], whi[QKR_MAX_PAIRS];
#pragma unroll
    for (int p = 0; p < QKR_MAX_PAIRS; p++) {
        const int i = lane + 32 * p;
        cs[p] = 1.0f, sn[p] = 0.0f, wlo[p] = whi[p] = 1.0f;
        if (live && kind < 2 && i < half) {
            const float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
            sincosf((float)positions[t] * inv_freq, &sn[p], &cs[p]);
            if (nw) {
                wlo[p] = to_f32(nw[i]);
                whi[p] = to_f32(nw[i + half]);
            }
        }
    }
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    if (!live || slot < 0)
        return;
    const float *src = qkv + (t * heads + h) * head_dim;
    float lo[QKR_MAX_PAIRS], hi[QKR_MAX_PAIRS];
    float ss = 0.0f;
#pragma unroll
    for (int p = 0; p < QKR_MAX_PAIRS; p++) {
        const int i = lane + 32 * p;
        lo[p] = hi[p] = 0.0f;
        if (i < half) {
            lo[p] = src[i];
            hi[p] = src[i + half];
            ss += lo[p] * lo[p] + hi[p] * hi[p];
        }
    }
    const int64_t row = (int64_t)n_kv_heads * head_dim;
    if (kind == 2) { /* v: convert and store */
        CT *dst = vc + (int64_t)slot * row + (int64_t)(h - n_heads - n_kv_heads) * head_dim;
#pragma unroll
        for (int p = 0; p < QKR_MAX_PAIRS; p++) {
            const int i = lane + 32 * p;
            if (i < half) {
                dst[i] = from_f32<CT>(lo[p]);
                dst[i + half] = from_f32<CT>(hi[p]);
            }
        }
        return;
    }
    if (nw) {
        ss = warp_sum(ss);
        const float inv = 1.0f / sqrtf(ss / (float)head_dim + eps);
#pragma unroll
        for (int p = 0; p < QKR_MAX_PAIRS; p++) {
            lo[p] = (lo[p] * inv) * wlo[p];
            hi[p] = (hi[p] * inv) * whi[p];
        }
    }
    float *qdst = q_out + (t * n_heads + h) * head_dim;
    CT *kdst = kc + (int64_t)slot * row + (int64_t)(h - n_heads) * head_dim;
#pragma unroll
    for (int p = 0; p < QKR_MAX_PAIRS; p++) {
        const int i = lane + 32 * p;
        if (i < half) {
            const float a = lo[p] * cs[p] - hi[p] * sn[p];
            const float c = hi[p] * cs[p] + lo[p] * sn[p];
            if (kind == 0) {
                qdst[i] = a;
                qdst[i + half] = c;
            } else {
                kdst[i] = from_f32<CT>(a);
                kdst[i + half] = from_f32<CT>(c);
            }
        }
    }
}

template <typename WT, typename CT>
static void launch_qkr(const llmrt_backend *b, float *q_out, const float *qkv,
                       const llmrt_tensor *qn, const llmrt_tensor *kn, const int32_t *pos,
                       const int32_t *slots, void *kc, void *vc, int32_t n, int32_t nh,
                       int32_t nkv, int32_t hd, float eps, float theta)
{
    const int64_t warps = (int64_t)n * (nh + 2 * nkv);
    cuda_launch(b, qk_norm_rope_store_kernel<WT, CT>, (unsigned)ceil_div64(warps, QKR_WARPS),
                QKR_WARPS * 32, 0, q_out, qkv, qn ? (const WT *)qn->data : (const WT *)nullptr,
                kn ? (const WT *)kn->data : (const WT *)nullptr, pos, slots, (CT *)kc, (CT *)vc, n,
                nh, nkv, hd, eps, theta);
}

template <typename WT>
static void launch_qkr_ct(const llmrt_backend *b, llmrt_dtype kv_dtype, float *q_out,
                          const float *qkv, const llmrt_tensor *qn, const llmrt_tensor *kn,
                          const int32_t *pos, const int32_t *slots, void *kc, void *vc, int32_t n,
                          int32_t nh, int32_t nkv, int32_t hd, float eps, float theta)
{
    switch (kv_dtype) {
    case LLMRT_DTYPE_F32:
        launch_qkr<WT, float>(b, q_out, qkv, qn, kn, pos, slots, kc, vc, n, nh, nkv, hd, eps, theta);
        break;
    case LLMRT_DTYPE_F16:
        launch_qkr<WT, __half>(b, q_out, qkv, qn, kn, pos, slots, kc, vc, n, nh, nkv, hd, eps, theta);
        break;
    default:
        launch_qkr<WT, __nv_bfloat16>(b, q_out, qkv, qn, kn, pos, slots, kc, vc, n, nh, nkv, hd,
                                      eps, theta);
        break;
    }
}

llmrt_status cuda_qk_norm_rope_store(llmrt_backend *b, float *q_out, const float *qkv,
                                     const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                     const int32_t *positions, const int32_t *slot_mapping,
                                     int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                     int32_t head_dim, float eps, float theta, void *k_cache,
                                     void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    if (head_dim <= 0 || head_dim % 2 || head_dim > 2 * 32 * QKR_MAX_PAIRS || n_heads <= 0 ||
        n_kv_heads <= 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cuda qk_norm_rope_store: head_dim %d (even, at most %d), n_heads %d and "
                          "n_kv_heads %d (positive) are required",
                          head_dim, 2 * 32 * QKR_MAX_PAIRS, n_heads, n_kv_heads);
    if (!cuda_is_float_dtype(kv_dtype))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda qk_norm_rope_store: cache dtype %s is not supported (F32, F16, "
                          "BF16)", llmrt_dtype_name(kv_dtype));
    if ((q_norm == NULL) != (k_norm == NULL) ||
        (q_norm && (q_norm->dtype != k_norm->dtype || !cuda_is_float_dtype(q_norm->dtype) ||
                    llmrt_tensor_numel(q_norm) != head_dim ||
                    llmrt_tensor_numel(k_norm) != head_dim)))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda qk_norm_rope_store: q_norm and k_norm must both be NULL or both "
                          "F32/F16/BF16 [%d] of one dtype", head_dim);
    if (!(theta > 0.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda qk_norm_rope_store: theta %g must be > 0", (double)theta);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const llmrt_dtype wt = q_norm ? q_norm->dtype : LLMRT_DTYPE_F32;
    switch (wt) {
    case LLMRT_DTYPE_F32:
        launch_qkr_ct<float>(b, kv_dtype, q_out, qkv, q_norm, k_norm, positions, slot_mapping,
                             k_cache, v_cache, n, n_heads, n_kv_heads, head_dim, eps, theta);
        break;
    case LLMRT_DTYPE_F16:
        launch_qkr_ct<__half>(b, kv_dtype, q_out, qkv, q_norm, k_norm, positions, slot_mapping,
                              k_cache, v_cache, n, n_heads, n_kv_heads, head_dim, eps, theta);
        break;
    default:
        launch_qkr_ct<__nv_bfloat16>(b, kv_dtype, q_out, qkv, q_norm, k_norm, positions,
                                     slot_mapping, k_cache, v_cache, n, n_heads, n_kv_heads,
                                     head_dim, eps, theta);
        break;
    }
    return cuda_check_launch(err, "qk_norm_rope_store");
}

/* ---- swiglu ---- */

__device__ __forceinline__ float silu_f(float g) { return g / (1.0f + expf(-g)); }

/* out [n, d] = silu(gu[:, :d]) * gu[:, d:]; vec4: d % 4 == 0 and 16-byte aligned pointers. */
__global__ void swiglu_kernel(float *__restrict__ out, const float *__restrict__ gu, int32_t n,
                              int32_t d, int vec4)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec4) {
        const int d4 = d / 4;
        const int64_t total = (int64_t)n * d4;
        for (int64_t i = i0; i < total; i += stride) {
            const int64_t t = i / d4;
            const int c = (int)(i - t * d4);
            const float4 g = reinterpret_cast<const float4 *>(gu + t * 2 * d)[c];
            const float4 u = reinterpret_cast<const float4 *>(gu + t * 2 * d + d)[c];
            reinterpret_cast<float4 *>(out + t * d)[c] =
                make_float4(silu_f(g.x) * u.x, silu_f(g.y) * u.y, silu_f(g.z) * u.z, silu_f(g.w) * u.w);
        }
        return;
    }
    const int64_t total = (int64_t)n * d;
    for (int64_t i = i0; i < total; i += stride) {
        const int64_t t = i / d;
        const int64_t c = i - t * d;
        out[i] = silu_f(gu[t * 2 * d + c]) * gu[t * 2 * d + d + c];
    }
}

llmrt_status cuda_swiglu(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                         llmrt_error *err)
{
    if (n <= 0 || d <= 0)
        return LLMRT_OK;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int vec4 = d % 4 == 0 && is_aligned16(out) && is_aligned16(gu);
    int64_t blocks = ceil_div64((int64_t)n * d, 256 * 4);
    if (blocks > (int64_t)b->sm_count * 8)
        blocks = (int64_t)b->sm_count * 8;
    cuda_launch(b, swiglu_kernel, (unsigned)(blocks > 0 ? blocks : 1), 256, 0, out, gu, n, d, vec4);
    return cuda_check_launch(err, "swiglu");
}
