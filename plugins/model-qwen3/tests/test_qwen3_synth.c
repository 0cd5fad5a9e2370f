/* test_qwen3_synth.c — synthetic Qwen3 checkpoints (the qwen3 plugin's synthesize, AWQ
 * through quant-awq's synth entries, written by the host: llmrt_synth_run with the built
 * plugins), read back with llmrt's own reader: exactly the Hugging Face Qwen3 / AutoAWQ tensor
 * names, dtypes and shapes; shards and index; bytes that depend on the seed only (not on the
 * thread count); values in the ranges a forward pass needs; and clear refusals of shapes that
 * cannot work. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "hf_config.h"
#include "qwen3.h"
#include "runtime.h"
#include "safetensors.h"
#include "synth.h"
#include "test_util.h"

/* What a test asks for, and the shapes it expects back (the tiny preset's). */
typedef struct mk {
    const char *preset;
    int awq;
    int32_t group_size;   /* 0: the quant's choice */
    llmrt_dtype dtype;    /* INVALID: the plugins' choice */
    int tie;              /* -1: the preset's */
    int tied_lm_head;
    uint64_t seed;
    int threads;
    uint64_t shard_bytes;
} mk;

/* The tiny preset's shapes (qwen3_synth.c). */
typedef struct shapes {
    int32_t vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos, bos, eos;
    double theta;
} shapes;
static const shapes TINY = {512, 64, 128, 2, 4, 2, 32, 512, 510, 511, 1000000.0};

static llmrt_runtime *RT;

static void tiny_opts(mk *o)
{
    memset(o, 0, sizeof *o);
    o->preset = "tiny";
    o->dtype = LLMRT_DTYPE_INVALID;
    o->tie = -1;
    o->threads = 2;
}

static llmrt_status write_mk(const char *dir, const mk *m, llmrt_synth_result *res,
                             llmrt_error *err)
{
    llmrt_synth_opts o;
    llmrt_synth_opts_init(&o);
    char group[64];
    const char *qopts[1] = {group};
    o.preset = m->preset;
    o.quant = m->awq ? "awq" : NULL;
    if (m->awq && m->group_size) {
        snprintf(group, sizeof group, "group_size=%d", (int)m->group_size);
        o.quant_opts = qopts;
        o.n_quant_opts = 1;
    }
    o.dtype = m->dtype;
    o.tie = m->tie;
    o.tied_lm_head = m->tied_lm_head;
    o.seed = m->seed;
    o.write.threads = m->threads;
    o.write.shard_bytes = m->shard_bytes;
    llmrt_synth_result unused;
    return llmrt_synth_run(RT, dir, &o, res ? res : &unused, err);
}

static void write_ok(const char *dir, const mk *o, llmrt_synth_result *res)
{
    llmrt_error err = {0};
    llmrt_status st = write_mk(dir, o, res, &err);
    ck_assert_msg(st == LLMRT_OK, "mkmodel: %s", err.msg);
}

/* The dense dtype a run of o writes (bf16 for presets, f16 with AWQ). */
static llmrt_dtype dense_dtype(const mk *o)
{
    return o->dtype != LLMRT_DTYPE_INVALID ? o->dtype : o->awq ? LLMRT_DTYPE_F16 : LLMRT_DTYPE_BF16;
}

static int tied(const mk *o) { return o->tie > 0; }

/* config.json of dir through the qwen3 plugin's own parser. */
static void read_config(const char *dir, qwen3_config *c)
{
    char path[4200], *text = NULL;
    llmrt_error err = {0};
    snprintf(path, sizeof path, "%s/config.json", dir);
    ck_assert_msg(llmrt_read_file(path, &text, NULL, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_msg(qwen3_config_parse(text, c, &err) == LLMRT_OK, "%s", err.msg);
    free(text);
}

/* Byte-compare two files. */
static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    ck_assert_ptr_nonnull(fa);
    ck_assert_ptr_nonnull(fb);
    int same = 1, ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        if (ca != cb)
            same = 0;
    } while (same && ca != EOF);
    fclose(fa);
    fclose(fb);
    return same;
}

typedef struct expect {
    char name[96];
    llmrt_dtype dtype;
    int64_t d0, d1; /* d1 = 0: one dimension */
} expect;

/* The tensors transformers' Qwen3ForCausalLM (and AutoAWQ's WQLinear_GEMM) name, for cfg. */
static size_t expected_tensors(const mk *o, expect *e)
{
    const shapes *c = &TINY;
    int64_t h = c->hidden, q = (int64_t)c->heads * c->head_dim;
    int64_t kv = (int64_t)c->kv_heads * c->head_dim, ff = c->inter;
    llmrt_dtype dt = dense_dtype(o);
    size_t n = 0;
#define ADD(dtype_, d0_, d1_, ...)                                                           \
    do {                                                                                      \
        snprintf(e[n].name, sizeof e[n].name, __VA_ARGS__);                                   \
        e[n].dtype = dtype_;                                                                  \
        e[n].d0 = d0_;                                                                        \
        e[n].d1 = d1_;                                                                        \
        n++;                                                                                  \
    } while (0)
    ADD(dt, c->vocab, h, "model.embed_tokens.weight");
    ADD(dt, h, 0, "model.norm.weight");
    if (!tied(o) || o->tied_lm_head)
        ADD(dt, c->vocab, h, "lm_head.weight");
    const struct {
        const char *name;
        int64_t in, out;
    } lin[] = {{"self_attn.q_proj", h, q},  {"self_attn.k_proj", h, kv}, {"self_attn.v_proj", h, kv},
               {"self_attn.o_proj", q, h},  {"mlp.gate_proj", h, ff},    {"mlp.up_proj", h, ff},
               {"mlp.down_proj", ff, h}};
    for (int i = 0; i < c->layers; i++) {
        ADD(dt, h, 0, "model.layers.%d.input_layernorm.weight", i);
        ADD(dt, h, 0, "model.layers.%d.post_attention_layernorm.weight", i);
        ADD(dt, c->head_dim, 0, "model.layers.%d.self_attn.q_norm.weight", i);
        ADD(dt, c->head_dim, 0, "model.layers.%d.self_attn.k_norm.weight", i);
        for (int k = 0; k < 7; k++) {
            if (!o->awq) {
                ADD(dt, lin[k].out, lin[k].in, "model.layers.%d.%s.weight", i, lin[k].name);
                continue;
            }
            int64_t g = o->group_size ? o->group_size : 64; /* tiny: the largest that divides 64 and 128 */
            ADD(LLMRT_DTYPE_I32, lin[k].in, lin[k].out / 8, "model.layers.%d.%s.qweight", i,
                lin[k].name);
            ADD(LLMRT_DTYPE_I32, lin[k].in / g, lin[k].out / 8, "model.layers.%d.%s.qzeros", i,
                lin[k].name);
            ADD(LLMRT_DTYPE_F16, lin[k].in / g, lin[k].out, "model.layers.%d.%s.scales", i,
                lin[k].name);
        }
    }
#undef ADD
    return n;
}

/* Open dir with the reader; every expected tensor present with its dtype and shape, and
 * nothing else. Returns the model (caller closes). */
static llmrt_st_model *check_layout(const char *dir, const mk *o)
{
    llmrt_st_model *m;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_st_model_open(dir, 0, &m, &err) == LLMRT_OK, "%s", err.msg);
    expect *e = calloc(4096, sizeof *e);
    size_t n = expected_tensors(o, e), have = 0;
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(m);
    for (size_t i = 0; i < n; i++) {
        llmrt_tensor_view v;
        ck_assert_msg(ck->find(ck->ctx, e[i].name, &v, &err) == LLMRT_OK, "%s", err.msg);
        ck_assert_msg(v.dtype == e[i].dtype, "%s: dtype %s, expected %s", e[i].name,
                      llmrt_dtype_name(v.dtype), llmrt_dtype_name(e[i].dtype));
        ck_assert_int_eq(v.ndim, e[i].d1 ? 2 : 1);
        ck_assert_msg(v.shape[0] == e[i].d0 && (!e[i].d1 || v.shape[1] == e[i].d1),
                      "%s: shape [%lld, %lld], expected [%lld, %lld]", e[i].name,
                      (long long)v.shape[0], (long long)v.shape[1], (long long)e[i].d0,
                      (long long)e[i].d1);
    }
    for (size_t f = 0; f < llmrt_st_model_file_count(m); f++)
        have += llmrt_st_file_count(llmrt_st_model_file(m, f));
    ck_assert_uint_eq(have, n);
    free(e);
    return m;
}

static float elem(const llmrt_tensor_view *v, int64_t i) { return llmrt_load_f(v->data, v->dtype, i); }

static void mean_std(const llmrt_tensor_view *v, double *mean, double *sd, double *lo, double *hi)
{
    int64_t n = (int64_t)(v->bytes / llmrt_dtype_size(v->dtype));
    double s = 0, s2 = 0;
    *lo = 1e30;
    *hi = -1e30;
    for (int64_t i = 0; i < n; i++) {
        double x = elem(v, i);
        s += x;
        s2 += x * x;
        *lo = fmin(*lo, x);
        *hi = fmax(*hi, x);
    }
    *mean = s / (double)n;
    *sd = sqrt(s2 / (double)n - *mean * *mean);
}

START_TEST(test_tiny_dense_layout_and_config)
{
    char *d = tu_mkdtemp();
    mk o;
    llmrt_synth_result res;
    tiny_opts(&o);
    write_ok(d, &o, &res);
    ck_assert_uint_eq(res.n_shards, 1);
    llmrt_st_model *m = check_layout(d, &o);
    ck_assert_uint_eq(res.n_tensors, 3 + 2 * 11);
    ck_assert_uint_eq(res.bytes, llmrt_st_model_total_bytes(m));
    const char *f = strrchr(llmrt_st_file_at(llmrt_st_model_file(m, 0), 0)->file, '/');
    ck_assert_str_eq(f, "/model.safetensors");

    /* values: dense ~U(-a, a) with std 0.02, norms near 1 */
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(m);
    llmrt_tensor_view v;
    llmrt_error err = {0};
    double mean, sd, lo, hi;
    ck_assert_int_eq(ck->find(ck->ctx, "model.embed_tokens.weight", &v, &err), LLMRT_OK);
    mean_std(&v, &mean, &sd, &lo, &hi);
    ck_assert_msg(fabs(mean) < 0.002 && fabs(sd - 0.02) < 0.001 && lo >= -0.0347 && hi <= 0.0347,
                  "embed mean %g std %g range [%g, %g]", mean, sd, lo, hi);
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.1.self_attn.k_norm.weight", &v, &err), LLMRT_OK);
    mean_std(&v, &mean, &sd, &lo, &hi);
    ck_assert_msg(lo >= 0.949 && hi <= 1.051 && sd > 0.01, "norm range [%g, %g] std %g", lo, hi, sd);
    /* two tensors of the same shape differ (the name feeds the generator) */
    llmrt_tensor_view a, b;
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.0.mlp.gate_proj.weight", &a, &err), LLMRT_OK);
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.0.mlp.up_proj.weight", &b, &err), LLMRT_OK);
    ck_assert_int_ne(memcmp(a.data, b.data, a.bytes), 0);
    llmrt_st_model_close(m);

    /* config.json and generation_config.json read back as written */
    llmrt_hf_config c;
    ck_assert_msg(llmrt_hf_config_load(d, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_str_eq(c.architecture, "Qwen3ForCausalLM");
    ck_assert_str_eq(c.model_type, "qwen3");
    ck_assert_ptr_nonnull(strstr(c.config_json, "\"torch_dtype\": \"bfloat16\""));
    ck_assert_int_eq(c.n_eos, 1);
    ck_assert_int_eq(c.eos_ids[0], TINY.eos);
    ck_assert_int_eq(c.bos_id, TINY.bos);
    ck_assert_ptr_null(c.quant_json);
    llmrt_hf_config_free(&c);
    qwen3_config q;
    read_config(d, &q);
    ck_assert_int_eq(q.head_dim, TINY.head_dim);
    ck_assert_int_ne(q.head_dim, q.hidden / q.n_heads);
    ck_assert_int_eq(q.vocab, TINY.vocab);
    ck_assert_int_eq(q.n_kv_heads, TINY.kv_heads);
    ck_assert_int_eq(q.max_position, TINY.max_pos);
    ck_assert_double_eq(q.eps, 1e-6);
    ck_assert_double_eq(q.rope_theta, TINY.theta);
    ck_assert_int_eq(q.tie, 0);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_awq_sharded_tied)
{
    char *d = tu_mkdtemp();
    mk o;
    llmrt_synth_result res;
    llmrt_error err = {0};
    tiny_opts(&o);
    o.awq = 1;
    o.dtype = LLMRT_DTYPE_F16;
    o.group_size = 32;
    o.tie = 1;
    o.shard_bytes = 50000;
    write_ok(d, &o, &res);
    ck_assert_uint_gt(res.n_shards, 2);
    llmrt_st_model *m = check_layout(d, &o);
    ck_assert_uint_eq(llmrt_st_model_file_count(m), res.n_shards);
    for (size_t i = 0; i < llmrt_st_model_file_count(m); i++) {
        char want[64];
        snprintf(want, sizeof want, "/model-%05zu-of-%05u.safetensors", i + 1, res.n_shards);
        const char *file = llmrt_st_file_at(llmrt_st_model_file(m, i), 0)->file;
        ck_assert_msg(strstr(file, want), "%s lacks %s", file, want);
    }
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(m);
    ck_assert_int_eq(ck->has(ck->ctx, "lm_head.weight"), 0);

    /* dequantized w = (q - z) * s over one linear has std ~0.02 */
    llmrt_tensor_view qw, qz, sc;
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.1.mlp.down_proj.qweight", &qw, &err), LLMRT_OK);
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.1.mlp.down_proj.qzeros", &qz, &err), LLMRT_OK);
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.1.mlp.down_proj.scales", &sc, &err), LLMRT_OK);
    int64_t in = qw.shape[0], o8 = qw.shape[1], g = o.group_size;
    double s = 0, s2 = 0;
    int zero_seen[16] = {0};
    for (int64_t i = 0; i < in; i++)
        for (int64_t j = 0; j < o8; j++) {
            uint32_t wq = ((const uint32_t *)qw.data)[i * o8 + j];
            uint32_t wz = ((const uint32_t *)qz.data)[(i / g) * o8 + j];
            for (int k = 0; k < 8; k++) {
                int q = (int)(wq >> (4 * k) & 15), z = (int)(wz >> (4 * k) & 15);
                zero_seen[z] = 1;
                double w = (q - z) * elem(&sc, (i / g) * sc.shape[1] + j * 8 + k);
                s += w;
                s2 += w * w;
            }
        }
    double n = (double)(in * o8 * 8), sd = sqrt(s2 / n - (s / n) * (s / n));
    ck_assert_msg(fabs(sd - 0.02) < 0.002, "dequantized std %g", sd);
    int distinct = 0;
    for (int z = 0; z < 16; z++)
        distinct += zero_seen[z];
    ck_assert_int_eq(distinct, 16);
    llmrt_st_model_close(m);

    llmrt_hf_config c;
    ck_assert_msg(llmrt_hf_config_load(d, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(c.config_json, "\"torch_dtype\": \"float16\""));
    qwen3_config q;
    read_config(d, &q);
    ck_assert_int_eq(q.tie, 1);
    ck_assert_ptr_nonnull(c.quant_json);
    ck_assert_str_eq(c.quant_json, "{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":32,"
                                   "\"zero_point\":true,\"version\":\"gemm\","
                                   "\"modules_to_not_convert\":null}");
    llmrt_hf_config_free(&c);

    /* a tied checkpoint that still carries lm_head.weight: equal to embed_tokens */
    o.tied_lm_head = 1;
    write_ok(d, &o, &res);
    m = check_layout(d, &o);
    ck = llmrt_st_model_checkpoint(m);
    llmrt_tensor_view emb, head;
    ck_assert_int_eq(ck->find(ck->ctx, "model.embed_tokens.weight", &emb, &err), LLMRT_OK);
    ck_assert_int_eq(ck->find(ck->ctx, "lm_head.weight", &head, &err), LLMRT_OK);
    ck_assert_uint_eq(emb.bytes, head.bytes);
    ck_assert_int_eq(memcmp(emb.data, head.data, emb.bytes), 0);
    llmrt_st_model_close(m);
    read_config(d, &q);
    ck_assert_int_eq(q.tie, 1);
    o.tied_lm_head = 0;

    /* writing a smaller model over it leaves no stale shard or index behind */
    o.awq = 0;
    o.dtype = LLMRT_DTYPE_BF16;
    o.shard_bytes = 0;
    write_ok(d, &o, &res);
    ck_assert_uint_eq(res.n_shards, 1);
    m = check_layout(d, &o);
    ck_assert_uint_eq(llmrt_st_model_file_count(m), 1);
    llmrt_st_model_close(m);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_bytes_depend_on_seed_only)
{
    char *d1 = tu_mkdtemp(), *d2 = tu_mkdtemp(), *d3 = tu_mkdtemp();
    mk o;
    llmrt_synth_result res;
    tiny_opts(&o);
    o.awq = 1;
    o.dtype = LLMRT_DTYPE_F16;
    o.group_size = 64;
    o.seed = 42;
    o.threads = 1;
    write_ok(d1, &o, &res);
    o.threads = 7;
    write_ok(d2, &o, &res);
    o.seed = 43;
    write_ok(d3, &o, &res);
    char a[4096], b[4096], c[4096];
    snprintf(a, sizeof a, "%s/model.safetensors", d1);
    snprintf(b, sizeof b, "%s/model.safetensors", d2);
    snprintf(c, sizeof c, "%s/model.safetensors", d3);
    ck_assert_msg(same_file(a, b), "1 and 7 threads wrote different bytes");
    ck_assert_msg(!same_file(a, c), "seeds 42 and 43 wrote the same bytes");
    snprintf(a, sizeof a, "%s/config.json", d1);
    snprintf(c, sizeof c, "%s/config.json", d3);
    ck_assert(same_file(a, c));
    tu_rmtree(d1);
    tu_rmtree(d2);
    tu_rmtree(d3);
    free(d1);
    free(d2);
    free(d3);
}
END_TEST

static void expect_refusal(const mk *o, const char *a, const char *b)
{
    char *d = tu_mkdtemp();
    llmrt_error err = {0};
    ck_assert_int_ne(write_mk(d, o, NULL, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, a) && (!b || strstr(err.msg, b)), "'%s' lacks '%s' / '%s'",
                  err.msg, a, b ? b : "");
    tu_rmtree(d);
    free(d);
}

START_TEST(test_refusals)
{
    mk o;
    llmrt_error err = {0};
    tiny_opts(&o);
    o.awq = 1;
    o.dtype = LLMRT_DTYPE_BF16;
    expect_refusal(&o, "AWQ checkpoints are float16", "not BF16");
    o.dtype = LLMRT_DTYPE_F16;
    o.group_size = 48;
    expect_refusal(&o, "group_size '48' is not supported", "32, 64 or 128");
    o.group_size = 128;
    expect_refusal(&o, "group size 128 does not divide", "in_features 64");
    tiny_opts(&o);
    o.tied_lm_head = 1;
    expect_refusal(&o, "--tied-lm-head is for tied models", NULL);
    o.preset = "qwen3-70b";
    expect_refusal(&o, "unknown preset 'qwen3-70b'", "qwen3-0.6b");

    /* missing parents are created (mkdir -p); a parent that is a file is an error naming it */
    tiny_opts(&o);
    char *d = tu_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/a/b", d);
    ck_assert_int_eq(write_mk(path, &o, NULL, &err), LLMRT_OK);
    free(tu_write_file(d, "file", "x"));
    snprintf(path, sizeof path, "%s/file/b", d);
    ck_assert_int_eq(write_mk(path, &o, NULL, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, path), "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* A config.json of the wrong shape is refused by the plugin, naming the key. */
START_TEST(test_config_refusals)
{
    char *d = tu_mkdtemp();
    char *cfg = tu_write_file(d, "config.json",
                              "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\","
                              " \"vocab_size\": 64, \"hidden_size\": 64, \"intermediate_size\": 128,"
                              " \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                              " \"num_key_value_heads\": 3, \"head_dim\": 16}");
    llmrt_synth_opts o;
    llmrt_synth_opts_init(&o);
    o.config_path = cfg;
    llmrt_error err = {0};
    char out[4200];
    snprintf(out, sizeof out, "%s/out", d);
    ck_assert_int_ne(llmrt_synth_run(RT, out, &o, NULL, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "num_attention_heads (4) must be a multiple of num_key_value_heads (3)") &&
                      strstr(err.msg, cfg),
                  "%s", err.msg);
    free(cfg);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* The presets of the real shapes, as the written config.json says them (config only: the
 * 8B model's weights are written elsewhere, by the benchmarks). */
START_TEST(test_real_presets_listed)
{
    char list[4096];
    llmrt_synth_preset_list(RT->reg, list, sizeof list);
    ck_assert_msg(strstr(list, "tiny") && strstr(list, "qwen3-0.6b") && strstr(list, "qwen3-8b") &&
                      strstr(list, "(qwen3)"),
                  "%s", list);
}
END_TEST

int main(void)
{
    char set[4200];
    snprintf(set, sizeof set, "runtime.plugin_dir=%s", tu_env("LLMRT_PLUGIN_DIR"));
    const char *sets[] = {set};
    llmrt_error err = {0};
    if (llmrt_runtime_open(NULL, sets, 1, &RT, &err) != LLMRT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (!llmrt_registry_find(RT->reg, LLMRT_PLUGIN_MODEL, "qwen3") ||
        !llmrt_registry_find(RT->reg, LLMRT_PLUGIN_QUANT, "awq")) {
        printf("SKIP: model-qwen3.so and quant-awq.so are not built (looked in $LLMRT_PLUGIN_DIR)\n");
        llmrt_runtime_close(RT);
        return 77;
    }
    Suite *s = suite_create("qwen3_synth");
    TCase *tc = tcase_create("mkmodel");
    tcase_add_test(tc, test_tiny_dense_layout_and_config);
    tcase_add_test(tc, test_awq_sharded_tied);
    tcase_add_test(tc, test_bytes_depend_on_seed_only);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_config_refusals);
    tcase_add_test(tc, test_real_presets_listed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    llmrt_runtime_close(RT);
    return failed ? 1 : 0;
}
