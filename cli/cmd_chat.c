/* cmd_chat.c — `llmrt chat`: an interactive, multi-turn conversation through the model's chat
 * template, the reply streamed as it is generated.
 *
 * Why it is short: the history is rendered by the model plugin's chat format through the
 * engine (exactly as transformers'
 * apply_chat_template would) and every turn is one engine request; assistant turns are kept
 * in the history so the template can decide what of them the model sees again (Qwen3 drops
 * earlier reasoning). Lines starting with '/' are commands: /reset, /exit. Ctrl-D quits.
 *
 * Ctrl-C stops the reply being generated (its request is cancelled; what came so far stays in
 * the conversation) and the program goes on; a second Ctrl-C at the prompt quits. The signal
 * handler only counts and writes a byte to a pipe, which the prompt polls beside stdin, so
 * whichever thread the signal lands on, the prompt hears it. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llmrt/engine.h>

#include "commands.h"
#include "common.h"
#include "error.h"

static const char usage[] =
    "usage: llmrt chat [-c FILE] [--model DIR] [--system TEXT] [--no-thinking] [options]\n\n"
    "Interactive chat through the model's chat template (tokenizer_config.json); replies\n"
    "stream as they are generated. Type a message and press Enter. Commands: /reset forgets\n"
    "the conversation (keeps --system), /exit or Ctrl-D quits. Ctrl-C stops the reply being\n"
    "generated (the conversation keeps what came); a second Ctrl-C at the prompt quits.\n"
    CLI_SAMPLING_DEFAULTS_USAGE "\n"
    "options:\n"
    "  --system TEXT          a system message at the start of the conversation\n"
    "  --no-thinking          enable_thinking=false: the model answers without reasoning\n"
    "  --max-tokens N         most tokens per reply (default 2048; never more than what is\n"
    "                         left of cache.max_model_len after the conversation so far)\n"
    "  --temperature T        sampling temperature (0 = greedy; default: the model's)\n"
    "  --top-p P              nucleus sampling mass (default: the model's)\n"
    "  --top-k K              sample from the K most likely tokens (0 = all; default: the\n"
    "                         model's)\n"
    "  --seed S               seed of the first reply (later replies use S+1, S+2, ...)\n\n"
    CLI_COMMON_USAGE;

enum {
    OPT_SYSTEM = CLI_OPT_FIRST_OWN,
    OPT_NO_THINKING
};

#define DEFAULT_MAX_TOKENS 2048 /* per reply, when --max-tokens is not given */

/* ---- Ctrl-C ---- */

static volatile sig_atomic_t interrupts;   /* SIGINTs so far */
static int sig_pipe[2] = {-1, -1};         /* the handler writes a byte to [1] */

static void on_sigint(int sig)
{
    (void)sig;
    int saved = errno;
    interrupts++;
    if (sig_pipe[1] >= 0 && write(sig_pipe[1], "", 1) < 0) {
        /* the pipe is full: a Ctrl-C is pending anyway */
    }
    errno = saved;
}

static void drain_sig_pipe(void)
{
    char buf[64];
    while (sig_pipe[0] >= 0 && read(sig_pipe[0], buf, sizeof buf) > 0) {
    }
}

static int install_sigint(void)
{
    if (pipe(sig_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
        fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGINT, &sa, NULL);
}

/* stdin, a line at a time, waiting on the signal pipe too. */
typedef struct line_reader {
    char *buf;  /* read, not yet returned */
    size_t n, cap;
    char *line; /* the line returned last */
    size_t line_cap;
    int eof;
} line_reader;

/* 1: a line in *line (without its newline; valid until the next call), 0: end of input,
 * -1: Ctrl-C, -2: a read error. */
static int read_line(line_reader *r, char **line)
{
    for (;;) {
        char *nl = r->n ? memchr(r->buf, '\n', r->n) : NULL;
        if (nl || (r->eof && r->n)) {
            size_t len = nl ? (size_t)(nl - r->buf) : r->n;
            if (len + 1 > r->line_cap) {
                char *g = realloc(r->line, len + 1);
                if (!g)
                    return -2;
                r->line = g;
                r->line_cap = len + 1;
            }
            memcpy(r->line, r->buf, len);
            r->line[len] = 0;
            size_t used = nl ? len + 1 : len;
            memmove(r->buf, r->buf + used, r->n - used);
            r->n -= used;
            *line = r->line;
            return 1;
        }
        if (r->eof)
            return 0;
        struct pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -2;
        }
        if (fds[1].revents & POLLIN) {
            drain_sig_pipe();
            return -1;
        }
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if (r->n + 4096 > r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 8192;
            char *g = realloc(r->buf, cap);
            if (!g)
                return -2;
            r->buf = g;
            r->cap = cap;
        }
        ssize_t got = read(STDIN_FILENO, r->buf + r->n, r->cap - r->n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -2;
        if (got == 0)
            r->eof = 1;
        r->n += (size_t)got;
    }
}

typedef struct reply {
    char *text;
    size_t len, cap;
    int32_t prompt_tokens, completion_tokens;
    llmrt_finish_reason finish;
    char error[512];
} reply;

static void on_token(void *user, const llmrt_token_event *ev)
{
    reply *r = user;
    if (ev->text_len) {
        fwrite(ev->text, 1, ev->text_len, stdout);
        fflush(stdout);
        if (r->len + ev->text_len + 1 > r->cap) {
            size_t c = r->cap ? r->cap : 1024;
            while (c < r->len + ev->text_len + 1)
                c *= 2;
            char *t = realloc(r->text, c);
            if (!t)
                return;
            r->text = t, r->cap = c;
        }
        memcpy(r->text + r->len, ev->text, ev->text_len);
        r->len += ev->text_len;
        r->text[r->len] = 0;
    }
    r->prompt_tokens = ev->prompt_tokens;
    r->completion_tokens = ev->completion_tokens;
    if (ev->finish != LLMRT_FINISH_NONE) {
        r->finish = ev->finish;
        if (ev->error)
            snprintf(r->error, sizeof r->error, "%s", ev->error);
    }
}

/* The conversation: messages whose strings this file owns. */
typedef struct history {
    llmrt_chat_message *m;
    size_t n, cap;
} history;

static int history_add(history *h, const char *role, const char *content)
{
    if (h->n == h->cap) {
        size_t c = h->cap ? h->cap * 2 : 16;
        llmrt_chat_message *m = realloc(h->m, sizeof *m * c);
        if (!m)
            return -1;
        h->m = m, h->cap = c;
    }
    char *copy = strdup(content ? content : "");
    if (!copy)
        return -1;
    memset(&h->m[h->n], 0, sizeof h->m[h->n]);
    h->m[h->n].role = role;
    h->m[h->n].content = copy;
    h->n++;
    return 0;
}

static void history_truncate(history *h, size_t n)
{
    while (h->n > n)
        free((char *)h->m[--h->n].content);
}

int cmd_chat(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_COMMON_OPTIONS,
        {"system", required_argument, 0, OPT_SYSTEM},
        {"no-thinking", no_argument, 0, OPT_NO_THINKING},
        {"max-tokens", required_argument, 0, CLI_OPT_MAX_TOKENS},
        {"temperature", required_argument, 0, CLI_OPT_TEMPERATURE},
        {"top-p", required_argument, 0, CLI_OPT_TOP_P},
        {"top-k", required_argument, 0, CLI_OPT_TOP_K},
        {"seed", required_argument, 0, CLI_OPT_SEED},
        {0, 0, 0, 0}};
    cli_common c = {0};
    const char *system = NULL;
    int thinking = 1;
    cli_sampling smp = {.max_tokens = 0}; /* the rest: given, or the model's defaults */
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        int r = cli_common_opt(&c, opt, optarg, "chat", usage);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if ((r = cli_sampling_opt(&smp, opt, optarg, "chat", usage)) < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case OPT_SYSTEM: system = optarg; break;
        case OPT_NO_THINKING: thinking = 0; break;
        default: return cli_bad_option("chat", opts, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("chat", usage, "unexpected argument '%s'", argv[optind]);

    llmrt_runtime *rt = NULL;
    if (cli_open_runtime(&c, &rt))
        return 1;
    if (!cli_model_has_tokenizer(rt, "chat")) { /* before the (long) load */
        llmrt_runtime_close(rt);
        return 1;
    }
    int rc = 1;
    llmrt_error err = {0};
    llmrt_engine *e = NULL;
    history h = {0};
    char *line = NULL;
    line_reader lr = {0};
    const int interactive = isatty(STDIN_FILENO);

    llmrt_engine_options eo;
    llmrt_engine_options_init(&eo);
    eo.show_progress = 1; /* a bar on a terminal, plain lines in a log */
    if (llmrt_engine_create(rt, &eo, &e, &err) != LLMRT_OK) {
        cli_fail("chat", &err);
        goto done;
    }
    if (llmrt_engine_chat_unavailable(e)) {
        fprintf(stderr, "llmrt chat: error: no chat: %s\n", llmrt_engine_chat_unavailable(e));
        goto done;
    }
    if (system && history_add(&h, "system", system))
        goto oom;
    const size_t base = h.n;
    if (install_sigint() != 0) {
        fprintf(stderr, "llmrt chat: error: cannot handle Ctrl-C: %s\n", strerror(errno));
        goto done;
    }
    if (interactive)
        fprintf(stderr, "llmrt chat: type a message; /reset forgets the conversation, Ctrl-C "
                        "stops a reply, Ctrl-D quits\n");
    uint64_t turn = 0;
    int quit_armed = 0; /* the last thing was a Ctrl-C: another one at the prompt quits */
    for (;;) {
        if (interactive) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        int got_line = read_line(&lr, &line);
        if (got_line == -2) {
            fprintf(stderr, "llmrt chat: error: reading stdin: %s\n", strerror(errno));
            goto done;
        }
        if (got_line == -1) {
            if (quit_armed) {
                fputc('\n', stderr);
                break;
            }
            fprintf(stderr, "\n(Ctrl-C again to quit, or type a message)\n");
            quit_armed = 1;
            continue;
        }
        if (got_line == 0)
            break; /* Ctrl-D / end of input */
        quit_armed = 0;
        size_t got = strlen(line);
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        if (got == 0)
            continue;
        if (strcmp(line, "/exit") == 0 || strcmp(line, "/quit") == 0)
            break;
        if (strcmp(line, "/reset") == 0) {
            history_truncate(&h, base);
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (line[0] == '/' && line[1] != '/') {
            fprintf(stderr, "unknown command %s (commands: /reset, /exit; start a message with "
                            "// to send a leading /)\n", line);
            continue;
        }
        const char *msg = line[0] == '/' ? line + 1 : line;
        size_t before = h.n;
        if (history_add(&h, "user", msg))
            goto oom;
        llmrt_chat_options co = {.struct_size = sizeof co, .add_generation_prompt = 1,
                                 .enable_thinking = thinking};
        int32_t *prompt = NULL; /* what is typed stays text: no forged special tokens */
        size_t n_prompt = 0;
        if (llmrt_engine_chat_tokenize(e, h.m, (uint32_t)h.n, &co, 0, &prompt, &n_prompt,
                                       &err) != LLMRT_OK) {
            cli_fail("chat", &err);
            history_truncate(&h, before);
            continue;
        }
        reply r;
        memset(&r, 0, sizeof r);
        llmrt_request q;
        llmrt_request_init(&q);
        q.prompt_ids = prompt;
        q.n_prompt = (int32_t)n_prompt;
        /* the engine ends a reply at max_model_len anyway (FINISH_LENGTH) */
        q.sampling.max_tokens = smp.max_tokens > 0 ? (int32_t)smp.max_tokens : DEFAULT_MAX_TOKENS;
        cli_sampling_fill(&smp, e, &q.sampling, "chat", 0);
        if (smp.have_seed) {
            q.sampling.has_seed = 1;
            q.sampling.seed = (uint64_t)smp.seed + turn;
        }
        q.on_token = on_token;
        q.user = &r;
        uint64_t id = 0;
        llmrt_status st = llmrt_engine_submit(e, &q, &id, &err);
        free(prompt);
        if (st != LLMRT_OK) {
            cli_fail("chat", &err); /* e.g. the conversation no longer fits: /reset */
            if (st == LLMRT_ERR_LIMIT)
                fprintf(stderr, "(the conversation is too long for cache.max_model_len; /reset "
                                "starts over)\n");
            history_truncate(&h, before);
            continue;
        }
        turn++;
        /* step until the reply is over; a Ctrl-C cancels it (its final event comes with the
         * next step) */
        sig_atomic_t seen = interrupts;
        int cancelled = 0;
        while (llmrt_engine_has_work(e)) {
            if (interrupts != seen && !cancelled) {
                llmrt_engine_cancel(e, id);
                cancelled = 1;
            }
            if (llmrt_engine_step(e, &err) != LLMRT_OK) {
                putchar('\n');
                cli_fail("chat", &err);
                free(r.text);
                goto done;
            }
        }
        drain_sig_pipe(); /* the Ctrl-C was for the reply, not for the prompt */
        putchar('\n');
        fflush(stdout);
        if (r.finish == LLMRT_FINISH_CANCELLED) {
            fprintf(stderr, "[reply stopped by Ctrl-C: %d prompt tokens, %d generated; the "
                            "conversation keeps it. Ctrl-C again quits]\n",
                    r.prompt_tokens, r.completion_tokens);
            quit_armed = 1;
            if (history_add(&h, "assistant", r.text ? r.text : "")) {
                free(r.text);
                goto oom;
            }
            free(r.text);
            continue;
        }
        if (r.finish == LLMRT_FINISH_ERROR) {
            fprintf(stderr, "llmrt chat: error: %s\n", r.error);
            history_truncate(&h, before);
        } else if (history_add(&h, "assistant", r.text ? r.text : "")) {
            free(r.text);
            goto oom;
        }
        fprintf(stderr, "[%d prompt tokens, %d generated%s]\n", r.prompt_tokens,
                r.completion_tokens,
                r.finish == LLMRT_FINISH_LENGTH ? ", stopped at the token limit" : "");
        free(r.text);
    }
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "llmrt chat: out of memory\n");
done:
    free(lr.buf);
    free(lr.line);
    history_truncate(&h, 0);
    free(h.m);
    llmrt_engine_destroy(e);
    llmrt_runtime_close(rt);
    return rc;
}
