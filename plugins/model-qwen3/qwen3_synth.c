/* qwen3_synth.c — synthetic Qwen3 checkpoints (model.h synth_preset / synthesize): the
 * presets, the tensor list exactly as transformers' Qwen3 names and orders it (state_dict
 * order), and config.json / generation_config.json as transformers writes them for the
 * released checkpoints. The host writes the files (llmrt/synth.h); a quant plugin, when one
 * is given, says how each decoder linear is stored.
 *
 * Values, so a forward pass stays finite: dense weights uniform(-a, a) with a = 0.02 sqrt(3)
 * (std 0.02, like initializer_range), norm weights 1 + uniform(-0.05, 0.05). A tied model that
 * still writes lm_head.weight draws it from embed_tokens' stream: the same values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <llmrt/synth.h>

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
    int32_t bos;
    int32_t eos[8];
    int n_eos;
    char *quant_json; /* quantization_config text, or NULL */
} synth_cfg;

static const llmrt_fill FILL_DENSE = {.kind = LLMRT_FILL_UNIFORM, .scale = 1.0, .center = 0.0,
                                      .half = 0.034641016151377546 /* 0.02 sqrt(3) */};
static const llmrt_fill FILL_NORM = {.kind = LLMRT_FILL_UNIFORM, .scale = 1.0, .center = 1.0,
                                     .half = 0.05};

static const char *hf_dtype_name(llmrt_dtype d)
{
    return d == LLMRT_DTYPE_F16 ? "float16" : d == LLMRT_DTYPE_F32 ? "float32" : "bfloat16";
}

static llmrt_status parse_dtype(json_t *root, llmrt_dtype *out, llmrt_error *err)
{
    const char *keys[2] = {"dtype", "torch_dtype"}; /* transformers 5, released checkpoints */
    for (int k = 0; k < 2; k++) {
        json_t *d = json_object_get(root, keys[k]);
        if (!d || json_is_null(d))
            continue;
        const char *s = json_is_string(d) ? json_string_value(d) : "";
        if (strncmp(s, "torch.", 6) == 0)
            s += 6;
        *out = !strcmp(s, "bfloat16") ? LLMRT_DTYPE_BF16
               : !strcmp(s, "float16") ? LLMRT_DTYPE_F16
               : !strcmp(s, "float32") ? LLMRT_DTYPE_F32
                                       : LLMRT_DTYPE_INVALID;
        if (*out == LLMRT_DTYPE_INVALID)
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "config.json: %s '%s' is not supported (bfloat16, float16 or "
                              "float32)",
                              keys[k], json_is_string(d) ? json_string_value(d) : "(not a string)");
        return LLMRT_OK;
    }
    return LLMRT_OK;
}

/* bos / eos ids of a base config.json. */
static llmrt_status parse_ids(json_t *root, synth_cfg *s, llmrt_error *err)
{
    json_t *b = json_object_get(root, "bos_token_id");
    s->bos = json_is_integer(b) && json_integer_value(b) >= 0 ? (int32_t)json_integer_value(b) : -1;
    json_t *e = json_object_get(root, "eos_token_id");
    size_t n = json_is_array(e) ? json_array_size(e) : (e && !json_is_null(e) ? 1 : 0);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(e) ? json_array_get(e, i) : e;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "config.json: eos_token_id must be a non-negative integer or a "
                              "list of them");
        if (s->n_eos == 8)
            return llmrt_fail(err, LLMRT_ERR_LIMIT, "config.json: more than 8 eos_token_id values");
        s->eos[s->n_eos++] = (int32_t)json_integer_value(v);
    }
    return LLMRT_OK;
}

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
        s->bos = p->bos;
        s->eos[0] = p->eos;
        s->n_eos = 1;
        return LLMRT_OK;
    }
    llmrt_status st = qwen3_config_parse(req->base_config_json, &s->c, err);
    if (st != LLMRT_OK)
        return st;
    json_t *root = json_loads(req->base_config_json, 0, NULL);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "config.json: not JSON");
    s->dtype = LLMRT_DTYPE_BF16;
    st = parse_dtype(root, &s->dtype, err);
    if (st == LLMRT_OK)
        st = parse_ids(root, s, err);
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

static llmrt_status add(const llmrt_ckpt_writer *w, const char *name, llmrt_dtype dt, int64_t d0,
                        int64_t d1, const llmrt_fill *f, llmrt_error *err)
{
    int64_t shape[2] = {d0, d1};
    return w->add_tensor(w->ctx, name, dt, d1 > 0 ? 2 : 1, shape, f, err);
}

/* One decoder linear: the quant's layout, or a dense [out, in] weight. */
static llmrt_status add_linear(const llmrt_synth_request *req, const synth_cfg *s,
                               const llmrt_ckpt_writer *w, const char *prefix, const lin *l,
                               llmrt_error *err)
{
    if (req->quant) {
        llmrt_status st = req->quant->synth_linear(s->quant_json, w, prefix, l->in, l->out, err);
        if (st != LLMRT_ERR_NOT_FOUND)
            return st;
    }
    char name[600];
    snprintf(name, sizeof name, "%s.weight", prefix);
    return add(w, name, s->dtype, l->out, l->in, &FILL_DENSE, err);
}

static llmrt_status add_tensors(const llmrt_synth_request *req, const synth_cfg *s,
                                const llmrt_ckpt_writer *w, int tied_head, llmrt_error *err)
{
    llmrt_status st;
    const qwen3_config *c = &s->c;
    char name[600], pre[512];
    lin attn[4], mlp[3];
    layer_linears(c, attn, mlp);
    if ((st = add(w, "model.embed_tokens.weight", s->dtype, c->vocab, c->hidden, &FILL_DENSE, err)))
        return st;
    for (int32_t i = 0; i < c->n_layers; i++) {
        for (int k = 0; k < 4; k++) {
            snprintf(pre, sizeof pre, "model.layers.%d.%s", (int)i, attn[k].sub);
            if ((st = add_linear(req, s, w, pre, &attn[k], err)))
                return st;
        }
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", (int)i);
        if ((st = add(w, name, s->dtype, c->head_dim, 0, &FILL_NORM, err)))
            return st;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", (int)i);
        if ((st = add(w, name, s->dtype, c->head_dim, 0, &FILL_NORM, err)))
            return st;
        for (int k = 0; k < 3; k++) {
            snprintf(pre, sizeof pre, "model.layers.%d.%s", (int)i, mlp[k].sub);
            if ((st = add_linear(req, s, w, pre, &mlp[k], err)))
                return st;
        }
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", (int)i);
        if ((st = add(w, name, s->dtype, c->hidden, 0, &FILL_NORM, err)))
            return st;
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", (int)i);
        if ((st = add(w, name, s->dtype, c->hidden, 0, &FILL_NORM, err)))
            return st;
    }
    if ((st = add(w, "model.norm.weight", s->dtype, c->hidden, 0, &FILL_NORM, err)))
        return st;
    if (!c->tie || tied_head) {
        llmrt_fill f = FILL_DENSE;
        if (c->tie) /* the same values as embed_tokens */
            f.same_as = "model.embed_tokens.weight";
        if ((st = add(w, "lm_head.weight", s->dtype, c->vocab, c->hidden, &f, err)))
            return st;
    }
    return LLMRT_OK;
}

/* ---- JSON files ---- */

static json_t *eos_json(const synth_cfg *s, int as_list)
{
    if (s->n_eos == 0)
        return json_null();
    if (s->n_eos == 1 && !as_list)
        return json_integer(s->eos[0]);
    json_t *a = json_array();
    for (int i = 0; i < s->n_eos; i++)
        json_array_append_new(a, json_integer(s->eos[i]));
    return a;
}

/* config.json as transformers writes a Qwen3 config (the keys of the released checkpoints). */
static json_t *config_json(const synth_cfg *s, llmrt_error *err)
{
    const qwen3_config *c = &s->c;
    json_t *j = json_object();
    json_object_set_new(j, "architectures", json_pack("[s]", QWEN3_ARCH));
    json_object_set_new(j, "attention_bias", json_false());
    json_object_set_new(j, "attention_dropout", json_real(0.0));
    json_object_set_new(j, "bos_token_id", s->bos >= 0 ? json_integer(s->bos) : json_null());
    json_object_set_new(j, "eos_token_id", eos_json(s, 0));
    json_object_set_new(j, "head_dim", json_integer(c->head_dim));
    json_object_set_new(j, "hidden_act", json_string("silu"));
    json_object_set_new(j, "hidden_size", json_integer(c->hidden));
    json_object_set_new(j, "initializer_range", json_real(0.02));
    json_object_set_new(j, "intermediate_size", json_integer(c->intermediate));
    json_object_set_new(j, "max_position_embeddings", json_integer(c->max_position));
    json_object_set_new(j, "max_window_layers", json_integer(c->n_layers));
    json_object_set_new(j, "model_type", json_string("qwen3"));
    json_object_set_new(j, "num_attention_heads", json_integer(c->n_heads));
    json_object_set_new(j, "num_hidden_layers", json_integer(c->n_layers));
    json_object_set_new(j, "num_key_value_heads", json_integer(c->n_kv_heads));
    if (s->quant_json) {
        json_t *q = json_loads(s->quant_json, 0, NULL);
        if (!json_is_object(q)) {
            json_decref(q);
            json_decref(j);
            llmrt_fail(err, LLMRT_ERR_INTERNAL,
                       "qwen3: the quant plugin's quantization_config is not a JSON object");
            return NULL;
        }
        json_object_set_new(j, "quantization_config", q);
    }
    json_object_set_new(j, "rms_norm_eps", json_real(c->eps));
    json_object_set_new(j, "rope_scaling", json_null());
    json_object_set_new(j, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(j, "sliding_window", json_null());
    json_object_set_new(j, "tie_word_embeddings", json_boolean(c->tie));
    json_object_set_new(j, "torch_dtype", json_string(hf_dtype_name(s->dtype)));
    json_object_set_new(j, "use_cache", json_true());
    json_object_set_new(j, "use_sliding_window", json_false());
    json_object_set_new(j, "vocab_size", json_integer(c->vocab));
    return j;
}

/* Greedy by default: a synthetic model has no tuned sampling settings. */
static json_t *generation_json(const synth_cfg *s)
{
    json_t *j = json_object();
    json_object_set_new(j, "bos_token_id", s->bos >= 0 ? json_integer(s->bos) : json_null());
    json_object_set_new(j, "do_sample", json_false());
    json_object_set_new(j, "eos_token_id", eos_json(s, 1));
    return j;
}

static llmrt_status add_json(const llmrt_ckpt_writer *w, const char *name, json_t *j,
                             llmrt_error *err)
{
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(j);
    if (!text)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory writing %s", name);
    llmrt_status st = w->add_json(w->ctx, name, text, err);
    free(text);
    return st;
}

/* quantization_config text through the quant plugin's synth_config. */
typedef struct text_sink {
    char *p;
    size_t n;
} text_sink;

static llmrt_status sink_write(void *ctx, const char *s, size_t n)
{
    text_sink *t = ctx;
    char *g = realloc(t->p, t->n + n + 1);
    if (!g)
        return LLMRT_ERR_NOMEM;
    memcpy(g + t->n, s, n);
    t->p = g;
    t->n += n;
    g[t->n] = 0;
    return LLMRT_OK;
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
    text_sink t = {0};
    llmrt_sink sink = {&t, sink_write};
    st = req->quant->synth_config(req->quant_opts, l, n, &s->dtype, &sink, err);
    s->quant_json = t.p;
    if (st == LLMRT_OK && !s->quant_json)
        st = llmrt_fail(err, LLMRT_ERR_INTERNAL, "the quant plugin wrote no quantization_config");
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
    s.bos = -1;
    if (req->preset && strcmp(req->preset, "tiny-chat") == 0) {
        if ((st = qwen3_script_build(req, w, &s.c, &s.dtype, err)))
            return st;
        s.bos = 151643;
        s.eos[0] = 151645;
        s.n_eos = 1;
        if ((st = add_json(w, "generation_config.json", generation_json(&s), err)))
            return st;
        json_t *cj = config_json(&s, err);
        return cj ? add_json(w, "config.json", cj, err) : err->code;
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
    if ((st = add_json(w, "generation_config.json", generation_json(&s), err)))
        goto cleanup;
    json_t *cj = config_json(&s, err);
    st = cj ? add_json(w, "config.json", cj, err) : err->code;
cleanup:
    free(s.quant_json);
    return st;
}
