/* test_engine_text.c — the engine's text layer with a real tokenizer.json (written here: a
 * byte-level BPE whose ids 0..94 are the printable ASCII characters, 95/96 special tokens,
 * 97..99 the lone bytes C3, A9, E2 so that characters can split across tokens):
 * text prompts, streamed text equal to the full decode, whole UTF-8 characters in every
 * event, stop strings across token boundaries never leaking, held-back text released, the
 * earliest of several stop strings winning, stop strings unchanged when the prompt comes from
 * the prefix cache, and the stop-string unit (llmrt_stopper). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mock_model.h"
#include "stop_strings.h"
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

static void setup(void)
{
    g_dir = tu_mkdtemp();
    char json[8192], key[8];
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
        byte_char(32 + i, key);
        const char *esc = key[0] == '"' ? "\\\"" : key[0] == '\\' ? "\\\\" : key;
        n += (size_t)snprintf(json + n, sizeof json - n, "%s\"%s\":%d", i ? "," : "", esc, i);
    }
    const int extra[3] = {0xC3, 0xA9, 0xE2};
    for (int i = 0; i < 3; i++) {
        byte_char(extra[i], key);
        n += (size_t)snprintf(json + n, sizeof json - n, ",\"%s\":%d", key, 97 + i);
    }
    snprintf(json + n, sizeof json - n, "},\"merges\":[]}}");
    free(tu_write_file(g_dir, "tokenizer.json", json));
    llmrt_error err = {0};
    ck_assert_msg(llmrt_tokenizer_load(g_dir, &g_tok, &err) == LLMRT_OK, "%s", err.msg);
}

static void teardown(void)
{
    llmrt_tokenizer_free(g_tok);
    tu_rmtree(g_dir);
    free(g_dir);
}

/* ---- events ---- */

typedef struct tout {
    int32_t ids[400];
    int n;
    char text[4096];
    size_t len;
    size_t len_after[400]; /* cumulative text length after the event of token i */
    int bad_utf8;
    llmrt_finish_reason fin;
    char stop_reason[64];
    int32_t stop_token;
    int finals;
    int32_t cached; /* cached_tokens of the final event */
} tout;

/* 1 when s[0..n) is valid UTF-8 made of whole characters. */
static int utf8_whole(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] >> 6) != 2)
                return 0;
        i += k;
    }
    return 1;
}

static void on_tok(void *user, const llmrt_token_event *ev)
{
    tout *o = user;
    if (!utf8_whole(ev->text, ev->text_len))
        o->bad_utf8++;
    if (o->len + ev->text_len < sizeof o->text) {
        memcpy(o->text + o->len, ev->text, ev->text_len);
        o->len += ev->text_len;
        o->text[o->len] = 0;
    }
    if (ev->token >= 0 && o->n < 400) {
        o->ids[o->n] = ev->token;
        o->len_after[o->n] = o->len;
        o->n++;
    }
    if (ev->finish) {
        o->cached = ev->cached_tokens;
        o->finals++;
        o->fin = ev->finish;
        o->stop_token = ev->stop_token;
        snprintf(o->stop_reason, sizeof o->stop_reason, "%s", ev->stop_reason ? ev->stop_reason : "");
    }
}

static mock_rig open_rig(int vocab, int eos_id, int eos_after)
{
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    o.model.vocab = vocab;
    o.model.eos_id = eos_id;
    o.model.eos_after = eos_after;
    o.tok = g_tok;
    llmrt_error err = {0};
    ck_assert_msg(mock_rig_open(&r, &o, &err) == LLMRT_OK, "%s", err.msg);
    return r;
}

static mock_model_cfg cfg_of(int vocab, int eos_id, int eos_after)
{
    mock_model_cfg c = mock_model_default_cfg();
    c.vocab = vocab, c.eos_id = eos_id, c.eos_after = eos_after;
    return c;
}

static void submit(llmrt_engine *e, const char *text, const int32_t *ids, int n, int max_tokens,
                   const char *const *stops, int n_stops, int min_tokens, tout *o)
{
    llmrt_request q;
    llmrt_request_init(&q);
    q.prompt_text = text;
    q.prompt_ids = ids;
    q.n_prompt = n;
    q.sampling.max_tokens = max_tokens;
    q.sampling.min_tokens = min_tokens;
    q.sampling.stop = stops;
    q.sampling.n_stop = n_stops;
    q.on_token = on_tok;
    q.user = o;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_submit(e, &q, NULL, &err) == LLMRT_OK, "%s", err.msg);
}

static void run(llmrt_engine *e)
{
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_run(e, &err) == LLMRT_OK, "%s", err.msg);
}

/* The reference text of greedy ids (ASCII vocabulary: id i is character 32 + i). */
static void ascii_text(const int32_t *ids, int n, char *out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] < 95)
            out[k++] = (char)(32 + ids[i]);
    out[k] = 0;
}

START_TEST(test_text_prompt_and_stream)
{
    mock_rig r = open_rig(97, -1, 0);
    const char *prompt = "Hello, engine!";
    int32_t ids[32];
    int n = (int)strlen(prompt);
    for (int i = 0; i < n; i++)
        ids[i] = prompt[i] - 32;
    tout a = {0}, b = {0};
    submit(r.e, prompt, NULL, 0, 40, NULL, 0, 0, &a);
    submit(r.e, NULL, ids, n, 40, NULL, 0, 0, &b);
    run(r.e);
    mock_model_cfg c = cfg_of(97, -1, 0);
    int32_t ref[40];
    ck_assert_int_eq(mock_model_greedy(&c, ids, n, 40, ref), 40);
    ck_assert_int_eq(a.n, 40);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(a.ids[i], ref[i]);
    ck_assert_mem_eq(a.ids, b.ids, sizeof a.ids);
    /* streamed text = the decode of all ids (specials skipped) */
    char *full = NULL;
    size_t flen = 0;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_tokenizer_decode(g_tok, a.ids, 40, 1, &full, &flen, &err), LLMRT_OK);
    ck_assert_uint_eq(a.len, flen);
    ck_assert_str_eq(a.text, full);
    free(full);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_utf8_whole_characters)
{
    /* vocab 100: the model emits lone bytes C3 A9 E2 among ASCII, so characters split
     * across tokens and invalid sequences occur; every event must still carry whole
     * characters and the stream must equal the full (lossy) decode. */
    mock_rig r = open_rig(100, -1, 0);
    tout o[6];
    memset(o, 0, sizeof o);
    int32_t p[6][8];
    int32_t all[6][300];
    for (int k = 0; k < 6; k++) {
        for (int i = 0; i < 8; i++)
            p[k][i] = (k * 31 + i * 7) % 95;
        submit(r.e, NULL, p[k], 8, 300, NULL, 0, 0, &o[k]);
    }
    run(r.e);
    int saw_lead = 0;
    for (int k = 0; k < 6; k++) {
        ck_assert_int_eq(o[k].bad_utf8, 0);
        ck_assert_int_eq(o[k].n, 300);
        memcpy(all[k], o[k].ids, sizeof all[k]);
        char *full = NULL;
        size_t flen = 0;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_tokenizer_decode(g_tok, all[k], 300, 1, &full, &flen, &err), LLMRT_OK);
        ck_assert_uint_eq(o[k].len, flen);
        ck_assert_mem_eq(o[k].text, full, flen);
        free(full);
        for (int i = 0; i + 1 < 300; i++) /* a lead byte whose character is incomplete */
            saw_lead |= (all[k][i] == 97 || all[k][i] == 99) && all[k][i + 1] < 95;
    }
    ck_assert_msg(saw_lead, "the workload never produced a partial character");
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_stop_string_across_tokens)
{
    mock_model_cfg c = cfg_of(97, -1, 0);
    int32_t p[5] = {40, 41, 42, 43, 44}, ref[80];
    mock_model_greedy(&c, p, 5, 80, ref);
    char T[128];
    ascii_text(ref, 80, T);
    for (int k = 8; k < 40; k += 7) {
        mock_rig r = open_rig(97, -1, 0);
        char stop[4] = {T[k], T[k + 1], T[k + 2], 0}; /* three tokens, two boundaries */
        const char *stops[] = {stop};
        const char *first = strstr(T, stop);
        size_t at = (size_t)(first - T);
        tout o = {0};
        submit(r.e, NULL, p, 5, 80, stops, 1, 0, &o);
        run(r.e);
        ck_assert_int_eq(o.fin, LLMRT_FINISH_STOP);
        ck_assert_str_eq(o.stop_reason, stop);
        ck_assert_int_eq(o.stop_token, -1);
        ck_assert_uint_eq(o.len, at); /* the text before the stop, nothing of it */
        ck_assert_mem_eq(o.text, T, at);
        /* generation ends with the token completing the stop (specials have no text) */
        int n_tok = 0;
        for (size_t chars = 0; chars < at + 3; n_tok++)
            chars += ref[n_tok] < 95;
        ck_assert_int_eq(o.n, n_tok);
        for (int i = 0; i < o.n; i++) /* at no point did text from the stop leak */
            ck_assert_uint_le(o.len_after[i], at);
        mock_rig_close(&r);
    }
}
END_TEST

START_TEST(test_held_back_then_released)
{
    mock_model_cfg c = cfg_of(97, -1, 0);
    int32_t p[3] = {10, 20, 30}, ref[60];
    mock_model_greedy(&c, p, 3, 60, ref);
    char T[64];
    ascii_text(ref, 60, T);
    /* a stop that starts like T[20..22) but continues with a character never generated */
    char stop[8] = {T[20], T[21], '\x7f', 0};
    const char *stops[] = {stop};
    mock_rig r = open_rig(97, -1, 0);
    tout o = {0};
    submit(r.e, NULL, p, 3, 60, stops, 1, 0, &o);
    run(r.e);
    ck_assert_int_eq(o.fin, LLMRT_FINISH_LENGTH);
    ck_assert_str_eq(o.text, T); /* everything comes out in the end */
    ck_assert_uint_le(o.len_after[20], 20); /* T[20] held: could start the stop */
    ck_assert_uint_le(o.len_after[21], 20); /* T[20..22) still could */
    ck_assert_uint_ge(o.len_after[22], 22); /* T[22] is not '\x7f': released */
    /* held text is released at the end of a length-limited sequence */
    char stop2[4] = {T[strlen(T) - 1], '\x7f', 0};
    const char *stops2[] = {stop2};
    tout o2 = {0};
    submit(r.e, NULL, p, 3, 60, stops2, 1, 0, &o2);
    run(r.e);
    ck_assert_str_eq(o2.text, T);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_earliest_stop_wins_and_eos)
{
    mock_model_cfg c = cfg_of(97, -1, 0);
    int32_t p[4] = {1, 2, 3, 4}, ref[60];
    mock_model_greedy(&c, p, 4, 60, ref);
    char T[64];
    ascii_text(ref, 60, T);
    char late[4] = {T[40], T[41], 0}, early[4] = {T[15], T[16], T[17], 0};
    const char *stops[] = {late, early};
    size_t at = (size_t)(strstr(T, early) - T), at_late = (size_t)(strstr(T, late) - T);
    const char *expect = at <= at_late ? early : late;
    size_t expect_at = at <= at_late ? at : at_late;
    mock_rig r = open_rig(97, -1, 0);
    tout o = {0};
    submit(r.e, NULL, p, 4, 60, stops, 2, 0, &o);
    run(r.e);
    ck_assert_str_eq(o.stop_reason, expect);
    ck_assert_uint_eq(o.len, expect_at);
    mock_rig_close(&r);
    /* eos: text ends without the eos token's text (it is special anyway), stop_token set */
    mock_rig r2 = open_rig(97, 96, 15);
    tout e = {0};
    submit(r2.e, NULL, p, 4, 60, NULL, 0, 0, &e);
    run(r2.e);
    ck_assert_int_eq(e.fin, LLMRT_FINISH_STOP);
    ck_assert_int_eq(e.stop_token, 96);
    mock_model_cfg ce = cfg_of(97, 96, 15);
    int32_t eref[60];
    ck_assert_int_eq(mock_model_greedy(&ce, p, 4, 60, eref), 12);
    char ET[64];
    ascii_text(eref, 11, ET);
    ck_assert_int_eq(e.n, 12);
    ck_assert_str_eq(e.text, ET);
    mock_rig_close(&r2);
}
END_TEST

/* Stop strings with prefix caching: a request that repeats an earlier one (its prompt and
 * then its reply as the next turn's prompt) stops at the same place with the same text,
 * whether its prompt was computed or found in the cache. */
START_TEST(test_stop_strings_with_cached_prefix)
{
    mock_model_cfg c = cfg_of(97, -1, 0);
    int32_t p[80], ref[60];
    for (int i = 0; i < 21; i++)
        p[i] = (i * 13 + 5) % 95;
    mock_model_greedy(&c, p, 21, 60, ref);
    char T[64];
    ascii_text(ref, 60, T);
    char stop[4] = {T[30], T[31], 0};
    const char *stops[] = {stop};
    size_t at = (size_t)(strstr(T, stop) - T);
    for (int on = 0; on < 2; on++) {
        mock_rig r;
        mock_rig_opts o = mock_rig_default_opts();
        o.tok = g_tok;
        o.set.block_size = 4;
        o.set.prefix_caching = on;
        llmrt_error err = {0};
        ck_assert_msg(mock_rig_open(&r, &o, &err) == LLMRT_OK, "%s", err.msg);
        tout a = {0}, b = {0}, t2 = {0};
        submit(r.e, NULL, p, 21, 60, stops, 1, 0, &a);
        run(r.e);
        submit(r.e, NULL, p, 21, 60, stops, 1, 0, &b);
        run(r.e);
        for (tout *x = &a; x; x = x == &a ? &b : NULL) {
            ck_assert_int_eq(x->fin, LLMRT_FINISH_STOP);
            ck_assert_str_eq(x->stop_reason, stop);
            ck_assert_uint_eq(x->len, at);
            ck_assert_mem_eq(x->text, T, at);
        }
        ck_assert_int_eq(a.n, b.n);
        ck_assert_int_eq(b.cached, on ? 20 : 0);
        /* the next turn: prompt, reply, and a stop that comes later in the reference */
        memcpy(p + 21, a.ids, sizeof *p * (size_t)a.n);
        int n2 = 21 + a.n;
        int32_t ref2[40];
        mock_model_greedy(&c, p, n2, 40, ref2);
        char T2[48];
        ascii_text(ref2, 40, T2);
        char stop2[4] = {T2[20], T2[21], 0};
        const char *stops2[] = {stop2};
        submit(r.e, NULL, p, n2, 40, stops2, 1, 0, &t2);
        run(r.e);
        ck_assert_int_eq(t2.fin, LLMRT_FINISH_STOP);
        size_t at2 = (size_t)(strstr(T2, stop2) - T2);
        ck_assert_uint_eq(t2.len, at2);
        ck_assert_mem_eq(t2.text, T2, at2);
        /* the reply's blocks were cached too: more than the prompt's 20 tokens */
        if (on)
            ck_assert_int_gt(t2.cached, 20);
        else
            ck_assert_int_eq(t2.cached, 0);
        mock_rig_close(&r);
    }
}
END_TEST

START_TEST(test_stop_strings_validated)
{
    mock_rig r = open_rig(97, -1, 0);
    int32_t p[2] = {1, 2};
    const char *bad[] = {"ok", "\xC3"};
    llmrt_request q;
    llmrt_request_init(&q);
    q.prompt_ids = p, q.n_prompt = 2;
    q.sampling.stop = bad, q.sampling.n_stop = 2;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "stop string 1") && strstr(err.msg, "UTF-8"), "%s", err.msg);
    const char *empty[] = {""};
    q.sampling.stop = empty, q.sampling.n_stop = 1;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "empty"));
    mock_rig_close(&r);
}
END_TEST

/* ---- the stopper on its own ---- */

static void push_all(llmrt_stopper *s, const char *const *pieces, int n, char *out, int *matched)
{
    size_t k = 0;
    *matched = -1;
    for (int i = 0; i < n; i++) {
        const char *o;
        size_t on;
        int m = llmrt_stopper_push(s, pieces[i], strlen(pieces[i]), &o, &on);
        memcpy(out + k, o, on);
        k += on;
        if (m >= 0)
            *matched = m;
    }
    const char *o;
    size_t on;
    llmrt_stopper_flush(s, &o, &on);
    memcpy(out + k, o, on);
    k += on;
    out[k] = 0;
}

START_TEST(test_stopper_unit)
{
    llmrt_error err = {0};
    llmrt_stopper *s;
    const char *stops[] = {"\n\nUser:", "###"};
    ck_assert_int_eq(llmrt_stopper_new(stops, 2, &s, &err), LLMRT_OK);
    const char *pieces[] = {"Hello", "\n", "\nUs", "er", ": more"};
    char out[128];
    int m;
    push_all(s, pieces, 5, out, &m);
    ck_assert_int_eq(m, 0);
    ck_assert_str_eq(out, "Hello");
    ck_assert_str_eq(llmrt_stopper_matched(s), "\n\nUser:");
    llmrt_stopper_free(s);

    /* a near miss is released in full, in order */
    ck_assert_int_eq(llmrt_stopper_new(stops, 2, &s, &err), LLMRT_OK);
    const char *near[] = {"a#", "#", "b\n", "\nUse", "d"};
    push_all(s, near, 5, out, &m);
    ck_assert_int_eq(m, -1);
    ck_assert_str_eq(out, "a##b\n\nUsed");
    ck_assert_ptr_null(llmrt_stopper_matched(s));
    llmrt_stopper_free(s);

    /* match inside one piece, with text after it dropped; overlapping prefixes */
    const char *st2[] = {"aab"};
    ck_assert_int_eq(llmrt_stopper_new(st2, 1, &s, &err), LLMRT_OK);
    const char *pc[] = {"xa", "a", "aab", "zzz"};
    push_all(s, pc, 4, out, &m);
    ck_assert_int_eq(m, 0);
    ck_assert_str_eq(out, "xaa"); /* "xaaaab": the first "aab" starts at 3 */
    llmrt_stopper_free(s);

    /* no stops: pass-through */
    ck_assert_int_eq(llmrt_stopper_new(NULL, 0, &s, &err), LLMRT_OK);
    const char *pt[] = {"ab", "", "c"};
    push_all(s, pt, 3, out, &m);
    ck_assert_str_eq(out, "abc");
    llmrt_stopper_free(s);

    const char *emp[] = {""};
    ck_assert_int_eq(llmrt_stopper_new(emp, 1, &s, &err), LLMRT_ERR_INVALID_ARG);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("engine_text");
    TCase *tc = tcase_create("engine_text");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_text_prompt_and_stream);
    tcase_add_test(tc, test_utf8_whole_characters);
    tcase_add_test(tc, test_stop_string_across_tokens);
    tcase_add_test(tc, test_held_back_then_released);
    tcase_add_test(tc, test_earliest_stop_wins_and_eos);
    tcase_add_test(tc, test_stop_strings_with_cached_prefix);
    tcase_add_test(tc, test_stop_strings_validated);
    tcase_add_test(tc, test_stopper_unit);
    suite_add_tcase(su, tc);
    return tu_run_suite(su);
}
