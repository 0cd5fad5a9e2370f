/* fp8_test_common.h — fixtures for the quant-fp8 tests: the plugins (quant-fp8, backend-cpu,
 * backend-cuda) loaded from $LLMRT_PLUGIN_DIR, an in-memory llmrt_checkpoint, random FP8
 * linears with their exact dequantized weights computed here (from the format's definition,
 * not through the plugin), and references of both semantics in double precision. */
#ifndef LLMRT_FP8_TEST_COMMON_H
#define LLMRT_FP8_TEST_COMMON_H

#include <stdint.h>

#include <llmrt/quant.h>

const llmrt_quant_vtable *ft_fp8(void);
const llmrt_plugin_desc *ft_fp8_desc(void);
const llmrt_backend_vtable *ft_cpu(void);
/* A cpu backend with [backend.cpu] threads = n, simd = simd ("auto", "exact", "baseline", ...). */
llmrt_backend_ref ft_cpu_backend(int threads, const char *simd);
/* The quantization_config Qwen3-*-FP8 ships. */
extern const char *const FT_QWEN_CONFIG;
/* An fp8 instance over `be` with [quant.fp8] activations = act (NULL: the default); aborts on
 * failure. */
llmrt_quant *ft_quant(const llmrt_backend_ref *be, const char *act);

/* An in-memory checkpoint: tensors added by name (1..3 dims); data owned by the checkpoint,
 * stored one byte past an allocation's start (checkpoint data need not be aligned). */
typedef struct ft_ckpt ft_ckpt;
ft_ckpt *ft_ckpt_new(void);
void ft_ckpt_add(ft_ckpt *c, const char *name, llmrt_dtype dt, int32_t ndim, const int64_t *shape,
                 const void *data);
void ft_ckpt_free(ft_ckpt *c);
const llmrt_checkpoint *ft_ckpt_view(ft_ckpt *c);

/* A random FP8 linear [out, in]: every e4m3 code but NaN, block scales in [1e-3, 4e-3]
 * (exact in the scale dtype, F32 or BF16). w: the exact dequantized weights, f32 [out, in]. */
typedef struct ft_linear {
    int64_t in, out, rb, kb;
    llmrt_dtype scale_dtype;
    uint8_t *codes; /* [out, in] */
    void *scales;   /* [rb, kb] in scale_dtype */
    float *sf;      /* [rb, kb] the scales as f32 */
    float *w;       /* [out, in] */
} ft_linear;
ft_linear ft_linear_random(int64_t in, int64_t out, llmrt_dtype scale_dtype, uint64_t seed);
void ft_linear_free(ft_linear *l);
/* Add prefix.weight and prefix.weight_scale_inv of l to the checkpoint. */
void ft_linear_add(ft_ckpt *c, const char *prefix, const ft_linear *l);

/* References in double precision, y [n, out] for x [n, in]:
 *   W8A16: y = x · wᵀ;  W8A8: fp8_act.h's quantization of x (in f32, as defined), then
 *   y = Σ_blocks (Σ xq · e4m3) · s_x · s_w.
 * mag (may be NULL) gets Σ_i |x_i w_i| (W8A8: of the quantized operands) per output, the
 * scale of the rounding error an f32 kernel may make. */
void ft_ref_w8a16(const ft_linear *l, const float *x, int32_t n, double *y, double *mag);
void ft_ref_w8a8(const ft_linear *l, const float *x, int32_t n, double *y, double *mag);

/* deterministic random numbers */
typedef struct ft_rng {
    uint64_t s;
} ft_rng;
uint64_t ft_next(ft_rng *r);
float ft_uniform(ft_rng *r, float lo, float hi);
/* Activations of n rows x in: uniform(-2, 2) with a few large outliers per row (as real
 * activations have, so the per-group scales differ). */
float *ft_activations(ft_rng *r, int32_t n, int64_t in);

#endif
