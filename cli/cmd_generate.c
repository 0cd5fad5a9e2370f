/* cmd_generate.c — `llmrt generate`: one prompt streamed to stdout, or a file of prompts
 * submitted together and batched, one output line each in input order. A summary (load time,
 * prefill and decode speed, inter-token latency, KV capacity, prefix-cache hits, memory path,
 * backend) goes to stderr.
 *
 * Why a thin front end: generation, batching and stops all happen in the engine
 * (include/llmrt/engine.h); this file only turns options into requests and events into
 * output, so what generate measures is what bench and serve run. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/engine.h>

#include "commands.h"
#include "common.h"
#include "error.h"
#include "stats.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: llmrt generate [-c FILE] [--model DIR] (--prompt TEXT | --prompt-ids LIST |\n"
    "                      --prompts-file FILE [--ids]) --max-tokens N [options]\n\n"
    "Generates from a prompt and streams the text to stdout. With --prompts-file every line\n"
    "is a prompt; all are submitted at once and batched, and one line per prompt is printed\n"
    "in input order (newlines in the output written as \\n, backslashes as \\\\). A summary\n"
    "goes to stderr.\n"
    CLI_SAMPLING_DEFAULTS_USAGE "\n"
    "options:\n"
    "  --prompt TEXT          prompt text (needs the model folder's tokenizer.json)\n"
    "  --prompt-ids LIST      prompt token ids, comma or space separated\n"
    "  --prompts-file FILE    one prompt per line (text, or ids with --ids)\n"
    "  --ids                  the lines of --prompts-file are token ids\n"
    "  --max-tokens N         most tokens to generate per prompt (required)\n"
    "  --temperature T        0 = greedy (default: the model's, else 0)\n"
    "  --top-p P              nucleus sampling mass in (0, 1] (default: the model's, else 1)\n"
    "  --top-k K              sample from the K most likely tokens (default: the model's,\n"
    "                         else 0 = all)\n"
    "  --min-p P              drop tokens below P x the most likely one's probability\n"
    "                         (default: the model's, else 0)\n"
    "  --seed S               seed: the same seed gives the same output (default: random)\n"
    "  --ignore-eos           keep generating past the model's end-of-sequence tokens\n"
    "  --print-ids            print the generated ids (one line, space separated) instead\n"
    "                         of text\n"
    "  --no-stream            print each output when it is complete\n\n" CLI_COMMON_USAGE;

enum {
    OPT_PROMPT = CLI_OPT_FIRST_OWN,
    OPT_PROMPT_IDS,
    OPT_PROMPTS_FILE,
    OPT_IDS,
    OPT_IGNORE_EOS,
    OPT_PRINT_IDS,
    OPT_NO_STREAM
};

struct gen;

/* One prompt's output. */
typedef struct gen_out {
    struct gen *g;
    int32_t *ids;
    int32_t n, cap;
    char *text;
    size_t len, text_cap;
    llmrt_finish_reason finish;
    char error[512];
    double t_first, t_last;
    double *itl; /* inter-token gaps, seconds */
    int32_t n_itl, itl_cap;
    int32_t prompt_tokens;
} gen_out;

typedef struct gen {
    gen_out *outs;
    int n;
    int stream;      /* write text to stdout as it comes (single prompt) */
    int print_ids;
    int remaining;
    /* step records → prefill / decode speed */
    double prefill_s, decode_s;
    uint64_t prefill_tokens, decode_tokens;
    /* decode steps' bus traffic (CPU weight offload): as bench's steps.bus_gbps */
    uint64_t decode_steps;
    double decode_offload_bytes, decode_bus_bytes, decode_busy_ms;
} gen;

static int grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static void on_token(void *user, const llmrt_token_event *ev)
{
    gen_out *o = user;
    struct gen *g = o->g;
    o->prompt_tokens = ev->prompt_tokens;
    if (ev->token >= 0) {
        if (o->n > 0 && grow((void **)&o->itl, &o->itl_cap, o->n_itl + 1, sizeof *o->itl) == 0)
            o->itl[o->n_itl++] = ev->time_s - o->t_last;
        if (o->n == 0)
            o->t_first = ev->time_s;
        o->t_last = ev->time_s;
        if (grow((void **)&o->ids, &o->cap, o->n + 1, sizeof *o->ids) == 0)
            o->ids[o->n++] = ev->token;
    }
    if (ev->text_len) {
        if (g->stream && !g->print_ids) {
            fwrite(ev->text, 1, ev->text_len, stdout);
            fflush(stdout);
        } else {
            size_t need = o->len + ev->text_len + 1;
            if (need > o->text_cap) {
                size_t c = o->text_cap ? o->text_cap : 256;
                while (c < need)
                    c *= 2;
                char *t = realloc(o->text, c);
                if (t)
                    o->text = t, o->text_cap = c;
            }
            if (need <= o->text_cap) {
                memcpy(o->text + o->len, ev->text, ev->text_len);
                o->len += ev->text_len;
                o->text[o->len] = 0;
            }
        }
    }
    if (ev->finish != LLMRT_FINISH_NONE) {
        o->finish = ev->finish;
        if (ev->error)
            snprintf(o->error, sizeof o->error, "%s", ev->error);
        g->remaining--;
    }
}

static void on_step(void *user, const llmrt_step_record *r)
{
    gen *g = user;
    if (r->n_prefill_tokens > 0) {
        g->prefill_s += r->wall_ms * 1e-3;
        g->prefill_tokens += (uint64_t)r->n_prefill_tokens;
    } else {
        g->decode_s += r->wall_ms * 1e-3;
        g->decode_tokens += (uint64_t)r->n_decode_seqs;
        g->decode_steps++;
        g->decode_offload_bytes += (double)r->offload_bytes;
        g->decode_bus_bytes += (double)(r->h2d_bytes + r->d2h_bytes);
        g->decode_busy_ms += r->gpu_busy_ms;
    }
}

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n')
            fputs("\\n", stdout);
        else if (s[i] == '\\')
            fputs("\\\\", stdout);
        else if (s[i] == '\r')
            fputs("\\r", stdout);
        else
            putchar(s[i]);
    }
}

static void print_ids(const gen_out *o)
{
    for (int32_t i = 0; i < o->n; i++)
        printf(i ? " %d" : "%d", o->ids[i]);
    putchar('\n');
}

/* Lines of a file (without the newline); *n lines. */
static char **read_lines(const char *path, int *n, llmrt_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        llmrt_fail(err, LLMRT_ERR_IO, "cannot open --prompts-file %s: %s", path, strerror(errno));
        return NULL;
    }
    char **lines = NULL;
    int cap = 0;
    *n = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **g = realloc(lines, sizeof *g * (size_t)cap);
            if (!g)
                break;
            lines = g;
        }
        lines[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (*n == 0)
        llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "--prompts-file %s has no lines", path);
    return lines;
}

int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"prompt", required_argument, 0, OPT_PROMPT},
        {"prompt-ids", required_argument, 0, OPT_PROMPT_IDS},
        {"prompts-file", required_argument, 0, OPT_PROMPTS_FILE},
        {"ids", no_argument, 0, OPT_IDS},
        {"max-tokens", required_argument, 0, CLI_OPT_MAX_TOKENS},
        {"temperature", required_argument, 0, CLI_OPT_TEMPERATURE},
        {"top-p", required_argument, 0, CLI_OPT_TOP_P},
        {"top-k", required_argument, 0, CLI_OPT_TOP_K},
        {"min-p", required_argument, 0, CLI_OPT_MIN_P},
        {"seed", required_argument, 0, CLI_OPT_SEED},
        {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
        {"print-ids", no_argument, 0, OPT_PRINT_IDS},
        {"no-stream", no_argument, 0, OPT_NO_STREAM},
        {0, 0, 0, 0}};
    cli_common c = {0};
    const char *prompt = NULL, *prompt_ids = NULL, *prompts_file = NULL;
    int file_ids = 0, ignore_eos = 0, want_ids = 0, no_stream = 0;
    cli_sampling smp = {.max_tokens = -1}; /* the rest: given, or the model's defaults */
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        int r = cli_common_opt(&c, opt, optarg, "generate", usage);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if ((r = cli_sampling_opt(&smp, opt, optarg, "generate", usage)) < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case OPT_PROMPT: prompt = optarg; break;
        case OPT_PROMPT_IDS: prompt_ids = optarg; break;
        case OPT_PROMPTS_FILE: prompts_file = optarg; break;
        case OPT_IDS: file_ids = 1; break;
        case OPT_IGNORE_EOS: ignore_eos = 1; break;
        case OPT_PRINT_IDS: want_ids = 1; break;
        case OPT_NO_STREAM: no_stream = 1; break;
        default: return cli_bad_option("generate", opts, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("generate", usage, "unexpected argument '%s'", argv[optind]);
    if (!!prompt + !!prompt_ids + !!prompts_file != 1)
        return cli_usage_error("generate", usage,
                               "give exactly one of --prompt, --prompt-ids, --prompts-file");
    if (file_ids && !prompts_file)
        return cli_usage_error("generate", usage, "--ids goes with --prompts-file");
    if (smp.max_tokens < 1)
        return cli_usage_error("generate", usage, "--max-tokens N is required");

    llmrt_runtime *rt = NULL;
    if (cli_open_runtime(&c, &rt))
        return 1;
    /* a text prompt without a tokenizer: say so before the (long) load */
    if ((prompt || (prompts_file && !file_ids)) && !cli_model_has_tokenizer(rt, "generate")) {
        llmrt_runtime_close(rt);
        return 2;
    }
    int rc = 1;
    llmrt_error err = {0};
    llmrt_engine *e = NULL;
    char **lines = NULL;
    int n_lines = 0;
    int32_t **pids = NULL;
    int32_t *pn = NULL;
    gen g;
    memset(&g, 0, sizeof g);

    llmrt_engine_options eo;
    llmrt_engine_options_init(&eo);
    eo.show_progress = 1;
    eo.on_step = on_step;
    eo.step_user = &g;
    if (llmrt_engine_create(rt, &eo, &e, &err) != LLMRT_OK) {
        cli_fail("generate", &err);
        goto done;
    }
    llmrt_tokenizer *tok = llmrt_engine_tokenizer(e);

    /* the prompts */
    if (prompts_file) {
        lines = read_lines(prompts_file, &n_lines, &err);
        if (!lines) {
            cli_fail("generate", &err);
            goto done;
        }
    } else {
        n_lines = 1;
    }
    pids = calloc((size_t)n_lines, sizeof *pids);
    pn = calloc((size_t)n_lines, sizeof *pn);
    g.outs = calloc((size_t)n_lines, sizeof *g.outs);
    if (!pids || !pn || !g.outs) {
        fprintf(stderr, "llmrt generate: out of memory\n");
        goto done;
    }
    g.n = n_lines;
    for (int i = 0; i < n_lines; i++)
        g.outs[i].g = &g;
    for (int i = 0; i < n_lines; i++) {
        const char *ids_text = prompt_ids ? prompt_ids : (file_ids ? lines[i] : NULL);
        const char *text = prompt ? prompt : (!file_ids && lines ? lines[i] : NULL);
        if (ids_text) {
            int n = cli_parse_ids(ids_text, &pids[i]);
            if (n < 0) {
                if (prompts_file)
                    fprintf(stderr, "llmrt generate: %s:%d: '%s' is not a list of token ids\n",
                            prompts_file, i + 1, ids_text);
                else
                    fprintf(stderr, "llmrt generate: --prompt-ids '%s' is not a list of token "
                                    "ids (use 1,2,3)\n", ids_text);
                rc = 2;
                goto done;
            }
            pn[i] = n;
        } else {
            if (!tok) {
                fprintf(stderr, "llmrt generate: a text prompt needs tokenizer.json in the "
                                "model folder; give token ids (--prompt-ids, --ids)\n");
                rc = 2;
                goto done;
            }
            size_t n = 0;
            if (llmrt_tokenizer_encode(tok, text, strlen(text), 0, &pids[i], &n, &err)) {
                if (prompts_file)
                    llmrt_error_prefix(&err, "%s:%d", prompts_file, i + 1);
                cli_fail("generate", &err);
                goto done;
            }
            pn[i] = (int32_t)n;
        }
        if (pn[i] == 0) {
            if (prompts_file)
                fprintf(stderr, "llmrt generate: %s:%d: empty prompt\n", prompts_file, i + 1);
            else
                fprintf(stderr, "llmrt generate: the prompt is empty\n");
            rc = 2;
            goto done;
        }
    }
    /* the engine ends a request at max_model_len: say when that cuts --max-tokens */
    {
        int32_t mml = llmrt_engine_max_model_len(e), n_cut = 0, first = -1;
        for (int i = 0; i < n_lines; i++)
            if ((int64_t)pn[i] + (int64_t)smp.max_tokens > mml) {
                if (first < 0)
                    first = i;
                n_cut++;
            }
        if (n_cut == 1 && !prompts_file)
            fprintf(stderr, "llmrt generate: note: --max-tokens %.0f is cut to %d: "
                            "cache.max_model_len = %d and the prompt has %d tokens\n",
                    smp.max_tokens, mml - pn[first], mml, pn[first]);
        else if (n_cut)
            fprintf(stderr, "llmrt generate: note: --max-tokens %.0f is cut by "
                            "cache.max_model_len = %d for %d prompt(s) (the first, %s:%d, to %d "
                            "tokens)\n",
                    smp.max_tokens, mml, n_cut, prompts_file, first + 1, mml - pn[first]);
    }
    g.stream = !prompts_file && !no_stream && tok != NULL;
    g.print_ids = want_ids || !tok;
    g.remaining = n_lines;
    for (int i = 0; i < n_lines; i++) {
        llmrt_request r;
        llmrt_request_init(&r);
        r.prompt_ids = pids[i];
        r.n_prompt = pn[i];
        r.sampling.max_tokens = (int32_t)smp.max_tokens;
        cli_sampling_fill(&smp, e, &r.sampling, "generate", 0);
        r.sampling.ignore_eos = ignore_eos;
        if (smp.have_seed) {
            r.sampling.has_seed = 1;
            r.sampling.seed = (uint64_t)smp.seed + (uint64_t)i; /* distinct per line */
        }
        r.on_token = on_token;
        r.user = &g.outs[i];
        if (llmrt_engine_submit(e, &r, NULL, &err) != LLMRT_OK) {
            if (prompts_file)
                llmrt_error_prefix(&err, "%s:%d", prompts_file, i + 1);
            cli_fail("generate", &err);
            goto done;
        }
    }
    if (llmrt_engine_run(e, &err) != LLMRT_OK) {
        cli_fail("generate", &err);
        goto done;
    }

    /* output */
    rc = 0;
    for (int i = 0; i < n_lines; i++) {
        gen_out *o = &g.outs[i];
        if (o->finish == LLMRT_FINISH_ERROR) {
            fprintf(stderr, "llmrt generate: error: %s\n", o->error);
            rc = 1;
        }
        if (g.print_ids)
            print_ids(o);
        else if (prompts_file) {
            print_escaped(o->text ? o->text : "", o->len);
            putchar('\n');
        } else if (!g.stream) {
            fwrite(o->text ? o->text : "", 1, o->len, stdout);
            putchar('\n');
        } else {
            putchar('\n');
        }
    }
    fflush(stdout);

    /* summary */
    llmrt_engine_stats st;
    llmrt_engine_stats_get(e, &st);
    uint64_t gen_tokens = 0, prompt_tokens = 0;
    int32_t n_itl = 0;
    for (int i = 0; i < n_lines; i++) {
        gen_tokens += (uint64_t)g.outs[i].n;
        prompt_tokens += (uint64_t)pn[i];
        n_itl += g.outs[i].n_itl;
    }
    double *all = n_itl ? malloc(sizeof *all * (size_t)n_itl) : NULL;
    double p50 = 0;
    if (all) {
        int32_t k = 0;
        for (int i = 0; i < n_lines; i++)
            for (int32_t j = 0; j < g.outs[i].n_itl; j++)
                all[k++] = g.outs[i].itl[j];
        p50 = llmrt_stats_median_inplace(all, (size_t)n_itl);
        free(all);
    }
    char pc[128] = "";
    if (st.prefix_caching)
        snprintf(pc, sizeof pc, " | prefix cache hits %llu of %llu tokens, %llu evictions",
                 (unsigned long long)st.prefix_cache_hits,
                 (unsigned long long)st.prefix_cache_queries,
                 (unsigned long long)st.prefix_cache_evictions);
    /* CPU weight offload: what each decode step moved over the bus, and how fast */
    char off[256] = "";
    if (st.mem.offload_layers > 0)
        snprintf(off, sizeof off,
                 " | offload %d layers (%s): %.3f MB per step over the bus, %.2f GB/s",
                 st.mem.offload_layers, st.mem.offload_path,
                 g.decode_steps ? g.decode_offload_bytes / (double)g.decode_steps / 1e6 : 0.0,
                 g.decode_busy_ms > 0 ? g.decode_bus_bytes / (g.decode_busy_ms * 1e-3) / 1e9
                                      : 0.0);
    fprintf(stderr,
            "llmrt generate: %d prompt(s), %llu prompt tokens, %llu generated | load %.2f s | "
            "prefill %.1f tok/s | decode %.1f tok/s | ITL p50 %.2f ms | KV cache %lld tokens "
            "(%s)%s | memory path %s%s | backend %s (%s)%s\n",
            n_lines, (unsigned long long)prompt_tokens, (unsigned long long)gen_tokens,
            st.load_time_s, g.prefill_s > 0 ? (double)g.prefill_tokens / g.prefill_s : 0.0,
            g.decode_s > 0 ? (double)g.decode_tokens / g.decode_s : 0.0, p50 * 1e3,
            (long long)st.kv_capacity_tokens, st.kv_dtype, pc, st.memory_path, off, st.backend,
            st.device, st.preemptions ? " | preemptions: raise cache.kv_tokens" : "");
done:
    llmrt_engine_destroy(e);
    for (int i = 0; lines && i < n_lines; i++)
        free(lines[i]);
    free(lines);
    for (int i = 0; pids && i < n_lines; i++)
        free(pids[i]);
    free(pids);
    free(pn);
    for (int i = 0; g.outs && i < g.n; i++) {
        free(g.outs[i].ids);
        free(g.outs[i].text);
        free(g.outs[i].itl);
    }
    free(g.outs);
    llmrt_runtime_close(rt);
    return rc;
}
