/* qwen3_forward.c — the MLP of a dense Qwen3 layer, as the shared decoder's callback
 * (plugins/qwen3-common/qwen3_decoder.c runs everything around it):
 *   proj = (silu(xn · Wgᵀ) * (xn · Wuᵀ)) · Wdᵀ
 * gate/up as one fused projection and the backend's swiglu when the model uses fused ops, or —
 * at decode sizes where the quant plugin folds it (m->glu_rows) — the gate/up projection
 * writes silu(gate) * up itself. */
#include "qwen3.h"

llmrt_status qwen3_dense_mlp(void *ctx, int32_t layer, int32_t T, llmrt_error *err)
{
    llmrt_model *m = ctx;
    return qwen3_mlp_forward(&m->d.rt, &m->mlp[layer], &m->act, m->d.s.proj, m->d.s.xn, T,
                             m->glu_rows, err);
}
