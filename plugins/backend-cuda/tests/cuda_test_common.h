/* cuda_test_common.h — fixtures for the backend-cuda tests: the CUDA and CPU backends loaded
 * from $LLMRT_PLUGIN_DIR side by side, buffers on either, random data, NaN poisoning and
 * relative-error comparison.
 *
 * Why: every CUDA op is checked against backend-cpu (the reference) on the same inputs, so
 * the tests need the same few moves over and over: allocate on both, upload, poison the
 * output, run, download, compare. CUDA cannot survive fork(), so suites run with
 * CK_NOFORK (ct_run does that). */
#ifndef LLMRT_CUDA_TEST_COMMON_H
#define LLMRT_CUDA_TEST_COMMON_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/cuda.h>
#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/fused.h>

typedef struct ct_env {
    const llmrt_backend_vtable *cuda_vt, *cpu_vt;
    llmrt_backend_ref cuda, cpu; /* cpu.b is NULL unless ct_open(need_cpu = 1) */
    llmrt_host host;
    llmrt_device_info info;
} ct_env;

extern ct_env CT; /* the test program's backends (one per process) */

/* Load backend-cuda.so (and backend-cpu.so), create the backends. Exits 77 with the reason
 * when no CUDA device is visible; exits 1 when a plugin cannot be loaded. The CUDA backend
 * gets LLMRT_BACKEND_CUDA_PDL / LLMRT_BACKEND_CUDA_TUNE from the environment as its pdl and
 * tune, as the host would give them. */
void ct_open(int need_cpu);
void ct_close(void);
/* The descriptor of a plugin file in $LLMRT_PLUGIN_DIR, or NULL (message printed). */
const llmrt_plugin_desc *ct_plugin(const char *file);

/* A backend's "llmrt.fused" / "llmrt.argmax_head" extension table (fails the test when the
 * backend does not offer it). */
const llmrt_fused_ops *ct_fused(const llmrt_backend_ref *b);
const llmrt_argmax_head_ops *ct_argmax_head(const llmrt_backend_ref *b);
/* A CUDA backend created with [backend.cuda] key = value (key NULL: none), and the
 * environment's other keys as ct_open takes them. */
llmrt_status ct_create_cuda(const char *key, const char *value, llmrt_backend **out,
                            llmrt_error *err);

/* Run a suite without forking; returns the process exit code. */
int ct_run(Suite *s);

/* Assert a status call succeeded; err must be an llmrt_error in scope. */
#define CT_OK(call)                                                                           \
    do {                                                                                      \
        llmrt_status st_ = (call);                                                            \
        ck_assert_msg(st_ == LLMRT_OK, "%s failed (%s): %s", #call, llmrt_status_str(st_),   \
                      err.msg);                                                               \
    } while (0)

/* ---- buffers on a backend (synchronous helpers) ---- */
void *ct_alloc(const llmrt_backend_ref *b, size_t bytes);
void ct_free(const llmrt_backend_ref *b, void *p);
void ct_upload(const llmrt_backend_ref *b, void *dev, const void *host, size_t bytes);
void ct_download(const llmrt_backend_ref *b, void *host, const void *dev, size_t bytes);
void *ct_dup(const llmrt_backend_ref *b, const void *host, size_t bytes);
void ct_sync(const llmrt_backend_ref *b);
/* Fill n floats of device memory with NaN. */
void ct_poison(const llmrt_backend_ref *b, void *dev, size_t n);

/* ---- random data (deterministic per seed) ---- */
typedef struct ct_rng {
    uint64_t s;
} ct_rng;
uint64_t ct_next(ct_rng *r);
float ct_uniform(ct_rng *r, float lo, float hi);
int32_t ct_int(ct_rng *r, int32_t lo, int32_t hi); /* [lo, hi] */
float *ct_rand_f32(ct_rng *r, size_t n, float lo, float hi); /* malloc'd */
/* A host copy of `src` [n] in dtype (F32/F16/BF16), rounded to nearest even; malloc'd.
 * If `rounded` is not NULL it receives the values as f32 after rounding. */
void *ct_to_dtype(const float *src, size_t n, llmrt_dtype dt, float *rounded);

/* ---- comparison ---- */
/* ||a - ref|| / ||ref|| over n values; *nan_count gets the NaNs/infs in a not in ref. */
double ct_rel_err(const float *a, const float *ref, size_t n, size_t *nan_count);
/* Assert a matches ref within tol (relative L2) and has no NaN where ref has none. */
void ct_assert_close(const float *a, const float *ref, size_t n, double tol, const char *what);

/* ---- sampling reference ---- */
/* The token cuda_sample.cu draws from logits x [vocab] with sp, in double precision; the
 * deltas nudge top_p and u to find decisions that sit on a rounding boundary. */
int ct_ref_sample(const float *x, int vocab, llmrt_sample_params sp, double top_p_delta,
                  double u_delta);

#endif
