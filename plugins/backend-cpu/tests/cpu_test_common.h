/* cpu_test_common.h — helpers for the backend-cpu tests and benchmark: load the built
 * plugin, create instances with a given thread count, deterministic random numbers. */
#ifndef LLMRT_CPU_TEST_COMMON_H
#define LLMRT_CPU_TEST_COMMON_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/cpu.h>
#include <llmrt/ext/fused.h>

/* The backend-cpu vtable from $LLMRT_PLUGIN_DIR/backend-cpu.so (loaded once). */
const llmrt_backend_vtable *ct_vtable(void);
/* An instance with [backend.cpu] threads = n and simd = exact, the reference arithmetic
 * (aborts the test on failure). */
llmrt_backend *ct_create(int threads);
/* The same with another simd path ("auto", "amx", "avx512", "avx2", "exact", "baseline"). */
llmrt_backend *ct_create_simd(int threads, const char *simd);
/* The same, NULL when this CPU lacks the path. */
llmrt_backend *ct_try_create_simd(int threads, const char *simd);
/* b's "llmrt.cpu", "llmrt.fused" and "llmrt.argmax_head" extension tables (abort the test
 * when absent). */
const llmrt_cpu_ext *ct_cpu_ext(llmrt_backend *b);
const llmrt_fused_ops *ct_fused(llmrt_backend *b);
const llmrt_argmax_head_ops *ct_argmax_head(llmrt_backend *b);

/* xorshift64*: same sequence on every machine. */
typedef struct ct_rng {
    uint64_t s;
} ct_rng;
static inline uint64_t ct_next(ct_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}
/* uniform in [lo, hi) */
static inline float ct_uniform(ct_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((ct_next(r) >> 40) * (1.0 / 16777216.0));
}
static inline int ct_int(ct_rng *r, int n)
{
    return (int)(ct_next(r) % (uint64_t)n);
}

/* Fill with a quiet NaN so an element an op forgets to write fails every comparison. */
void ct_poison(float *p, int64_t n);

/* ck_assert_msg without Check's record of each passing assertion (one write to its log file
 * per call, which made the element-by-element checks most of a test's time). */
#define CT_CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond))                                                                       \
            ck_assert_msg(cond, __VA_ARGS__);                                              \
    } while (0)

#endif
