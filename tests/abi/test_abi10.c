/* test_abi10.c — plugins built against the frozen ABI 1.0 headers run in this host: a model
 * plugin (model_abi10.c) and the example memory plugin, both compiled with
 * tests/abi-1.0/include only, are loaded (reported as ABI 1.0), pass validation, and drive the
 * engine on the 1.1 CPU backend: greedy ids equal a reference computed here from the weights.
 * Their 1.1 members are absent (LLMRT_VT_HAS is false beyond their struct_size). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/engine.h>

#include "registry.h"
#include "runtime.h"
#include "safetensors.h"
#include "test_util.h"

#define V 16
#define H 8

static float embed[V * H], head[V * H];

static void write_checkpoint(const char *dir)
{
    for (int i = 0; i < V * H; i++) {
        embed[i] = sinf(0.37f * (float)i + 0.1f);
        head[i] = cosf(0.23f * (float)i * (float)i + 0.5f);
    }
    free(tu_write_file(dir, "config.json",
                       "{\"architectures\": [\"AbiTestForCausalLM\"], \"model_type\": \"abitest\"}"));
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    llmrt_st_writer *w;
    llmrt_error err = {0};
    int64_t shape[2] = {V, H};
    ck_assert_msg(llmrt_st_writer_open(path, &w, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(llmrt_st_writer_add(w, "embed.weight", LLMRT_DTYPE_F32, 2, shape, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_add(w, "head.weight", LLMRT_DTYPE_F32, 2, shape, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_begin_data(w, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_write(w, embed, sizeof embed, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_write(w, head, sizeof head, &err), LLMRT_OK);
    ck_assert_msg(llmrt_st_writer_close(w, &err) == LLMRT_OK, "%s", err.msg);
}

/* The model's greedy next token after t: argmax_j embed[t] · head[j], lowest j on ties. */
static int32_t next_of(int32_t t)
{
    int32_t best = 0;
    double bv = -INFINITY;
    for (int32_t j = 0; j < V; j++) {
        double s = 0;
        for (int k = 0; k < H; k++)
            s += (double)embed[t * H + k] * (double)head[j * H + k];
        if (s > bv)
            bv = s, best = j;
    }
    return best;
}

typedef struct got {
    int32_t ids[64];
    int n;
    llmrt_finish_reason fin;
} got;

static void on_token(void *user, const llmrt_token_event *ev)
{
    got *g = user;
    if (ev->token >= 0 && g->n < 64)
        g->ids[g->n++] = ev->token;
    if (ev->finish != LLMRT_FINISH_NONE)
        g->fin = ev->finish;
}

START_TEST(test_abi10_plugins_load_and_run)
{
    char *dir = tu_mkdtemp();
    write_checkpoint(dir);
    setenv("LLMRT_PLUGIN_PATH", tu_env("LLMRT_ABI10_DIR"), 1);
    char s_plugins[4200], s_model[4200];
    snprintf(s_plugins, sizeof s_plugins, "runtime.plugin_dir=%s", tu_env("LLMRT_PLUGIN_DIR"));
    snprintf(s_model, sizeof s_model, "model.path=%s", dir);
    const char *sets[] = {s_plugins, s_model, "runtime.backend=cpu", "memory.plugin=example",
                          "cache.kv_tokens=256", "scheduler.max_num_seqs=2"};
    llmrt_runtime *rt;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_runtime_open(NULL, sets, 6, &rt, &err) == LLMRT_OK, "%s", err.msg);

    /* loaded, reported as 1.0, their 1.1 members absent */
    const llmrt_plugin_entry *me = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_MODEL, "abi10");
    const llmrt_plugin_entry *mm = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_MEMORY, "example");
    ck_assert_msg(me && mm, "1.0 plugins not loaded (rejected: %zu)", llmrt_registry_rejected_count(rt->reg));
    ck_assert_uint_eq(LLMRT_ABI_MINOR_OF(me->desc->abi_version), 0);
    ck_assert_uint_eq(LLMRT_ABI_MINOR_OF(mm->desc->abi_version), 0);
    ck_assert(!LLMRT_VT_HAS(me->desc, llmrt_plugin_desc, keys));
    const llmrt_model_vtable *mvt = me->desc->vtable;
    ck_assert(!LLMRT_VT_HAS(mvt, llmrt_model_vtable, chat));
    ck_assert(!LLMRT_VT_HAS(mvt, llmrt_model_vtable, synthesize));
    ck_assert(!LLMRT_VT_HAS(mvt, llmrt_model_vtable, forward_argmax));

    /* the engine runs them: greedy ids as the weights say */
    llmrt_engine_options o;
    llmrt_engine_options_init(&o);
    o.quiet = 1;
    llmrt_engine *e;
    ck_assert_msg(llmrt_engine_create(rt, &o, &e, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_ptr_nonnull(llmrt_engine_chat_unavailable(e));
    llmrt_engine_stats st;
    llmrt_engine_stats_get(e, &st);
    ck_assert_str_eq(st.memory_plugin, "example");
    ck_assert_str_eq(st.model_arch, "AbiTestForCausalLM");
    int32_t prompt[2] = {3, 5};
    got g = {0};
    llmrt_request r;
    llmrt_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt = 2;
    r.sampling.max_tokens = 12;
    r.on_token = on_token;
    r.user = &g;
    ck_assert_msg(llmrt_engine_submit(e, &r, NULL, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_msg(llmrt_engine_run(e, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(g.fin, LLMRT_FINISH_LENGTH);
    ck_assert_int_eq(g.n, 12);
    int32_t t = prompt[1];
    for (int i = 0; i < g.n; i++) {
        int32_t want = next_of(t);
        ck_assert_msg(g.ids[i] == want, "token %d: %d, expected %d", i, g.ids[i], want);
        t = want;
    }
    llmrt_engine_destroy(e);
    llmrt_runtime_close(rt);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("abi10");
    TCase *tc = tcase_create("abi10");
    tcase_add_test(tc, test_abi10_plugins_load_and_run);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
