/* awq_test_common.h — fixtures for the quant-awq tests and benchmark: the plugins (awq and
 * backend-cpu) loaded from $LLMRT_PLUGIN_DIR, an in-memory llmrt_checkpoint, random AWQ
 * linears and the test's own AutoAWQ packer. */
#ifndef LLMRT_AWQ_TEST_COMMON_H
#define LLMRT_AWQ_TEST_COMMON_H

#include <stdint.h>

#include <llmrt/quant.h>

const llmrt_quant_vtable *at_awq(void);
const llmrt_plugin_desc *at_awq_desc(void);
const llmrt_backend_vtable *at_cpu(void);
/* A cpu backend with [backend.cpu] threads = n and simd = exact (the reference kernels;
 * aborts on failure). */
llmrt_backend_ref at_cpu_backend(int threads);
/* The same with another [backend.cpu] simd ("auto", "amx", "avx512", "avx2", "baseline"). */
llmrt_backend_ref at_cpu_backend_simd(int threads, const char *simd);
/* The same: 0 when this CPU lacks the path, 1 with *out created. */
int at_try_cpu_backend_simd(int threads, const char *simd, llmrt_backend_ref *out);
/* The path a cpu backend runs (its "llmrt.cpu" extension's simd()). */
const char *at_cpu_simd(const llmrt_backend_ref *be);
/* An awq instance over `be` for an AWQ config with this group size (aborts on failure). */
llmrt_quant *at_quant(const llmrt_backend_ref *be, int group);
/* The same with [quant.awq] tune = `tune` (NULL: no section). */
llmrt_quant *at_quant_tune(const llmrt_backend_ref *be, int group, const char *tune);
/* The AWQ config JSON at_quant uses, for this group size (a static buffer). */
const char *at_config(int group);

/* An in-memory checkpoint: tensors added by name; data is owned by the checkpoint. */
typedef struct at_ckpt at_ckpt;
at_ckpt *at_ckpt_new(void);
void at_ckpt_add(at_ckpt *c, const char *name, llmrt_dtype dt, int64_t d0, int64_t d1,
                 const void *data);
void at_ckpt_free(at_ckpt *c);
const llmrt_checkpoint *at_ckpt_view(at_ckpt *c);

/* A random AWQ linear [out, in]: q, z in 0..15, scales exact f16 values.
 * w: the exact weights (q - z) * s, f32 [out, in]. */
typedef struct at_linear {
    int64_t in, out, group;
    int32_t *qweight; /* [in, out/8]   packed by at_pack */
    int32_t *qzeros;  /* [in/group, out/8] */
    uint16_t *scales; /* [in/group, out] f16 */
    float *w;         /* [out, in] */
} at_linear;
at_linear at_linear_random(int64_t in, int64_t out, int64_t group, uint64_t seed);
void at_linear_free(at_linear *l);
/* Add prefix.qweight/.qzeros/.scales of l to the checkpoint. */
void at_linear_add(at_ckpt *c, const char *prefix, const at_linear *l);

/* AutoAWQ's packing, written from its description (WQLinear_GEMM.from_linear): eight
 * values of columns 8c..8c+7 go into word c with order_map = [0, 2, 4, 6, 1, 3, 5, 7],
 * nibble k holding column 8c + order_map[k]. vals [rows, cols] → packed [rows, cols/8]. */
void at_pack(const uint8_t *vals, int64_t rows, int64_t cols, int32_t *packed);

/* deterministic random numbers */
typedef struct at_rng {
    uint64_t s;
} at_rng;
uint64_t at_next(at_rng *r);
float at_uniform(at_rng *r, float lo, float hi);

/* ck_assert_msg without Check's record of each passing assertion (one write to its log file
 * per call, which made the element-by-element checks most of a test's time). */
#define AT_CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond))                                                                       \
            ck_assert_msg(cond, __VA_ARGS__);                                              \
    } while (0)

#endif
