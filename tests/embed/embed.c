/* embed.c — a program that embeds the engine, built against the installed llmrt only
 * (`pkg-config --cflags --libs llmrt-engine`): it includes <llmrt/engine.h> and nothing else
 * of llmrt, opens a runtime from `--set`-style arguments, generates greedily from token ids
 * and prints the ids on one line, as `llmrt generate --print-ids` does.
 *   usage: embed MODEL_DIR ID[,ID...] MAX_TOKENS [section.key=value ...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/engine.h>

static void on_token(void *user, const llmrt_token_event *ev)
{
    int *first = user;
    if (ev->token >= 0) {
        printf("%s%d", *first ? "" : " ", ev->token);
        *first = 0;
    }
    if (ev->finish != LLMRT_FINISH_NONE)
        printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: embed MODEL_DIR ID[,ID...] MAX_TOKENS [section.key=value ...]\n");
        return 2;
    }
    char model[4200];
    snprintf(model, sizeof model, "model.path=%s", argv[1]);
    const char *sets[64];
    int n = 0;
    sets[n++] = model;
    for (int i = 4; i < argc && n < 64; i++)
        sets[n++] = argv[i];
    int32_t ids[256];
    int n_ids = 0;
    for (char *s = argv[2], *end; *s && n_ids < 256; s = *end ? end + 1 : end)
        ids[n_ids++] = (int32_t)strtol(s, &end, 10);

    llmrt_error err = {0};
    llmrt_runtime *rt = NULL;
    llmrt_engine *e = NULL;
    int rc = 1, first = 1;
    if (llmrt_runtime_open(NULL, sets, n, &rt, &err) != LLMRT_OK)
        goto done;
    llmrt_engine_options o;
    llmrt_engine_options_init(&o);
    o.quiet = 1;
    if (llmrt_engine_create(rt, &o, &e, &err) != LLMRT_OK)
        goto done;
    llmrt_request r;
    llmrt_request_init(&r);
    r.prompt_ids = ids;
    r.n_prompt = n_ids;
    r.sampling.max_tokens = atoi(argv[3]);
    r.sampling.ignore_eos = 1;
    r.on_token = on_token;
    r.user = &first;
    if (llmrt_engine_submit(e, &r, NULL, &err) != LLMRT_OK || llmrt_engine_run(e, &err) != LLMRT_OK)
        goto done;
    fprintf(stderr, "embed: llmrt %s\n", llmrt_version());
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "embed: %s\n", err.msg);
    llmrt_engine_destroy(e);
    llmrt_runtime_close(rt);
    return rc;
}
