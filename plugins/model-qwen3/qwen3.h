/* qwen3.h — internal to the model-qwen3 plugin: the parsed config, the loaded weights and the
 * per-step scratch, shared by the plugin's files (config, weights, forward, descriptor).
 *
 * Why one struct: create() fills it once (weights copied to backend memory, scratch sized for
 * params.max_tokens rows), forward() only reads it, so forward allocates nothing and never
 * synchronises — a sequence of backend ops that a CUDA graph can capture. */
#ifndef LLMRT_QWEN3_H
#define LLMRT_QWEN3_H

#include <stdint.h>

#include <llmrt/backend.h>
#include <llmrt/chat.h>
#include <llmrt/checkpoint.h>
#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/fused.h>
#include <llmrt/model.h>
#include <llmrt/quant.h>

#define QWEN3_ARCH "Qwen3ForCausalLM"

/* The config.json keys the architecture needs. */
typedef struct qwen3_config {
    int32_t vocab;          /* vocab_size */
    int32_t hidden;         /* hidden_size */
    int32_t intermediate;   /* intermediate_size */
    int32_t n_layers;       /* num_hidden_layers */
    int32_t n_heads;        /* num_attention_heads */
    int32_t n_kv_heads;     /* num_key_value_heads (default: n_heads) */
    int32_t head_dim;       /* head_dim (default: hidden / n_heads) */
    int32_t max_position;   /* max_position_embeddings */
    double eps;             /* rms_norm_eps */
    double rope_theta;      /* rope_theta or rope_parameters.rope_theta */
    int32_t tie;            /* tie_word_embeddings */
} qwen3_config;

/* 1 when config.json's architectures lists Qwen3ForCausalLM; sets *is_json 0 on bad JSON. */
int qwen3_config_matches(const char *config_json, int *is_json);
/* Parse and validate; errors name the key and say "config.json". */
llmrt_status qwen3_config_parse(const char *config_json, qwen3_config *out, llmrt_error *err);

/* The Qwen3 chat format (qwen3_chat.c). */
extern const llmrt_chat_vtable qwen3_chat_vtable;

/* Its reply markup and the streaming reply parser (qwen3_reply.c): chat.h's syntax and
 * parser_create / push / finish / destroy. */
const llmrt_chat_syntax *qwen3_reply_syntax(const llmrt_chat *c);
llmrt_status qwen3_reply_create(const llmrt_chat *c, const llmrt_reply_options *opt,
                                llmrt_reply_parser **out, llmrt_error *err);
llmrt_status qwen3_reply_push(llmrt_reply_parser *p, const char *text, size_t n,
                              const llmrt_reply_sink *sink, llmrt_error *err);
llmrt_status qwen3_reply_finish(llmrt_reply_parser *p, const llmrt_reply_sink *sink,
                                llmrt_error *err);
void qwen3_reply_destroy(llmrt_reply_parser *p);

/* Synthetic checkpoints (qwen3_synth.c): model.h synth_preset / synthesize. */
const llmrt_synth_preset *qwen3_synth_preset(uint32_t index);
llmrt_status qwen3_synthesize(const llmrt_host *host, const llmrt_synth_request *req,
                              const llmrt_ckpt_writer *w, llmrt_error *err);

/* The tiny-chat preset (qwen3_script.c): a checkpoint whose greedy reply is model_opts'
 * says=TEXT. Adds every tensor and the tokenizer files; *cfg and *dtype say what config.json
 * must hold. */
llmrt_status qwen3_script_build(const llmrt_synth_request *req, const llmrt_ckpt_writer *w,
                                qwen3_config *cfg, llmrt_dtype *dtype, llmrt_error *err);

/* A linear layer y = x·Wᵀ, W logically [out, in]: quantized (q != NULL) or dense (w). */
typedef struct qwen3_linear {
    llmrt_qlinear *q;
    llmrt_tensor w;  /* [out, in] F32/F16/BF16 in backend memory when q == NULL */
    int64_t in, out;
} qwen3_linear;

typedef struct qwen3_layer {
    llmrt_tensor input_norm;  /* [hidden] */
    llmrt_tensor post_norm;   /* [hidden] */
    llmrt_tensor q_norm;      /* [head_dim] */
    llmrt_tensor k_norm;      /* [head_dim] */
    qwen3_linear q_proj;      /* [n_heads * head_dim, hidden] */
    qwen3_linear k_proj;      /* [n_kv_heads * head_dim, hidden] */
    qwen3_linear v_proj;      /* [n_kv_heads * head_dim, hidden] */
    qwen3_linear o_proj;      /* [hidden, n_heads * head_dim] */
    qwen3_linear gate_proj;   /* [intermediate, hidden] */
    qwen3_linear up_proj;     /* [intermediate, hidden] */
    qwen3_linear down_proj;   /* [hidden, intermediate] */
    /* Fused projections (see qwen3_weights.c): when set, q/k/v_proj resp. gate/up_proj are
     * unused and one linear computes them all. */
    int fused_qkv, fused_gate_up;
    qwen3_linear qkv_proj;    /* [(n_heads + 2 n_kv_heads) * head_dim, hidden]: q, k, v rows */
    qwen3_linear gate_up_proj; /* [2 * intermediate, hidden]: gate rows, then up rows */
} qwen3_layer;

/* Activations for one forward, f32, allocated once (T = params.max_tokens, S = max_seqs). */
typedef struct qwen3_scratch {
    void *base;    /* the single backend allocation all of these point into */
    float *x;      /* [T, hidden] residual stream */
    float *xn;     /* [T, hidden] normed input of a block */
    float *q;      /* [T, n_heads, head_dim] */
    float *k;      /* [T, n_kv_heads, head_dim] */
    float *v;      /* [T, n_kv_heads, head_dim] */
    float *attn;   /* [T, n_heads, head_dim] */
    float *proj;   /* [T, hidden] output of o_proj / down_proj */
    float *gate;   /* [T, intermediate] */
    float *up;     /* [T, intermediate] */
    float *act;    /* [T, intermediate] silu(gate) * up */
    float *rows;   /* [S, hidden] hidden states of the logits rows */
    float *qkv;    /* [T, (n_heads + 2 n_kv_heads) * head_dim] fused q|k|v projection */
    float *gu;     /* [T, 2 * intermediate] fused gate|up projection */
} qwen3_scratch;

struct llmrt_model {
    llmrt_host host;
    int has_host;
    llmrt_backend_ref be;
    llmrt_quant_ref quant;    /* quant.vt == NULL: dense checkpoint */
    qwen3_config cfg;
    llmrt_model_params params;
    llmrt_tensor embed;       /* [vocab, hidden] */
    llmrt_tensor final_norm;  /* [hidden] */
    llmrt_tensor lm_head;     /* [vocab, hidden]; same data as embed when tied */
    int lm_head_tied;
    qwen3_layer *layers;      /* [n_layers] */
    qwen3_scratch s;
    uint64_t weight_bytes;
    /* [model.qwen3] fuse = auto: use the backend's fused ops (the "llmrt.fused" extension:
     * add_rmsnorm, qk_norm_rope_store, swiglu) and fused q/k/v and gate/up linears where
     * available; off: the separate ops only (for A/B and as a reference). */
    int fuse;
    const llmrt_fused_ops *fused; /* the backend's fused ops; NULL: none, or fuse = off */
    int use_qkv, use_gate_up;     /* fused projections: decided at create (fused != NULL) */
    /* A forward of at most glu_rows tokens has the gate/up projection write silu(gate) * up
     * itself (quant linear_forward_fused, LLMRT_FUSE_OUT_SWIGLU; 0: never). */
    int32_t glu_rows;
    /* [model.qwen3] greedy_head = auto: when the backend offers the "llmrt.argmax_head"
     * extension, greedy steps of at most head_rows sequences find each argmax through it
     * (CUDA: an int8 copy of lm_head screens, the candidates are recomputed exactly); off:
     * lm_head + argmax. */
    int greedy_head;
    const llmrt_argmax_head_ops *head_ops; /* the extension that made `head` */
    llmrt_argmax_head *head;  /* NULL: none */
    int32_t head_rows;
};

/* Before anything is sized from num_hidden_layers: the checkpoint must hold the last layer it
 * implies (else LLMRT_ERR_FORMAT naming the key and the layers the checkpoint does hold). */
llmrt_status qwen3_weights_check_layers(const qwen3_config *c, const llmrt_checkpoint *ckpt,
                                        llmrt_error *err);
/* Load every weight (through the quant plugin for decoder linears when one is given) into
 * backend memory; shapes are checked against m->cfg. m->be, m->quant, m->cfg must be set. */
llmrt_status qwen3_weights_load(llmrt_model *m, const llmrt_checkpoint *ckpt, llmrt_error *err);
void qwen3_weights_free(llmrt_model *m);

llmrt_status qwen3_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                           float *logits, llmrt_error *err);
/* forward, then out[s] = argmax of sequence s's logits (model.h forward_argmax). */
llmrt_status qwen3_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                  const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                  llmrt_error *err);

#endif
