/* synth.h — synthetic checkpoints (`llmrt mkmodel`), built by plugins through a host writer
 * (since 1.1).
 *
 * Why: benchmarks and tests need checkpoints of real shapes (an 8B AWQ model is ~6 GB)
 * without downloading any. What goes into one is the model's business (tensor names,
 * shapes, config.json) and the quant format's (how a linear is stored, quantization_config);
 * how it is written is the host's: sharding as transformers does, streaming through fill
 * buffers on several threads, safetensors headers, the index, atomic renames. So a model
 * plugin describes the checkpoint — each tensor with a fill rule, each JSON file as text —
 * and the host writes it. Fill rules are data, not code: element i of a tensor is a pure
 * function of (the run's seed, the tensor's name, i), so the bytes never depend on threads
 * or chunking and every tensor can be regenerated alone. */
#ifndef LLMRT_SYNTH_H
#define LLMRT_SYNTH_H

#include "plugin.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum llmrt_fill_kind {
    /* Each element from 16 random bits r: u = (r + 0.5) / 65536, value =
     * scale * (center + half * (2u - 1)), stored in the tensor's float dtype (F32, F16, BF16,
     * F8_E4M3, F8_E5M2). A weight with std s: center 0, half s * sqrt(3), scale 1. */
    LLMRT_FILL_UNIFORM = 1,
    /* Random 32-bit words (dtype I32 or U32): e.g. packed 4-bit weights, every nibble uniform. */
    LLMRT_FILL_BITS = 2,
    /* The bytes given (data, bytes = the tensor's size), copied when the tensor is added. */
    LLMRT_FILL_DATA = 3
} llmrt_fill_kind;

typedef struct llmrt_fill {
    llmrt_fill_kind kind;
    double scale, center, half; /* UNIFORM */
    const char *same_as;        /* UNIFORM/BITS: draw from the stream of this tensor name
                                   instead of this tensor's own (a tied lm_head equal to
                                   embed_tokens); NULL: its own */
    const void *data;           /* DATA */
    size_t bytes;               /* DATA */
} llmrt_fill;

/* The host's writer, handed to synthesize(). Tensors are written in the order added (larger
 * element sizes first within a shard, for alignment); JSON files after every shard, and
 * config.json last, so a folder with a config.json holds a complete checkpoint. */
typedef struct llmrt_ckpt_writer {
    uint32_t struct_size;
    void *ctx;
    /* Add a tensor: name (unique), dtype, shape [ndim] (1..LLMRT_MAX_DIMS), fill rule. */
    llmrt_status (*add_tensor)(void *ctx, const char *name, llmrt_dtype dtype, int32_t ndim,
                               const int64_t *shape, const llmrt_fill *fill, llmrt_error *err);
    /* Add a JSON file of the model folder ("config.json", "generation_config.json", ...);
     * the text is copied. */
    llmrt_status (*add_json)(void *ctx, const char *file_name, const char *json_text,
                             llmrt_error *err);
} llmrt_ckpt_writer;

/* A named shape a model plugin can synthesize ("qwen3-8b"). Frozen. */
typedef struct llmrt_synth_preset {
    const char *name;
    const char *description; /* one line: "Qwen3-8B shapes (36 layers, hidden 4096)" */
} llmrt_synth_preset;

/* One linear layer as the model will load it, for a quant plugin's synth_config. Frozen. */
typedef struct llmrt_synth_linear {
    const char *prefix; /* "model.layers.0.mlp.down_proj" */
    int64_t in_features, out_features;
} llmrt_synth_linear;

typedef struct llmrt_quant_vtable llmrt_quant_vtable;

/* What `llmrt mkmodel` asks of a model plugin. */
typedef struct llmrt_synth_request {
    uint32_t struct_size;
    const char *preset;           /* a preset's name, or NULL when base_config_json is set */
    const char *base_config_json; /* config.json text to take the shapes from (--config) */
    llmrt_dtype dtype;            /* dense tensors; INVALID: the quant's, else the config's,
                                     else the preset's */
    int32_t tie;                  /* tie_word_embeddings: -1 as the preset/config says, 0, 1 */
    int32_t tied_lm_head;         /* tied: still write lm_head.weight (= embed_tokens) */
    const llmrt_quant_vtable *quant; /* NULL: a dense checkpoint */
    const char *quant_name;
    const llmrt_section *quant_opts; /* the quant's options (--quant-opt K=V: group_size=...) */
    const llmrt_section *model_opts; /* the model's options (--model-opt K=V) */
} llmrt_synth_request;

#ifdef __cplusplus
}
#endif
#endif
