/* moe.h — internal to the model-qwen3-moe plugin: the parsed config, the weights of a sparse
 * MoE block, the per-step scratch and the model instance, shared by the plugin's files.
 *
 * Qwen3-MoE is Qwen3 (plugins/qwen3-common: attention with q/k RMSNorm, RoPE and GQA, the
 * embedding, final norm and lm_head, the chat format) whose MLP is, per layer, either the
 * dense SwiGLU MLP (the layers in mlp_only_layers, or off the decoder_sparse_step grid) or a
 * sparse mixture-of-experts block (transformers' Qwen3MoeSparseMoeBlock):
 *   logits [T, E] = xn · Wrᵀ                      (mlp.gate, the router; dense)
 *   p = softmax(logits) in f32; the top K experts of each token, by logit (lowest index first
 *   among equal logits); weights p_k, divided by their sum when norm_topk_prob
 *   out[t] = Σ_k w[t, k] · down_e(silu(gate_e(xn[t])) * up_e(xn[t]))   (e = the k-th expert)
 * with E = num_experts, K = num_experts_per_tok, each expert a SwiGLU MLP of width
 * moe_intermediate_size.
 *
 * How a step runs a block (moe_block.c): the router gemm (backend), routing (the plugin's own
 * code: moe_cpu.c, moe_cuda.cu), which also lays out the T·K (token, expert) rows sorted by
 * expert, with each expert's range; the experts' gate/up and down projections as grouped
 * linears over those rows — the quant plugin's linear_forward_grouped for quantized experts,
 * the plugin's own grouped GEMV for dense ones — reading each row's expert on the device; the
 * weighted combine back to tokens. Nothing synchronises with the host or allocates. */
#ifndef LLMRT_QWEN3_MOE_H
#define LLMRT_QWEN3_MOE_H

#include <stdint.h>

#include "qwen3_common.h"

#define MOE_ARCH "Qwen3MoeForCausalLM"
#define MOE_PLUGIN "qwen3_moe"

/* ---- config (moe_config.c) ---- */

typedef struct moe_config {
    qwen3_config base;    /* the keys every Qwen3 has (intermediate_size: the dense layers') */
    int32_t n_experts;    /* num_experts (0: every layer dense) */
    int32_t top_k;        /* num_experts_per_tok */
    int32_t moe_inter;    /* moe_intermediate_size: each expert's width */
    int32_t sparse_step;  /* decoder_sparse_step */
    int32_t norm_topk;    /* norm_topk_prob */
    int32_t *mlp_only;    /* mlp_only_layers [n_mlp_only], sorted, distinct (malloc'd) */
    int32_t n_mlp_only;
} moe_config;

/* 1 when config.json's architectures lists Qwen3MoeForCausalLM; *is_json 0 on bad JSON. */
int moe_config_matches(const char *config_json, int *is_json);
/* Parse and validate every key of the released Qwen3-MoE configs; errors name the key. */
llmrt_status moe_config_parse(const char *config_json, moe_config *out, llmrt_error *err);
void moe_config_free(moe_config *c);
/* 1 when layer l is a sparse MoE block (transformers: not in mlp_only_layers, num_experts > 0
 * and (l + 1) % decoder_sparse_step == 0), else 0: a dense MLP. */
int moe_layer_is_sparse(const moe_config *c, int32_t l);

/* ---- the experts of one projection (moe_experts.c) ---- */

/* Which code runs the plugin's own ops: chosen by what the backend offers. */
typedef enum moe_target { MOE_ON_CPU = 1, MOE_ON_CUDA = 2 } moe_target;

typedef struct moe_cuda moe_cuda; /* moe_cuda.h */

/* One projection (gate|up fused, gate, up or down) of a layer's experts: out x in each. */
typedef struct moe_experts {
    int32_t n;             /* num_experts */
    int64_t in, out;
    qwen3_linear *lin;     /* [n]: expert e's linear, quantized (lin[e].q) or dense (lin[e].w) */
    int32_t n_quant;       /* how many are quantized */
    llmrt_qgroup *qgroup;  /* the quant plugin's group over them (NULL entries for the dense) */
    uint32_t qflags;       /* folds the group does (LLMRT_FUSE_OUT_SWIGLU or 0) */
    /* the dense ones: on CUDA a device table [n] of weight pointers (NULL for quantized
     * experts), all of dtype dense_dtype */
    const void **dense_table;
    llmrt_dtype dense_dtype;
} moe_experts;

/* A sparse MoE block's weights. */
typedef struct moe_block {
    llmrt_tensor router;   /* [num_experts, hidden] mlp.gate.weight, dense */
    int fused_gate_up;     /* gate_up holds [gate; up] per expert; else gate and up */
    moe_experts gate_up;   /* [2 moe_inter, hidden]: gate rows, then up rows */
    moe_experts gate, up;  /* [moe_inter, hidden] each (not fused) */
    moe_experts down;      /* [hidden, moe_inter] */
} moe_block;

/* ---- the model ---- */

/* Scratch of the sparse blocks, one allocation (T = max_tokens, N = T·K rows, E experts). */
typedef struct moe_scratch {
    void *base;
    float *router_logits;  /* [T, E] */
    int32_t *topk_id;      /* [T, K] the experts of token t, best first */
    float *topk_w;         /* [T, K] their weights */
    int32_t *row_expert;   /* [N] the expert of row r; rows sorted by expert */
    int32_t *row_src;      /* [N] the token of row r */
    int32_t *expert_start; /* [E + 1] expert e's rows are [expert_start[e], expert_start[e+1]) */
    int32_t *row_of;       /* [N] the row of (token t, k-th choice): row_of[t·K + k] */
    float *act;            /* [N, moe_inter] silu(gate) * up per row */
    float *gu;             /* [N, 2 moe_inter] gate|up when no fold does SwiGLU (else NULL) */
    float *gate, *up;      /* [N, moe_inter] each when gate/up are not fused (else NULL) */
    float *rows;           /* [N, hidden] down projection per row */
    float *xg, *yg;        /* CPU: gathered inputs [N, hidden] and outputs [N, 2 moe_inter] */
    int32_t *cursor;       /* CPU: [E] the sort's next free row per expert */
} moe_scratch;

struct llmrt_model {
    qwen3_decoder d;       /* config, attention, embedding, lm_head, greedy head */
    moe_config cfg;        /* cfg.base is copied into d.cfg */
    moe_target target;
    moe_cuda *cuda;        /* the CUDA ops (target CUDA) */
    int fuse;              /* [model.qwen3_moe] fuse: also experts' gate/up as one linear */
    uint8_t *sparse;       /* [n_layers] moe_layer_is_sparse */
    qwen3_mlp *mlp;        /* [n_layers] the dense layers' MLPs (unused for sparse ones) */
    moe_block *moe;        /* [n_layers] the sparse layers' blocks (unused for dense ones) */
    qwen3_mlp_act mlp_act; /* the dense layers' activations */
    void *mlp_act_base;
    int32_t glu_rows;      /* the dense layers' SwiGLU fold limit (see model-qwen3) */
    moe_scratch ms;
};

/* ---- weights (moe_weights.c) ---- */

llmrt_status moe_weights_load(llmrt_model *m, const llmrt_checkpoint *ck, llmrt_error *err);
void moe_weights_free(llmrt_model *m);

/* ---- a step (moe_block.c) ---- */

/* The decoder's MLP callback (qwen3_mlp_fn): layer l's dense MLP or sparse block on d.s.xn
 * into d.s.proj. */
llmrt_status moe_mlp(void *m, int32_t layer, int32_t n_tokens, llmrt_error *err);

/* ---- the plugin's CPU ops (moe_cpu.c): host memory, the backend's threads ---- */

/* topk_id/topk_w [T, K] from logits [T, E] (see the routing rule above). */
void moe_cpu_route(const llmrt_backend_ref *be, const float *logits, int32_t T, int32_t E,
                   int32_t K, int norm_topk, int32_t *topk_id, float *topk_w);
/* The T·K rows sorted by expert (stable: by token within an expert), expert_start [E + 1]
 * and row_of [T·K]; cursor: scratch [E]. */
void moe_cpu_sort(const int32_t *topk_id, int32_t T, int32_t K, int32_t E, int32_t *row_expert,
                  int32_t *row_src, int32_t *expert_start, int32_t *row_of, int32_t *cursor);
/* Rows of the dense experts of `ex` (rows sorted by expert, expert_start): y[r] =
 * x[row_src ? row_src[r] : r] · W_eᵀ through the backend's gemm per expert (xg, yg: scratch
 * [n_rows, in] and [n_rows, out]); glu: y [.., out / 2] = silu(gate) * up. */
llmrt_status moe_cpu_dense_grouped(const llmrt_backend_ref *be, const moe_experts *ex, float *y,
                                   const float *x, const int32_t *row_src,
                                   const int32_t *expert_start, int glu, float *xg, float *yg,
                                   llmrt_error *err);
/* out [n, d] = silu(gu[:, :d]) * gu[:, d:] */
void moe_cpu_swiglu(float *out, const float *gu, int32_t n, int32_t d);
/* out[t] = Σ_k topk_w[t, k] · rows[row_of[t·K + k]], k in order. */
void moe_cpu_combine(const llmrt_backend_ref *be, float *out, const float *rows,
                     const float *topk_w, const int32_t *row_of, int32_t T, int32_t K, int32_t H);

/* ---- synthetic checkpoints (moe_synth.c) ---- */

const llmrt_synth_preset *moe_synth_preset(uint32_t index);
llmrt_status moe_synthesize(const llmrt_host *host, const llmrt_synth_request *req,
                            const llmrt_ckpt_writer *w, llmrt_error *err);

#endif
