/* bench_grammar.c — a benchmark command, not a test: the host cost of structured outputs'
 * token masks at the real Qwen3 vocabulary (151,669 tokens, 151,936 mask bits), per decode
 * step, at batch 1 and 32.
 *
 * usage: bench_grammar [TOKENIZER_DIR]   (default: tools/fetch-qwen3-tokenizer.sh's cache)
 *
 * Replies are real tokenizations: JSON documents of each schema, written from word lists
 * and random numbers, encoded with the real tokenizer (what a model that writes such text
 * emits); each step masks the state before the reply's next token, as the engine does. A
 * step's time at batch B is the time of B masks, each row a different document in its own
 * state. "cold" starts from an empty cache (a new schema's first reply), "warm" replays new
 * documents of the same schema after a first pass (the steady state of a served schema).
 * Also: building the vocabulary trie, compiling each grammar, the end-of-budget full check
 * of the vocabulary, and applying a mask to one row of logits on the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar.h"
#include "tokenizer.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

static const char *words[] = {"alpha", "river", "Paris", "quantum", "garden", "silver", "Lyon",
                              "orbit", "maple", "coffee", "delta", "summit", "harbor", "violet",
                              "engine", "Tokyo", "ember", "forest", "pixel", "lunar", "Berlin",
                              "canyon", "nectar", "falcon", "meadow", "signal", "copper"};
#define W() words[rnd() % (sizeof words / sizeof *words)]

static void sentence(char *out, size_t cap, int n)
{
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        strncat(out, W(), cap - strlen(out) - 2);
        if (i + 1 < n)
            strncat(out, rnd() % 5 ? " " : ", ", cap - strlen(out) - 1);
    }
}

/* ---- the schemas and documents of them ---- */

typedef struct bench_case {
    const char *name;
    const char *schema;
    llmrt_gram_wrap wrap;
    void (*doc)(char *out, size_t cap);
} bench_case;

static const char *lower(const char *w, char *buf)
{
    size_t i = 0;
    for (; w[i] && i < 31; i++)
        buf[i] = (char)(w[i] >= 'A' && w[i] <= 'Z' ? w[i] - 'A' + 'a' : w[i]);
    buf[i] = 0;
    return buf;
}

static void doc_person(char *o, size_t cap)
{
    char name[64], street[128], a[32], b[32], c[32];
    snprintf(name, sizeof name, "%s %s", W(), W());
    sentence(street, sizeof street, 3);
    int n = snprintf(o, cap, "{\"name\": \"%s\", \"age\": %u, \"email\": \"%s.%s@%s.com\", \"tags\": [",
                     name, rnd() % 100, lower(W(), a), lower(W(), b), lower(W(), c));
    int k = (int)(rnd() % 5);
    for (int i = 0; i < k; i++)
        n += snprintf(o + n, cap - (size_t)n, "%s\"%s\"", i ? ", " : "", W());
    snprintf(o + n, cap - (size_t)n,
             "], \"address\": {\"street\": \"%u %s\", \"city\": \"%s\", \"zip\": \"%05u\"}, "
             "\"active\": %s}",
             1 + rnd() % 999, street, W(), rnd() % 100000, rnd() % 2 ? "true" : "false");
}

static void doc_any(char *o, size_t cap)
{
    char s[256];
    sentence(s, sizeof s, 6);
    snprintf(o, cap,
             "{\"id\": %u, \"title\": \"%s\", \"scores\": [%u.%u, %u, -%u.5], \"meta\": "
             "{\"source\": \"%s\", \"ok\": %s, \"nested\": {\"k\": null, \"list\": [\"%s\", "
             "\"%s\"]}}}",
             rnd() % 100000, s, rnd() % 10, rnd() % 100, rnd() % 50, rnd() % 9, W(),
             rnd() % 2 ? "true" : "false", W(), W());
}

static void doc_tool(char *o, size_t cap)
{
    snprintf(o, cap,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"%s\", "
             "\"unit\": \"%s\", \"days\": %u}}\n</tool_call>",
             W(), rnd() % 2 ? "celsius" : "fahrenheit", 1 + rnd() % 7);
}

static void doc_summary(char *o, size_t cap)
{
    char s[2048];
    sentence(s, sizeof s, 40 + (int)(rnd() % 40));
    snprintf(o, cap, "{\"summary\": \"%s.\", \"score\": 0.%u, \"label\": \"%s\"}", s,
             rnd() % 1000, rnd() % 2 ? "positive" : "negative");
}

static const bench_case cases[] = {
    {"person (nested object, enum-free, email format, counted arrays)",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
     "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},\"email\":{\"type\":"
     "\"string\",\"format\":\"email\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"string\",\"maxLength\":20},\"maxItems\":8},\"address\":{\"type\":\"object\","
     "\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"},\"zip\":"
     "{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"}},\"required\":[\"street\",\"city\","
     "\"zip\"],\"additionalProperties\":false},\"active\":{\"type\":\"boolean\"}},"
     "\"required\":[\"name\",\"age\",\"email\",\"tags\",\"address\",\"active\"],"
     "\"additionalProperties\":false}",
     {0},
     doc_person},
    {"json_object (any JSON object)", "{\"type\":\"object\"}", {0}, doc_any},
    {"tool call (Qwen3 markup, tool_choice required)",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},\"arguments\":"
     "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},\"unit\":"
     "{\"enum\":[\"celsius\",\"fahrenheit\"]},\"days\":{\"type\":\"integer\",\"minimum\":1,"
     "\"maximum\":14}},\"required\":[\"location\",\"unit\",\"days\"],\"additionalProperties\":"
     "false}},\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}",
     {.prefix = "<tool_call>\n", .suffix = "\n</tool_call>", .separator = "\n", .min_count = 1,
      .max_count = 8},
     doc_tool},
    {"long free text (a 40-80 word string)",
     "{\"type\":\"object\",\"properties\":{\"summary\":{\"type\":\"string\"},\"score\":{\"type\":"
     "\"number\",\"minimum\":0,\"maximum\":1},\"label\":{\"enum\":[\"positive\",\"negative\"]}},"
     "\"required\":[\"summary\",\"score\",\"label\"],\"additionalProperties\":false}",
     {0},
     doc_summary},
};

/* ---- one measurement ---- */

typedef struct reply {
    int32_t *ids;
    size_t n;
    llmrt_gram_state st, tmp;
} reply;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* B replies stepped together; per-step times into t [steps]; returns the steps. */
static size_t run_batch(const llmrt_gram *g, llmrt_gram_masker *mk, const llmrt_gram_vocab *v,
                        const llmrt_tokenizer *tok, const bench_case *c, int B, double *t,
                        size_t max_steps, uint32_t *words)
{
    reply *r = calloc((size_t)B, sizeof *r);
    size_t longest = 0;
    for (int b = 0; b < B; b++) {
        char doc[8192];
        c->doc(doc, sizeof doc);
        llmrt_error err = {0};
        if (llmrt_tokenizer_encode(tok, doc, strlen(doc), 0, &r[b].ids, &r[b].n, &err)) {
            fprintf(stderr, "encode: %s\n", err.msg);
            exit(1);
        }
        if (!llmrt_gram_matches(g, doc, strlen(doc))) {
            fprintf(stderr, "bench document does not match its schema: %s\n", doc);
            exit(1);
        }
        llmrt_gram_state_init(&r[b].st);
        llmrt_gram_state_init(&r[b].tmp);
        llmrt_gram_state_start(g, &r[b].st);
        if (r[b].n > longest)
            longest = r[b].n;
    }
    size_t steps = 0;
    for (size_t k = 0; k < longest && steps < max_steps; k++) {
        double t0 = now();
        for (int b = 0; b < B; b++)
            if (k < r[b].n)
                llmrt_gram_mask(mk, &r[b].st, words + (size_t)b * (size_t)llmrt_gram_vocab_words(v));
        t[steps++] = now() - t0;
        for (int b = 0; b < B; b++) {
            if (k >= r[b].n)
                continue;
            const uint32_t *w = words + (size_t)b * (size_t)llmrt_gram_vocab_words(v);
            if (!llmrt_gram_bit(w, r[b].ids[k])) {
                fprintf(stderr, "the mask forbids the document's own token %d\n", r[b].ids[k]);
                exit(1);
            }
            uint32_t len;
            const uint8_t *bytes = llmrt_gram_vocab_token(v, r[b].ids[k], &len);
            llmrt_gram_advance_bytes(g, &r[b].st, bytes, len, &r[b].tmp);
        }
    }
    for (int b = 0; b < B; b++) {
        free(r[b].ids);
        llmrt_gram_state_free(&r[b].st);
        llmrt_gram_state_free(&r[b].tmp);
    }
    free(r);
    return steps;
}

static void report(const char *what, double *t, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += t[i];
    qsort(t, n, sizeof *t, cmp_d);
    printf("| %-26s | %5zu | %8.3f | %8.3f | %8.3f | %8.3f |\n", what, n, sum / (double)n * 1e3,
           t[n / 2] * 1e3, t[(size_t)((double)(n - 1) * 0.99)] * 1e3, t[n - 1] * 1e3);
}

int main(int argc, char **argv)
{
    char dir[4096];
    if (argc > 1) {
        snprintf(dir, sizeof dir, "%s", argv[1]);
    } else {
        const char *h = getenv("XDG_CACHE_HOME");
        char home[4096];
        snprintf(home, sizeof home, "%s/.cache", getenv("HOME") ? getenv("HOME") : ".");
        snprintf(dir, sizeof dir, "%s/llmrt/tokenizer-qwen3/3.7.2", h ? h : home);
    }
    llmrt_error err = {0};
    llmrt_tokenizer *tok = NULL;
    if (llmrt_tokenizer_load(dir, &tok, &err)) {
        fprintf(stderr, "bench_grammar: %s (run tools/fetch-qwen3-tokenizer.sh, or give the "
                        "folder)\n",
                err.msg);
        return 2;
    }
    const int32_t bits = 151936;
    double t0 = now();
    llmrt_gram_vocab *v = NULL;
    if (llmrt_gram_vocab_from_tokenizer(tok, bits, &v, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("vocabulary: %d token ids, %d mask words, trie of %d nodes built in %.1f ms\n\n",
           llmrt_tokenizer_vocab_size(tok), llmrt_gram_vocab_words(v), llmrt_gram_vocab_nodes(v),
           (now() - t0) * 1e3);
    enum { B_MAX = 32, MAX_STEPS = 4096 };
    uint32_t *words = malloc((size_t)B_MAX * (size_t)llmrt_gram_vocab_words(v) * 4);
    double *t = malloc(MAX_STEPS * sizeof *t);
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const bench_case *c = &cases[ci];
        llmrt_gram *g = NULL;
        t0 = now();
        if (llmrt_gram_compile(LLMRT_GRAM_JSON_SCHEMA, c->schema, strlen(c->schema), NULL, NULL, 0,
                               &c->wrap, &g, &err)) {
            fprintf(stderr, "%s: %s\n", c->name, err.msg);
            return 1;
        }
        double compile_ms = (now() - t0) * 1e3;
        printf("### %s\ncompile %.2f ms, %d automaton states\n\n", c->name, compile_ms, g->n_st);
        for (int B = 1; B <= B_MAX; B *= 32) {
            llmrt_gram_masker *mk = NULL;
            llmrt_gram_masker_new(g, v, 16u << 20, &mk, &err);
            char what[64];
            size_t n = run_batch(g, mk, v, tok, c, B, t, MAX_STEPS, words);
            llmrt_gram_mask_stats ms;
            llmrt_gram_masker_stats(mk, &ms);
            if (B == 1) {
                printf("| masks per step            | steps | mean ms  | p50 ms   | p99 ms   | max ms   |\n");
                printf("|---|---|---|---|---|---|\n");
            }
            snprintf(what, sizeof what, "batch %d, cold", B);
            report(what, t, n);
            uint64_t computed = ms.tops_computed;
            for (int pass = 0; pass < 2; pass++) /* settle the cache */
                run_batch(g, mk, v, tok, c, B, t, MAX_STEPS, words);
            n = run_batch(g, mk, v, tok, c, B, t, MAX_STEPS, words);
            snprintf(what, sizeof what, "batch %d, warm", B);
            report(what, t, n);
            llmrt_gram_masker_stats(mk, &ms);
            printf("\n(batch %d: %lu top states walked in the cold pass, %lu in all; %lu stack "
                   "checks per mask; cache %.1f MB)\n\n",
                   B,
                   (unsigned long)computed, (unsigned long)ms.tops_computed,
                   (unsigned long)(ms.masks ? ms.checks / ms.masks : 0),
                   (double)ms.cache_bytes / 1e6);
            llmrt_gram_masker_free(mk);
        }
        /* the end-of-budget filter: every token checked against the state */
        llmrt_gram_masker *mk = NULL;
        llmrt_gram_masker_new(g, v, 16u << 20, &mk, &err);
        llmrt_gram_state s;
        llmrt_gram_state_init(&s);
        llmrt_gram_state_start(g, &s);
        t0 = now();
        llmrt_gram_mask_exact(mk, &s, 1000, words);
        printf("\nend-of-budget full check of the vocabulary (from the start state): %.1f ms\n\n",
               (now() - t0) * 1e3);
        llmrt_gram_state_free(&s);
        llmrt_gram_masker_free(mk);
        llmrt_gram_free(g);
    }
    /* applying a mask to a row on the CPU (the host path, and the CPU backend's extension) */
    float *row = malloc(sizeof(float) * (size_t)bits);
    for (int i = 0; i < bits; i++)
        row[i] = (float)(rnd() % 1000);
    memset(words, 0x55, (size_t)llmrt_gram_vocab_words(v) * 4);
    t0 = now();
    for (int rep = 0; rep < 100; rep++)
        for (int i = 0; i < bits; i++)
            if (!llmrt_gram_bit(words, i))
                row[i] = -INFINITY;
    printf("applying a mask to one row of %d logits on the CPU: %.3f ms\n", bits,
           (now() - t0) * 1e3 / 100);
    free(row);
    free(t);
    free(words);
    llmrt_gram_vocab_free(v);
    llmrt_tokenizer_free(tok);
    return 0;
}
