/* test_fp8_synth.c — `mkmodel --quant fp8` round trip (ctest quant-fp8.synth): the qwen3
 * plugin describes the model, quant-fp8 its linears, the host writes them (llmrt_synth_run with
 * the built plugins); read back with llmrt's reader the checkpoint has Qwen3-*-FP8's layout
 * (weight F8_E4M3 [out, in], weight_scale_inv F32 [ceil(out/128), ceil(in/128)], dense bf16,
 * Qwen's quantization_config), and every linear loads through quant-fp8 on backend-cpu and
 * dequantizes to finite weights of std ~0.02 — also for shapes with partial blocks (hidden
 * 192, intermediate 320 through --config). Refusals name the option or dtype. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_test_common.h"
#include "hf_config.h"
#include "runtime.h"
#include "safetensors.h"
#include "synth.h"
#include "test_util.h"

static llmrt_runtime *RT;

typedef struct shape {
    int64_t hidden, inter, heads, kv_heads, head_dim, layers;
} shape;
static const shape TINY = {64, 128, 4, 2, 32, 2};
static const shape ODD = {192, 320, 4, 2, 64, 2};

static llmrt_status write_fp8(const char *dir, const char *config_path, llmrt_dtype dtype,
                              const char *qopt, llmrt_error *err)
{
    llmrt_synth_opts o;
    llmrt_synth_opts_init(&o);
    o.preset = config_path ? NULL : "tiny";
    o.config_path = config_path;
    o.quant = "fp8";
    o.dtype = dtype;
    o.tie = -1;
    o.write.threads = 2;
    const char *qopts[1] = {qopt};
    if (qopt) {
        o.quant_opts = qopts;
        o.n_quant_opts = 1;
    }
    llmrt_synth_result res;
    return llmrt_synth_run(RT, dir, &o, &res, err);
}

/* Every decoder linear of the checkpoint in dir: the FP8 layout, loadable, std ~0.02. */
static void check_checkpoint(const char *dir, const shape *c, llmrt_dtype dense)
{
    llmrt_st_model *m;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_st_model_open(dir, 0, &m, &err) == LLMRT_OK, "%s", err.msg);
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(m);
    llmrt_tensor_view v;
    ck_assert_int_eq(ck->find(ck->ctx, "model.embed_tokens.weight", &v, &err), LLMRT_OK);
    ck_assert_int_eq(v.dtype, dense);
    ck_assert_int_eq(ck->find(ck->ctx, "lm_head.weight", &v, &err), LLMRT_OK);
    ck_assert_int_eq(v.dtype, dense);
    ck_assert_int_eq(ck->find(ck->ctx, "model.layers.0.input_layernorm.weight", &v, &err), LLMRT_OK);
    ck_assert_int_eq(v.dtype, dense);

    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    llmrt_quant *q = ft_quant(&be, NULL);
    const int64_t h = c->hidden, qd = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim;
    const struct {
        const char *name;
        int64_t in, out;
    } lin[] = {{"self_attn.q_proj", h, qd}, {"self_attn.k_proj", h, kv},
               {"self_attn.v_proj", h, kv}, {"self_attn.o_proj", qd, h},
               {"mlp.gate_proj", h, c->inter}, {"mlp.up_proj", h, c->inter},
               {"mlp.down_proj", c->inter, h}};
    for (int layer = 0; layer < c->layers; layer++)
        for (int k = 0; k < 7; k++) {
            char prefix[128], name[160];
            snprintf(prefix, sizeof prefix, "model.layers.%d.%s", layer, lin[k].name);
            snprintf(name, sizeof name, "%s.weight", prefix);
            ck_assert_int_eq(ck->find(ck->ctx, name, &v, &err), LLMRT_OK);
            ck_assert_msg(v.dtype == LLMRT_DTYPE_F8_E4M3 && v.ndim == 2 &&
                              v.shape[0] == lin[k].out && v.shape[1] == lin[k].in,
                          "%s: %s [%lld, %lld]", name, llmrt_dtype_name(v.dtype),
                          (long long)v.shape[0], (long long)v.shape[1]);
            /* codes over the whole e4m3 range, no NaN */
            const uint8_t *codes = v.data;
            int nan = 0, big = 0;
            for (size_t i = 0; i < v.bytes; i++) {
                nan += (codes[i] & 0x7f) == 0x7f;
                big += fabsf(llmrt_e4m3_to_f32(codes[i])) >= 256.0f;
            }
            ck_assert_int_eq(nan, 0);
            ck_assert_msg(big > (int)(v.bytes / 8), "%s: %d of %zu codes >= 256 in magnitude", name,
                          big, v.bytes);
            snprintf(name, sizeof name, "%s.weight_scale_inv", prefix);
            ck_assert_int_eq(ck->find(ck->ctx, name, &v, &err), LLMRT_OK);
            ck_assert_msg(v.dtype == LLMRT_DTYPE_F32 && v.ndim == 2 &&
                              v.shape[0] == (lin[k].out + 127) / 128 &&
                              v.shape[1] == (lin[k].in + 127) / 128,
                          "%s: %s [%lld, %lld]", name, llmrt_dtype_name(v.dtype),
                          (long long)v.shape[0], (long long)v.shape[1]);
            snprintf(name, sizeof name, "%s.qweight", prefix);
            ck_assert(!ck->has(ck->ctx, name));

            llmrt_qlinear *l = NULL;
            ck_assert_msg(ft_fp8()->linear_load(q, ck, prefix, lin[k].in, lin[k].out, &l, &err) ==
                              LLMRT_OK,
                          "%s", err.msg);
            const int64_t n = lin[k].in * lin[k].out;
            float *w = malloc((size_t)n * sizeof(float));
            ck_assert_int_eq(ft_fp8()->linear_dequant(q, l, w, &err), LLMRT_OK);
            double s = 0, s2 = 0;
            for (int64_t i = 0; i < n; i++) {
                ck_assert(isfinite(w[i]));
                s += w[i];
                s2 += (double)w[i] * w[i];
            }
            const double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
            ck_assert_msg(fabs(mean) < 0.002 && sd > 0.017 && sd < 0.023,
                          "%s dequantizes to mean %g std %g (want ~0, ~0.02)", prefix, mean, sd);
            ft_fp8()->linear_free(q, l);
            free(w);
        }
    ft_fp8()->destroy(q);
    be.vt->destroy(be.b);
    llmrt_st_model_close(m);

    /* config.json carries Qwen's quantization_config, which the plugin probes as its own */
    llmrt_hf_config hc;
    ck_assert_msg(llmrt_hf_config_load(dir, &hc, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(hc.quant_json);
    ck_assert_str_eq(hc.quant_json, "{\"activation_scheme\":\"dynamic\",\"fmt\":\"e4m3\","
                                    "\"quant_method\":\"fp8\",\"weight_block_size\":[128,128]}");
    ck_assert_int_eq(ft_fp8()->probe(hc.quant_json, &err), LLMRT_OK);
    llmrt_hf_config_free(&hc);
}

START_TEST(test_tiny_fp8)
{
    char *d = tu_mkdtemp();
    llmrt_error err = {0};
    ck_assert_msg(write_fp8(d, NULL, LLMRT_DTYPE_INVALID, NULL, &err) == LLMRT_OK, "%s", err.msg);
    check_checkpoint(d, &TINY, LLMRT_DTYPE_BF16);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_partial_blocks_f16)
{
    char *d = tu_mkdtemp();
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
             "\"vocab_size\": 512, \"hidden_size\": %lld, \"intermediate_size\": %lld, "
             "\"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, "
             "\"num_key_value_heads\": %lld, \"head_dim\": %lld, \"max_position_embeddings\": 512, "
             "\"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0, \"tie_word_embeddings\": false, "
             "\"torch_dtype\": \"bfloat16\", \"hidden_act\": \"silu\", \"attention_bias\": false}",
             (long long)ODD.hidden, (long long)ODD.inter, (long long)ODD.layers,
             (long long)ODD.heads, (long long)ODD.kv_heads, (long long)ODD.head_dim);
    char *path = tu_write_file(d, "base.json", cfg);
    char out[4200];
    snprintf(out, sizeof out, "%s/model", d);
    llmrt_error err = {0};
    ck_assert_msg(write_fp8(out, path, LLMRT_DTYPE_F16, NULL, &err) == LLMRT_OK, "%s", err.msg);
    check_checkpoint(out, &ODD, LLMRT_DTYPE_F16);
    free(path);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_refusals)
{
    char *d = tu_mkdtemp();
    llmrt_error err = {0};
    ck_assert_int_eq(write_fp8(d, NULL, LLMRT_DTYPE_INVALID, "group_size=128", &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "group_size") && strstr(err.msg, "FP8"), "%s", err.msg);
    /* the entries directly: a dtype the format does not go with */
    const llmrt_quant_vtable *vt = ft_fp8();
    llmrt_synth_linear lin = {"model.layers.0.mlp.up_proj", 64, 128};
    llmrt_dtype dt = LLMRT_DTYPE_I8;
    llmrt_sink sink = {NULL, NULL};
    ck_assert_int_eq(vt->synth_config(NULL, &lin, 1, &dt, &sink, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "I8") && strstr(err.msg, "bf16"), "%s", err.msg);
    /* synth_linear under another format's config is not ours */
    ck_assert_int_eq(vt->synth_linear("{\"quant_method\": \"awq\"}", NULL, "p", 64, 64, &err),
                     LLMRT_ERR_NOT_FOUND);
    tu_rmtree(d);
    free(d);
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
        !llmrt_registry_find(RT->reg, LLMRT_PLUGIN_QUANT, "fp8")) {
        printf("SKIP: model-qwen3.so and quant-fp8.so are not built (looked in "
               "$LLMRT_PLUGIN_DIR)\n");
        llmrt_runtime_close(RT);
        return 77;
    }
    Suite *s = suite_create("quant-fp8 synth");
    TCase *tc = tcase_create("mkmodel");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_tiny_fp8);
    tcase_add_test(tc, test_partial_blocks_f16);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    llmrt_runtime_close(RT);
    return failed ? 1 : 0;
}
