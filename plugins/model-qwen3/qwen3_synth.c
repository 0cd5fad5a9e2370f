/* qwen3_synth.c — synthetic Qwen3 checkpoints (model.h synth_preset / synthesize): the
 * presets, the tensor list exactly as transformers' Qwen3 names and orders it (state_dict
 * order), and config.json / generation_config.json as transformers writes them for the
 * released checkpoints. The host writes the files (llmrt/synth.h); a quant plugin, when one
 * is given, says how each decoder linear is stored.
 *
 * Values, so a forward pass stays finite: qwen3-common's fill rules (dense weights std 0.02,
 * norm weights 1 + uniform(-0.05, 0.05)). A tied model that still writes lm_head.weight draws
 * it from embed_tokens' stream: the same values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "qwen3.h"

typedef struct preset {
    llmrt_synth_preset pub;
    int32_t vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos;
    double theta;
    int tie;
    int32_t bos, eos;
} preset;

static const preset presets[] = {
    /* head_dim 32 != hidden/heads = 16 on purpose: catches code that derives it */
    {{"tiny", "2 layers, hidden 64, vocab 512: CPU tests"},
     512, 64, 128, 2, 4, 2, 32, 512, 1000000.0, 0, 510, 511},
    {{"qwen3-0.6b", "Qwen3-0.6B shapes (28 layers, hidden 1024, tied embeddings)"},
     151936, 1024, 3072, 28, 16, 8, 128, 40960, 1000000.0, 1, 151643, 151645},
    {{"qwen3-8b", "Qwen3-8B shapes (36 layers, hidden 4096)"},
     151936, 4096, 12288, 36, 32, 8, 128, 40960, 1000000.0, 0, 151643, 151645},
    /* shapes from the text: qwen3_script.c */
    {{"tiny-chat", "a scripted chat model with Qwen3's tokenizer: its greedy reply is "
                   "--model-opt says=TEXT (and tokenizer=DIR)"},
     151936, 0, 0, 1, 0, 1, 0, 4096, 10.0, 1, 151643, 151645},
};

const llmrt_synth_preset *qwen3_synth_preset(uint32_t index)
{
    return index < sizeof presets / sizeof *presets ? &presets[index].pub : NULL;
}

/* What the checkpoint will say: the architecture's config plus dtype, tie and token ids. */
typedef struct synth_cfg {
    qwen3_config c;
    llmrt_dtype dtype;
    qwen3_synth_ids ids;
    char *quant_json; /* quantization_config text, or NULL */
} synth_cfg;

static llmrt_status base_config(const llmrt_synth_request *req, synth_cfg *s, llmrt_error *err)
{
    if (req->preset) {
        const preset *p = NULL;
        for (size_t i = 0; i < sizeof presets / sizeof *presets; i++)
            if (strcmp(req->preset, presets[i].pub.name) == 0)
                p = &presets[i];
        if (!p)
            return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "qwen3: unknown preset '%s'", req->preset);
        qwen3_config *c = &s->c;
        c->vocab = p->vocab, c->hidden = p->hidden, c->intermediate = p->inter;
        c->n_layers = p->layers, c->n_heads = p->heads, c->n_kv_heads = p->kv_heads;
        c->head_dim = p->head_dim, c->max_position = p->max_pos;
        c->eps = 1e-6, c->rope_theta = p->theta, c->tie = p->tie;
        s->dtype = LLMRT_DTYPE_BF16;
        s->ids.bos = p->bos;
        s->ids.eos[0] = p->eos;
        s->ids.n_eos = 1;
        return LLMRT_OK;
    }
    llmrt_status st = qwen3_config_parse(req->base_config_json, &s->c, err);
    if (st != LLMRT_OK)
        return st;
    json_t *root = json_loads(req->base_config_json, 0, NULL);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: not JSON");
    s->dtype = LLMRT_DTYPE_BF16;
    st = qwen3_synth_parse_dtype(root, &s->dtype, err);
    if (st == LLMRT_OK)
        st = qwen3_synth_parse_ids(root, &s->ids, err);
    json_decref(root);
    return st;
}

/* ---- the tensor list ---- */

typedef struct lin {
    const char *sub;
    int64_t in, out;
} lin;

static void layer_linears(const qwen3_config *c, lin attn[4], lin mlp[3])
{
    int64_t h = c->hidden, q = (int64_t)c->n_heads * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_heads * c->head_dim, ff = c->intermediate;
    attn[0] = (lin){"self_attn.q_proj", h, q};
    attn[1] = (lin){"self_attn.k_proj", h, kv};
    attn[2] = (lin){"self_attn.v_proj", h, kv};
    attn[3] = (lin){"self_attn.o_proj", q, h};
    mlp[0] = (lin){"mlp.gate_proj", h, ff};
    mlp[1] = (lin){"mlp.up_proj", h, ff};
    mlp[2] = (lin){"mlp.down_proj", ff, h};
}

/* One decoder linear: the quant's layout, or a dense [out, in] weight. */
static llmrt_status add_linear(const llmrt_synth_request *req, const synth_cfg *s,
                               const llmrt_ckpt_writer *w, const char *prefix, const lin *l,
                               llmrt_error *err)
{
    return qwen3_synth_add_linear(req, s->quant_json, s->dtype, w, prefix, l->in, l->out, err);
}

static llmrt_status add_tensors(const llmrt_synth_request *req, const synth_cfg *s,
                                const llmrt_ckpt_writer *w, int tied_head, llmrt_error *err)
{
    llmrt_status st;
    const qwen3_config *c = &s->c;
    char name[600], pre[512];
    lin attn[4], mlp[3];
    layer_linears(c, attn, mlp);
    if ((st = qwen3_synth_add(w, "model.embed_tokens.weight", s->dtype, c->vocab, c->hidden, &qwen3_fill_dense, err)))
        return st;
    for (int32_t i = 0; i < c->n_layers; i++) {
        for (int k = 0; k < 4; k++) {
            snprintf(pre, sizeof pre, "model.layers.%d.%s", (int)i, attn[k].sub);
            if ((st = add_linear(req, s, w, pre, &attn[k], err)))
                return st;
        }
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", (int)i);
        if ((st = qwen3_synth_add(w, name, s->dtype, c->head_dim, 0, &qwen3_fill_norm, err)))
            return st;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", (int)i);
        if ((st = qwen3_synth_add(w, name, s->dtype, c->head_dim, 0, &qwen3_fill_norm, err)))
            return st;
        for (int k = 0; k < 3; k++) {
            snprintf(pre, sizeof pre, "model.layers.%d.%s", (int)i, mlp[k].sub);
            if ((st = add_linear(req, s, w, pre, &mlp[k], err)))
                return st;
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", (int)i);
        if ((st = qwen3_synth_add(w, name, s->dtype, c->hidden, 0, &qwen3_fill_norm, err)))
            return st;
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", (int)i);
        if ((st = qwen3_synth_add(w, name, s->dtype, c->hidden, 0, &qwen3_fill_norm, err)))
            return st;
    }
    if ((st = qwen3_synth_add(w, "model.norm.weight", s->dtype, c->hidden, 0, &qwen3_fill_norm, err)))
        return st;
    if (!c->tie || tied_head) {
        llmrt_fill f = qwen3_fill_dense;
        if (c->tie) /* the same values as embed_tokens */
            f.same_as = "model.embed_tokens.weight";
        if ((st = qwen3_synth_add(w, "lm_head.weight", s->dtype, c->vocab, c->hidden, &f, err)))
            return st;
    }
    return LLMRT_OK;
}

/* ---- JSON files ---- */

/* config.json as transformers writes a Qwen3 config (the keys of the released checkpoints). */
static json_t *config_json(const synth_cfg *s, llmrt_error *err)
{
    json_t *j = json_object();
    if (qwen3_synth_config_keys(j, &s->c, QWEN3_ARCH, "qwen3", &s->ids, s->dtype, s->quant_json,
                                err) != LLMRT_OK) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static llmrt_status quant_config(const llmrt_synth_request *req, synth_cfg *s, llmrt_error *err)
{
    const qwen3_config *c = &s->c;
    uint32_t n = (uint32_t)c->n_layers * 7;
    llmrt_synth_linear *l = calloc(n, sizeof *l);
    char(*names)[96] = calloc(n, sizeof *names);
    llmrt_status st = LLMRT_OK;
    if (!l || !names) {
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
        goto cleanup;
    }
    lin attn[4], mlp[3];
    layer_linears(c, attn, mlp);
    for (int32_t i = 0; i < c->n_layers; i++)
        for (int k = 0; k < 7; k++) {
            const lin *x = k < 4 ? &attn[k] : &mlp[k - 4];
            uint32_t j = (uint32_t)i * 7 + (uint32_t)k;
            snprintf(names[j], sizeof names[j], "model.layers.%d.%s", (int)i, x->sub);
            l[j] = (llmrt_synth_linear){names[j], x->in, x->out};
        }
    st = qwen3_synth_quant_config(req, l, n, &s->dtype, &s->quant_json, err);
cleanup:
    free(l);
    free(names);
    return st;
}

llmrt_status qwen3_synthesize(const llmrt_host *host, const llmrt_synth_request *req,
                              const llmrt_ckpt_writer *w, llmrt_error *err)
{
    (void)host;
    llmrt_status st;
    synth_cfg s;
    memset(&s, 0, sizeof s);
    s.ids.bos = -1;
    if (req->preset && strcmp(req->preset, "tiny-chat") == 0) {
        if ((st = qwen3_script_build(req, w, &s.c, &s.dtype, err)))
            return st;
        s.ids.bos = 151643;
        s.ids.eos[0] = 151645;
        s.ids.n_eos = 1;
        if ((st = qwen3_synth_add_json(w, "generation_config.json",
                                       qwen3_synth_generation_json(&s.ids), err)))
            return st;
        json_t *cj = config_json(&s, err);
        return cj ? qwen3_synth_add_json(w, "config.json", cj, err) : err->code;
    }
    if (req->model_opts && req->model_opts->n > 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: unknown qwen3 option '%s' (only the tiny-chat preset takes "
                          "options: says=TEXT, tokenizer=DIR)",
                          req->model_opts->keys[0]);
    if ((st = base_config(req, &s, err)))
        return st;
    if (req->tie >= 0)
        s.c.tie = req->tie;
    if (req->tied_lm_head && !s.c.tie)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: --tied-lm-head is for tied models (add --tie)");
    if (req->dtype != LLMRT_DTYPE_INVALID)
        s.dtype = req->dtype;
    if (s.dtype != LLMRT_DTYPE_F16 && s.dtype != LLMRT_DTYPE_BF16 && s.dtype != LLMRT_DTYPE_F32)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "mkmodel: dtype %s is not a weight dtype (f16, bf16 or f32)",
                          llmrt_dtype_name(s.dtype));
    if (req->quant) {
        /* the quant decides the dense dtype unless one was asked for */
        if (req->dtype == LLMRT_DTYPE_INVALID)
            s.dtype = LLMRT_DTYPE_INVALID;
        if ((st = quant_config(req, &s, err)))
            goto cleanup;
    }
    if ((st = add_tensors(req, &s, w, req->tied_lm_head, err)))
        goto cleanup;
    if ((st = qwen3_synth_add_json(w, "generation_config.json", qwen3_synth_generation_json(&s.ids),
                                   err)))
        goto cleanup;
    json_t *cj = config_json(&s, err);
    st = cj ? qwen3_synth_add_json(w, "config.json", cj, err) : err->code;
cleanup:
    free(s.quant_json);
    return st;
}
