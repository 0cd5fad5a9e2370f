/* cuda_elementwise.cu — the small ops of a decoder layer: embedding lookup, RMSNorm, neox
 * RoPE, KV-cache store, SiLU·mul and residual add.
 *
 * Why: each is memory-bound and tiny at decode; what matters is one launch each, coalesced
 * (and where possible 16-byte) accesses, fp32 math that rounds like the CPU reference, and no
 * host-side dependence on device values (so every launch is graph-capturable). */
#include "cuda_common.cuh"

#include <math.h>

/* ---- embedding ---- */

/* out [n, d] = table [rows, d] at ids [n]; an id outside [0, rows) gives a NaN row so the
 * mistake shows instead of reading out of bounds. */
template <typename T>
__global__ void embedding_kernel(float *__restrict__ out, const T *__restrict__ table,
                                 const int32_t *__restrict__ ids, int64_t rows, int32_t d)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t i = blockIdx.x;
    const int32_t id = ids[i];
    float *o = out + i * d;
    if (id < 0 || id >= rows) {
        for (int j = threadIdx.x; j < d; j += blockDim.x)
            o[j] = __int_as_float(0x7fc00000);
        return;
    }
    const T *row = table + (int64_t)id * d;
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        o[j] = to_f32(row[j]);
}

llmrt_status cuda_embedding(llmrt_backend *b, float *out, const llmrt_tensor *table,
                            const int32_t *ids, int32_t n, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    if (table->ndim != 2 || !cuda_is_float_dtype(table->dtype))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda embedding: table must be a 2-D F32/F16/BF16 tensor [rows, d] "
                          "(got %d-D %s)", table->ndim, llmrt_dtype_name(table->dtype));
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int64_t rows = table->shape[0];
    const int32_t d = (int32_t)table->shape[1];
    const int threads = d >= 1024 ? 256 : 128;
    switch (table->dtype) {
    case LLMRT_DTYPE_F32:
        cuda_launch(b, embedding_kernel<float>, n, threads, 0, out, (const float *)table->data, ids, rows, d);
        break;
    case LLMRT_DTYPE_F16:
        cuda_launch(b, embedding_kernel<__half>, n, threads, 0, out, (const __half *)table->data, ids, rows, d);
        break;
    default:
        cuda_launch(b, embedding_kernel<__nv_bfloat16>, n, threads, 0, out,
                    (const __nv_bfloat16 *)table->data, ids, rows, d);
        break;
    }
    return cuda_check_launch(err, "embedding");
}

/* ---- rmsnorm ---- */

/* out[r, :] = (x[r, :] * 1/sqrt(mean(x[r, :]^2) + eps)) * w, normalised in fp32 first and
 * then multiplied by the weight, as transformers does. One block per row. */
template <typename T>
__global__ void rmsnorm_block_kernel(float *out, const float *x, const T *__restrict__ w,
                                     int32_t d, float eps)
{
    __shared__ float red[32];
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const float *xr = x + (int64_t)blockIdx.x * d;
    float *orow = out + (int64_t)blockIdx.x * d;
    float ss = 0.0f;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = xr[j];
        ss += v * v;
    }
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    /* in place is fine: each thread rewrites only the elements it read */
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        orow[j] = (xr[j] * inv) * to_f32(w[j]);
}

/* The same for short rows (per-head q/k norms, head_dim 64..256): one warp per row. */
template <typename T>
__global__ void rmsnorm_warp_kernel(float *out, const float *x, const T *__restrict__ w,
                                    int32_t rows, int32_t d, float eps)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    const float *xr = x + r * d;
    float *orow = out + r * d;
    float ss = 0.0f;
    for (int j = lane; j < d; j += 32) {
        float v = xr[j];
        ss += v * v;
    }
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int j = lane; j < d; j += 32)
        orow[j] = (xr[j] * inv) * to_f32(w[j]);
}

template <typename T>
static void launch_rmsnorm(const llmrt_backend *b, float *out, const float *x, const T *w,
                           int32_t rows, int32_t d, float eps)
{
    if (d <= 512) {
        const int rows_per_block = 8;
        cuda_launch(b, rmsnorm_warp_kernel<T>, (unsigned)ceil_div64(rows, rows_per_block),
                    32 * rows_per_block, 0, out, x, w, rows, d, eps);
    } else {
        const int threads = d >= 4096 ? 512 : 256;
        cuda_launch(b, rmsnorm_block_kernel<T>, rows, threads, 0, out, x, w, d, eps);
    }
}

llmrt_status cuda_rmsnorm(llmrt_backend *b, float *out, const float *x, const llmrt_tensor *w,
                          int32_t rows, int32_t d, float eps, llmrt_error *err)
{
    if (rows <= 0 || d <= 0)
        return LLMRT_OK;
    if (!cuda_is_float_dtype(w->dtype) || llmrt_tensor_numel(w) != d)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda rmsnorm: weight must be F32/F16/BF16 with %d elements (got %s "
                          "with %lld)", d, llmrt_dtype_name(w->dtype),
                          (long long)llmrt_tensor_numel(w));
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    switch (w->dtype) {
    case LLMRT_DTYPE_F32: launch_rmsnorm(b, out, x, (const float *)w->data, rows, d, eps); break;
    case LLMRT_DTYPE_F16: launch_rmsnorm(b, out, x, (const __half *)w->data, rows, d, eps); break;
    default: launch_rmsnorm(b, out, x, (const __nv_bfloat16 *)w->data, rows, d, eps); break;
    }
    return cuda_check_launch(err, "rmsnorm");
}

/* ---- rope (neox rotate-half) ---- */

/* x [n, heads, head_dim] in place. Pair (i, i + half) of each head rotates by
 * pos * inv_freq[i], inv_freq[i] = 1 / theta^(2i / head_dim), all in fp32 like transformers
 * (accurate cosf/sinf, no fast-math intrinsics). */
__global__ void rope_kernel(float *x, const int32_t *__restrict__ positions, int32_t n,
                            int32_t heads, int32_t head_dim, float theta)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int half = head_dim / 2;
    const int64_t total = (int64_t)n * heads * half;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)(idx % half);
        const int64_t th = idx / half; /* token * heads + head */
        const int64_t tok = th / heads;
        const float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
        const float ang = (float)positions[tok] * inv_freq;
        float sn, cs;
        sincosf(ang, &sn, &cs);
        float *p = x + th * head_dim;
        const float x1 = p[i], x2 = p[i + half];
        p[i] = x1 * cs - x2 * sn;
        p[i + half] = x2 * cs + x1 * sn;
    }
}

llmrt_status cuda_rope(llmrt_backend *b, float *x, const int32_t *positions, int32_t n,
                       int32_t heads, int32_t head_dim, float theta, llmrt_error *err)
{
    if (n <= 0 || heads <= 0)
        return LLMRT_OK;
    if (head_dim <= 0 || head_dim % 2)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda rope: head_dim must be even and positive (got %d)", head_dim);
    if (!(theta > 0.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cuda rope: theta %g must be > 0",
                          (double)theta);
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int64_t total = (int64_t)n * heads * (head_dim / 2);
    int64_t blocks = ceil_div64(total, 256);
    if (blocks > 65535)
        blocks = 65535;
    cuda_launch(b, rope_kernel, (unsigned)blocks, 256, 0, x, positions, n, heads, head_dim, theta);
    return cuda_check_launch(err, "rope");
}

/* ---- kv_store ---- */

/* cache[slot, :, :] = k/v [i, :, :] for slot = slot_mapping[i] >= 0; caches are
 * [n_blocks * block_size, n_kv_heads * head_dim] viewed flat. */
template <typename T>
__global__ void kv_store_kernel(T *__restrict__ kc, T *__restrict__ vc, const float *__restrict__ k,
                                const float *__restrict__ v, const int32_t *__restrict__ slots,
                                int32_t n, int32_t row)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t total = (int64_t)n * row;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t tok = idx / row;
        const int32_t j = (int32_t)(idx - tok * row);
        const int32_t slot = slots[tok];
        if (slot < 0)
            continue;
        const int64_t dst = (int64_t)slot * row + j;
        kc[dst] = from_f32<T>(k[idx]);
        vc[dst] = from_f32<T>(v[idx]);
    }
}

llmrt_status cuda_kv_store(llmrt_backend *b, void *k_cache, void *v_cache, llmrt_dtype kv_dtype,
                           const float *k, const float *v, const int32_t *slot_mapping, int32_t n,
                           int32_t n_kv_heads, int32_t head_dim, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    if (!cuda_is_float_dtype(kv_dtype))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda kv_store: cache dtype %s is not supported (F32, F16, BF16)",
                          llmrt_dtype_name(kv_dtype));
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int32_t row = n_kv_heads * head_dim;
    int64_t blocks = ceil_div64((int64_t)n * row, 256);
    if (blocks > 65535)
        blocks = 65535;
    switch (kv_dtype) {
    case LLMRT_DTYPE_F32:
        cuda_launch(b, kv_store_kernel<float>, (unsigned)blocks, 256, 0, (float *)k_cache,
                    (float *)v_cache, k, v, slot_mapping, n, row);
        break;
    case LLMRT_DTYPE_F16:
        cuda_launch(b, kv_store_kernel<__half>, (unsigned)blocks, 256, 0, (__half *)k_cache,
                    (__half *)v_cache, k, v, slot_mapping, n, row);
        break;
    default:
        cuda_launch(b, kv_store_kernel<__nv_bfloat16>, (unsigned)blocks, 256, 0,
                    (__nv_bfloat16 *)k_cache, (__nv_bfloat16 *)v_cache, k, v, slot_mapping, n, row);
        break;
    }
    return cuda_check_launch(err, "kv_store");
}

/* ---- silu_mul, add ---- */

__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

/* vec4: all three pointers 16-byte aligned; elements [4*n4, n) are done scalar. */
__global__ void silu_mul_kernel(float *out, const float *gate, const float *up, int64_t n, int vec4)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec4) {
        const int64_t n4 = n / 4;
        for (int64_t j = i; j < n4; j += stride) {
            float4 g = reinterpret_cast<const float4 *>(gate)[j];
            float4 u = reinterpret_cast<const float4 *>(up)[j];
            float4 o = make_float4(silu(g.x) * u.x, silu(g.y) * u.y, silu(g.z) * u.z, silu(g.w) * u.w);
            reinterpret_cast<float4 *>(out)[j] = o;
        }
        i += n4 * 4;
    }
    for (; i < n; i += stride)
        out[i] = silu(gate[i]) * up[i];
}

__global__ void add_kernel(float *out, const float *a, const float *c, int64_t n, int vec4)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec4) {
        const int64_t n4 = n / 4;
        for (int64_t j = i; j < n4; j += stride) {
            float4 x = reinterpret_cast<const float4 *>(a)[j];
            float4 y = reinterpret_cast<const float4 *>(c)[j];
            reinterpret_cast<float4 *>(out)[j] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
        i += n4 * 4;
    }
    for (; i < n; i += stride)
        out[i] = a[i] + c[i];
}

static unsigned elementwise_blocks(llmrt_backend *b, int64_t n)
{
    int64_t blocks = ceil_div64(n, 256 * 4);
    const int64_t cap = (int64_t)b->sm_count * 8;
    if (blocks > cap)
        blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

llmrt_status cuda_silu_mul(llmrt_backend *b, float *out, const float *gate, const float *up,
                           int64_t n, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int vec4 = is_aligned16(out) && is_aligned16(gate) && is_aligned16(up);
    cuda_launch(b, silu_mul_kernel, elementwise_blocks(b, n), 256, 0, out, gate, up, n, vec4);
    return cuda_check_launch(err, "silu_mul");
}

llmrt_status cuda_add(llmrt_backend *b, float *out, const float *a, const float *c, int64_t n,
                      llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    const int vec4 = is_aligned16(out) && is_aligned16(a) && is_aligned16(c);
    cuda_launch(b, add_kernel, elementwise_blocks(b, n), 256, 0, out, a, c, n, vec4);
    return cuda_check_launch(err, "add");
}
