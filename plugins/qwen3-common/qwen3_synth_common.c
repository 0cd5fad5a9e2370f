/* qwen3_synth_common.c — what the Qwen3 plugins' synthetic checkpoints (model.h synthesize)
 * share: fill rules, a base config.json's dtype and token ids, the config.json keys of the
 * attention side as transformers writes them for the released checkpoints, the decoder
 * linears through the quant plugin, generation_config.json. The host writes the files
 * (llmrt/synth.h); each plugin lists its own tensors and presets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qwen3_common.h"

const llmrt_fill qwen3_fill_dense = {.kind = LLMRT_FILL_UNIFORM, .scale = 1.0, .center = 0.0,
                                     .half = 0.034641016151377546 /* 0.02 sqrt(3) */};
const llmrt_fill qwen3_fill_norm = {.kind = LLMRT_FILL_UNIFORM, .scale = 1.0, .center = 1.0,
                                    .half = 0.05};

const char *qwen3_synth_dtype_name(llmrt_dtype d)
{
    return d == LLMRT_DTYPE_F16 ? "float16" : d == LLMRT_DTYPE_F32 ? "float32" : "bfloat16";
}

llmrt_status qwen3_synth_parse_dtype(json_t *root, llmrt_dtype *out, llmrt_error *err)
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

llmrt_status qwen3_synth_parse_ids(json_t *root, qwen3_synth_ids *s, llmrt_error *err)
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

json_t *qwen3_synth_eos_json(const qwen3_synth_ids *s, int as_list)
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

json_t *qwen3_synth_generation_json(const qwen3_synth_ids *s)
{
    json_t *j = json_object();
    json_object_set_new(j, "bos_token_id", s->bos >= 0 ? json_integer(s->bos) : json_null());
    json_object_set_new(j, "do_sample", json_false());
    json_object_set_new(j, "eos_token_id", qwen3_synth_eos_json(s, 1));
    return j;
}

llmrt_status qwen3_synth_add_json(const llmrt_ckpt_writer *w, const char *name, json_t *j,
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

llmrt_status qwen3_synth_add(const llmrt_ckpt_writer *w, const char *name, llmrt_dtype dt,
                             int64_t d0, int64_t d1, const llmrt_fill *f, llmrt_error *err)
{
    int64_t shape[2] = {d0, d1};
    return w->add_tensor(w->ctx, name, dt, d1 > 0 ? 2 : 1, shape, f, err);
}

llmrt_status qwen3_synth_add_linear(const llmrt_synth_request *req, const char *quant_json,
                                    llmrt_dtype dtype, const llmrt_ckpt_writer *w,
                                    const char *prefix, int64_t in, int64_t out, llmrt_error *err)
{
    if (req->quant) {
        llmrt_status st = req->quant->synth_linear(quant_json, w, prefix, in, out, err);
        if (st != LLMRT_ERR_NOT_FOUND)
            return st;
    }
    char name[600];
    snprintf(name, sizeof name, "%s.weight", prefix);
    return qwen3_synth_add(w, name, dtype, out, in, &qwen3_fill_dense, err);
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

llmrt_status qwen3_synth_quant_config(const llmrt_synth_request *req,
                                      const llmrt_synth_linear *linears, uint32_t n,
                                      llmrt_dtype *dtype, char **quant_json, llmrt_error *err)
{
    text_sink t = {0};
    llmrt_sink sink = {&t, sink_write};
    llmrt_status st = req->quant->synth_config(req->quant_opts, linears, n, dtype, &sink, err);
    *quant_json = t.p;
    if (st == LLMRT_OK && !*quant_json)
        st = llmrt_fail(err, LLMRT_ERR_INTERNAL, "the quant plugin wrote no quantization_config");
    return st;
}

llmrt_status qwen3_synth_config_keys(json_t *j, const qwen3_config *c, const char *arch,
                                     const char *model_type, const qwen3_synth_ids *ids,
                                     llmrt_dtype dtype, const char *quant_json, llmrt_error *err)
{
    json_object_set_new(j, "architectures", json_pack("[s]", arch));
    json_object_set_new(j, "attention_bias", json_false());
    json_object_set_new(j, "attention_dropout", json_real(0.0));
    json_object_set_new(j, "bos_token_id", ids->bos >= 0 ? json_integer(ids->bos) : json_null());
    json_object_set_new(j, "eos_token_id", qwen3_synth_eos_json(ids, 0));
    json_object_set_new(j, "head_dim", json_integer(c->head_dim));
    json_object_set_new(j, "hidden_act", json_string("silu"));
    json_object_set_new(j, "hidden_size", json_integer(c->hidden));
    json_object_set_new(j, "initializer_range", json_real(0.02));
    json_object_set_new(j, "intermediate_size", json_integer(c->intermediate));
    json_object_set_new(j, "max_position_embeddings", json_integer(c->max_position));
    json_object_set_new(j, "max_window_layers", json_integer(c->n_layers));
    json_object_set_new(j, "model_type", json_string(model_type));
    json_object_set_new(j, "num_attention_heads", json_integer(c->n_heads));
    json_object_set_new(j, "num_hidden_layers", json_integer(c->n_layers));
    json_object_set_new(j, "num_key_value_heads", json_integer(c->n_kv_heads));
    if (quant_json) {
        json_t *q = json_loads(quant_json, 0, NULL);
        if (!json_is_object(q)) {
            json_decref(q);
            return llmrt_fail(err, LLMRT_ERR_INTERNAL,
                              "%s: the quant plugin's quantization_config is not a JSON object",
                              model_type);
        }
        json_object_set_new(j, "quantization_config", q);
    }
    json_object_set_new(j, "rms_norm_eps", json_real(c->eps));
    json_object_set_new(j, "rope_scaling", json_null());
    json_object_set_new(j, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(j, "sliding_window", json_null());
    json_object_set_new(j, "tie_word_embeddings", json_boolean(c->tie));
    json_object_set_new(j, "torch_dtype", json_string(qwen3_synth_dtype_name(dtype)));
    json_object_set_new(j, "use_cache", json_true());
    json_object_set_new(j, "use_sliding_window", json_false());
    json_object_set_new(j, "vocab_size", json_integer(c->vocab));
    return LLMRT_OK;
}
