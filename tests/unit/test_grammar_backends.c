/* test_grammar_backends.c — structured outputs on a real backend: a random-weight Qwen3
 * (`llmrt mkmodel --preset tiny`) with a byte-level tokenizer written here, loaded through
 * runtime.ini settings like any model, graphs and async scheduling on. Constrained and
 * unconstrained requests run together, greedy and sampled, under each memory plugin; every
 * constrained reply is a complete document of its grammar (parsed and matched) that ends
 * with FINISH_STOP, and the steps show the masks (n_masked) and graph replays.
 *
 *   test_grammar_backends          the CPU backend (its llmrt.logits_mask)
 *   test_grammar_backends cuda     the CUDA backend; exits 77 without a CUDA device */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/backend.h>
#include <llmrt/engine.h>

#include "grammar.h"
#include "test_util.h"

static const char *g_backend = "cpu";
static char *g_dir;

/* ---- the model folder: tiny preset + a byte-level tokenizer of its 512 ids ---- */

static void byte_char(int b, char *out)
{
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
                n++;
        cp = 256 + n;
    }
    if (cp < 0x80)
        out[0] = (char)cp, out[1] = 0;
    else
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static void spell(char *dst, const unsigned char *bytes, size_t n)
{
    dst[0] = 0;
    for (size_t i = 0; i < n; i++) {
        char c[4];
        byte_char(bytes[i], c);
        strcat(dst, c[0] == '"' ? "\\\"" : c[0] == '\\' ? "\\\\" : c);
    }
}

static void write_tokenizer(const char *dir)
{
    static const char *pieces[] = {"{\"", "\":", "\",", "\"}", "\": \"", "\", \"", "true",
                                   "false", "null", "name", "age", "tags", "id", "ok", "12",
                                   "},", "],", "\":[", "\"]", "<tool", "_call", ">\n", "\n<",
                                   "</", "arguments", "get", "_weather", "city", "Paris"};
    const int np = (int)(sizeof pieces / sizeof *pieces);
    size_t cap = 1 << 16, n = 0;
    char *json = malloc(cap);
    char key[256];
    n += (size_t)snprintf(json + n, cap - n,
                          "{\"version\":\"1.0\",\"added_tokens\":["
                          "{\"id\":510,\"content\":\"<|bos|>\",\"single_word\":false,\"lstrip\":false,"
                          "\"rstrip\":false,\"normalized\":false,\"special\":true},"
                          "{\"id\":511,\"content\":\"<|im_end|>\",\"single_word\":false,\"lstrip\":"
                          "false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
                          "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
                          "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false},"
                          "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\","
                          "\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
                          "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
                          "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
                          "\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        spell(key, &c, 1);
        n += (size_t)snprintf(json + n, cap - n, "%s\"%s\":%d", b ? "," : "", key, b);
    }
    uint64_t r = 12345;
    for (int id = 256; id < 510; id++) {
        char t[64] = {0};
        if (id - 256 < np) {
            snprintf(t, sizeof t, "%s", pieces[id - 256]);
        } else { /* unique random pairs of pieces and letters */
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            snprintf(t, sizeof t, "%s%c%d", pieces[r % (uint64_t)np], 'a' + (int)(r >> 8) % 26, id);
        }
        spell(key, (const unsigned char *)t, strlen(t));
        n += (size_t)snprintf(json + n, cap - n, ",\"%s\":%d", key, id);
    }
    snprintf(json + n, cap - n, "},\"merges\":[]}}");
    free(tu_write_file(dir, "tokenizer.json", json));
    free(json);
}

static void setup(void)
{
    g_dir = tu_mkdtemp();
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' mkmodel --preset tiny -q --seed 3 -o '%s'", tu_env("LLMRT"),
             g_dir);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "mkmodel: %s", out);
    free(out);
    write_tokenizer(g_dir);
}

static void teardown(void)
{
    tu_rmtree(g_dir);
    free(g_dir);
}

/* ---- requests ---- */

typedef struct reply {
    char text[16384];
    size_t len;
    int n;
    llmrt_finish_reason fin;
    char error[256];
} reply;

static void on_token(void *user, const llmrt_token_event *ev)
{
    reply *r = user;
    if (ev->token >= 0)
        r->n++;
    if (ev->text_len && r->len + ev->text_len < sizeof r->text) {
        memcpy(r->text + r->len, ev->text, ev->text_len);
        r->len += ev->text_len;
        r->text[r->len] = 0;
    }
    if (ev->finish) {
        r->fin = ev->finish;
        if (ev->error)
            snprintf(r->error, sizeof r->error, "%s", ev->error);
    }
}

typedef struct steps {
    int masked, graphs, async, total;
    double mask_ms;
} steps;

static void on_step(void *user, const llmrt_step_record *rec)
{
    steps *s = user;
    s->total++;
    s->masked += rec->n_masked > 0;
    s->graphs += rec->graph;
    s->async += rec->async;
    s->mask_ms += rec->mask_ms;
}

typedef struct spec {
    llmrt_gram_kind kind;
    const char *text;
    llmrt_gram_wrap wrap;
    int json;
} spec;

static const spec specs[] = {
    {LLMRT_GRAM_JSON_SCHEMA,
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":10},"
     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"tags\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\",\"maxLength\":5},\"maxItems\":3}},\"required\":[\"name\","
     "\"age\"],\"additionalProperties\":false}",
     {0},
     1},
    {LLMRT_GRAM_JSON_SCHEMA, "{\"type\":\"object\"}", {0}, 1},
    {LLMRT_GRAM_JSON_SCHEMA,
     "{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"number\",\"minimum\":-2,\"maximum\":2},"
     "{\"enum\":[\"a\",\"b\",null]}]},\"minItems\":1,\"maxItems\":6}",
     {0},
     1},
    {LLMRT_GRAM_REGEX, "[a-z]{2,6}-[0-9]{3}( ok)?", {0}, 0},
    {LLMRT_GRAM_JSON_SCHEMA,
     "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":"
     "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12}},"
     "\"required\":[\"city\"],\"additionalProperties\":false}},\"required\":[\"name\","
     "\"arguments\"],\"additionalProperties\":false}",
     {.prefix = "<tool_call>\n", .suffix = "\n</tool_call>", .separator = "\n", .min_count = 1,
      .max_count = 3},
     0},
};
#define N_SPECS ((int)(sizeof specs / sizeof *specs))

static void run_backend(const char *memory)
{
    char set_path[4200], set_plugins[4200], set_mem[64], set_be[64];
    snprintf(set_path, sizeof set_path, "model.path=%s", g_dir);
    snprintf(set_plugins, sizeof set_plugins, "runtime.plugin_dir=%s", tu_env("LLMRT_PLUGIN_DIR"));
    snprintf(set_mem, sizeof set_mem, "memory.plugin=%s", memory);
    snprintf(set_be, sizeof set_be, "runtime.backend=%s", g_backend);
    const char *sets[] = {set_path, set_plugins, set_mem, set_be, "cache.kv_tokens=4096",
                          "scheduler.async_scheduling=true", "scheduler.cuda_graphs=true",
                          "memory.fallback=pageable"};
    llmrt_runtime *rt = NULL;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_runtime_open(NULL, sets, 8, &rt, &err) == LLMRT_OK, "%s", err.msg);
    steps st = {0};
    llmrt_engine_options eo;
    llmrt_engine_options_init(&eo);
    eo.quiet = 1;
    eo.on_step = on_step;
    eo.step_user = &st;
    llmrt_engine *e = NULL;
    ck_assert_msg(llmrt_engine_create(rt, &eo, &e, &err) == LLMRT_OK, "%s", err.msg);
    enum { N_REQ = 3 * N_SPECS + 3 };
    static reply out[N_REQ];
    memset(out, 0, sizeof out);
    const int32_t prompt[] = {1, 2, 3, 4, 5};
    for (int i = 0; i < N_REQ; i++) {
        llmrt_request r;
        llmrt_request_init(&r);
        r.prompt_ids = prompt;
        r.n_prompt = 1 + i % 5;
        r.sampling.max_tokens = i >= 3 * N_SPECS ? 400 : 300; /* an unconstrained tail */
        r.sampling.ignore_eos = i >= 3 * N_SPECS;
        if (i % 3 == 1) {
            r.sampling.temperature = 0.9f;
            r.sampling.has_seed = 1;
            r.sampling.seed = (uint64_t)i;
        }
        if (i < 3 * N_SPECS) {
            const spec *sp = &specs[i % N_SPECS];
            llmrt_grammar_options o;
            llmrt_grammar_options_init(&o);
            o.prefix = sp->wrap.prefix, o.suffix = sp->wrap.suffix;
            o.separator = sp->wrap.separator;
            o.min_count = sp->wrap.min_count, o.max_count = sp->wrap.max_count;
            llmrt_status cs = sp->kind == LLMRT_GRAM_REGEX
                                  ? llmrt_engine_grammar_regex(e, sp->text, strlen(sp->text), &o,
                                                               &r.sampling.grammar, &err)
                                  : llmrt_engine_grammar_json_schema(e, sp->text, strlen(sp->text),
                                                                     &o, &r.sampling.grammar, &err);
            ck_assert_msg(cs == LLMRT_OK, "%s", err.msg);
        }
        r.on_token = on_token;
        r.user = &out[i];
        ck_assert_msg(llmrt_engine_submit(e, &r, NULL, &err) == LLMRT_OK, "%s", err.msg);
    }
    ck_assert_msg(llmrt_engine_run(e, &err) == LLMRT_OK, "%s", err.msg);
    for (int i = 0; i < 3 * N_SPECS; i++) {
        const spec *sp = &specs[i % N_SPECS];
        const reply *o = &out[i];
        ck_assert_msg(o->fin == LLMRT_FINISH_STOP, "%s/%s request %d: finish %d (%s): %s",
                      g_backend, memory, i, o->fin, o->error, o->text);
        llmrt_gram *g = NULL;
        ck_assert_int_eq(llmrt_gram_compile(sp->kind, sp->text, strlen(sp->text), NULL, NULL, 0,
                                            &sp->wrap, &g, &err),
                         LLMRT_OK);
        ck_assert_msg(llmrt_gram_matches(g, o->text, o->len), "%s/%s request %d: %s", g_backend,
                      memory, i, o->text);
        llmrt_gram_free(g);
        if (sp->json) {
            json_error_t je;
            json_t *v = json_loadb(o->text, o->len, JSON_DECODE_ANY, &je);
            ck_assert_msg(v, "%s/%s request %d: not JSON (%s): %s", g_backend, memory, i, je.text,
                          o->text);
            json_decref(v);
        }
    }
    for (int i = 3 * N_SPECS; i < N_REQ; i++)
        ck_assert_msg(out[i].fin == LLMRT_FINISH_LENGTH && out[i].n == 400,
                      "unconstrained request %d: finish %d after %d tokens", i, out[i].fin, out[i].n);
    ck_assert_msg(st.masked > 0, "no step was masked");
    llmrt_engine_stats es;
    llmrt_engine_stats_get(e, &es);
    if (es.cuda_graphs) /* masked steps replay forward-only graphs, the tail whole ones */
        ck_assert_msg(st.graphs > 0, "%s/%s: graphs on but none replayed", g_backend, memory);
    if (es.async_scheduling) /* the unconstrained tail chains its steps */
        ck_assert_msg(st.async > 0, "%s/%s: async on but no step chained", g_backend, memory);
    ck_assert_msg(st.masked < st.total, "the unconstrained tail was masked");
    fprintf(stderr, "%s/%s: %d steps, %d masked (%.3f ms of masks), %d from graphs, %d chained\n",
            g_backend, memory, st.total, st.masked, st.mask_ms, st.graphs, st.async);
    llmrt_engine_destroy(e);
    llmrt_runtime_close(rt);
}

START_TEST(test_memory_plugins)
{
    static const char *mem[] = {"pageable", "pinned", "uva"};
    run_backend(mem[_i]);
}
END_TEST

/* 1 when backend-cuda.so loads and sees a device. */
static int cuda_device(void)
{
    char *path = tu_plugin_path("backend-cuda.so");
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    free(path);
    if (!d)
        return 0;
    const llmrt_backend_vtable *vt = d->vtable;
    llmrt_device_info info[4];
    int32_t count = 0;
    llmrt_error err = {0};
    return vt->probe(info, 4, &count, &err) == LLMRT_OK && count > 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        if (!cuda_device()) {
            fprintf(stderr, "skip: no CUDA device (or backend-cuda.so not built)\n");
            return 77;
        }
        g_backend = "cuda";
    }
    Suite *s = suite_create("grammar_backends");
    TCase *t = tcase_create(g_backend);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 900);
    tcase_add_loop_test(t, test_memory_plugins, 0, 3);
    suite_add_tcase(s, t);
    if (strcmp(g_backend, "cuda") == 0) { /* CUDA does not survive fork() */
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
    }
    return tu_run_suite(s);
}
