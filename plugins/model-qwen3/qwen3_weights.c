/* qwen3_weights.c — load a Qwen3 checkpoint's tensors into backend memory, in transformers'
 * order: embed_tokens; per layer the attention half (plugins/qwen3-common: input_layernorm,
 * q/k/v, q_norm, k_norm, o_proj, post_attention_layernorm) and the dense MLP (gate/up,
 * down), each moved into host memory right after it loads when it is an offloaded one
 * (qwen3_offload.c, memory.cpu_offload_gb); then model.norm and lm_head. The loaders
 * (quantized through the quant plugin, or dense; fused projections where the model uses fused
 * ops) are qwen3-common's. */
#include <stdio.h>
#include <stdlib.h>

#include "qwen3.h"

llmrt_status qwen3_weights_load(llmrt_model *m, const llmrt_checkpoint *ck, llmrt_error *err)
{
    qwen3_decoder *d = &m->d;
    const qwen3_config *c = &d->cfg;
    llmrt_status st;
    if ((st = qwen3_decoder_load_embed(d, ck, err)))
        return st;
    for (int32_t i = 0; i < c->n_layers; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "model.layers.%d.mlp", (int)i);
        if ((st = qwen3_attn_load(&d->rt, ck, c, i, &d->attn[i], err)) ||
            (st = qwen3_mlp_load(&d->rt, ck, prefix, c->hidden, c->intermediate,
                                 "intermediate_size", &m->mlp[i], err)) ||
            (st = qwen3_offload_layer(&d->rt, c->n_layers, i, &d->attn[i], &m->mlp[i], err)))
            return st;
    }
    return qwen3_decoder_load_head(d, ck, err);
}

void qwen3_weights_free(llmrt_model *m)
{
    for (int32_t i = 0; m->mlp && i < m->d.cfg.n_layers; i++)
        qwen3_mlp_free(&m->d.rt, &m->mlp[i]);
    qwen3_decoder_free(&m->d);
}
