/* test_mkmodel.c — synthetic checkpoints through the core API, read back with llmrt's own
 * reader: exactly the Hugging Face Qwen3 / AutoAWQ tensor names, dtypes and shapes; shards
 * and index; bytes that depend on the seed only (not on the thread count); values in the
 * ranges a forward pass needs; and clear refusals of shapes that cannot work. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_config.h"
#include "mkmodel.h"
#include "safetensors.h"
#include "test_util.h"

static void tiny_opts(llmrt_mkmodel_opts *o)
{
    llmrt_error err = {0};
    llmrt_mkmodel_opts_init(o);
    ck_assert_int_eq(llmrt_mkmodel_preset("tiny", &o->cfg, &err), LLMRT_OK);
    o->threads = 2;
}

static void write_ok(const char *dir, const llmrt_mkmodel_opts *o, llmrt_mkmodel_result *res)
{
    llmrt_error err = {0};
    llmrt_status st = llmrt_mkmodel_write(dir, o, res, &err);
    ck_assert_msg(st == LLMRT_OK, "mkmodel: %s", err.msg);
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
static size_t expected_tensors(const llmrt_mkmodel_opts *o, expect *e)
{
    const llmrt_hf_config *c = &o->cfg;
    int64_t h = c->hidden_size, q = (int64_t)c->num_attention_heads * c->head_dim;
    int64_t kv = (int64_t)c->num_key_value_heads * c->head_dim, ff = c->intermediate_size;
    llmrt_dtype dt = o->dtype;
    size_t n = 0;
#define ADD(dtype_, d0_, d1_, ...)                                                           \
    do {                                                                                      \
        snprintf(e[n].name, sizeof e[n].name, __VA_ARGS__);                                   \
        e[n].dtype = dtype_;                                                                  \
        e[n].d0 = d0_;                                                                        \
        e[n].d1 = d1_;                                                                        \
        n++;                                                                                  \
    } while (0)
    ADD(dt, c->vocab_size, h, "model.embed_tokens.weight");
    ADD(dt, h, 0, "model.norm.weight");
    if (!c->tie_word_embeddings || o->tied_lm_head)
        ADD(dt, c->vocab_size, h, "lm_head.weight");
    const struct {
        const char *name;
        int64_t in, out;
    } lin[] = {{"self_attn.q_proj", h, q},  {"self_attn.k_proj", h, kv}, {"self_attn.v_proj", h, kv},
               {"self_attn.o_proj", q, h},  {"mlp.gate_proj", h, ff},    {"mlp.up_proj", h, ff},
               {"mlp.down_proj", ff, h}};
    for (int i = 0; i < c->num_hidden_layers; i++) {
        ADD(dt, h, 0, "model.layers.%d.input_layernorm.weight", i);
        ADD(dt, h, 0, "model.layers.%d.post_attention_layernorm.weight", i);
        ADD(dt, c->head_dim, 0, "model.layers.%d.self_attn.q_norm.weight", i);
        ADD(dt, c->head_dim, 0, "model.layers.%d.self_attn.k_norm.weight", i);
        for (int k = 0; k < 7; k++) {
            if (!o->awq) {
                ADD(dt, lin[k].out, lin[k].in, "model.layers.%d.%s.weight", i, lin[k].name);
                continue;
            }
            int64_t g = o->group_size;
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
static llmrt_st_model *check_layout(const char *dir, const llmrt_mkmodel_opts *o)
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
    llmrt_mkmodel_opts o;
    llmrt_mkmodel_result res;
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
    ck_assert_int_eq(c.head_dim, o.cfg.head_dim);
    ck_assert_int_ne(c.head_dim, c.hidden_size / c.num_attention_heads);
    ck_assert_int_eq(c.vocab_size, o.cfg.vocab_size);
    ck_assert_int_eq(c.num_key_value_heads, o.cfg.num_key_value_heads);
    ck_assert_int_eq(c.max_position_embeddings, o.cfg.max_position_embeddings);
    ck_assert_double_eq(c.rms_norm_eps, o.cfg.rms_norm_eps);
    ck_assert_double_eq(c.rope_theta, o.cfg.rope_theta);
    ck_assert_int_eq(c.dtype, LLMRT_DTYPE_BF16);
    ck_assert_int_eq(c.tie_word_embeddings, 0);
    ck_assert_int_eq(c.n_eos, 1);
    ck_assert_int_eq(c.eos_ids[0], o.cfg.eos_ids[0]);
    ck_assert_int_eq(c.bos_id, o.cfg.bos_id);
    ck_assert_ptr_null(c.quant_json);
    llmrt_hf_config_free(&c);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_awq_sharded_tied)
{
    char *d = tu_mkdtemp();
    llmrt_mkmodel_opts o;
    llmrt_mkmodel_result res;
    llmrt_error err = {0};
    tiny_opts(&o);
    o.awq = 1;
    o.dtype = LLMRT_DTYPE_F16;
    o.group_size = 32;
    o.cfg.tie_word_embeddings = 1;
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
    ck_assert_int_eq(c.dtype, LLMRT_DTYPE_F16);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
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
    ck_assert_msg(llmrt_hf_config_load(d, &c, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
    llmrt_hf_config_free(&c);
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
    llmrt_mkmodel_opts o;
    llmrt_mkmodel_result res;
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

static void expect_refusal(const llmrt_mkmodel_opts *o, const char *a, const char *b)
{
    char *d = tu_mkdtemp();
    llmrt_error err = {0};
    ck_assert_int_ne(llmrt_mkmodel_write(d, o, NULL, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, a) && (!b || strstr(err.msg, b)), "'%s' lacks '%s' / '%s'",
                  err.msg, a, b ? b : "");
    tu_rmtree(d);
    free(d);
}

START_TEST(test_refusals)
{
    llmrt_mkmodel_opts o;
    llmrt_error err = {0};
    tiny_opts(&o);
    o.awq = 1;
    o.dtype = LLMRT_DTYPE_BF16;
    expect_refusal(&o, "AWQ checkpoints are float16", "not BF16");
    o.dtype = LLMRT_DTYPE_F16;
    o.group_size = 48;
    expect_refusal(&o, "group size 48 does not divide", "in_features 64");
    o.group_size = 32;
    o.cfg.num_key_value_heads = 3;
    expect_refusal(&o, "num_attention_heads 4 is not a multiple of num_key_value_heads 3", NULL);
    o.cfg.num_key_value_heads = 2;
    o.cfg.intermediate_size = 100;
    expect_refusal(&o, "out_features 100 is not a multiple of 8", NULL);
    ck_assert_int_eq(llmrt_mkmodel_preset("qwen3-70b", &o.cfg, &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "unknown preset 'qwen3-70b'") && strstr(err.msg, "qwen3-0.6b"),
                  "%s", err.msg);

    /* missing parents are created (mkdir -p); a parent that is a file is an error naming it */
    tiny_opts(&o);
    char *d = tu_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/a/b", d);
    ck_assert_int_eq(llmrt_mkmodel_write(path, &o, NULL, &err), LLMRT_OK);
    free(tu_write_file(d, "file", "x"));
    snprintf(path, sizeof path, "%s/file/b", d);
    ck_assert_int_eq(llmrt_mkmodel_write(path, &o, NULL, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, path), "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_real_presets_shapes)
{
    llmrt_hf_config c;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_mkmodel_preset("qwen3-0.6b", &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.vocab_size, 151936);
    ck_assert_int_eq(c.hidden_size, 1024);
    ck_assert_int_eq(c.num_hidden_layers, 28);
    ck_assert_int_eq(c.num_attention_heads, 16);
    ck_assert_int_eq(c.num_key_value_heads, 8);
    ck_assert_int_eq(c.head_dim, 128);
    ck_assert_int_eq(c.intermediate_size, 3072);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
    ck_assert_int_eq(llmrt_mkmodel_preset("qwen3-8b", &c, &err), LLMRT_OK);
    ck_assert_int_eq(c.hidden_size, 4096);
    ck_assert_int_eq(c.num_hidden_layers, 36);
    ck_assert_int_eq(c.num_attention_heads, 32);
    ck_assert_int_eq(c.num_key_value_heads, 8);
    ck_assert_int_eq(c.intermediate_size, 12288);
    ck_assert_int_eq(c.max_position_embeddings, 40960);
    ck_assert_double_eq(c.rope_theta, 1000000.0);
    ck_assert_int_eq(c.tie_word_embeddings, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mkmodel");
    TCase *tc = tcase_create("mkmodel");
    tcase_add_test(tc, test_tiny_dense_layout_and_config);
    tcase_add_test(tc, test_awq_sharded_tied);
    tcase_add_test(tc, test_bytes_depend_on_seed_only);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_real_presets_shapes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
