/* quant.h — weight quantization plugins (awq, ...).
 *
 * Why: a quantization format is a loader (which tensors, what layout) plus kernels for
 * y = x·Wᵀ on each backend it supports. The model plugin asks the quant plugin for every
 * linear layer; a linear the checkpoint keeps dense (NOT_FOUND) is loaded densely. */
#ifndef LLMRT_QUANT_H
#define LLMRT_QUANT_H

#include "backend.h"
#include "checkpoint.h"
#include "plugin.h"
#include "synth.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_quant llmrt_quant;     /* a quant-plugin instance, opaque */
/* (synth.h declares `struct llmrt_quant_vtable` for llmrt_synth_request) */
typedef struct llmrt_qlinear llmrt_qlinear; /* one loaded quantized linear, opaque */
typedef struct llmrt_qgroup llmrt_qgroup;   /* (since 1.2) linears run as one grouped op, opaque */

/* Folds for linear_forward_fused: elementwise work after y = x · Wᵀ that the same launch does. */
enum {
    /* the linear is [gate; up] (out / 2 rows each): y [n, out / 2] = silu(gate) * up, as the
     * backend's swiglu (saves the gate|up buffer's round trip and a launch per MLP) */
    LLMRT_FUSE_OUT_SWIGLU = 1u << 0,
};

/* (since 1.3) A mover of weight buffers (linear_move): fn moves `bytes` at device address dev
 * and sets *now to where kernels read them from then on. */
typedef struct llmrt_buffer_mover {
    void *ctx;
    llmrt_status (*fn)(void *ctx, void *dev, size_t bytes, void **now, llmrt_error *err);
} llmrt_buffer_mover;

typedef struct llmrt_quant_vtable {
    uint32_t struct_size; /* (required) */
    /* (required) quant_config_json: config.json's "quantization_config" object as JSON text.
     * LLMRT_OK: this plugin handles it. LLMRT_ERR_NOT_FOUND: not this plugin's format.
     * LLMRT_ERR_UNSUPPORTED: this plugin's family, but a variant it rejects (err says why:
     * "bits=8", "version gemv", ...). */
    llmrt_status (*probe)(const char *quant_config_json, llmrt_error *err);
    /* (required) The plugin chooses its kernels by what the backend offers (an extension such
     * as "llmrt.cuda", or host-addressable memory), never by the backend's name;
     * LLMRT_ERR_UNSUPPORTED when it has none for this backend. */
    llmrt_status (*create)(const llmrt_host *host, const llmrt_section *cfg,
                           const char *quant_config_json, const llmrt_backend_ref *backend,
                           llmrt_quant **out, llmrt_error *err);
    void (*destroy)(llmrt_quant *q); /* (required) */
    /* (required) Load the linear at `prefix` ("model.layers.0.self_attn.q_proj"), logically [out, in].
     * LLMRT_ERR_NOT_FOUND when the checkpoint keeps this linear dense (the model then loads
     * prefix.weight); other errors name the tensor and what was wrong. */
    llmrt_status (*linear_load)(llmrt_quant *q, const llmrt_checkpoint *ckpt, const char *prefix,
                                int64_t in_features, int64_t out_features, llmrt_qlinear **out,
                                llmrt_error *err);
    void (*linear_free)(llmrt_quant *q, llmrt_qlinear *l); /* (required) */
    /* (required) y [n, out] = x [n, in] · Wᵀ, fp32 accumulation, enqueued on the backend's stream. */
    llmrt_status (*linear_forward)(llmrt_quant *q, const llmrt_qlinear *l, float *y,
                                   const float *x, int32_t n, llmrt_error *err);
    /* (optional, since 1.0) Bytes the linear occupies on the backend (for load reports). */
    uint64_t (*linear_bytes)(llmrt_quant *q, const llmrt_qlinear *l);
    /* (optional, since 1.0) Dense f32 [out, in] on the host, for tests and references. */
    llmrt_status (*linear_dequant)(llmrt_quant *q, const llmrt_qlinear *l, float *out,
                                   llmrt_error *err);

    /* (optional, since 1.0) Load n_parts linears that read the same input (q/k/v, gate/up) as ONE linear
     * [sum(out_features[i]), in]: its output row holds part 0's outputs, then part 1's, ...
     * so one launch replaces n_parts. Same tensors and checks as linear_load for each prefix.
     * LLMRT_ERR_UNSUPPORTED when the parts cannot be fused (the caller then loads them one by
     * one); LLMRT_ERR_NOT_FOUND when some part is dense in the checkpoint. */
    llmrt_status (*linear_load_fused)(llmrt_quant *q, const llmrt_checkpoint *ckpt,
                                      const char *const *prefixes, int32_t n_parts,
                                      int64_t in_features, const int64_t *out_features,
                                      llmrt_qlinear **out, llmrt_error *err);

    /* (optional, since 1.0; with linear_fused_max_rows) linear_forward with the folds in `flags` (LLMRT_FUSE_*), for
     * 1 <= n <= linear_fused_max_rows(q, l, flags); 0 there means never (the caller then runs
     * linear_forward and the separate ops). */
    llmrt_status (*linear_forward_fused)(llmrt_quant *q, const llmrt_qlinear *l, float *y,
                                         const float *x, int32_t n, uint32_t flags,
                                         llmrt_error *err);
    int32_t (*linear_fused_max_rows)(llmrt_quant *q, const llmrt_qlinear *l, uint32_t flags);

    /* ---- synthetic checkpoints (optional, since 1.1: both or neither; synth.h) ---- */
    /* Choose and check the format's parameters for a model whose quantizable linears are
     * linears [n] (the options in opts, e.g. group_size, else defaults that suit every
     * linear), and write config.json's "quantization_config" object as JSON text to out.
     * *dtype is the dense tensors' dtype: INVALID asks the plugin for its choice; a dtype the
     * format cannot go with is an error that says which it needs. Unknown options and shapes
     * the format cannot store are errors naming the option or the linear. No backend. */
    llmrt_status (*synth_config)(const llmrt_section *opts, const llmrt_synth_linear *linears,
                                 uint32_t n, llmrt_dtype *dtype, const llmrt_sink *out,
                                 llmrt_error *err);
    /* Add the tensors of the linear at `prefix`, logically [out, in], as this format stores
     * them under quant_config_json (what synth_config wrote), with values that dequantize to
     * a weight of std ~0.02. LLMRT_ERR_NOT_FOUND: the format keeps this linear dense (the
     * model then writes prefix.weight itself). */
    llmrt_status (*synth_linear)(const char *quant_config_json, const llmrt_ckpt_writer *w,
                                 const char *prefix, int64_t in_features, int64_t out_features,
                                 llmrt_error *err);

    /* ---- grouped linears: a mixture-of-experts layer's experts (optional, since 1.2: all
     * three or none) ----
     * A MoE layer sends each token row to a few of its experts, chosen on the device; only the
     * quant plugin knows how its experts' weights are laid out, so it runs them all in one
     * call that reads each row's expert from device memory: no host synchronisation, and a
     * step reads only the chosen experts' weights.
     *
     * Group linears [n] (loaded by this instance; each may be NULL: the rows of that index are
     * computed by someone else, e.g. the dense experts of a partly quantized layer) that share
     * in_features and out_features. max_rows bounds n_rows of every forward (the plugin sizes
     * its scratch here: forward allocates nothing). flags: the folds (LLMRT_FUSE_*) forward will
     * ask for; LLMRT_ERR_UNSUPPORTED when the plugin cannot group these linears or fold that
     * for them (the caller then asks without the fold). The linears outlive the group.
     * Allocates and may synchronise: not inside a graph capture. */
    llmrt_status (*linear_group_create)(llmrt_quant *q, const llmrt_qlinear *const *linears,
                                        int32_t n, int32_t max_rows, uint32_t flags,
                                        llmrt_qgroup **out, llmrt_error *err);
    /* For every row r < n_rows (n_rows <= max_rows) whose linear i = row_linear[r] is >= 0 and
     * not NULL in the group:
     *   y[r, :] = x[row_src ? row_src[r] : r, :] · W_iᵀ        y [n_rows, out], x [.., in]
     * with the folds in flags (a subset of the group's; LLMRT_FUSE_OUT_SWIGLU: each W_i is
     * [gate; up] and y [n_rows, out / 2] = silu(gate) * up). Other rows of y are left as they
     * were. row_linear and row_src ([n_rows]) are device arrays read on the device: the call
     * never synchronises with the host and can be captured in a graph. linear_start (device,
     * [n + 1]) or NULL: when given, the rows are sorted by linear — linear i's rows are
     * [linear_start[i], linear_start[i + 1]), rows after linear_start[n] are skipped — so the
     * plugin may read each linear's weights once for all of its rows. Each row's values do not
     * depend on the other rows of the call, their number or their order. Enqueued on the
     * backend's stream, fp32 accumulation. */
    llmrt_status (*linear_forward_grouped)(llmrt_quant *q, const llmrt_qgroup *g, float *y,
                                           const float *x, const int32_t *row_linear,
                                           const int32_t *row_src, const int32_t *linear_start,
                                           int32_t n_rows, uint32_t flags, llmrt_error *err);
    void (*linear_group_destroy)(llmrt_quant *q, llmrt_qgroup *g);

    /* ---- CPU weight offload (optional, since 1.3; memory.h offload_*) ----
     * Hand each device buffer that holds l's weights (not scratch shared between linears) to
     * mv->fn. When fn sets *now to another address, the mover took the buffer (and freed dev):
     * the plugin reads the weights at *now from then on and never frees it; when *now == dev
     * the buffer stays the plugin's (a mover that only measures). Load time only, before any
     * group is made of l. */
    llmrt_status (*linear_move)(llmrt_quant *q, llmrt_qlinear *l, const llmrt_buffer_mover *mv,
                                llmrt_error *err);
} llmrt_quant_vtable;


#define LLMRT_QUANT_REQUIRED(X)                                                              \
    X(probe) X(create) X(destroy) X(linear_load) X(linear_free) X(linear_forward)

typedef struct llmrt_quant_ref {
    const llmrt_quant_vtable *vt;
    llmrt_quant *q;
    const char *name; /* "awq" */
} llmrt_quant_ref;

#ifdef __cplusplus
}
#endif
#endif
