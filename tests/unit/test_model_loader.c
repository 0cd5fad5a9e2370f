/* test_model_loader.c — core/model_loader: choosing model and quant plugins by probe (with
 * built-in fake plugins), forced choices and their errors, the "no model" error, and a real
 * load of a `llmrt mkmodel --preset tiny` checkpoint with the built plugins. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_loader.h"
#include "test_util.h"

/* ---- fake plugins: probes decide by substrings of the JSON they are given ---- */

static llmrt_status m_create(const llmrt_host *h, const llmrt_section *c, const llmrt_checkpoint *k,
                             const llmrt_backend_ref *b, const llmrt_quant_ref *q,
                             const llmrt_model_params *p, llmrt_model **o, llmrt_error *e)
{
    return llmrt_fail(e, LLMRT_ERR_INTERNAL, "fake");
}
static void m_destroy(llmrt_model *m) {}
static void m_info(llmrt_model *m, llmrt_model_info *o) {}
static llmrt_status m_forward(llmrt_model *m, const llmrt_batch *b, const llmrt_kv_cache *kv,
                              float *l, llmrt_error *e)
{
    return LLMRT_OK;
}
static llmrt_status alpha_probe(const char *json, llmrt_error *e)
{
    return llmrt_fail(e, LLMRT_ERR_NOT_FOUND, "not mine");
}
static llmrt_status beta_probe(const char *json, llmrt_error *e)
{
    return strstr(json, "BetaForCausalLM") ? LLMRT_OK : llmrt_fail(e, LLMRT_ERR_NOT_FOUND, "no");
}
static llmrt_status gamma_probe(const char *json, llmrt_error *e)
{
    return strstr(json, "GammaForCausalLM")
               ? llmrt_fail(e, LLMRT_ERR_UNSUPPORTED, "gamma checkpoints of version 1 only")
               : llmrt_fail(e, LLMRT_ERR_NOT_FOUND, "no");
}
#define MODEL_VT(fn)                                                                        \
    {.struct_size = sizeof(llmrt_model_vtable), .probe = fn, .create = m_create,             \
     .destroy = m_destroy, .info = m_info, .forward = m_forward}
static const llmrt_model_vtable alpha_vt = MODEL_VT(alpha_probe), beta_vt = MODEL_VT(beta_probe),
                                gamma_vt = MODEL_VT(gamma_probe);

static llmrt_status q_create(const llmrt_host *h, const llmrt_section *c, const char *j,
                             const llmrt_backend_ref *b, llmrt_quant **o, llmrt_error *e)
{
    return llmrt_fail(e, LLMRT_ERR_INTERNAL, "fake");
}
static void q_destroy(llmrt_quant *q) {}
static llmrt_status q_load(llmrt_quant *q, const llmrt_checkpoint *c, const char *p, int64_t i,
                           int64_t o, llmrt_qlinear **out, llmrt_error *e)
{
    return LLMRT_ERR_NOT_FOUND;
}
static void q_free(llmrt_quant *q, llmrt_qlinear *l) {}
static llmrt_status q_forward(llmrt_quant *q, const llmrt_qlinear *l, float *y, const float *x,
                              int32_t n, llmrt_error *e)
{
    return LLMRT_OK;
}
static llmrt_status q4_probe(const char *json, llmrt_error *e)
{
    if (!strstr(json, "\"q4\""))
        return llmrt_fail(e, LLMRT_ERR_NOT_FOUND, "no");
    if (strstr(json, "\"bits\": 8"))
        return llmrt_fail(e, LLMRT_ERR_UNSUPPORTED, "bits = 8 is not supported (4 only)");
    return LLMRT_OK;
}
static const llmrt_quant_vtable q4_vt = {.struct_size = sizeof(llmrt_quant_vtable),
                                         .probe = q4_probe, .create = q_create,
                                         .destroy = q_destroy, .linear_load = q_load,
                                         .linear_free = q_free, .linear_forward = q_forward};

#define DESC(k, n, d, vt)                                                                     \
    {.struct_size = sizeof(llmrt_plugin_desc), .abi_version = LLMRT_ABI_VERSION, .kind = k,    \
     .name = n, .version = "1", .description = d, .license = "MIT", .vtable = vt}
static const llmrt_plugin_desc descs[] = {
    DESC(LLMRT_PLUGIN_MODEL, "alpha", "Alpha models", &alpha_vt),
    DESC(LLMRT_PLUGIN_MODEL, "beta", "BetaForCausalLM", &beta_vt),
    DESC(LLMRT_PLUGIN_MODEL, "gamma", "GammaForCausalLM v1", &gamma_vt),
    DESC(LLMRT_PLUGIN_QUANT, "q4", "4-bit q4", &q4_vt),
};

static llmrt_registry *fake_registry(void)
{
    static llmrt_host host = {sizeof(llmrt_host), LLMRT_ABI_VERSION, NULL, NULL, NULL};
    llmrt_registry *reg = NULL;
    llmrt_error err = {0};
    ck_assert(llmrt_registry_new(&host, &reg, &err) == LLMRT_OK);
    for (size_t i = 0; i < sizeof descs / sizeof *descs; i++)
        ck_assert_msg(llmrt_registry_add(reg, &descs[i], "<builtin>", &err) == LLMRT_OK, "%s", err.msg);
    return reg;
}

static const char *const BETA = "{\"architectures\": [\"BetaForCausalLM\"]}";

/* select must fail with `code` and a message containing each substring (NULL-terminated). */
static void expect_select_fail(llmrt_registry *reg, const char *cfg, const char *qj,
                               const char *mname, const char *qname, llmrt_status code,
                               const char *const *subs)
{
    const llmrt_plugin_entry *me = NULL, *qe = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_model_select(reg, cfg, qj, mname, qname, &me, &qe, &err);
    ck_assert_msg(st == code, "status %d, expected %d (%s)", st, code, err.msg);
    for (; *subs; subs++)
        ck_assert_msg(strstr(err.msg, *subs), "message \"%s\" lacks \"%s\"", err.msg, *subs);
}

START_TEST(test_select_model)
{
    llmrt_registry *reg = fake_registry();
    const llmrt_plugin_entry *me = NULL, *qe = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_model_select(reg, BETA, NULL, "auto", "auto", &me, &qe, &err), LLMRT_OK);
    ck_assert_str_eq(me->desc->name, "beta");
    ck_assert_ptr_null(qe);
    /* forced: no probe */
    ck_assert_int_eq(llmrt_model_select(reg, BETA, NULL, "alpha", "auto", &me, &qe, &err), LLMRT_OK);
    ck_assert_str_eq(me->desc->name, "alpha");

    const char *unknown[] = {"[\"FooForCausalLM\"]", "is not supported", "alpha (Alpha models)",
                             "beta (BetaForCausalLM)", "model.plugin", NULL};
    expect_select_fail(reg, "{\"architectures\": [\"FooForCausalLM\"]}", NULL, "auto", "auto",
                       LLMRT_ERR_NOT_FOUND, unknown);
    const char *rejected[] = {"GammaForCausalLM", "gamma: gamma checkpoints of version 1 only", NULL};
    expect_select_fail(reg, "{\"architectures\": [\"GammaForCausalLM\"]}", NULL, "auto", "auto",
                       LLMRT_ERR_UNSUPPORTED, rejected);
    const char *noname[] = {"model.plugin = delta", "alpha, beta, gamma", NULL};
    expect_select_fail(reg, BETA, NULL, "delta", "auto", LLMRT_ERR_NOT_FOUND, noname);
    const char *noarch[] = {"architectures (none)", NULL};
    expect_select_fail(reg, "{}", NULL, "auto", "auto", LLMRT_ERR_NOT_FOUND, noarch);
    llmrt_registry_free(reg);
}
END_TEST

START_TEST(test_select_quant)
{
    llmrt_registry *reg = fake_registry();
    const llmrt_plugin_entry *me = NULL, *qe = NULL;
    llmrt_error err = {0};
    const char *q4 = "{\"quant_method\": \"q4\", \"bits\": 4}";
    ck_assert_int_eq(llmrt_model_select(reg, BETA, q4, "auto", "auto", &me, &qe, &err), LLMRT_OK);
    ck_assert_ptr_nonnull(qe);
    ck_assert_str_eq(qe->desc->name, "q4");
    ck_assert_int_eq(llmrt_model_select(reg, BETA, q4, "auto", "q4", &me, &qe, &err), LLMRT_OK);
    ck_assert_str_eq(qe->desc->name, "q4");
    /* none: dense even when the checkpoint says otherwise */
    ck_assert_int_eq(llmrt_model_select(reg, BETA, q4, "auto", "none", &me, &qe, &err), LLMRT_OK);
    ck_assert_ptr_null(qe);

    const char *bits8[] = {"quant_method \"q4\"", "q4: bits = 8 is not supported", NULL};
    expect_select_fail(reg, BETA, "{\"quant_method\": \"q4\", \"bits\": 8}", "auto", "auto",
                       LLMRT_ERR_UNSUPPORTED, bits8);
    const char *forced8[] = {"quant plugin 'q4'", "bits = 8", NULL};
    expect_select_fail(reg, BETA, "{\"quant_method\": \"q4\", \"bits\": 8}", "auto", "q4",
                       LLMRT_ERR_UNSUPPORTED, forced8);
    const char *gptq[] = {"quant_method \"gptq\"", "is not supported", "q4 (4-bit q4)", NULL};
    expect_select_fail(reg, BETA, "{\"quant_method\": \"gptq\"}", "auto", "auto",
                       LLMRT_ERR_NOT_FOUND, gptq);
    const char *dense[] = {"model.quant = q4", "no quantization_config", NULL};
    expect_select_fail(reg, BETA, NULL, "auto", "q4", LLMRT_ERR_INVALID_ARG, dense);
    const char *noname[] = {"model.quant = awq", "available: q4", NULL};
    expect_select_fail(reg, BETA, q4, "auto", "awq", LLMRT_ERR_NOT_FOUND, noname);
    const char *mismatch[] = {"model.quant = q4", "does not handle", "gptq", NULL};
    expect_select_fail(reg, BETA, "{\"quant_method\": \"gptq\"}", "auto", "q4",
                       LLMRT_ERR_UNSUPPORTED, mismatch);
    llmrt_registry_free(reg);
}
END_TEST

START_TEST(test_no_model_path)
{
    llmrt_runtime *rt = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_runtime_open(NULL, NULL, 0, &rt, &err), LLMRT_OK);
    llmrt_loaded_model *lm = (llmrt_loaded_model *)1;
    ck_assert_int_eq(llmrt_model_load(rt, NULL, &lm, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_null(lm);
    ck_assert_str_eq(err.msg, "no model: set model.path or pass --model DIR");
    llmrt_runtime_close(rt);

    const char *sets[] = {"model.path=/nonexistent/model-dir"};
    ck_assert_int_eq(llmrt_runtime_open(NULL, sets, 1, &rt, &err), LLMRT_OK);
    ck_assert_int_ne(llmrt_model_load(rt, NULL, &lm, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "/nonexistent/model-dir"), "%s", err.msg);
    llmrt_runtime_close(rt);
}
END_TEST

/* The real thing: mkmodel's tiny preset through the plugins of this build. */
START_TEST(test_load_tiny)
{
    char *dir = tu_mkdtemp(), cmd[8192], set_path[4200], set_plugins[4200];
    snprintf(cmd, sizeof cmd, "'%s' mkmodel --preset tiny -q -o '%s/tiny'", tu_env("LLMRT"), dir);
    char *out = NULL;
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "mkmodel: %s", out);
    free(out);
    snprintf(set_path, sizeof set_path, "model.path=%s/tiny", dir);
    snprintf(set_plugins, sizeof set_plugins, "runtime.plugin_dir=%s", tu_env("LLMRT_PLUGIN_DIR"));
    const char *sets[] = {set_path, set_plugins, "runtime.backend=cpu",
                          "scheduler.max_num_batched_tokens=64", "scheduler.max_num_seqs=3"};
    llmrt_runtime *rt = NULL;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_runtime_open(NULL, sets, 5, &rt, &err) == LLMRT_OK, "%s", err.msg);
    llmrt_loaded_model *lm = NULL;
    llmrt_model_load_opts quiet = {.quiet = 1};
    ck_assert_msg(llmrt_model_load(rt, &quiet, &lm, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_str_eq(lm->model_plugin, "qwen3");
    ck_assert_str_eq(lm->backend.name, "cpu");
    ck_assert_ptr_null(lm->quant.vt);
    ck_assert_int_eq(lm->params.max_tokens, 64); /* from scheduler.* */
    ck_assert_int_eq(lm->params.max_seqs, 3);
    /* the fixture's config.json: the model plugin read its sizes */
    ck_assert_ptr_nonnull(strstr(lm->hf.config_json, "\"num_hidden_layers\": 2"));
    ck_assert_int_eq(lm->info.n_layers, 2);
    ck_assert_ptr_nonnull(strstr(lm->hf.config_json, "\"head_dim\": 32"));
    ck_assert_int_eq(lm->info.head_dim, 32);
    ck_assert(lm->info.weight_bytes > 0);
    ck_assert(lm->load_seconds >= 0);
    llmrt_model_unload(lm);

    llmrt_model_load_opts small = {.max_tokens = 5, .max_seqs = 1, .quiet = 1};
    ck_assert_msg(llmrt_model_load(rt, &small, &lm, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(lm->params.max_tokens, 5); /* caller overrides win */
    ck_assert_int_eq(lm->params.max_seqs, 1);
    llmrt_model_unload(lm);
    llmrt_runtime_close(rt);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_loader");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_select_model);
    tcase_add_test(tc, test_select_quant);
    tcase_add_test(tc, test_no_model_path);
    tcase_add_test(tc, test_load_tiny);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
