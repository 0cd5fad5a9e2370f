/* test_engine_grammar.c — structured outputs through the engine's step loop on the mock rig
 * (tests/support/mock_model.h) with a byte-level tokenizer written here: a constrained
 * reply is a complete document of its schema (parsed, and matched by the grammar) and ends
 * with FINISH_STOP; eos is taken only where the reply may end; the device mask path (the
 * mock backend's logits_mask extension) and the host path give the same tokens; graphs and
 * async scheduling stay on for unconstrained rows in the same batch, whose tokens equal the
 * reference, and steps without a grammar never pay for a mask; the budget makes a reply
 * finish within max_tokens; seeded sampling under a grammar does not depend on the batch;
 * logprobs and penalties (host rows); regex and choice; a handle serves one request;
 * refusals through the engine API; cancellation. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "mock_model.h"
#include "test_util.h"
#include "tokenizer.h"

static char *g_dir;
static llmrt_tokenizer *g_tok;

/* The GPT-2 byte-level spelling of byte b (UTF-8 of the mapped code point). */
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
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

/* Multi-byte tokens (ids 100..): their spelling byte by byte. */
static const char *multi[] = {"{\"", "\":", "\",", "\"}", "true", "null", "12", "ab", "}}", "]}",
                              "\"x\"", "yes", "no"};
#define N_MULTI ((int)(sizeof multi / sizeof *multi))
#define VOCAB (100 + N_MULTI)
#define EOS 96

static void json_key(char *dst, const char *bytes)
{
    dst[0] = 0;
    for (const char *p = bytes; *p; p++) {
        char c[4];
        byte_char((unsigned char)*p, c);
        if (c[0] == '"')
            strcat(dst, "\\\"");
        else if (c[0] == '\\')
            strcat(dst, "\\\\");
        else
            strcat(dst, c);
    }
}

/* ids 0..94: the printable ASCII bytes; 95, 96: special; 97..99: C3 A9 E2; 100..: multi. */
static void setup(void)
{
    g_dir = tu_mkdtemp();
    static char json[16384];
    char key[64];
    size_t n = 0;
    n += (size_t)snprintf(json + n, sizeof json - n,
                          "{\"version\":\"1.0\",\"added_tokens\":["
                          "{\"id\":95,\"content\":\"<|endoftext|>\",\"single_word\":false,"
                          "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
                          "{\"id\":96,\"content\":\"<|im_end|>\",\"single_word\":false,"
                          "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
                          "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
                          "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false},"
                          "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\","
                          "\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
                          "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
                          "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
                          "\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{");
    for (int i = 0; i < 95; i++) {
        char b[2] = {(char)(32 + i), 0};
        json_key(key, b);
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"%s\":%d", i ? "," : "", key, i);
    }
    const int extra[3] = {0xC3, 0xA9, 0xE2};
    for (int i = 0; i < 3; i++) {
        byte_char(extra[i], key);
        n += (size_t)snprintf(json + n, sizeof json - n, ",\"%s\":%d", key, 97 + i);
    }
    for (int i = 0; i < N_MULTI; i++) {
        json_key(key, multi[i]);
        n += (size_t)snprintf(json + n, sizeof json - n, ",\"%s\":%d", key, 100 + i);
    }
    snprintf(json + n, sizeof json - n, "},\"merges\":[]}}");
    free(tu_write_file(g_dir, "tokenizer.json", json));
    llmrt_error err = {0};
    ck_assert_msg(llmrt_tokenizer_load(g_dir, &g_tok, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_int_eq(llmrt_tokenizer_vocab_size(g_tok), VOCAB);
}

static void teardown(void)
{
    llmrt_tokenizer_free(g_tok);
    tu_rmtree(g_dir);
    free(g_dir);
}

/* ---- the rig ---- */

typedef struct steps_t {
    int steps, masked_steps, unmasked_with_mask, graphs;
    double mask_ms;
} steps_t;

static void on_step(void *user, const llmrt_step_record *r)
{
    steps_t *s = user;
    s->steps++;
    s->masked_steps += r->n_masked > 0;
    s->graphs += r->graph;
    s->mask_ms += r->mask_ms;
    if (r->n_masked == 0 && r->mask_ms != 0)
        s->unmasked_with_mask++;
}

static mock_rig_opts rig_opts(int mask_ext, steps_t *st)
{
    mock_rig_opts o = mock_rig_default_opts();
    o.tok = g_tok;
    o.model.vocab = VOCAB;
    o.model.eos_id = EOS;
    o.ops.mask = mask_ext;
    o.on_step = st ? on_step : NULL;
    o.step_user = st;
    return o;
}

static void open_ok(mock_rig *r, const mock_rig_opts *o)
{
    llmrt_error err = {0};
    ck_assert_msg(mock_rig_open(r, o, &err) == LLMRT_OK, "rig: %s", err.msg);
}

/* ---- collecting a reply ---- */

#define MAXT 1024
typedef struct reply {
    int32_t ids[MAXT];
    int n;
    char text[8192];
    size_t len;
    llmrt_finish_reason fin;
    int32_t stop_token;
    int finals;
    char error[256];
    float lp[MAXT];
} reply;

static void on_token(void *user, const llmrt_token_event *ev)
{
    reply *r = user;
    if (ev->token >= 0 && r->n < MAXT) {
        r->lp[r->n] = ev->logprob;
        r->ids[r->n++] = ev->token;
    }
    if (ev->text_len && r->len + ev->text_len < sizeof r->text) {
        memcpy(r->text + r->len, ev->text, ev->text_len);
        r->len += ev->text_len;
        r->text[r->len] = 0;
    }
    if (ev->finish != LLMRT_FINISH_NONE) {
        r->finals++;
        r->fin = ev->finish;
        r->stop_token = ev->stop_token;
        if (ev->error)
            snprintf(r->error, sizeof r->error, "%s", ev->error);
    }
}

static llmrt_grammar *schema_grammar(llmrt_engine *e, const char *schema)
{
    llmrt_grammar *g = NULL;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_grammar_json_schema(e, schema, strlen(schema), NULL, &g, &err) ==
                      LLMRT_OK,
                  "%s: %s", schema, err.msg);
    return g;
}

static uint64_t submit(llmrt_engine *e, const int32_t *prompt, int n, llmrt_grammar *g,
                       const llmrt_sampling *sp, reply *out)
{
    llmrt_request r;
    llmrt_request_init(&r);
    if (sp)
        r.sampling = *sp;
    else
        r.sampling.max_tokens = 400;
    r.sampling.grammar = g;
    r.prompt_ids = prompt;
    r.n_prompt = n;
    r.on_token = on_token;
    r.user = out;
    memset(out, 0, sizeof *out);
    uint64_t id = 0;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_submit(e, &r, &id, &err) == LLMRT_OK, "submit: %s", err.msg);
    return id;
}

static void run_ok(llmrt_engine *e)
{
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_run(e, &err) == LLMRT_OK, "run: %s", err.msg);
}

/* The reply is a complete document of the schema: JSON, and the grammar matches it. */
static void check_doc(const char *schema, const reply *r, const char *what)
{
    ck_assert_msg(r->finals == 1, "%s: %d final events", what, r->finals);
    ck_assert_msg(r->fin == LLMRT_FINISH_STOP, "%s: finish %d (%s), text %s", what, r->fin,
                  r->error, r->text);
    json_error_t je;
    json_t *v = json_loadb(r->text, r->len, JSON_DECODE_ANY, &je);
    ck_assert_msg(v, "%s: not JSON (%s): %s", what, je.text, r->text);
    json_decref(v);
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_gram_json_schema(schema, strlen(schema), &g, &err), LLMRT_OK);
    ck_assert_msg(llmrt_gram_matches(g, r->text, r->len), "%s: the grammar rejects %s", what,
                  r->text);
    llmrt_gram_free(g);
}

static const int32_t P1[] = {5, 17, 33, 2, 61}, P2[] = {40, 41, 42}, P3[] = {7, 7, 7, 7};

static const char *PERSON =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":8},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},\"tags\":{\"type\":\"array\","
    "\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";

/* ---- tests ---- */

START_TEST(test_device_and_host_paths)
{
    reply dev, host;
    for (int pass = 0; pass < 2; pass++) {
        steps_t st = {0};
        mock_rig_opts o = rig_opts(pass == 0, &st);
        mock_rig r;
        open_ok(&r, &o);
        reply *out = pass == 0 ? &dev : &host;
        submit(r.e, P1, 5, schema_grammar(r.e, PERSON), NULL, out);
        run_ok(r.e);
        check_doc(PERSON, out, pass == 0 ? "device masks" : "host masks");
        mock_ops_stats ms = mock_ops_get_stats(&r.be);
        if (pass == 0)
            ck_assert_msg(ms.mask_calls > 0 && ms.masked_rows > 0, "no device mask applied");
        else
            ck_assert_int_eq(ms.mask_calls, 0);
        ck_assert_int_eq(st.masked_steps, st.steps); /* every step sampled the reply */
        mock_rig_close(&r);
    }
    ck_assert_int_eq(dev.n, host.n);
    for (int i = 0; i < dev.n; i++)
        ck_assert_int_eq(dev.ids[i], host.ids[i]);
}
END_TEST

/* A batch: constrained and unconstrained requests together, graphs and async on. The
 * unconstrained replies equal the reference; steps with no grammar pay for no mask. */
START_TEST(test_batch_graphs_async)
{
    steps_t st = {0};
    mock_rig_opts o = rig_opts(1, &st);
    o.ops.graphs = 1;
    o.ops.async = 1;
    o.set.async_scheduling = 1;
    o.set.cuda_graphs = 1;
    mock_rig r;
    open_ok(&r, &o);
    static reply c[3], u[2];
    const char *schemas[3] = {PERSON, "{\"type\":\"object\"}",
                              "{\"type\":\"array\",\"items\":{\"type\":\"number\"},"
                              "\"minItems\":2,\"maxItems\":4}"};
    submit(r.e, P1, 5, schema_grammar(r.e, schemas[0]), NULL, &c[0]);
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.max_tokens = 40;
    submit(r.e, P2, 3, NULL, &sp, &u[0]);
    submit(r.e, P2, 3, schema_grammar(r.e, schemas[1]), NULL, &c[1]);
    submit(r.e, P3, 4, schema_grammar(r.e, schemas[2]), NULL, &c[2]);
    submit(r.e, P3, 4, NULL, &sp, &u[1]);
    run_ok(r.e);
    for (int i = 0; i < 3; i++)
        check_doc(schemas[i], &c[i], schemas[i]);
    const int32_t *ups[2] = {P2, P3};
    int ulen[2] = {3, 4};
    for (int i = 0; i < 2; i++) {
        int32_t ref[64];
        int nr = mock_model_greedy(&o.model, ups[i], ulen[i], 40, ref);
        ck_assert_int_eq(u[i].n, nr);
        for (int k = 0; k < nr; k++)
            ck_assert_int_eq(u[i].ids[k], ref[k]);
    }
    ck_assert_int_eq(st.unmasked_with_mask, 0);
    /* the unconstrained replies went on after the constrained ones ended: graphs replayed */
    ck_assert_msg(st.graphs > 0, "no step replayed a graph");
    mock_rig_close(&r);

    /* no grammar at all: no mask op, no masked step */
    steps_t st2 = {0};
    o = rig_opts(1, &st2);
    o.ops.graphs = 1, o.ops.async = 1, o.set.async_scheduling = 1;
    open_ok(&r, &o);
    submit(r.e, P2, 3, NULL, &sp, &u[0]);
    run_ok(r.e);
    ck_assert_int_eq(mock_ops_get_stats(&r.be).mask_calls, 0);
    ck_assert_int_eq(st2.masked_steps, 0);
    mock_rig_close(&r);
}
END_TEST

/* eos is the model's clear favourite from the start: it is taken only once the reply may end. */
START_TEST(test_eos_only_when_complete)
{
    mock_rig_opts o = rig_opts(1, NULL);
    o.model.eos_after = 1;
    mock_rig r;
    open_ok(&r, &o);
    reply a, b, c;
    /* an integer may go on after each digit: it ends with eos as soon as it can */
    submit(r.e, P1, 5, schema_grammar(r.e, "{\"type\":\"integer\",\"minimum\":10}"), NULL, &a);
    /* an object ends with its brace: then nothing may follow, and it stops without eos */
    submit(r.e, P2, 3, schema_grammar(r.e, PERSON), NULL, &b);
    /* no grammar: eos at once */
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.max_tokens = 10;
    submit(r.e, P3, 4, NULL, &sp, &c);
    run_ok(r.e);
    ck_assert_int_eq(c.n, 1);
    ck_assert_int_eq(c.stop_token, EOS);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_STOP);
    ck_assert_int_eq(a.stop_token, EOS);
    ck_assert_msg(a.len == 2 && a.text[0] >= '1' && a.text[0] <= '9', "integer reply \"%s\"",
                  a.text);
    check_doc(PERSON, &b, "object");
    ck_assert_int_eq(b.stop_token, -1);
    for (int i = 0; i < b.n; i++)
        ck_assert_int_ne(b.ids[i], EOS);
    mock_rig_close(&r);
}
END_TEST

/* A stop id that is an ordinary token the grammar takes ends the reply only where it may
 * end: inside the document it is masked out (as xgrammar treats stop tokens); when the
 * document cannot go on without it, the reply ends with an error that says so, never with
 * an invalid document. */
START_TEST(test_stop_id_inside_document)
{
    mock_rig_opts o = rig_opts(1, NULL);
    mock_rig r;
    open_ok(&r, &o);
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.max_tokens = 300;
    const int32_t comma = ',' - 32, quote = '"' - 32;
    sp.stop_ids = &comma;
    sp.n_stop_ids = 1;
    for (int k = 0; k < 3; k++) { /* any JSON value: ',' belongs inside arrays and objects */
        reply a;
        const int32_t p[2] = {k, 40 + k};
        submit(r.e, p, 2, schema_grammar(r.e, "{\"type\":[\"array\",\"integer\"]}"), &sp, &a);
        run_ok(r.e);
        ck_assert_msg(a.fin == LLMRT_FINISH_STOP || a.fin == LLMRT_FINISH_ERROR, "finish %d",
                      a.fin);
        for (int i = 0; i < a.n - (a.stop_token == comma); i++) /* the last may end it */
            ck_assert_msg(a.ids[i] != comma, "token %d is the stop id: %s", i, a.text);
        if (a.fin == LLMRT_FINISH_STOP) {
            llmrt_gram *g = NULL;
            llmrt_error err = {0};
            const char *t = "{\"type\":[\"array\",\"integer\"]}";
            ck_assert_int_eq(llmrt_gram_json_schema(t, strlen(t), &g, &err), LLMRT_OK);
            ck_assert_msg(llmrt_gram_matches(g, a.text, a.len), "%s", a.text);
            llmrt_gram_free(g);
        }
    }
    /* "a\"b": after 'a' only the lone '"' goes on, and it is a stop id */
    llmrt_grammar *g = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_grammar_regex(r.e, "a\"b", 3, NULL, &g, &err), LLMRT_OK);
    reply a;
    sp.stop_ids = &quote;
    submit(r.e, P1, 5, g, &sp, &a);
    run_ok(r.e);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_ERROR);
    ck_assert_msg(strstr(a.error, "no token of the vocabulary"), "%s", a.error);
    ck_assert_str_eq(a.text, "a");
    /* without the stop id it is the document */
    ck_assert_int_eq(llmrt_engine_grammar_regex(r.e, "a\"b", 3, NULL, &g, &err), LLMRT_OK);
    sp.n_stop_ids = 0;
    submit(r.e, P1, 5, g, &sp, &a);
    run_ok(r.e);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_STOP);
    ck_assert_str_eq(a.text, "a\"b");
    mock_rig_close(&r);
}
END_TEST

/* The budget: a reply that could run on (a free string, any object) still finishes within
 * max_tokens as a complete document when max_tokens holds the shortest one in bytes (every
 * byte is a token) and its eos; when the budget cannot hold even that, it ends by length. */
START_TEST(test_budget)
{
    const char *schemas[] = {
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\"},\"n\":{\"type\":"
        "\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"s\",\"n\"],"
        "\"additionalProperties\":false}",
        "{\"type\":\"object\"}",
        "{\"type\":\"string\",\"minLength\":5}",
    };
    /* the shortest documents are 15, 2 and 7 bytes, and one token stays for eos: budgets
     * from 16 tokens on */
    for (int mt = 16; mt <= 44; mt += 7)
        for (size_t k = 0; k < sizeof schemas / sizeof *schemas; k++) {
            mock_rig_opts o = rig_opts(k % 2, NULL);
            mock_rig r;
            open_ok(&r, &o);
            reply a;
            llmrt_sampling sp;
            llmrt_sampling_init(&sp);
            sp.max_tokens = mt;
            submit(r.e, P1, 5, schema_grammar(r.e, schemas[k]), &sp, &a);
            run_ok(r.e);
            check_doc(schemas[k], &a, schemas[k]);
            ck_assert_int_le(a.n, mt);
            mock_rig_close(&r);
        }
    mock_rig_opts o = rig_opts(1, NULL);
    mock_rig r;
    open_ok(&r, &o);
    reply a;
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.max_tokens = 3;
    submit(r.e, P1, 5, schema_grammar(r.e, PERSON), &sp, &a);
    run_ok(r.e);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_LENGTH);
    ck_assert_int_eq(a.n, 3);
    /* a reply that may go on once complete (more digits; more documents) while the model
     * never wants eos: at the end of the budget it ends with eos, complete */
    llmrt_grammar_options opt;
    llmrt_grammar_options_init(&opt);
    opt.prefix = "<c>";
    opt.suffix = "</c>";
    opt.separator = ",";
    opt.min_count = 1;
    opt.max_count = 50;
    const char *obj = "{\"type\":\"object\"}";
    for (int mt = 10; mt < 60; mt += 10) { /* "<c>{}</c>" and eos: 10 */
        llmrt_grammar *g = NULL;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_engine_grammar_json_schema(r.e, obj, strlen(obj), &opt, &g, &err),
                         LLMRT_OK);
        reply b, c;
        sp.max_tokens = mt;
        submit(r.e, P2, 3, g, &sp, &b);
        submit(r.e, P3, 4, schema_grammar(r.e, "{\"type\":\"integer\"}"), &sp, &c);
        run_ok(r.e);
        ck_assert_msg(b.fin == LLMRT_FINISH_STOP && b.stop_token == EOS && b.n <= mt,
                      "max_tokens %d: finish %d, stop token %d, %d tokens: %s", mt, b.fin,
                      b.stop_token, b.n, b.text);
        ck_assert_msg(c.fin == LLMRT_FINISH_STOP && c.n <= mt && c.len > 0, "integer: %s", c.text);
        llmrt_gram *gg = NULL;
        llmrt_gram_wrap w = {"<c>", "</c>", ",", 1, 50, NULL, NULL, 0};
        ck_assert_int_eq(llmrt_gram_compile(LLMRT_GRAM_JSON_SCHEMA, obj, strlen(obj), NULL, NULL,
                                            0, &w, &gg, &err),
                         LLMRT_OK);
        ck_assert_msg(llmrt_gram_matches(gg, b.text, b.len), "wrapped: %s", b.text);
        llmrt_gram_free(gg);
    }
    mock_rig_close(&r);
}
END_TEST

/* Seeded sampling under a grammar: the same ids alone and in a batch. */
START_TEST(test_seeded_sampling_batch_independent)
{
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.temperature = 1.3f;
    sp.top_p = 0.95f;
    sp.has_seed = 1;
    sp.seed = 1234;
    sp.max_tokens = 200;
    reply alone, batched, other;
    for (int pass = 0; pass < 2; pass++) {
        mock_rig_opts o = rig_opts(1, NULL);
        mock_rig r;
        open_ok(&r, &o);
        if (pass == 1)
            submit(r.e, P2, 3, schema_grammar(r.e, "{\"type\":\"object\"}"), &sp, &other);
        submit(r.e, P1, 5, schema_grammar(r.e, PERSON), &sp, pass ? &batched : &alone);
        run_ok(r.e);
        mock_rig_close(&r);
    }
    check_doc(PERSON, &alone, "sampled");
    ck_assert_int_eq(alone.n, batched.n);
    ck_assert_int_eq(memcmp(alone.ids, batched.ids, sizeof(int32_t) * (size_t)alone.n), 0);
    check_doc("{\"type\":\"object\"}", &other, "sampled other");
}
END_TEST

/* Host rows: logprobs and penalties with a grammar. */
START_TEST(test_host_rows)
{
    mock_rig_opts o = rig_opts(1, NULL);
    mock_rig r;
    open_ok(&r, &o);
    reply a, b;
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.max_tokens = 300;
    sp.logprobs = 2;
    submit(r.e, P1, 5, schema_grammar(r.e, PERSON), &sp, &a);
    llmrt_sampling_init(&sp);
    sp.max_tokens = 300;
    sp.repetition_penalty = 1.5f;
    sp.presence_penalty = 0.5f;
    submit(r.e, P2, 3, schema_grammar(r.e, PERSON), &sp, &b);
    run_ok(r.e);
    check_doc(PERSON, &a, "logprobs");
    check_doc(PERSON, &b, "penalties");
    for (int i = 0; i < a.n; i++)
        ck_assert(a.lp[i] <= 0.0f);
    ck_assert_int_eq(mock_ops_get_stats(&r.be).mask_calls, 0); /* both sampled on the host */
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_regex_and_choice)
{
    mock_rig_opts o = rig_opts(1, NULL);
    mock_rig r;
    open_ok(&r, &o);
    llmrt_grammar *re = NULL, *ch = NULL;
    llmrt_error err = {0};
    const char *pat = "[a-c]{2,4}-[0-9]{3}";
    ck_assert_int_eq(llmrt_engine_grammar_regex(r.e, pat, strlen(pat), NULL, &re, &err), LLMRT_OK);
    const char *choices[] = {"yes", "no", "maybe"};
    ck_assert_int_eq(llmrt_engine_grammar_choice(r.e, choices, 3, NULL, &ch, &err), LLMRT_OK);
    reply a, b;
    submit(r.e, P1, 5, re, NULL, &a);
    submit(r.e, P2, 3, ch, NULL, &b);
    run_ok(r.e);
    llmrt_gram *g = NULL;
    ck_assert_int_eq(llmrt_gram_regex(pat, strlen(pat), &g, &err), LLMRT_OK);
    ck_assert_msg(a.fin == LLMRT_FINISH_STOP && llmrt_gram_matches(g, a.text, a.len), "regex: %s",
                  a.text);
    llmrt_gram_free(g);
    ck_assert_msg(b.fin == LLMRT_FINISH_STOP &&
                      (!strcmp(b.text, "yes") || !strcmp(b.text, "no") || !strcmp(b.text, "maybe")),
                  "choice: %s", b.text);
    /* a wrapped one: literal text around the document */
    llmrt_grammar_options opt;
    llmrt_grammar_options_init(&opt);
    opt.prefix = "<a>";
    opt.suffix = "</a>";
    const char *s = "{\"type\":\"boolean\"}";
    llmrt_grammar *w = NULL;
    ck_assert_int_eq(llmrt_engine_grammar_json_schema(r.e, s, strlen(s), &opt, &w, &err), LLMRT_OK);
    reply c;
    submit(r.e, P3, 4, w, NULL, &c);
    run_ok(r.e);
    ck_assert_msg(!strcmp(c.text, "<a>true</a>") || !strcmp(c.text, "<a>false</a>"), "wrap: %s",
                  c.text);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_handles_and_refusals)
{
    mock_rig_opts o = rig_opts(1, NULL);
    mock_rig r;
    open_ok(&r, &o);
    llmrt_grammar *g = schema_grammar(r.e, PERSON);
    reply a;
    submit(r.e, P1, 5, g, NULL, &a);
    /* the same handle again: refused, and the first request is unharmed */
    llmrt_request rq;
    llmrt_request_init(&rq);
    rq.prompt_ids = P2;
    rq.n_prompt = 3;
    rq.sampling.grammar = g;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_submit(r.e, &rq, NULL, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "already given"), "%s", err.msg);
    /* a bad request with a grammar: the engine frees the grammar (ASan checks) */
    llmrt_request_init(&rq);
    rq.n_prompt = 0;
    rq.prompt_ids = P2;
    rq.sampling.grammar = schema_grammar(r.e, "{\"type\":\"null\"}");
    ck_assert_int_eq(llmrt_engine_submit(r.e, &rq, NULL, &err), LLMRT_ERR_INVALID_ARG);
    run_ok(r.e);
    check_doc(PERSON, &a, "first request");
    /* refusals through the engine API */
    llmrt_grammar *x = NULL;
    const char *bad = "{\"type\":\"integer\",\"multipleOf\":2}";
    ck_assert_int_eq(llmrt_engine_grammar_json_schema(r.e, bad, strlen(bad), NULL, &x, &err),
                     LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "multipleOf") && !x, "%s", err.msg);
    ck_assert_int_eq(llmrt_engine_grammar_regex(r.e, "(a", 2, NULL, &x, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(llmrt_engine_grammar_choice(r.e, NULL, 0, NULL, &x, &err),
                     LLMRT_ERR_INVALID_ARG);
    /* compiled twice: the cache gives two handles of one automaton */
    llmrt_grammar *h1 = schema_grammar(r.e, PERSON), *h2 = schema_grammar(r.e, PERSON);
    ck_assert_ptr_ne(h1, h2);
    llmrt_grammar_free(h1);
    llmrt_grammar_free(h2);
    mock_rig_close(&r);

    /* no tokenizer: no grammars */
    o = rig_opts(1, NULL);
    o.tok = NULL;
    open_ok(&r, &o);
    ck_assert_int_eq(llmrt_engine_grammar_json_schema(r.e, PERSON, strlen(PERSON), NULL, &x, &err),
                     LLMRT_ERR_STATE);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_cancel)
{
    mock_rig_opts o = rig_opts(1, NULL);
    mock_rig r;
    open_ok(&r, &o);
    reply a, b;
    uint64_t id = submit(r.e, P1, 5, schema_grammar(r.e, "{\"type\":\"object\"}"), NULL, &a);
    submit(r.e, P2, 3, schema_grammar(r.e, PERSON), NULL, &b);
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_step(r.e, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_engine_cancel(r.e, id), LLMRT_OK);
    run_ok(r.e);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_CANCELLED);
    check_doc(PERSON, &b, "after a cancel");
    /* a queued one destroyed with the engine */
    submit(r.e, P3, 4, schema_grammar(r.e, PERSON), NULL, &a);
    mock_rig_close(&r);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_CANCELLED);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_grammar");
    TCase *t = tcase_create("engine_grammar");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_device_and_host_paths);
    tcase_add_test(t, test_batch_graphs_async);
    tcase_add_test(t, test_eos_only_when_complete);
    tcase_add_test(t, test_stop_id_inside_document);
    tcase_add_test(t, test_budget);
    tcase_add_test(t, test_seeded_sampling_batch_independent);
    tcase_add_test(t, test_host_rows);
    tcase_add_test(t, test_regex_and_choice);
    tcase_add_test(t, test_handles_and_refusals);
    tcase_add_test(t, test_cancel);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run_suite(suite()); }
