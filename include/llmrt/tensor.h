/* tensor.h — element types and a plain tensor view shared by the core and every plugin.
 *
 * Why: weights come from checkpoints in several dtypes and live on different backends;
 * one small struct describes them everywhere. Activations inside a forward pass are
 * always f32 (see backend.h), so only weights and the KV cache vary in dtype. */
#ifndef LLMRT_TENSOR_H
#define LLMRT_TENSOR_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum llmrt_dtype {
    LLMRT_DTYPE_INVALID = 0,
    LLMRT_DTYPE_F32,
    LLMRT_DTYPE_F16,
    LLMRT_DTYPE_BF16,
    LLMRT_DTYPE_F64,
    LLMRT_DTYPE_I64,
    LLMRT_DTYPE_I32,
    LLMRT_DTYPE_I16,
    LLMRT_DTYPE_I8,
    LLMRT_DTYPE_U64,
    LLMRT_DTYPE_U32,
    LLMRT_DTYPE_U16,
    LLMRT_DTYPE_U8,
    LLMRT_DTYPE_BOOL,
    LLMRT_DTYPE_F8_E4M3, /* since 1.1: safetensors F8_E4M3 (OCP e4m3fn: no infinities, max 448) */
    LLMRT_DTYPE_F8_E5M2, /* since 1.1: safetensors F8_E5M2 */
    LLMRT_DTYPE_COUNT
} llmrt_dtype;

static inline size_t llmrt_dtype_size(llmrt_dtype t)
{
    switch (t) {
    case LLMRT_DTYPE_F64: case LLMRT_DTYPE_I64: case LLMRT_DTYPE_U64: return 8;
    case LLMRT_DTYPE_F32: case LLMRT_DTYPE_I32: case LLMRT_DTYPE_U32: return 4;
    case LLMRT_DTYPE_F16: case LLMRT_DTYPE_BF16: case LLMRT_DTYPE_I16: case LLMRT_DTYPE_U16: return 2;
    case LLMRT_DTYPE_I8: case LLMRT_DTYPE_U8: case LLMRT_DTYPE_BOOL:
    case LLMRT_DTYPE_F8_E4M3: case LLMRT_DTYPE_F8_E5M2: return 1;
    default: return 0;
    }
}

/* Names as safetensors spells them ("F32", "BF16", ...). */
static inline const char *llmrt_dtype_name(llmrt_dtype t)
{
    static const char *const names[LLMRT_DTYPE_COUNT] = {
        "INVALID", "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8",
        "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
    return (t > 0 && t < LLMRT_DTYPE_COUNT) ? names[t] : "INVALID";
}

#define LLMRT_MAX_DIMS 4

/* A dense, row-major, contiguous tensor. shape[0] is the outermost dimension
 * (a Linear weight is [out_features, in_features], as in PyTorch). */
typedef struct llmrt_tensor {
    llmrt_dtype dtype;
    int32_t ndim;
    int64_t shape[LLMRT_MAX_DIMS];
    void *data;           /* host address for CPU-resident tensors, device address otherwise */
} llmrt_tensor;

static inline int64_t llmrt_tensor_numel(const llmrt_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static inline size_t llmrt_tensor_bytes(const llmrt_tensor *t)
{
    return (size_t)llmrt_tensor_numel(t) * llmrt_dtype_size(t->dtype);
}

/* Scalar conversions, header-only so plugins share one definition.
 * bf16: round-to-nearest-even like torch; f16: IEEE half with subnormals. */
static inline float llmrt_bf16_to_f32(uint16_t h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

static inline uint16_t llmrt_f32_to_bf16(float f)
{
    union { uint32_t u; float f; } v;
    v.f = f;
    if ((v.u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet NaN */
        return (uint16_t)((v.u >> 16) | 0x40);
    uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)((v.u + rounding) >> 16);
}

static inline float llmrt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    union { uint32_t u; float f; } v;
    if (exp == 0) {
        if (man == 0) {
            v.u = sign;
        } else { /* subnormal: value = man * 2^-24 */
            v.f = (float)man * (1.0f / 16777216.0f);
            v.u |= sign;
        }
    } else if (exp == 31) {
        v.u = sign | 0x7f800000u | (man << 13);
    } else {
        v.u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return v.f;
}

static inline uint16_t llmrt_f32_to_f16(float f)
{
    union { uint32_t u; float f; } v;
    v.f = f;
    uint32_t sign = (v.u >> 16) & 0x8000u;
    uint32_t x = v.u & 0x7fffffffu;
    if (x > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (x >= 0x477ff000u)                  /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) { /* below smallest normal half: subnormal or zero */
        union { uint32_t u; float f; } a;
        a.u = x;
        /* value / 2^-24, rounded to nearest even by the FPU's default mode */
        float m = a.f * 16777216.0f;
        uint32_t r = (uint32_t)m;
        float frac = m - (float)r;
        if (frac > 0.5f || (frac == 0.5f && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t exp = ((x >> 23) - 112u) << 10;
    uint32_t man = (x >> 13) & 0x3ffu;
    uint32_t h = exp | man;
    uint32_t rest = x & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

/* 8-bit floats (since 1.1). e4m3 is OCP's e4m3fn (bias 7, no infinities, 0x7f/0xff NaN,
 * largest 448); e5m2 is IEEE-like (bias 15, largest finite 57344). f32 -> 8 bits rounds to
 * nearest even and saturates at the largest finite value (quantizers clamp anyway); NaN stays
 * NaN. */
static inline float llmrt_f8_to_f32(uint8_t x, int e_bits, int bias)
{
    const int m_bits = 7 - e_bits;
    const uint32_t e = (x >> m_bits) & ((1u << e_bits) - 1u), m = x & ((1u << m_bits) - 1u);
    float v;
    if (e == 0) /* subnormal: m * 2^(1 - bias - m_bits) */
        v = (float)m * ldexpf(1.0f, 1 - bias - m_bits);
    else
        v = ldexpf(1.0f + (float)m / (float)(1u << m_bits), (int)e - bias);
    return (x & 0x80u) ? -v : v;
}

static inline float llmrt_e4m3_to_f32(uint8_t x)
{
    if ((x & 0x7fu) == 0x7fu)
        return NAN;
    return llmrt_f8_to_f32(x, 4, 7);
}

static inline float llmrt_e5m2_to_f32(uint8_t x)
{
    if ((x & 0x7cu) == 0x7cu) /* exponent all ones */
        return (x & 0x03u) ? NAN : ((x & 0x80u) ? -INFINITY : INFINITY);
    return llmrt_f8_to_f32(x, 5, 15);
}

/* |f| -> (exponent field, mantissa field) of an 8-bit float, round to nearest even,
 * saturating at (max_e, max_m). */
static inline uint8_t llmrt_f32_to_f8(float f, int e_bits, int bias, uint32_t max_e,
                                      uint32_t max_m)
{
    const int m_bits = 7 - e_bits;
    const uint8_t sign = signbit(f) ? 0x80u : 0;
    float a = fabsf(f);
    const float max = ldexpf(1.0f + (float)max_m / (float)(1u << m_bits), (int)max_e - bias);
    if (a >= max)
        return (uint8_t)(sign | (max_e << m_bits) | max_m);
    const float min_normal = ldexpf(1.0f, 1 - bias);
    if (a < min_normal) { /* subnormal (or a rounding up into the smallest normal) */
        float q = rintf(a / ldexpf(1.0f, 1 - bias - m_bits));
        return (uint8_t)(sign | (uint32_t)q);
    }
    int e;
    float mant = frexpf(a, &e); /* a = mant * 2^e, mant in [0.5, 1) */
    e -= 1;                     /* a = (2 mant) * 2^e, 2 mant in [1, 2) */
    uint32_t m = (uint32_t)rintf((2.0f * mant - 1.0f) * (float)(1u << m_bits));
    if (m == (1u << m_bits))
        m = 0, e++;
    uint32_t be = (uint32_t)(e + bias);
    if (be > max_e || (be == max_e && m > max_m))
        return (uint8_t)(sign | (max_e << m_bits) | max_m);
    return (uint8_t)(sign | (be << m_bits) | m);
}

static inline uint8_t llmrt_f32_to_e4m3(float f)
{
    if (isnan(f))
        return 0x7fu;
    return llmrt_f32_to_f8(f, 4, 7, 15, 6);
}

static inline uint8_t llmrt_f32_to_e5m2(float f)
{
    if (isnan(f))
        return 0x7fu;
    return llmrt_f32_to_f8(f, 5, 15, 30, 3);
}

/* Element i of a float-typed buffer (F32/F16/BF16, F8_E4M3/F8_E5M2) as f32. */
static inline float llmrt_load_f(const void *p, llmrt_dtype t, int64_t i)
{
    switch (t) {
    case LLMRT_DTYPE_F32: return ((const float *)p)[i];
    case LLMRT_DTYPE_F16: return llmrt_f16_to_f32(((const uint16_t *)p)[i]);
    case LLMRT_DTYPE_BF16: return llmrt_bf16_to_f32(((const uint16_t *)p)[i]);
    case LLMRT_DTYPE_F8_E4M3: return llmrt_e4m3_to_f32(((const uint8_t *)p)[i]);
    case LLMRT_DTYPE_F8_E5M2: return llmrt_e5m2_to_f32(((const uint8_t *)p)[i]);
    default: return 0.0f;
    }
}

static inline void llmrt_store_f(void *p, llmrt_dtype t, int64_t i, float v)
{
    switch (t) {
    case LLMRT_DTYPE_F32: ((float *)p)[i] = v; break;
    case LLMRT_DTYPE_F16: ((uint16_t *)p)[i] = llmrt_f32_to_f16(v); break;
    case LLMRT_DTYPE_BF16: ((uint16_t *)p)[i] = llmrt_f32_to_bf16(v); break;
    case LLMRT_DTYPE_F8_E4M3: ((uint8_t *)p)[i] = llmrt_f32_to_e4m3(v); break;
    case LLMRT_DTYPE_F8_E5M2: ((uint8_t *)p)[i] = llmrt_f32_to_e5m2(v); break;
    default: break;
    }
}

#ifdef __cplusplus
}
#endif
#endif
