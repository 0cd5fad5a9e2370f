/* cuda_gemm.cu — dense y [n, out] = x [n, in] · wᵀ for F32/F16/BF16 weights w [out, in].
 *
 * Why two paths: at decode (n <= 8) the product is a GEMV bound by reading w once — the fp16
 * lm_head of Qwen3-8B is 151936 x 4096 = 1.245 GB per token, 0.31 ms at 4 TB/s — so a
 * bandwidth kernel streams w with 16-byte loads, several rows and loads in flight per warp,
 * fp32 accumulation. For larger n the weights are reused across rows and tensor cores win:
 * cuBLAS GemmEx with the activations cast to the weight dtype in a scratch buffer, fp32
 * output and fp32 compute. */
#include "cuda_common.cuh"

#define GEMV_MAX_N 8
#define GEMV_WARPS 4 /* warps per block */
#define GEMV_UNROLL 4 /* 16-byte loads in flight per row and lane */
#define GEMV_UNROLL_SHORT 8 /* the same where the grid is short of the SMs (a MoE router's 128
                             * rows): one row per warp, twice the loads in flight */

/* ---- GEMV, vector path: in % VEC == 0, w and x 16-byte aligned ---- */

/* Each warp owns R consecutive rows of w; lane l reads elements [l*VEC, l*VEC + VEC) of each
 * 32*VEC-element stretch, U stretches per iteration, so every lane has R*U independent
 * 16-byte loads in flight before it touches any of them. x (tiny, reused by every warp) comes
 * through L1; w streams past it. A lane sums its elements in input order whatever R and U, so
 * the result's bits do not depend on them. */
template <typename T, int N, int R, int U>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
gemv_vec_kernel(float *__restrict__ y, const float *__restrict__ x, const T *__restrict__ w,
                int32_t out, int32_t in)
{
    constexpr int VEC = 16 / sizeof(T);
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int lane = threadIdx.x & 31;
    const int64_t row0 = ((int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32) * R;
    if (row0 >= out)
        return;
    const T *wr[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        wr[r] = w + (int64_t)(row0 + r < out ? row0 + r : row0) * in; /* clamp: valid address */

    float acc[R][N];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < N; j++)
            acc[r][j] = 0.0f;

    const int step = 32 * VEC;
    int k = lane * VEC;
    for (; k + (U - 1) * step < in; k += U * step) {
        uint4 wv[U][R];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int r = 0; r < R; r++)
                wv[u][r] = ld_stream16(wr[r] + k + u * step);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int kk = k + u * step;
            float xv[N][VEC];
#pragma unroll
            for (int j = 0; j < N; j++) {
#pragma unroll
                for (int e = 0; e < VEC; e += 4) {
                    float4 t = __ldg(reinterpret_cast<const float4 *>(x + (int64_t)j * in + kk + e));
                    xv[j][e] = t.x, xv[j][e + 1] = t.y, xv[j][e + 2] = t.z, xv[j][e + 3] = t.w;
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                float wf[VEC];
                vec_to_f32<T>(wv[u][r], wf);
#pragma unroll
                for (int j = 0; j < N; j++)
#pragma unroll
                    for (int e = 0; e < VEC; e++)
                        acc[r][j] = fmaf(wf[e], xv[j][e], acc[r][j]);
            }
        }
    }
    for (; k < in; k += step) { /* the last < U stretches */
        float xv[N][VEC];
#pragma unroll
        for (int j = 0; j < N; j++)
#pragma unroll
            for (int e = 0; e < VEC; e += 4) {
                float4 t = __ldg(reinterpret_cast<const float4 *>(x + (int64_t)j * in + k + e));
                xv[j][e] = t.x, xv[j][e + 1] = t.y, xv[j][e + 2] = t.z, xv[j][e + 3] = t.w;
            }
#pragma unroll
        for (int r = 0; r < R; r++) {
            float wf[VEC];
            vec_to_f32<T>(ld_stream16(wr[r] + k), wf);
#pragma unroll
            for (int j = 0; j < N; j++)
#pragma unroll
                for (int e = 0; e < VEC; e++)
                    acc[r][j] = fmaf(wf[e], xv[j][e], acc[r][j]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int j = 0; j < N; j++) {
            float s = warp_sum(acc[r][j]);
            if (lane == ((r * N + j) & 31) && row0 + r < out)
                y[(int64_t)j * out + row0 + r] = s;
        }
}

/* ---- GEMV, scalar path (any alignment, any in): one warp per row ---- */

template <typename T>
__global__ void gemv_scalar_kernel(float *__restrict__ y, const float *__restrict__ x,
                                   const T *__restrict__ w, int32_t out, int32_t in, int32_t n)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * GEMV_WARPS + threadIdx.x / 32;
    if (row >= out)
        return;
    const T *wr = w + row * in;
    float acc[GEMV_MAX_N];
#pragma unroll
    for (int j = 0; j < GEMV_MAX_N; j++)
        acc[j] = 0.0f;
    for (int k = lane; k < in; k += 32) {
        const float wv = to_f32(wr[k]);
#pragma unroll
        for (int j = 0; j < GEMV_MAX_N; j++)
            if (j < n)
                acc[j] = fmaf(wv, x[(int64_t)j * in + k], acc[j]);
    }
#pragma unroll
    for (int j = 0; j < GEMV_MAX_N; j++) {
        if (j < n) {
            float s = warp_sum(acc[j]);
            if (lane == 0)
                y[(int64_t)j * out + row] = s;
        }
    }
}

template <typename T, int N>
static void launch_gemv_n(const llmrt_backend *s, float *y, const float *x, const T *w,
                          int32_t out, int32_t in)
{
    constexpr int R = N >= 4 ? 4 : 2; /* more rows per warp at larger n: x reuse from registers */
    const int64_t blocks = ceil_div64(out, (int64_t)GEMV_WARPS * R);
    if (blocks < s->sm_count) /* short: all of a row's loads in flight, more warps */
        cuda_launch(s, gemv_vec_kernel<T, N, 1, GEMV_UNROLL_SHORT>,
                    (unsigned)ceil_div64(out, GEMV_WARPS), GEMV_WARPS * 32, 0, y, x, w, out, in);
    else
        cuda_launch(s, gemv_vec_kernel<T, N, R, GEMV_UNROLL>, (unsigned)blocks, GEMV_WARPS * 32, 0,
                    y, x, w, out, in);
}

template <typename T>
static void launch_gemv(const llmrt_backend *s, float *y, const float *x, const T *w,
                        int32_t out, int32_t in, int32_t n)
{
    constexpr int VEC = 16 / sizeof(T);
    const int vec = in % VEC == 0 && is_aligned16(w) && is_aligned16(x);
    if (!vec) {
        cuda_launch(s, gemv_scalar_kernel<T>, (unsigned)ceil_div64(out, GEMV_WARPS),
                    GEMV_WARPS * 32, 0, y, x, w, out, in, n);
        return;
    }
    switch (n) {
    case 1: launch_gemv_n<T, 1>(s, y, x, w, out, in); break;
    case 2: launch_gemv_n<T, 2>(s, y, x, w, out, in); break;
    case 3: launch_gemv_n<T, 3>(s, y, x, w, out, in); break;
    case 4: launch_gemv_n<T, 4>(s, y, x, w, out, in); break;
    case 5: launch_gemv_n<T, 5>(s, y, x, w, out, in); break;
    case 6: launch_gemv_n<T, 6>(s, y, x, w, out, in); break;
    case 7: launch_gemv_n<T, 7>(s, y, x, w, out, in); break;
    default: launch_gemv_n<T, 8>(s, y, x, w, out, in); break;
    }
}

/* ---- cuBLAS path ---- */

template <typename T>
__global__ void cast_kernel(T *__restrict__ dst, const float *__restrict__ src, int64_t n)
{
    llmrt_cuda_pdl_wait();
    llmrt_cuda_pdl_trigger();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = from_f32<T>(src[i]);
}

static const char *cublas_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(other)";
    }
}

/* Column-major view: w row-major [out, in] is W (in x out, ld in); x row-major [n, in] is
 * X (in x n, ld in); y row-major [n, out] is Y (out x n, ld out). Y = Wᵀ X. */
static llmrt_status gemm_cublas(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                                int32_t n, int32_t out, int32_t in, llmrt_error *err)
{
    const float alpha = 1.0f, beta = 0.0f;
    const void *xb = x;
    cudaDataType_t t = CUDA_R_32F;
    if (w->dtype != LLMRT_DTYPE_F32) {
        const int64_t count = (int64_t)n * in;
        void *scratch = NULL;
        llmrt_status st = cuda_scratch_get(b, CUDA_SCRATCH_GEMM_X, (size_t)count * 2, &scratch, err);
        if (st)
            return st;
        int64_t blocks = ceil_div64(count, 256);
        if (blocks > (int64_t)b->sm_count * 16)
            blocks = (int64_t)b->sm_count * 16;
        if (w->dtype == LLMRT_DTYPE_F16) {
            cuda_launch(b, cast_kernel<__half>, (unsigned)blocks, 256, 0, (__half *)scratch, x, count);
            t = CUDA_R_16F;
        } else {
            cuda_launch(b, cast_kernel<__nv_bfloat16>, (unsigned)blocks, 256, 0, (__nv_bfloat16 *)scratch,
                        x, count);
            t = CUDA_R_16BF;
        }
        if ((st = cuda_check_launch(err, "gemm cast")) != LLMRT_OK)
            return st;
        xb = scratch;
    }
    cublasStatus_t cs = cublasGemmEx(b->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha,
                                     w->data, t, in, xb, t, in, &beta, y, CUDA_R_32F, out,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS)
        return llmrt_fail(err, LLMRT_ERR_DEVICE,
                          "cuda gemm: cublasGemmEx (%s weights [%d, %d], n = %d): %s",
                          llmrt_dtype_name(w->dtype), out, in, n, cublas_name(cs));
    return LLMRT_OK;
}

llmrt_status cuda_gemm(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                       int32_t n, llmrt_error *err)
{
    if (n <= 0)
        return LLMRT_OK;
    if (w->ndim != 2 || !cuda_is_float_dtype(w->dtype))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda gemm: weight must be a 2-D F32/F16/BF16 tensor [out, in] (got "
                          "%d-D %s)", w->ndim, llmrt_dtype_name(w->dtype));
    if (w->shape[0] > INT32_MAX || w->shape[1] > INT32_MAX)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "cuda gemm: weight [%lld, %lld] too large",
                          (long long)w->shape[0], (long long)w->shape[1]);
    const int32_t out = (int32_t)w->shape[0], in = (int32_t)w->shape[1];
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    if (n <= GEMV_MAX_N) {
        switch (w->dtype) {
        case LLMRT_DTYPE_F32: launch_gemv(b, y, x, (const float *)w->data, out, in, n); break;
        case LLMRT_DTYPE_F16: launch_gemv(b, y, x, (const __half *)w->data, out, in, n); break;
        default: launch_gemv(b, y, x, (const __nv_bfloat16 *)w->data, out, in, n); break;
        }
        return cuda_check_launch(err, "gemv");
    }
    return gemm_cublas(b, y, x, w, n, out, in, err);
}
