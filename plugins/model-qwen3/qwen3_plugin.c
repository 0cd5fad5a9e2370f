/* qwen3_plugin.c — the model-qwen3 plugin's descriptor and vtable: probe, create (config,
 * backend op check, the backend's extensions, weights, scratch, the greedy argmax_head),
 * destroy, info, forward, forward_argmax. The decoder itself is plugins/qwen3-common's; this
 * plugin gives it a dense SwiGLU MLP in every layer. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3.h"

static llmrt_status q3_probe(const char *config_json, llmrt_error *err)
{
    int is_json = 0;
    if (qwen3_config_matches(config_json, &is_json))
        return LLMRT_OK;
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, is_json ? "architectures does not list " QWEN3_ARCH
                                                         : "config.json is not a JSON object");
}

/* [model.qwen3]: declared here, validated (and filled in with defaults) by the host. */
static const llmrt_key qwen3_keys[] = {
    {"fuse", LLMRT_KEY_ENUM, "auto", "auto|off",
     "Load q/k/v and gate/up as one linear each and use the fused small ops when the backend "
     "has them (off: separate ones, for A/B).",
     0},
    {"greedy_head", LLMRT_KEY_ENUM, "auto", "auto|off",
     "Greedy steps find their argmax through the backend's argmax_head (CUDA: an int8 copy "
     "of lm_head screens up to 8 sequences, the lm_head gemm screens larger batches, and the "
     "candidates are recomputed exactly as for one row: each row's id is the one it gets "
     "alone; vocab x hidden bytes, plus vocab x 4 bytes per sequence, more device memory). "
     "off: lm_head + argmax always.",
     0},
};
#define N_QWEN3_KEYS ((uint32_t)(sizeof qwen3_keys / sizeof qwen3_keys[0]))

/* The MLPs' activations (T = max_tokens): buffers only the separate or only the fused
 * projections use are sized 0 when no layer needs them (gate and up alone are 200 MB at 2048
 * tokens for Qwen3-8B). */
static llmrt_status alloc_mlp_act(llmrt_model *m, llmrt_error *err)
{
    const qwen3_config *c = &m->d.cfg;
    const size_t T = (size_t)m->d.params.max_tokens, I = (size_t)c->intermediate;
    int sep_gu = 0, fused_gu = 0;
    for (int32_t l = 0; l < c->n_layers; l++)
        sep_gu |= !m->mlp[l].fused_gate_up, fused_gu |= m->mlp[l].fused_gate_up;
    const size_t n[] = {sep_gu ? T * I : 0, sep_gu ? T * I : 0, T * I, fused_gu ? T * 2 * I : 0};
    float **dst[] = {&m->act.gate, &m->act.up, &m->act.act, &m->act.gu};
    enum { NB = sizeof n / sizeof n[0] };
    size_t bytes[NB], off[NB], total = 0;
    for (size_t i = 0; i < NB; i++)
        bytes[i] = n[i] * sizeof(float);
    llmrt_status st = qwen3_alloc_block(&m->d.rt, NB, bytes, off, &m->act_base, &total, err);
    if (st) {
        m->act_base = NULL;
        char why[LLMRT_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return llmrt_fail(err, st,
                          "qwen3 MLP activations for %zu tokens (intermediate_size %zu; %.1f "
                          "MiB): %s",
                          T, I, (double)total / (1 << 20), why);
    }
    for (size_t i = 0; i < NB; i++)
        *dst[i] = n[i] ? (float *)((char *)m->act_base + off[i]) : NULL;
    return LLMRT_OK;
}

/* Layer 0's projections once at prefill sizes (qwen3_warm_up): every layer has its shapes. */
static llmrt_status warm_up(llmrt_model *m, llmrt_error *err)
{
    if (m->d.cfg.n_layers < 1)
        return LLMRT_OK;
    const qwen3_attn *A = &m->d.attn[0];
    const qwen3_mlp *M = &m->mlp[0];
    const qwen3_act *s = &m->d.s;
    const qwen3_linear *ls[7];
    float *ys[7];
    const float *xs[7];
    int k = 0;
#define ADD(l, y, x) (ls[k] = (l), ys[k] = (y), xs[k++] = (x))
    if (A->fused_qkv) {
        ADD(&A->qkv_proj, s->qkv, s->xn);
    } else {
        ADD(&A->q_proj, s->q, s->xn);
        ADD(&A->k_proj, s->k, s->xn);
        ADD(&A->v_proj, s->v, s->xn);
    }
    ADD(&A->o_proj, s->proj, s->attn);
    if (M->fused_gate_up) {
        ADD(&M->gate_up_proj, m->act.gu, s->xn);
    } else {
        ADD(&M->gate_proj, m->act.gate, s->xn);
        ADD(&M->up_proj, m->act.up, s->xn);
    }
    ADD(&M->down_proj, s->proj, m->act.act);
#undef ADD
    return qwen3_warm_up(&m->d.rt, ls, ys, xs, k, m->d.params.max_tokens, err);
}

/* The fewest rows the quant plugin folds SwiGLU into a layer's gate/up projection for (0 when
 * it does not, or some layer's gate/up is not one fused quantized linear). */
static int32_t glu_rows(const llmrt_model *m)
{
    int32_t rows = m->d.params.max_tokens;
    for (int32_t l = 0; l < m->d.cfg.n_layers && rows > 0; l++) {
        const int32_t r = qwen3_mlp_glu_rows(&m->d.rt, &m->mlp[l]);
        rows = r < rows ? r : rows;
    }
    return rows > 0 ? rows : 0;
}

static void q3_destroy(llmrt_model *m)
{
    if (!m)
        return;
    qwen3_weights_free(m);
    if (m->act_base)
        m->d.rt.be.vt->dev_free(m->d.rt.be.b, m->act_base);
    free(m->mlp);
    free(m);
}

static llmrt_status q3_create(const llmrt_host *host, const llmrt_section *cfg,
                              const llmrt_checkpoint *ckpt, const llmrt_backend_ref *backend,
                              const llmrt_quant_ref *quant, const llmrt_model_params *params,
                              llmrt_model **out, llmrt_error *err)
{
    llmrt_status st;
    *out = NULL;
    if (!ckpt || !backend || !backend->vt || !params)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "qwen3 create: checkpoint, backend and params are required");
    if (params->max_tokens < 1 || params->max_seqs < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "qwen3 create: max_tokens (%d) and max_seqs (%d) must be at least 1",
                          params->max_tokens, params->max_seqs);
    int fuse = 1, greedy_head = 1;
    if ((st = qwen3_key_auto_off(cfg, qwen3_keys, N_QWEN3_KEYS, "model.qwen3", "fuse",
                                 "fused ops and projections", &fuse, err)) ||
        (st = qwen3_key_auto_off(cfg, qwen3_keys, N_QWEN3_KEYS, "model.qwen3", "greedy_head",
                                 "the argmax_head ops", &greedy_head, err)))
        return st;

    llmrt_model *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "qwen3 create: out of memory");
    if ((st = qwen3_decoder_init(&m->d, host, "qwen3", backend, quant, params, fuse, greedy_head,
                                 err))) {
        free(m);
        return st;
    }
    m->d.mlp = qwen3_dense_mlp;
    m->d.mlp_ctx = m;
    if ((st = qwen3_config_parse(ckpt->config_json, &m->d.cfg, err)) ||
        (st = qwen3_check_layers(&m->d.cfg, ckpt, err)) ||
        (st = qwen3_decoder_alloc_layers(&m->d, err)))
        goto fail;
    m->mlp = calloc((size_t)m->d.cfg.n_layers, sizeof *m->mlp);
    if (!m->mlp) {
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "qwen3 create: out of memory");
        goto fail;
    }
    if ((st = qwen3_weights_load(m, ckpt, err)) || (st = qwen3_decoder_alloc_act(&m->d, err)) ||
        (st = alloc_mlp_act(m, err)))
        goto fail;
    qwen3_decoder_make_head(&m->d);
    if ((st = warm_up(m, err)))
        goto fail;
    m->glu_rows = glu_rows(m);
    *out = m;
    return LLMRT_OK;
fail:
    q3_destroy(m);
    return st;
}

static void q3_info(llmrt_model *m, llmrt_model_info *out)
{
    qwen3_decoder_info(&m->d, QWEN3_ARCH, m->d.cfg.intermediate, out);
}

static llmrt_status q3_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                               float *logits, llmrt_error *err)
{
    return qwen3_decoder_forward(&m->d, batch, kv, logits, err);
}

static llmrt_status q3_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                      const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                      llmrt_error *err)
{
    return qwen3_decoder_forward_argmax(&m->d, batch, kv, logits, out, err);
}

static const llmrt_model_vtable qwen3_vtable = {
    .struct_size = sizeof(llmrt_model_vtable),
    .probe = q3_probe,
    .create = q3_create,
    .destroy = q3_destroy,
    .info = q3_info,
    .forward = q3_forward,
    .forward_argmax = q3_forward_argmax,
    .chat = &qwen3_chat_vtable,
    .synth_preset = qwen3_synth_preset,
    .synthesize = qwen3_synthesize,
};

static const llmrt_plugin_desc qwen3_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_MODEL,
    .name = "qwen3",
    .version = "1.0.0",
    .description = "Qwen3 dense decoder (architectures: " QWEN3_ARCH "); bf16/f16/f32 weights, "
                   "quantized linears through a quant plugin",
    .license = "MIT",
    .vtable = &qwen3_vtable,
    .init = NULL,
    .keys = qwen3_keys,
    .n_keys = N_QWEN3_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &qwen3_desc : NULL;
}
