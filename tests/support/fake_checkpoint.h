/* fake_checkpoint.h — an llmrt_checkpoint over tensors built in memory, and the seeded random
 * numbers that fill them: what the model plugins' unit tests (model-qwen3, model-qwen3-moe)
 * load tiny models from without writing safetensors files.
 *
 * Why shared: both plugins' tests build the same kind of fake checkpoint; one copy keeps
 * their fixtures alike. The random numbers are splitmix64 from a global state the tests seed
 * (rng_state = seed) before building a model, so a test's weights depend on its seed only. */
#ifndef LLMRT_TEST_FAKE_CHECKPOINT_H
#define LLMRT_TEST_FAKE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/model.h>

extern uint64_t rng_state;
double rnd_uniform(void);  /* [0, 1) from splitmix64 */
double rnd_sym(double a);  /* U(-a, a) */

#define FK_MAX_TENSORS 1024
typedef struct ftensor {
    char name[128];
    llmrt_dtype dtype;
    int32_t ndim;
    int64_t shape[LLMRT_MAX_DIMS];
    void *data;
    size_t bytes;
} ftensor;

typedef struct fckpt {
    llmrt_checkpoint ck;      /* find / has answer from t[]; ck.config_json = config */
    ftensor t[FK_MAX_TENSORS];
    int n;
    char config[4096];        /* the test writes config.json here */
    int finds;                /* successful find calls (tests count loads) */
} fckpt;

fckpt *fk_new(const char *dir); /* dir: what messages name as the checkpoint's folder */
void fk_free(fckpt *f);
ftensor *fk_get(fckpt *f, const char *name);
/* A zero-filled tensor [d0] (ndim 1) or [d0, d1] (ndim 2). */
ftensor *fk_slot(fckpt *f, const char *name, llmrt_dtype dtype, int32_t ndim, int64_t d0,
                 int64_t d1);
/* A tensor filled with U(center - a, center + a), stored in `dtype` (I8: rounded). */
ftensor *fk_add(fckpt *f, const char *name, llmrt_dtype dtype, int32_t ndim, int64_t d0,
                int64_t d1, double center, double a);
/* A [d0, d1] tensor holding a copy of data. */
void fk_add_data(fckpt *f, const char *name, llmrt_dtype dtype, int64_t d0, int64_t d1,
                 const void *data);
void fk_remove(fckpt *f, const char *name); /* fails the test when absent */

#endif
