/* moe_plugin.c — the model-qwen3-moe plugin's descriptor and vtable: probe, create (config,
 * the backend's ops and extensions, which code runs the plugin's own ops, weights, scratch,
 * the greedy argmax_head), destroy, info, forward, forward_argmax, the chat format and the
 * synthetic checkpoints. The decoder is plugins/qwen3-common's; this plugin gives it the
 * Qwen3-MoE MLPs (moe.h).
 *
 * Which code runs the routing, the combine and the dense experts: the plugin's CUDA kernels
 * on a backend that offers the "llmrt.cuda" extension (and this build has them), else its CPU
 * code on a backend whose device memory is host memory — by what the backend offers, never
 * by its name. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"

#ifdef MOE_HAVE_CUDA
#include <llmrt/cuda.h>

#include "moe_cuda.h"
#else
/* llmrt/cuda.h needs the CUDA toolkit's headers; a build without them needs only the
 * extension's name, to tell a backend that offers it why this build cannot run there. */
#define LLMRT_EXT_CUDA "llmrt.cuda"
#define LLMRT_EXT_CUDA_VERSION 1
#endif

static llmrt_status moe_probe(const char *config_json, llmrt_error *err)
{
    int is_json = 0;
    if (moe_config_matches(config_json, &is_json))
        return LLMRT_OK;
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, is_json ? "architectures does not list " MOE_ARCH
                                                         : "config.json is not a JSON object");
}

/* [model.qwen3_moe]: declared here, validated (and filled in with defaults) by the host. */
static const llmrt_key moe_keys[] = {
    {"fuse", LLMRT_KEY_ENUM, "auto", "auto|off",
     "Load q/k/v, gate/up (dense layers) and each expert's gate/up as one linear each, and use "
     "the backend's fused small ops when it has them (off: separate ones, for A/B).",
     0},
    {"greedy_head", LLMRT_KEY_ENUM, "auto", "auto|off",
     "Greedy steps find their argmax through the backend's argmax_head (CUDA: an int8 copy "
     "of lm_head screens up to 8 sequences, the lm_head gemm screens larger batches, and the "
     "candidates are recomputed exactly as for one row: each row's id is the one it gets "
     "alone; vocab x hidden bytes, plus vocab x 4 bytes per sequence, more device memory). "
     "off: lm_head + argmax always.",
     0},
};
#define N_MOE_KEYS ((uint32_t)(sizeof moe_keys / sizeof moe_keys[0]))

static llmrt_status choose_target(const llmrt_backend_ref *be, moe_target *out, llmrt_error *err)
{
    const char *name = be->name ? be->name : "?";
#ifdef MOE_HAVE_CUDA
    const char *no_cuda = "";
    if (llmrt_cuda_ext_of(be)) {
        *out = MOE_ON_CUDA;
        return LLMRT_OK;
    }
#else
    const char *no_cuda = "; this build of model-qwen3-moe has no CUDA kernels either";
#endif
    if (be->vt->caps && (be->vt->caps(be->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE)) {
        *out = MOE_ON_CPU;
        return LLMRT_OK;
    }
#ifndef MOE_HAVE_CUDA
    if (llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_CUDA, LLMRT_EXT_CUDA_VERSION))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "model-qwen3-moe was built without CUDA: backend '%s' offers the \"%s\" "
                          "extension, but this build has no CUDA kernels for routing and the "
                          "experts (rebuild with a CUDA toolkit, LLMRT_CUDA=ON)",
                          name, LLMRT_EXT_CUDA);
#endif
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                      "the " MOE_PLUGIN " model has no code for backend '%s': it offers neither "
                      "the \"%s\" extension (version %d, for the CUDA kernels) nor "
                      "host-addressable device memory (caps LLMRT_BACKEND_CAP_HOST_IS_DEVICE, for "
                      "the CPU code)%s",
                      name, LLMRT_EXT_CUDA, LLMRT_EXT_CUDA_VERSION, no_cuda);
}

/* The sparse blocks' scratch (moe_scratch) and the dense layers' MLP activations, sized for
 * max_tokens rows; buffers no layer needs are sized 0. */
static llmrt_status alloc_scratch(llmrt_model *m, llmrt_error *err)
{
    const moe_config *c = &m->cfg;
    const size_t T = (size_t)m->d.params.max_tokens, K = (size_t)c->top_k;
    const size_t E = (size_t)c->n_experts, N = T * K, H = (size_t)c->base.hidden;
    const size_t I = (size_t)c->moe_inter, DI = (size_t)c->base.intermediate;
    int any_sparse = 0, need_gu = 0, need_sep = 0, dense_sep = 0, dense_fused = 0, any_dense = 0;
    for (int32_t l = 0; l < c->base.n_layers; l++) {
        if (m->sparse[l]) {
            const moe_block *B = &m->moe[l];
            any_sparse = 1;
            need_sep |= !B->fused_gate_up;
            need_gu |= B->fused_gate_up && B->gate_up.qgroup &&
                       !(B->gate_up.qflags & LLMRT_FUSE_OUT_SWIGLU);
        } else {
            any_dense = 1;
            dense_sep |= !m->mlp[l].fused_gate_up, dense_fused |= m->mlp[l].fused_gate_up;
        }
    }
    const int cpu = m->target == MOE_ON_CPU;
    const size_t F = sizeof(float), Z = sizeof(int32_t);
    /* moe_scratch's buffers in order, then the dense MLPs' (qwen3_mlp_act) */
    const size_t S = any_sparse ? 1 : 0;
    const size_t bytes[] = {S * T * E * F, S * N * Z, S * N * F, S * N * Z, S * N * Z,
                            S * (E + 1) * Z, S * N * Z, S * N * I * F, need_gu ? N * 2 * I * F : 0,
                            need_sep ? N * I * F : 0, need_sep ? N * I * F : 0, S * N * H * F,
                            cpu ? S * N * H * F : 0, cpu ? S * N * 2 * I * F : 0, cpu ? S * E * Z : 0,
                            dense_sep ? T * DI * F : 0, dense_sep ? T * DI * F : 0,
                            any_dense ? T * DI * F : 0, dense_fused ? T * 2 * DI * F : 0};
    enum { NB = sizeof bytes / sizeof bytes[0] };
    size_t off[NB], total = 0;
    llmrt_status st = qwen3_alloc_block(&m->d.rt, NB, bytes, off, &m->ms.base, &total, err);
    if (st) {
        m->ms.base = NULL;
        char why[LLMRT_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return llmrt_fail(err, st,
                          MOE_PLUGIN " MLP activations for %zu tokens (num_experts %zu, "
                          "num_experts_per_tok %zu, moe_intermediate_size %zu, hidden_size %zu, "
                          "intermediate_size %zu; %.1f MiB): %s",
                          T, E, K, I, H, DI, (double)total / (1 << 20), why);
    }
    char *b = m->ms.base;
#define AT(i, type) (bytes[i] ? (type *)(b + off[i]) : NULL)
    moe_scratch *x = &m->ms;
    x->router_logits = AT(0, float), x->topk_id = AT(1, int32_t), x->topk_w = AT(2, float);
    x->row_expert = AT(3, int32_t), x->row_src = AT(4, int32_t), x->expert_start = AT(5, int32_t);
    x->row_of = AT(6, int32_t), x->act = AT(7, float), x->gu = AT(8, float);
    x->gate = AT(9, float), x->up = AT(10, float), x->rows = AT(11, float), x->xg = AT(12, float);
    x->yg = AT(13, float), x->cursor = AT(14, int32_t);
    m->mlp_act.gate = AT(15, float), m->mlp_act.up = AT(16, float);
    m->mlp_act.act = AT(17, float), m->mlp_act.gu = AT(18, float);
#undef AT
    return LLMRT_OK;
}

/* On an asynchronous (GPU) backend, layer 0's attention projections, the first sparse
 * layer's router and the first dense layer's MLP once at prefill sizes (qwen3_warm_up):
 * every layer of a kind has the same shapes. */
static llmrt_status warm_up(llmrt_model *m, llmrt_error *err)
{
    if (m->d.cfg.n_layers < 1)
        return LLMRT_OK;
    const qwen3_attn *A = &m->d.attn[0];
    const qwen3_act *s = &m->d.s;
    const qwen3_linear *ls[9];
    float *ys[9];
    const float *xs[9];
    qwen3_linear router = {0};
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
    int sparse_done = 0, dense_done = 0;
    for (int32_t l = 0; l < m->d.cfg.n_layers; l++) {
        if (m->sparse[l] && !sparse_done) {
            router.w = m->moe[l].router;
            ADD(&router, m->ms.router_logits, s->xn);
            sparse_done = 1;
        } else if (!m->sparse[l] && !dense_done) {
            const qwen3_mlp *M = &m->mlp[l];
            if (M->fused_gate_up) {
                ADD(&M->gate_up_proj, m->mlp_act.gu, s->xn);
            } else {
                ADD(&M->gate_proj, m->mlp_act.gate, s->xn);
                ADD(&M->up_proj, m->mlp_act.up, s->xn);
            }
            ADD(&M->down_proj, s->proj, m->mlp_act.act);
            dense_done = 1;
        }
    }
#undef ADD
    return qwen3_warm_up(&m->d.rt, ls, ys, xs, k, m->d.params.max_tokens, err);
}

/* The dense layers' SwiGLU fold limit, as model-qwen3 computes it over its layers. */
static int32_t glu_rows(const llmrt_model *m)
{
    int32_t rows = m->d.params.max_tokens;
    for (int32_t l = 0; l < m->d.cfg.n_layers && rows > 0; l++) {
        if (m->sparse[l])
            continue;
        const int32_t r = qwen3_mlp_glu_rows(&m->d.rt, &m->mlp[l]);
        rows = r < rows ? r : rows;
    }
    return rows > 0 ? rows : 0;
}

static void moe_destroy(llmrt_model *m)
{
    if (!m)
        return;
    if (m->d.rt.be.vt) {
        moe_weights_free(m);
        if (m->ms.base)
            m->d.rt.be.vt->dev_free(m->d.rt.be.b, m->ms.base);
    }
#ifdef MOE_HAVE_CUDA
    if (m->cuda)
        moe_cuda_destroy(m->cuda);
#endif
    free(m->sparse);
    free(m->mlp);
    free(m->moe);
    moe_config_free(&m->cfg);
    free(m);
}

/* Shapes the plugin's kernels take, checked before anything is loaded. */
static llmrt_status check_limits(const llmrt_model *m, llmrt_error *err)
{
    const moe_config *c = &m->cfg;
    if ((int64_t)m->d.params.max_tokens * (c->top_k > 0 ? c->top_k : 1) > INT32_MAX)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          MOE_PLUGIN ": max_tokens (%d) x num_experts_per_tok (%d) rows do not "
                          "fit 32-bit row indices",
                          m->d.params.max_tokens, c->top_k);
#ifdef MOE_HAVE_CUDA
    if (m->target == MOE_ON_CUDA &&
        (c->n_experts > MOE_CUDA_MAX_EXPERTS || c->top_k > MOE_CUDA_MAX_TOPK))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "config.json: num_experts = %d, num_experts_per_tok = %d: the "
                          MOE_PLUGIN " CUDA kernels take up to %d experts and a top-k up to %d",
                          c->n_experts, c->top_k, MOE_CUDA_MAX_EXPERTS, MOE_CUDA_MAX_TOPK);
#endif
    return LLMRT_OK;
}

static llmrt_status moe_create(const llmrt_host *host, const llmrt_section *cfg,
                               const llmrt_checkpoint *ckpt, const llmrt_backend_ref *backend,
                               const llmrt_quant_ref *quant, const llmrt_model_params *params,
                               llmrt_model **out, llmrt_error *err)
{
    llmrt_status st;
    *out = NULL;
    if (!ckpt || !backend || !backend->vt || !params)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          MOE_PLUGIN " create: checkpoint, backend and params are required");
    if (params->max_tokens < 1 || params->max_seqs < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          MOE_PLUGIN " create: max_tokens (%d) and max_seqs (%d) must be at least 1",
                          params->max_tokens, params->max_seqs);
    int fuse = 1, greedy_head = 1;
    if ((st = qwen3_key_auto_off(cfg, moe_keys, N_MOE_KEYS, "model." MOE_PLUGIN, "fuse",
                                 "fused ops and projections", &fuse, err)) ||
        (st = qwen3_key_auto_off(cfg, moe_keys, N_MOE_KEYS, "model." MOE_PLUGIN, "greedy_head",
                                 "the argmax_head ops", &greedy_head, err)))
        return st;

    if (params->offload) /* its experts are grouped on the device (linear_group_create) */
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "memory.cpu_offload_gb: the " MOE_PLUGIN " model plugin does not "
                          "offload weights to host memory; set memory.cpu_offload_gb = 0");
    llmrt_model *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, MOE_PLUGIN " create: out of memory");
    m->fuse = fuse;
    if ((st = qwen3_decoder_init(&m->d, host, MOE_PLUGIN, backend, quant, params, fuse,
                                 greedy_head, err)) ||
        (st = choose_target(backend, &m->target, err)))
        goto fail;
    m->d.mlp = moe_mlp;
    m->d.mlp_ctx = m;
    if ((st = moe_config_parse(ckpt->config_json, &m->cfg, err)))
        goto fail;
    m->d.cfg = m->cfg.base;
    if ((st = qwen3_check_layers(&m->d.cfg, ckpt, err)) || (st = check_limits(m, err)))
        goto fail;
    {
        /* tensor parallel: every expert sharded like a dense MLP (moe_intermediate_size per
         * rank), the dense layers' MLPs too; the router whole on every rank */
        int any_dense = 0;
        for (int32_t l = 0; l < m->d.cfg.n_layers; l++)
            any_dense |= !moe_layer_is_sparse(&m->cfg, l);
        int32_t *const widths[] = {&m->cfg.moe_inter, &m->d.cfg.intermediate};
        static const char *const width_keys[] = {"moe_intermediate_size", "intermediate_size"};
        if ((st = qwen3_tp_init(&m->d.rt, &m->d.cfg, widths, width_keys, any_dense ? 2 : 1,
                                err)))
            goto fail;
        m->cfg.base = m->d.cfg;
    }
#ifdef MOE_HAVE_CUDA
    if (m->target == MOE_ON_CUDA && (st = moe_cuda_create(backend, &m->cuda, err)))
        goto fail;
#endif
    const size_t L = (size_t)m->d.cfg.n_layers;
    if ((st = qwen3_decoder_alloc_layers(&m->d, err)))
        goto fail;
    m->sparse = calloc(L, 1);
    m->mlp = calloc(L, sizeof *m->mlp);
    m->moe = calloc(L, sizeof *m->moe);
    if (!m->sparse || !m->mlp || !m->moe) {
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, MOE_PLUGIN " create: out of memory");
        goto fail;
    }
    for (size_t l = 0; l < L; l++)
        m->sparse[l] = (uint8_t)moe_layer_is_sparse(&m->cfg, (int32_t)l);
    if ((st = moe_weights_load(m, qwen3_tp_checkpoint(&m->d.rt, ckpt), err)) || (st = qwen3_decoder_alloc_act(&m->d, err)) ||
        (st = alloc_scratch(m, err)))
        goto fail;
    qwen3_decoder_make_head(&m->d);
    if ((st = warm_up(m, err)))
        goto fail;
    m->glu_rows = glu_rows(m);
    if (m->d.rt.has_host) {
        int32_t n_sparse = 0;
        for (size_t l = 0; l < L; l++)
            n_sparse += m->sparse[l];
        m->d.rt.host.log(m->d.rt.host.ctx, LLMRT_LOG_INFO, MOE_PLUGIN,
                         "%d of %d layers sparse (%d experts, top %d%s), routing and dense "
                         "experts on the %s",
                         n_sparse, (int)L, m->cfg.n_experts, m->cfg.top_k,
                         m->cfg.norm_topk ? ", renormalised" : "",
                         m->target == MOE_ON_CUDA ? "GPU (own CUDA kernels)" : "CPU (own code)");
    }
    *out = m;
    return LLMRT_OK;
fail:
    moe_destroy(m);
    return st;
}

static void moe_info(llmrt_model *m, llmrt_model_info *out)
{
    int any_sparse = 0;
    for (int32_t l = 0; l < m->d.cfg.n_layers; l++)
        any_sparse |= m->sparse[l];
    qwen3_decoder_info(&m->d, MOE_ARCH, any_sparse ? m->cfg.moe_inter : m->d.cfg.intermediate, out);
}

static llmrt_status moe_forward(llmrt_model *m, const llmrt_batch *batch, const llmrt_kv_cache *kv,
                                float *logits, llmrt_error *err)
{
    return qwen3_decoder_forward(&m->d, batch, kv, logits, err);
}

static llmrt_status moe_forward_argmax(llmrt_model *m, const llmrt_batch *batch,
                                       const llmrt_kv_cache *kv, float *logits, int32_t *out,
                                       llmrt_error *err)
{
    return qwen3_decoder_forward_argmax(&m->d, batch, kv, logits, out, err);
}

static const llmrt_model_vtable moe_vtable = {
    .struct_size = sizeof(llmrt_model_vtable),
    .probe = moe_probe,
    .create = moe_create,
    .destroy = moe_destroy,
    .info = moe_info,
    .forward = moe_forward,
    .forward_argmax = moe_forward_argmax,
    .chat = &qwen3_chat_vtable,
    .synth_preset = moe_synth_preset,
    .synthesize = moe_synthesize,
};

static const llmrt_plugin_desc moe_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_MODEL,
    .name = MOE_PLUGIN,
    .version = "1.0.0",
    .description = "Qwen3 mixture-of-experts decoder (architectures: " MOE_ARCH "); bf16/f16/f32 "
                   "weights, quantized experts and attention through a quant plugin",
    .license = "MIT",
    .vtable = &moe_vtable,
    .init = NULL,
    .keys = moe_keys,
    .n_keys = N_MOE_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &moe_desc : NULL;
}
