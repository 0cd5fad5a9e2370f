/* qwen3_common.h — the Qwen3 parts that two model plugins share: model-qwen3 (the dense
 * decoder) and model-qwen3-moe (its mixture-of-experts sibling). Both run the same attention
 * block (q/k RMSNorm, neox RoPE, GQA over the engine's paged cache), the same dense SwiGLU MLP
 * (every layer of Qwen3; the mlp_only_layers of Qwen3-MoE), the same skeleton around them
 * (embedding, final norm, lm_head, the greedy argmax head), read the same config.json keys and
 * speak the same chat format.
 *
 * Why one source compiled into each plugin (as memory-common is for the memory plugins), not a
 * library: plugins are standalone .so files that link nothing of llmrt's, and each is built
 * against the installed SDK. The skeleton calls back into the plugin for the MLP of each layer,
 * the one place the two architectures differ. Everything here only enqueues backend ops and
 * quant linears on memory allocated at create: forward allocates nothing and never
 * synchronises, so the engine can capture it in a CUDA graph. */
#ifndef LLMRT_QWEN3_COMMON_H
#define LLMRT_QWEN3_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <llmrt/backend.h>
#include <llmrt/chat.h>
#include <llmrt/checkpoint.h>
#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/fused.h>
#include <llmrt/model.h>
#include <llmrt/quant.h>
#include <llmrt/synth.h>

/* ---- config.json (qwen3_config_common.c) ---- */

/* The keys every Qwen3 decoder has. */
typedef struct qwen3_config {
    int32_t vocab;          /* vocab_size */
    int32_t hidden;         /* hidden_size */
    int32_t intermediate;   /* intermediate_size: the dense MLP's width */
    int32_t n_layers;       /* num_hidden_layers */
    int32_t n_heads;        /* num_attention_heads */
    int32_t n_kv_heads;     /* num_key_value_heads (default: n_heads) */
    int32_t head_dim;       /* head_dim (default: hidden / n_heads) */
    int32_t max_position;   /* max_position_embeddings */
    double eps;             /* rms_norm_eps */
    double rope_theta;      /* rope_theta or rope_parameters.rope_theta */
    int32_t tie;            /* tie_word_embeddings */
} qwen3_config;

/* How a plugin reads the common keys. */
typedef struct qwen3_config_spec {
    const char *plugin;           /* named in refusals: "... is not supported by the qwen3 plugin" */
    int64_t intermediate_default; /* intermediate_size when absent; < 0: the key is required */
} qwen3_config_spec;

/* 1 when config.json's architectures lists `arch`; *is_json = 0 when the text is not a JSON
 * object. */
int qwen3_config_lists_arch(const char *config_json, const char *arch, int *is_json);
/* config.json's text as a JSON object (the caller json_decref's it); errors say "config.json"
 * and the line. */
llmrt_status qwen3_config_load(const char *config_json, json_t **root, llmrt_error *err);
/* Read and validate the common keys from config.json's object. Variants neither plugin runs
 * (RoPE scaling, attention biases, sliding windows, activations other than silu) are refused
 * naming the key; errors name the key and say "config.json". */
llmrt_status qwen3_config_read(json_t *root, const qwen3_config_spec *spec, qwen3_config *out,
                               llmrt_error *err);
/* A positive integer key below 2^31 (def < 0: required). */
llmrt_status qwen3_json_posint(json_t *obj, const char *key, int64_t def, int32_t *out,
                               llmrt_error *err);

/* ---- the chat format (qwen3_chat.c) ---- */

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

/* ---- a model instance's services (qwen3_load.c) ---- */

/* This instance's place in a tensor-parallel group (qwen3_shard.c); size 1: the whole model. */
typedef struct qwen3_tp {
    const struct llmrt_collective_ops *ops; /* the backend's "llmrt.collective" (size > 1) */
    int32_t rank, size;
    int32_t kv_parts;             /* KV heads split into this many parts (< size: replicated) */
    const llmrt_checkpoint *base; /* the checkpoint view's source (while loading) */
    llmrt_checkpoint view;        /* hands the loaders this rank's slices */
    void **bufs;                  /* [n_bufs] slices the view copied (freed after loading) */
    size_t n_bufs, cap_bufs;
} qwen3_tp;

/* What the shared code needs of a model instance. */
typedef struct qwen3_rt {
    llmrt_host host;
    int has_host;                 /* host.log may be called */
    const char *who;              /* the plugin's name, for logs and messages ("qwen3") */
    llmrt_backend_ref be;
    llmrt_quant_ref quant;        /* quant.vt == NULL: a dense checkpoint */
    const llmrt_fused_ops *fused; /* the backend's "llmrt.fused" ops; NULL: none, or fuse = off */
    int fuse_proj;                /* load q/k/v and gate/up as one linear each (needs fused) */
    uint64_t weight_bytes;        /* bytes of weights loaded onto the backend so far */
    qwen3_tp tp;                  /* tensor parallelism (rank 0 of 1 without it) */
    /* CPU weight offload (qwen3_offload.c): params.offload, NULL none */
    const llmrt_weight_offload *offload;
    int32_t offload_first;        /* first offloaded layer (n_layers: none) */
    size_t offload_layer_bytes;   /* layer 0's bytes: the size of every offloaded layer */
    uint64_t offloaded_bytes;     /* of weight_bytes, those in host memory */
} qwen3_rt;

/* ---- tensor parallelism (qwen3_shard.c) ---- */

/* After the config is read: when the backend is a rank of a tensor-parallel group (its
 * "llmrt.collective" extension says so), check that heads, KV heads and widths[n] (config
 * keys width_keys[n], e.g. intermediate_size) split across the ranks, and make c and the
 * widths this rank's (heads / size; KV heads / size, or 1 replicated when fewer than ranks;
 * widths / size). Refusals name the config key. Without a group: nothing changes. */
llmrt_status qwen3_tp_init(qwen3_rt *rt, qwen3_config *c, int32_t *const *widths,
                           const char *const *width_keys, int n_widths, llmrt_error *err);
/* The checkpoint the loaders read: ck itself, or (tensor parallel) a view of it that hands out
 * this rank's slice of every column- and row-parallel linear's tensors and refuses, naming the
 * tensor, a shape that does not split on element, pack, group or block boundaries. */
const llmrt_checkpoint *qwen3_tp_checkpoint(qwen3_rt *rt, const llmrt_checkpoint *ck);
/* Free the view's sliced copies (once the weights are in backend memory). */
void qwen3_tp_release(qwen3_rt *rt);
/* x [n] = the sum over the ranks (in place); nothing without tensor parallel. */
llmrt_status qwen3_tp_reduce(qwen3_rt *rt, float *x, int64_t n, llmrt_error *err);

/* The backend's "llmrt.fused" / "llmrt.argmax_head" tables when complete, else NULL. */
const llmrt_fused_ops *qwen3_fused_ops_of(const llmrt_backend_ref *be);
const llmrt_argmax_head_ops *qwen3_argmax_head_ops_of(const llmrt_backend_ref *be);
/* LLMRT_ERR_UNSUPPORTED naming the first op (of those the decoder runs) a backend lacks, or
 * the linear entry a quant plugin lacks. */
llmrt_status qwen3_check_backend(const llmrt_backend_ref *be, const char *who, llmrt_error *err);
llmrt_status qwen3_check_quant(const llmrt_quant_ref *q, const char *who, llmrt_error *err);
/* An auto|off key of the plugin's section (see llmrt_key_value): *on = (value == "auto"). Any
 * other value is LLMRT_ERR_INVALID_ARG naming where it was set, "[<section>] key = 'v'" and
 * `what_auto` (what auto turns on). */
llmrt_status qwen3_key_auto_off(const llmrt_section *cfg, const llmrt_key *table, uint32_t n,
                                const char *section, const char *key, const char *what_auto,
                                int *on, llmrt_error *err);

/* ---- weights (qwen3_load.c) ---- */

/* A linear layer y = x·Wᵀ, W logically [out, in]: quantized (q != NULL) or dense (w). */
typedef struct qwen3_linear {
    llmrt_qlinear *q;
    llmrt_tensor w; /* [out, in] F32/F16/BF16 in backend memory when q == NULL */
    int64_t in, out;
    int moved;      /* w was handed to the memory plugin (offload): not ours to free */
} qwen3_linear;

/* 1 when the checkpoint holds `name` (through has, or find when has is absent). */
int qwen3_ckpt_has(const llmrt_checkpoint *ck, const char *name);
/* Before anything is sized from num_hidden_layers: the checkpoint must hold the last layer it
 * implies (else LLMRT_ERR_FORMAT naming the key and the layers the checkpoint does hold). */
llmrt_status qwen3_check_layers(const qwen3_config *c, const llmrt_checkpoint *ck,
                                llmrt_error *err);
/* Find a dense tensor of the expected shape and a float dtype (F32/F16/BF16); `dims` names
 * the config keys behind the shape ("[vocab_size, hidden_size]") for messages. */
llmrt_status qwen3_find_dense(const llmrt_checkpoint *ck, const char *name, int32_t ndim,
                              const int64_t *shape, const char *dims, llmrt_tensor_view *out,
                              llmrt_error *err);
/* Copy a dense tensor of the expected shape into backend memory. */
llmrt_status qwen3_load_dense(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *name,
                              int32_t ndim, const int64_t *shape, const char *dims,
                              llmrt_tensor *out, llmrt_error *err);
llmrt_status qwen3_load_vector(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *name,
                               int64_t d, const char *dims, llmrt_tensor *out, llmrt_error *err);
/* A decoder linear [out, in] at `prefix`: quantized when the quant plugin finds it, else
 * dense from prefix.weight. */
llmrt_status qwen3_load_linear(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *prefix,
                               int64_t in, int64_t out, const char *dims, qwen3_linear *l,
                               llmrt_error *err);
/* Parts of a fused projection: prefixes, out_features and the config keys behind each. */
typedef struct qwen3_parts {
    int n;
    const char *prefix[3];
    int64_t out[3];
    const char *dims[3];
} qwen3_parts;
/* The parts as one linear [sum(out), in] (outputs of part 0 first): through the quant
 * plugin's linear_load_fused when the checkpoint is quantized, else the dense parts
 * concatenated. LLMRT_ERR_UNSUPPORTED (nothing loaded, err untouched) when they cannot be
 * fused: the caller then loads them one by one, where any real error names its tensor. */
llmrt_status qwen3_load_fused(qwen3_rt *rt, const llmrt_checkpoint *ck, const qwen3_parts *fp,
                              int64_t in, qwen3_linear *l, llmrt_error *err);
void qwen3_free_tensor(qwen3_rt *rt, llmrt_tensor *t);
void qwen3_free_linear(qwen3_rt *rt, qwen3_linear *l);
/* One backend allocation holding n buffers of bytes[i] each (256-byte aligned): offsets in
 * off[i], the allocation in *base, its size in *total. A failure keeps the backend's message. */
llmrt_status qwen3_alloc_block(qwen3_rt *rt, size_t n, const size_t *bytes, size_t *off,
                               void **base, size_t *total, llmrt_error *err);

/* y [n, out] = x [n, in] · Wᵀ: the quant plugin's linear or the backend's gemm. */
llmrt_status qwen3_linear_forward(qwen3_rt *rt, const qwen3_linear *l, float *y, const float *x,
                                  int32_t n, llmrt_error *err);
/* On an asynchronous (GPU) backend, run linears ls[k] (inputs xs, outputs ys) once at prefill
 * sizes (min(max_tokens, 128) and max_tokens rows) and wait: the one-time costs of the
 * backend's first GEMMs of each shape land in the load time, not in the first request. */
llmrt_status qwen3_warm_up(qwen3_rt *rt, const qwen3_linear *const *ls, float *const *ys,
                           const float *const *xs, int k, int32_t max_tokens, llmrt_error *err);

/* ---- the attention block (qwen3_layer.c) ---- */

typedef struct qwen3_attn {
    llmrt_tensor input_norm; /* [hidden] input_layernorm */
    llmrt_tensor post_norm;  /* [hidden] post_attention_layernorm (the MLP's input norm) */
    llmrt_tensor q_norm;     /* [head_dim] */
    llmrt_tensor k_norm;     /* [head_dim] */
    qwen3_linear q_proj;     /* [n_heads * head_dim, hidden] */
    qwen3_linear k_proj;     /* [n_kv_heads * head_dim, hidden] */
    qwen3_linear v_proj;     /* [n_kv_heads * head_dim, hidden] */
    qwen3_linear o_proj;     /* [hidden, n_heads * head_dim] */
    /* fused (rt->fuse_proj, qwen3_load_fused): q/k/v_proj unused, one linear computes them */
    int fused_qkv;
    qwen3_linear qkv_proj;   /* [(n_heads + 2 n_kv_heads) * head_dim, hidden]: q, k, v rows */
    int offloaded;           /* the norms were handed to the memory plugin: not ours to free */
} qwen3_attn;

/* The first half of layer `layer`'s tensors: input_layernorm, q/k/v (fused when it can),
 * q_norm, k_norm, o_proj, post_attention_layernorm. */
llmrt_status qwen3_attn_load(qwen3_rt *rt, const llmrt_checkpoint *ck, const qwen3_config *c,
                             int32_t layer, qwen3_attn *a, llmrt_error *err);
void qwen3_attn_free(qwen3_rt *rt, qwen3_attn *a);

/* ---- the dense SwiGLU MLP (qwen3_layer.c) ---- */

typedef struct qwen3_mlp {
    qwen3_linear gate_proj;    /* [inter, hidden] */
    qwen3_linear up_proj;      /* [inter, hidden] */
    qwen3_linear down_proj;    /* [hidden, inter] */
    int fused_gate_up;         /* gate/up_proj unused: gate_up_proj computes both */
    qwen3_linear gate_up_proj; /* [2 inter, hidden]: gate rows, then up rows */
    int64_t inter;
} qwen3_mlp;

/* Activations of the MLP for T tokens: gate and up [T, inter] (separate projections only),
 * act [T, inter], gu [T, 2 inter] (fused projections only). */
typedef struct qwen3_mlp_act {
    float *gate, *up, *act, *gu;
} qwen3_mlp_act;

/* prefix.gate_proj / up_proj (fused when it can) and prefix.down_proj; inter_key names the
 * config key of inter in messages ("intermediate_size"). */
llmrt_status qwen3_mlp_load(qwen3_rt *rt, const llmrt_checkpoint *ck, const char *prefix,
                            int64_t hidden, int64_t inter, const char *inter_key, qwen3_mlp *m,
                            llmrt_error *err);
void qwen3_mlp_free(qwen3_rt *rt, qwen3_mlp *m);
/* The most rows for which the quant plugin folds SwiGLU into this MLP's gate/up projection
 * (0: never — dense, not fused, or no such fold). */
int32_t qwen3_mlp_glu_rows(const qwen3_rt *rt, const qwen3_mlp *m);
/* out [T, hidden] = (silu(xn · Wgᵀ) * (xn · Wuᵀ)) · Wdᵀ; for T <= glu_rows (which the caller
 * took from qwen3_mlp_glu_rows) the gate/up projection writes silu(gate) * up itself. */
llmrt_status qwen3_mlp_forward(qwen3_rt *rt, const qwen3_mlp *m, const qwen3_mlp_act *s,
                               float *out, const float *xn, int32_t T, int32_t glu_rows,
                               llmrt_error *err);

/* ---- CPU weight offload (qwen3_offload.c) ---- */

/* After layer `layer` of n_layers loaded (a: its attention half, m: its dense MLP): at layer 0
 * measure it, plan (memory.h llmrt_offload_first_layer) and set up the memory plugin; when the
 * layer is offloaded, move its buffers into host memory. Nothing without rt->offload. */
llmrt_status qwen3_offload_layer(qwen3_rt *rt, int32_t n_layers, int32_t layer, qwen3_attn *a,
                                 qwen3_mlp *m, llmrt_error *err);
/* In a forward: layer -1 when it begins, then before each layer's kernels. */
llmrt_status qwen3_offload_fetch(qwen3_rt *rt, int32_t n_layers, int32_t layer,
                                 llmrt_error *err);

/* ---- the decoder around the MLPs (qwen3_decoder.c) ---- */

/* The attention side's activations, f32, allocated once (T = params.max_tokens, S = max_seqs). */
typedef struct qwen3_act {
    void *base;  /* the one backend allocation these point into */
    float *x;    /* [T, hidden] residual stream */
    float *xn;   /* [T, hidden] normed input of a block: the MLP's input */
    float *q;    /* [T, n_heads, head_dim] */
    float *k;    /* [T, n_kv_heads, head_dim] (separate projections only) */
    float *v;    /* [T, n_kv_heads, head_dim] (separate projections only) */
    float *attn; /* [T, n_heads, head_dim] */
    float *proj; /* [T, hidden] output of o_proj, then of the MLP */
    float *rows; /* [S, hidden] hidden states of the logits rows */
    float *qkv;  /* [T, (n_heads + 2 n_kv_heads) * head_dim] fused projection (fused only) */
} qwen3_act;

/* The MLP of layer `layer` over n_tokens rows: proj = mlp(xn) (d->s's buffers). */
typedef llmrt_status (*qwen3_mlp_fn)(void *ctx, int32_t layer, int32_t n_tokens,
                                     llmrt_error *err);

typedef struct qwen3_decoder {
    qwen3_rt rt;
    qwen3_config cfg;
    llmrt_model_params params;
    llmrt_tensor embed;      /* [vocab, hidden] */
    llmrt_tensor final_norm; /* [hidden] */
    llmrt_tensor lm_head;    /* [vocab, hidden]; embed's data when tied */
    int lm_head_tied;
    qwen3_attn *attn;        /* [n_layers] */
    qwen3_act s;
    qwen3_mlp_fn mlp;
    void *mlp_ctx;
    /* greedy_head = auto: when the backend offers the "llmrt.argmax_head" extension, greedy
     * steps of at most head_rows sequences find each argmax through it; off: lm_head + argmax */
    int greedy_head;
    const llmrt_argmax_head_ops *head_ops;
    llmrt_argmax_head *head; /* NULL: none */
    int32_t head_rows;
} qwen3_decoder;

/* Set up d (zeroed by the caller) for a create(): host, backend, quant, params, the fused ops
 * when fuse is on, and the checks of backend ops and quant entries. */
llmrt_status qwen3_decoder_init(qwen3_decoder *d, const llmrt_host *host, const char *who,
                                const llmrt_backend_ref *be, const llmrt_quant_ref *quant,
                                const llmrt_model_params *params, int fuse, int greedy_head,
                                llmrt_error *err);
/* d->attn [n_layers] (zeroed) after d->cfg is read and qwen3_check_layers passed. */
llmrt_status qwen3_decoder_alloc_layers(qwen3_decoder *d, llmrt_error *err);
/* model.embed_tokens (first, as transformers orders them) ... */
llmrt_status qwen3_decoder_load_embed(qwen3_decoder *d, const llmrt_checkpoint *ck,
                                      llmrt_error *err);
/* ... and, after the layers, model.norm and lm_head (embed_tokens when tied, as transformers
 * does even when lm_head.weight is also present); then waits for the copies. */
llmrt_status qwen3_decoder_load_head(qwen3_decoder *d, const llmrt_checkpoint *ck,
                                     llmrt_error *err);
/* The attention side's activations. */
llmrt_status qwen3_decoder_alloc_act(qwen3_decoder *d, llmrt_error *err);
/* greedy_head = auto and the backend takes this lm_head: d->head (else none, logged). */
void qwen3_decoder_make_head(qwen3_decoder *d);
void qwen3_decoder_free(qwen3_decoder *d);
/* model.h info() from the decoder: arch and the MLP width given. */
void qwen3_decoder_info(const qwen3_decoder *d, const char *arch, int32_t intermediate,
                        llmrt_model_info *out);
/* model.h forward and forward_argmax over the layers, calling d->mlp for each. */
llmrt_status qwen3_decoder_forward(qwen3_decoder *d, const llmrt_batch *batch,
                                   const llmrt_kv_cache *kv, float *logits, llmrt_error *err);
llmrt_status qwen3_decoder_forward_argmax(qwen3_decoder *d, const llmrt_batch *batch,
                                          const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                          llmrt_error *err);

/* ---- synthetic checkpoints (qwen3_synth_common.c) ---- */

/* Dense weights uniform(-a, a), a = 0.02 sqrt(3) (std 0.02, like initializer_range); norm
 * weights 1 + uniform(-0.05, 0.05). */
extern const llmrt_fill qwen3_fill_dense;
extern const llmrt_fill qwen3_fill_norm;

/* Token ids of a synthetic checkpoint: bos (-1: none) and eos ids. */
typedef struct qwen3_synth_ids {
    int32_t bos;
    int32_t eos[8];
    int n_eos;
} qwen3_synth_ids;

/* config.json's "dtype" / "torch_dtype" (torch. prefix allowed), when present. */
llmrt_status qwen3_synth_parse_dtype(json_t *root, llmrt_dtype *out, llmrt_error *err);
/* bos_token_id / eos_token_id of a base config.json. */
llmrt_status qwen3_synth_parse_ids(json_t *root, qwen3_synth_ids *ids, llmrt_error *err);
const char *qwen3_synth_dtype_name(llmrt_dtype d); /* "bfloat16", "float16", "float32" */
json_t *qwen3_synth_eos_json(const qwen3_synth_ids *ids, int as_list);
/* generation_config.json: greedy by default (a synthetic model has no tuned sampling). */
json_t *qwen3_synth_generation_json(const qwen3_synth_ids *ids);
/* Add json (taking its reference) as a file of the checkpoint. */
llmrt_status qwen3_synth_add_json(const llmrt_ckpt_writer *w, const char *name, json_t *j,
                                  llmrt_error *err);
/* A dense tensor [d0] (d1 <= 0) or [d0, d1]. */
llmrt_status qwen3_synth_add(const llmrt_ckpt_writer *w, const char *name, llmrt_dtype dt,
                             int64_t d0, int64_t d1, const llmrt_fill *f, llmrt_error *err);
/* A decoder linear: the quant's layout (quant_json from synth_config), or a dense [out, in]
 * weight when there is no quant or it keeps this linear dense. */
llmrt_status qwen3_synth_add_linear(const llmrt_synth_request *req, const char *quant_json,
                                    llmrt_dtype dtype, const llmrt_ckpt_writer *w,
                                    const char *prefix, int64_t in, int64_t out,
                                    llmrt_error *err);
/* quantization_config's text for the linears [n] through req->quant's synth_config (*dtype
 * in/out as there); *quant_json is malloc'd. */
llmrt_status qwen3_synth_quant_config(const llmrt_synth_request *req,
                                      const llmrt_synth_linear *linears, uint32_t n,
                                      llmrt_dtype *dtype, char **quant_json, llmrt_error *err);
/* The config.json keys of a Qwen3 config as the released checkpoints write them (attention
 * and shapes), set on j; quant_json (or NULL) becomes quantization_config. */
llmrt_status qwen3_synth_config_keys(json_t *j, const qwen3_config *c, const char *arch,
                                     const char *model_type, const qwen3_synth_ids *ids,
                                     llmrt_dtype dtype, const char *quant_json, llmrt_error *err);

#endif
