/* synth_writer.h — the host's side of a synthetic checkpoint (llmrt/synth.h): the plan a
 * model plugin describes through an llmrt_ckpt_writer, and writing it in exactly the Hugging
 * Face layout: model.safetensors, or model-0000i-of-0000n.safetensors shards split as
 * transformers splits them plus model.safetensors.index.json, and the plugin's JSON files
 * (config.json last, so a folder with a config.json holds a complete checkpoint).
 *
 * Why here: sharding, streaming and threads are the same for every model. Element i of a
 * tensor is a pure function of (seed, the name of the tensor whose stream it draws, i) — a
 * counter-based generator (splitmix64's output function over a counter) — so the bytes do
 * not depend on threads or chunking; while the main thread write()s one 32 MB buffer, worker
 * threads fill the other. The model is never held in memory. */
#ifndef LLMRT_CORE_SYNTH_WRITER_H
#define LLMRT_CORE_SYNTH_WRITER_H

#include <stdint.h>

#include <llmrt/synth.h>

#define LLMRT_SYNTH_DEFAULT_SHARD_BYTES 2000000000ull /* 2 GB, decimal, as transformers */

typedef struct llmrt_synth_plan llmrt_synth_plan;

llmrt_status llmrt_synth_plan_new(uint64_t seed, llmrt_synth_plan **out, llmrt_error *err);
void llmrt_synth_plan_free(llmrt_synth_plan *p);
/* The writer a plugin describes the checkpoint to (its ctx is the plan). */
void llmrt_synth_plan_writer(llmrt_synth_plan *p, llmrt_ckpt_writer *w);

typedef struct llmrt_synth_write_opts {
    uint64_t shard_bytes; /* most tensor bytes per shard; 0: 2 GB */
    int threads;          /* fill threads; 0: one per online CPU */
    int show_progress;    /* progress display on stderr */
} llmrt_synth_write_opts;

typedef struct llmrt_synth_result {
    uint64_t bytes;     /* tensor data written, all shards */
    uint32_t n_tensors;
    uint32_t n_shards;  /* 1 = a single model.safetensors */
    double seconds;
} llmrt_synth_result;

/* Write the plan into `dir` (created with its parents when missing). Files an earlier run may
 * have left there (config.json, generation_config.json, the plan's other JSON files,
 * model.safetensors, model-*-of-*.safetensors, the index) are replaced; a plan without a
 * config.json is an error. */
llmrt_status llmrt_synth_plan_write(llmrt_synth_plan *p, const char *dir,
                                    const llmrt_synth_write_opts *o, llmrt_synth_result *res,
                                    llmrt_error *err);

#endif
