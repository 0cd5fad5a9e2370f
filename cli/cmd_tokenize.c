/* cmd_tokenize.c — `llmrt tokenize`: the tokenizer and chat template from the command line:
 * text → ids, ids → text, a messages file → rendered prompt (text or ids), and an encode
 * throughput benchmark. Useful on its own and the way integration tests reach the
 * tokenizer through the real binary. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat.h"
#include "chat_messages.h"
#include "clock.h"
#include "commands.h"
#include "common.h"
#include "fileutil.h"
#include "config.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: llmrt tokenize (--tokenizer PATH | --model DIR) [options] [TEXT...]\n\n"
    "  TEXT...                 encode the arguments (joined with spaces); prints ids\n"
    "  --file FILE             encode the contents of FILE (- for stdin) instead\n"
    "  --decode IDS...         decode ids (space or comma separated); prints the text\n"
    "  --skip-special          with --decode: leave out special tokens\n"
    "  --chat FILE.json        render a messages array (or {\"messages\", \"tools\"}) with the\n"
    "                          model's chat template; prints the ids of the prompt\n"
    "  --text                  with --chat: print the rendered prompt instead of ids\n"
    "  --no-thinking           with --chat: enable_thinking=false (empty think block)\n"
    "  --no-generation-prompt  with --chat: do not end with the assistant turn opener\n"
    "  --special-in-content    with --chat: special-token text inside the messages becomes\n"
    "                          special tokens (by default it stays text: a message cannot\n"
    "                          forge chat structure; the server's\n"
    "                          allow_special_tokens_in_content)\n"
    "  --special-as-text       special tokens written in the text are plain text\n"
    "  --add-special           add the post-processor's special tokens (e.g. BOS)\n"
    "  --pieces                print each token's string instead of its id\n"
    "  --bench FILE            encode FILE repeatedly; print throughput in MB/s\n"
    "  --threads N             with --bench: encode on N threads at once (default 1)\n"
    "  --seconds S             with --bench: measure for about S seconds (default 3)\n"
    "  --tokenizer PATH        tokenizer.json, or a folder holding it (and\n"
    "                          tokenizer_config.json); default: model.path\n\n"
    "Text and rendered prompts are printed followed by one newline.\n\n" CLI_COMMON_USAGE;

#define CMD "tokenize"

/* Read a file ("-" = stdin) or print why not; NULL on failure. */
static char *read_all(const char *path, size_t *len)
{
    char *data = NULL;
    llmrt_error err = {0};
    if (llmrt_read_file(path, &data, len, &err) != LLMRT_OK) {
        cli_fail(CMD, &err);
        return NULL;
    }
    return data;
}

static void print_ids(const llmrt_tokenizer *tok, const int32_t *ids, size_t n, int pieces)
{
    for (size_t i = 0; i < n; i++) {
        if (pieces) {
            const char *s = llmrt_tokenizer_token_str(tok, ids[i]);
            printf("%s%s", i ? " " : "", s ? s : "?");
        } else {
            printf("%s%d", i ? " " : "", ids[i]);
        }
    }
    printf("\n");
}

typedef struct bench_job {
    const llmrt_tokenizer *tok;
    const char *text;
    size_t len;
    const int32_t *expect;
    size_t n_expect;
    double seconds;
    long passes;
    int mismatch;
    llmrt_error err;
} bench_job;

static void *bench_thread(void *arg)
{
    bench_job *j = arg;
    double t0 = llmrt_now_s();
    do {
        int32_t *ids;
        size_t n;
        if (llmrt_tokenizer_encode(j->tok, j->text, j->len, 0, &ids, &n, &j->err) != LLMRT_OK)
            return NULL;
        if (n != j->n_expect || memcmp(ids, j->expect, n * sizeof *ids) != 0)
            j->mismatch = 1;
        free(ids);
        j->passes++;
    } while (llmrt_now_s() - t0 < j->seconds);
    return NULL;
}

static int run_bench(const llmrt_tokenizer *tok, const char *path, int threads, double seconds)
{
    size_t len;
    char *text = read_all(path, &len);
    if (!text)
        return 1;
    llmrt_error err = {0};
    int32_t *ids = NULL;
    size_t n;
    double t0 = llmrt_now_s(), c0;
    if (llmrt_tokenizer_encode(tok, text, len, 0, &ids, &n, &err) != LLMRT_OK) {
        free(text);
        return cli_fail(CMD, &err);
    }
    double cold = llmrt_now_s() - t0;
    bench_job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    int rc = 0;
    if (!jobs || !tid) {
        fprintf(stderr, "llmrt " CMD ": out of memory\n");
        rc = 1;
        goto done;
    }
    t0 = llmrt_now_s();
    c0 = llmrt_cpu_s();
    for (int i = 0; i < threads; i++) {
        jobs[i] = (bench_job){tok, text, len, ids, n, seconds, 0, 0, {0}};
        pthread_create(&tid[i], NULL, bench_thread, &jobs[i]);
    }
    long passes = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        passes += jobs[i].passes;
        if (jobs[i].err.code) {
            cli_fail(CMD, &jobs[i].err);
            rc = 1;
        }
        if (jobs[i].mismatch) {
            fprintf(stderr, "llmrt " CMD ": thread %d produced different ids (a thread-safety bug)\n", i);
            rc = 1;
        }
    }
    double wall = llmrt_now_s() - t0, cpu = llmrt_cpu_s() - c0;
    printf("encode bench: %s: %zu bytes, %zu tokens (%.2f bytes/token)\n", path, len, n,
           n ? (double)len / (double)n : 0.0);
    printf("  first pass (cold cache): %8.2f MB/s  %10.0f tokens/s\n", (double)len / cold / 1e6,
           (double)n / cold);
    printf("  repeated (%ld passes, %d thread%s): %8.2f MB/s  %10.0f tokens/s\n", passes, threads,
           threads == 1 ? "" : "s", (double)len * (double)passes / wall / 1e6,
           (double)n * (double)passes / wall);
    /* CPU time: what one core does, whatever else the machine is running. */
    printf("  per CPU-second:                 %8.2f MB/s  %10.0f tokens/s\n",
           (double)len * (double)passes / cpu / 1e6, (double)n * (double)passes / cpu);
done:
    free(jobs);
    free(tid);
    free(ids);
    free(text);
    return rc;
}

/* The folder of a tokenizer path (a folder, or a tokenizer.json in one). */
static const char *tok_dir(const char *path)
{
    static char dir[4200];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s", path);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return dir;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    return dir;
}

int cmd_tokenize(int argc, char **argv)
{
    enum {
        OPT_TOKENIZER = CLI_OPT_FIRST_OWN, OPT_FILE, OPT_DECODE, OPT_SKIP_SPECIAL, OPT_CHAT,
        OPT_TEXT, OPT_NO_THINKING, OPT_NO_GEN, OPT_SPECIAL_AS_TEXT, OPT_ADD_SPECIAL, OPT_PIECES,
        OPT_BENCH, OPT_THREADS, OPT_SECONDS, OPT_CONTENT_SPECIAL
    };
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                          {"tokenizer", required_argument, 0, OPT_TOKENIZER},
                                          {"file", required_argument, 0, OPT_FILE},
                                          {"decode", no_argument, 0, OPT_DECODE},
                                          {"skip-special", no_argument, 0, OPT_SKIP_SPECIAL},
                                          {"chat", required_argument, 0, OPT_CHAT},
                                          {"text", no_argument, 0, OPT_TEXT},
                                          {"no-thinking", no_argument, 0, OPT_NO_THINKING},
                                          {"no-generation-prompt", no_argument, 0, OPT_NO_GEN},
                                          {"special-as-text", no_argument, 0, OPT_SPECIAL_AS_TEXT},
                                          {"add-special", no_argument, 0, OPT_ADD_SPECIAL},
                                          {"pieces", no_argument, 0, OPT_PIECES},
                                          {"bench", required_argument, 0, OPT_BENCH},
                                          {"threads", required_argument, 0, OPT_THREADS},
                                          {"seconds", required_argument, 0, OPT_SECONDS},
                                          {"special-in-content", no_argument, 0,
                                           OPT_CONTENT_SPECIAL},
                                          {0, 0, 0, 0}};
    cli_common c = {0};
    const char *tok_path = NULL, *file = NULL, *chat = NULL, *bench = NULL;
    int decode = 0, skip_special = 0, as_text = 0, thinking = 1, gen_prompt = 1, pieces = 0;
    int threads = 1, content_special = 0;
    double seconds = 3;
    uint32_t flags = 0;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case OPT_TOKENIZER: tok_path = optarg; continue;
        case OPT_FILE: file = optarg; continue;
        case OPT_DECODE: decode = 1; continue;
        case OPT_SKIP_SPECIAL: skip_special = 1; continue;
        case OPT_CHAT: chat = optarg; continue;
        case OPT_TEXT: as_text = 1; continue;
        case OPT_NO_THINKING: thinking = 0; continue;
        case OPT_NO_GEN: gen_prompt = 0; continue;
        case OPT_SPECIAL_AS_TEXT: flags |= LLMRT_ENCODE_SPECIAL_AS_TEXT; continue;
        case OPT_ADD_SPECIAL: flags |= LLMRT_ENCODE_ADD_SPECIAL; continue;
        case OPT_PIECES: pieces = 1; continue;
        case OPT_CONTENT_SPECIAL: content_special = 1; continue;
        case OPT_BENCH: bench = optarg; continue;
        case OPT_THREADS:
            threads = (int)strtol(optarg, &end, 10);
            if (*end || threads < 1 || threads > 256)
                return cli_usage_error(CMD, usage, "--threads wants 1..256, not '%s'", optarg);
            continue;
        case OPT_SECONDS:
            seconds = strtod(optarg, &end);
            if (*end || !(seconds > 0 && seconds <= 3600))
                return cli_usage_error(CMD, usage, "--seconds wants a number in (0, 3600], not '%s'",
                                       optarg);
            continue;
        }
        int r = cli_common_opt(&c, opt, optarg, CMD, usage);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_bad_option(CMD, opts, argv);
    }
    int modes = decode + (chat != NULL) + (bench != NULL) + (file != NULL);
    if (modes > 1)
        return cli_usage_error(CMD, usage, "choose one of TEXT, --file, --decode, --chat, --bench");
    if ((chat || bench || file) && optind < argc)
        return cli_usage_error(CMD, usage, "unexpected argument '%s'", argv[optind]);
    if (modes == 0 && optind >= argc)
        return cli_usage_error(CMD, usage, "nothing to do: give TEXT, --file, --decode, --chat or --bench");
    if (decode && optind >= argc)
        return cli_usage_error(CMD, usage, "--decode wants ids: one or more non-negative integers");
    if (as_text && !chat)
        return cli_usage_error(CMD, usage, "--text goes with --chat");

    /* Where the tokenizer is: --tokenizer, else model.path (--model, -c, --set, env). The
     * runtime's plugins render --chat (the model plugin's chat format). */
    llmrt_error err = {0};
    llmrt_runtime *rt = NULL;
    if (cli_open_runtime(&c, &rt))
        return 1;
    if (!tok_path) {
        tok_path = llmrt_config_get(rt->cfg, "model.path");
        if (!tok_path || !tok_path[0]) {
            llmrt_runtime_close(rt);
            return cli_usage_error(CMD, usage, "no tokenizer: give --tokenizer PATH or --model DIR");
        }
    }
    llmrt_tokenizer *tok = NULL;
    int rc = 0;
    if (llmrt_tokenizer_load(tok_path, &tok, &err) != LLMRT_OK) {
        llmrt_runtime_close(rt);
        return cli_fail(CMD, &err);
    }

    char *text = NULL, *rendered = NULL;
    int32_t *ids = NULL;
    size_t len = 0, n = 0;
    llmrt_chat_messages *msgs = NULL;
    llmrt_chat_ref chat_fmt = {0};
    if (bench) {
        rc = run_bench(tok, bench, threads, seconds);
    } else if (decode) {
        /* The remaining arguments are ids: "1 2 3", "1,2,3" or several arguments. */
        size_t total = 1;
        for (int i = optind; i < argc; i++)
            total += strlen(argv[i]) + 1;
        char *joined = calloc(total, 1);
        int32_t *parsed = NULL;
        int k = -1;
        if (joined) {
            for (int i = optind; i < argc; i++) {
                strcat(joined, argv[i]);
                strcat(joined, " ");
            }
            k = cli_parse_ids(joined, &parsed);
        }
        free(joined);
        if (k == 0)
            free(parsed);
        if (k <= 0) {
            llmrt_tokenizer_free(tok);
            llmrt_runtime_close(rt);
            return cli_usage_error(CMD, usage, "--decode wants ids: one or more non-negative integers separated by spaces or commas");
        }
        if (llmrt_tokenizer_decode(tok, parsed, (size_t)k, skip_special, &text, &len, &err)) {
            rc = cli_fail(CMD, &err);
        } else {
            fwrite(text, 1, len, stdout);
            printf("\n");
        }
        free(parsed);
    } else if (chat) {
        char *data = read_all(chat, &len);
        if (!data) {
            rc = 1;
        } else if (llmrt_chat_messages_parse(data, len, chat, &msgs, &err) ||
                   llmrt_chat_open_dir(rt, tok_dir(tok_path), tok, &chat_fmt, &err)) {
            rc = cli_fail(CMD, &err);
        } else {
            llmrt_chat_options o = {sizeof o, gen_prompt, thinking,
                                    (const char *const *)msgs->tools, msgs->n_tools};
            /* as the server does: special-token text in the messages stays text, unless
             * --special-in-content (a trusted deployment's allow_special_tokens_in_content) */
            uint32_t cf = (content_special ? LLMRT_CHAT_CONTENT_SPECIAL : 0) |
                          ((flags & LLMRT_ENCODE_ADD_SPECIAL) ? LLMRT_CHAT_ADD_SPECIAL : 0);
            if (llmrt_chat_encode(&chat_fmt, tok, msgs->msgs, msgs->n, &o, cf, &ids, &n,
                                  &rendered, &err)) {
                rc = cli_fail(CMD, &err);
            } else if (as_text) {
                fputs(rendered, stdout);
                printf("\n");
            } else {
                print_ids(tok, ids, n, pieces);
            }
        }
        free(data);
    } else {
        if (file) {
            text = read_all(file, &len);
            if (!text)
                rc = 1;
        } else {
            size_t total = 1;
            for (int i = optind; i < argc; i++)
                total += strlen(argv[i]) + 1;
            text = calloc(total, 1);
            for (int i = optind; text && i < argc; i++) {
                if (i > optind)
                    strcat(text, " ");
                strcat(text, argv[i]);
            }
            len = text ? strlen(text) : 0;
        }
        if (text && llmrt_tokenizer_encode(tok, text, len, flags, &ids, &n, &err))
            rc = cli_fail(CMD, &err);
        else if (text)
            print_ids(tok, ids, n, pieces);
    }
    free(ids);
    free(text);
    free(rendered);
    llmrt_chat_messages_free(msgs);
    llmrt_chat_close(&chat_fmt);
    llmrt_tokenizer_free(tok);
    llmrt_runtime_close(rt);
    if (fflush(stdout) != 0)
        rc = 1;
    return rc;
}
