/* qwen3.h — internal to the model-qwen3 plugin: the model instance (the shared Qwen3 decoder
 * of plugins/qwen3-common plus a dense SwiGLU MLP per layer), shared by the plugin's files
 * (config, weights, forward, descriptor, synth).
 *
 * Why one struct: create() fills it once (weights copied to backend memory, scratch sized for
 * params.max_tokens rows), forward() only reads it, so forward allocates nothing and never
 * synchronises — a sequence of backend ops that a CUDA graph can capture. */
#ifndef LLMRT_QWEN3_H
#define LLMRT_QWEN3_H

#include <stdint.h>

#include "qwen3_common.h"

#define QWEN3_ARCH "Qwen3ForCausalLM"

/* 1 when config.json's architectures lists Qwen3ForCausalLM; sets *is_json 0 on bad JSON. */
int qwen3_config_matches(const char *config_json, int *is_json);
/* Parse and validate; errors name the key and say "config.json". */
llmrt_status qwen3_config_parse(const char *config_json, qwen3_config *out, llmrt_error *err);

/* Synthetic checkpoints (qwen3_synth.c): model.h synth_preset / synthesize. */
const llmrt_synth_preset *qwen3_synth_preset(uint32_t index);
llmrt_status qwen3_synthesize(const llmrt_host *host, const llmrt_synth_request *req,
                              const llmrt_ckpt_writer *w, llmrt_error *err);

/* The tiny-chat preset (qwen3_script.c): a checkpoint whose greedy reply is model_opts'
 * says=TEXT. Adds every tensor and the tokenizer files; *cfg and *dtype say what config.json
 * must hold. */
llmrt_status qwen3_script_build(const llmrt_synth_request *req, const llmrt_ckpt_writer *w,
                                qwen3_config *cfg, llmrt_dtype *dtype, llmrt_error *err);

struct llmrt_model {
    /* config, attention, embedding, lm_head, greedy head; [model.qwen3] fuse = auto: d.rt.fused
     * holds the backend's fused ops (the "llmrt.fused" extension: add_rmsnorm,
     * qk_norm_rope_store, swiglu) and q/k/v and gate/up load fused where available; off: the
     * separate ops only (for A/B and as a reference) */
    qwen3_decoder d;
    qwen3_mlp *mlp;      /* [n_layers] */
    qwen3_mlp_act act;   /* the MLPs' activations (one allocation, at act_base) */
    void *act_base;
    /* A forward of at most glu_rows tokens has the gate/up projection write silu(gate) * up
     * itself (quant linear_forward_fused, LLMRT_FUSE_OUT_SWIGLU; 0: never — also when some
     * layer's gate/up is not one fused quantized linear). */
    int32_t glu_rows;
};

/* Load every weight (through the quant plugin for decoder linears when one is given) into
 * backend memory; shapes are checked against m->d.cfg. */
llmrt_status qwen3_weights_load(llmrt_model *m, const llmrt_checkpoint *ckpt, llmrt_error *err);
void qwen3_weights_free(llmrt_model *m);

/* The decoder's MLP callback (qwen3_mlp_fn): layer l's dense MLP on d.s.xn into d.s.proj. */
llmrt_status qwen3_dense_mlp(void *m, int32_t layer, int32_t n_tokens, llmrt_error *err);

#endif
