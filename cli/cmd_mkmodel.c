/* cmd_mkmodel.c — `llmrt mkmodel`: write a synthetic checkpoint in Hugging Face layout from a
 * model plugin's preset (or a config.json), optionally quantized by a quant plugin
 * (core/ckpt/synth.c chooses them, the plugins describe it, the host writes it), and
 * `--inspect DIR` to list any checkpoint's tensors as llmrt's reader sees them after
 * validating every header.
 *
 * Its own option table: here --config means a Hugging Face config.json to take the shapes
 * from, not a runtime.ini, so the common options do not apply. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "safetensors.h"
#include "synth.h"

static const char usage[] =
    "usage: llmrt mkmodel (--preset NAME | --config config.json) [options] -o DIR\n"
    "       llmrt mkmodel --list-presets\n"
    "       llmrt mkmodel --inspect DIR\n\n"
    "Write a checkpoint with deterministic random weights, in exactly the Hugging Face\n"
    "layout: config.json, generation_config.json, model.safetensors (or shards +\n"
    "model.safetensors.index.json when larger than the shard size). The model plugin that\n"
    "offers the preset (or runs the config.json's architecture) says what goes in it.\n\n"
    "  --preset NAME       shapes of a preset (--list-presets: tiny for CPU tests,\n"
    "                      qwen3-0.6b, qwen3-8b, ...)\n"
    "  --config FILE       shapes from a Hugging Face config.json\n"
    "  --model-plugin NAME the model plugin to ask (default: the one with the preset, or\n"
    "                      the one that runs the config.json)\n"
    "  --quant NAME|none   store the decoder linears in a quant plugin's format (awq: AutoAWQ\n"
    "                      gemm int4, fp16 model); none: dense (default)\n"
    "  --quant-opt K=V     an option of the quant format (repeatable; awq: group_size=32|64|128,\n"
    "                      default the largest that divides every in_features)\n"
    "  --group-size N      short for --quant-opt group_size=N\n"
    "  --model-opt K=V     an option of the model plugin (repeatable)\n"
    "  --dtype f16|bf16|f32  dense dtype (default: the config's, bf16 for presets; the quant's)\n"
    "  --seed S            weights are a function of the seed only (default 0)\n"
    "  --shard-mb N        largest shard in MB of 10^6 bytes, fractions allowed (default 2000)\n"
    "  --tie, --no-tie     tie lm_head to embed_tokens or not (default: the preset's/config's)\n"
    "  --tied-lm-head      with a tied model, still write lm_head.weight (= embed_tokens),\n"
    "                      as some released tied checkpoints do\n"
    "  --threads N         fill threads (default: one per CPU); the bytes do not depend on it\n"
    "  -o, --output DIR    output folder (created; files of an earlier mkmodel run replaced)\n"
    "  -q, --quiet         no progress display and no summary\n"
    "  --inspect DIR       validate DIR's checkpoint and list its tensors: name dtype [shape] file\n"
    "  --help              this text\n";

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s[0] || s[0] == '-')
        return 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return 0;
    *out = v;
    return 1;
}

static int cmp_view_name(const void *a, const void *b)
{
    const llmrt_tensor_view *x = *(const llmrt_tensor_view *const *)a;
    const llmrt_tensor_view *y = *(const llmrt_tensor_view *const *)b;
    return strcmp(x->name, y->name);
}

/* Every tensor of the checkpoint, sorted by name, one per line. */
static int inspect(const char *dir)
{
    llmrt_error err = {0};
    llmrt_st_model *m = NULL;
    if (llmrt_st_model_open(dir, 0, &m, &err) != LLMRT_OK) {
        fprintf(stderr, "llmrt mkmodel: error: %s\n", err.msg);
        return 1;
    }
    size_t n = 0, nf = llmrt_st_model_file_count(m);
    for (size_t i = 0; i < nf; i++)
        n += llmrt_st_file_count(llmrt_st_model_file(m, i));
    const llmrt_tensor_view **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        llmrt_st_model_close(m);
        fprintf(stderr, "llmrt mkmodel: error: out of memory\n");
        return 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < nf; i++) {
        const llmrt_st_file *f = llmrt_st_model_file(m, i);
        for (size_t t = 0; t < llmrt_st_file_count(f); t++)
            v[k++] = llmrt_st_file_at(f, t);
    }
    qsort(v, n, sizeof *v, cmp_view_name);
    for (size_t i = 0; i < n; i++) {
        const char *base = strrchr(v[i]->file, '/');
        printf("%s %s [", v[i]->name, llmrt_dtype_name(v[i]->dtype));
        for (int32_t d = 0; d < v[i]->ndim; d++)
            printf("%s%lld", d ? ", " : "", (long long)v[i]->shape[d]);
        printf("] %s\n", base ? base + 1 : v[i]->file);
    }
    printf("# %zu tensors, %llu bytes in %zu file%s\n", n,
           (unsigned long long)llmrt_st_model_total_bytes(m), nf, nf == 1 ? "" : "s");
    free(v);
    llmrt_st_model_close(m);
    return 0;
}

#define MAX_OPTS 64

int cmd_mkmodel(int argc, char **argv)
{
    enum {
        OPT_PRESET = 1000, OPT_CONFIG, OPT_QUANT, OPT_GROUP, OPT_DTYPE, OPT_SEED, OPT_SHARD,
        OPT_TIE, OPT_NO_TIE, OPT_TIED_HEAD, OPT_THREADS, OPT_INSPECT, OPT_HELP, OPT_QUANT_OPT,
        OPT_MODEL_OPT, OPT_MODEL_PLUGIN, OPT_LIST
    };
    static const struct option opts[] = {
        {"preset", required_argument, 0, OPT_PRESET},
        {"config", required_argument, 0, OPT_CONFIG},
        {"quant", required_argument, 0, OPT_QUANT},
        {"group-size", required_argument, 0, OPT_GROUP},
        {"quant-opt", required_argument, 0, OPT_QUANT_OPT},
        {"model-opt", required_argument, 0, OPT_MODEL_OPT},
        {"model-plugin", required_argument, 0, OPT_MODEL_PLUGIN},
        {"list-presets", no_argument, 0, OPT_LIST},
        {"dtype", required_argument, 0, OPT_DTYPE},
        {"seed", required_argument, 0, OPT_SEED},
        {"shard-mb", required_argument, 0, OPT_SHARD},
        {"tie", no_argument, 0, OPT_TIE},
        {"no-tie", no_argument, 0, OPT_NO_TIE},
        {"tied-lm-head", no_argument, 0, OPT_TIED_HEAD},
        {"threads", required_argument, 0, OPT_THREADS},
        {"output", required_argument, 0, 'o'},
        {"quiet", no_argument, 0, 'q'},
        {"inspect", required_argument, 0, OPT_INSPECT},
        {"help", no_argument, 0, OPT_HELP},
        {0, 0, 0, 0}};
    const char *out = NULL, *inspect_dir = NULL, *dtype = NULL;
    const char *quant_opts[MAX_OPTS], *model_opts[MAX_OPTS];
    char group_opt[64];
    int n_quant_opts = 0, n_model_opts = 0, list = 0, quiet = 0, opt;
    uint64_t seed = 0, threads = 0, group = 0;
    double shard_mb = 0;
    llmrt_synth_opts o;
    llmrt_synth_opts_init(&o);

    optind = 1;
    while ((opt = getopt_long(argc, argv, "o:q", opts, NULL)) != -1) {
        switch (opt) {
        case OPT_PRESET: o.preset = optarg; break;
        case OPT_CONFIG: o.config_path = optarg; break;
        case OPT_QUANT: o.quant = optarg; break;
        case OPT_MODEL_PLUGIN: o.model = optarg; break;
        case OPT_LIST: list = 1; break;
        case OPT_DTYPE: dtype = optarg; break;
        case OPT_TIE: o.tie = 1; break;
        case OPT_NO_TIE: o.tie = 0; break;
        case OPT_TIED_HEAD: o.tied_lm_head = 1; break;
        case 'o': out = optarg; break;
        case 'q': quiet = 1; break;
        case OPT_INSPECT: inspect_dir = optarg; break;
        case OPT_HELP: fputs(usage, stdout); return 0;
        case OPT_QUANT_OPT:
        case OPT_MODEL_OPT:
            if ((opt == OPT_QUANT_OPT ? n_quant_opts : n_model_opts) == MAX_OPTS)
                return cli_usage_error("mkmodel", usage, "at most %d options of each kind",
                                       MAX_OPTS);
            if (!strchr(optarg, '=') || optarg[0] == '=')
                return cli_usage_error("mkmodel", usage, "--%s '%s': expected KEY=VALUE",
                                       opt == OPT_QUANT_OPT ? "quant-opt" : "model-opt", optarg);
            if (opt == OPT_QUANT_OPT)
                quant_opts[n_quant_opts++] = optarg;
            else
                model_opts[n_model_opts++] = optarg;
            break;
        case OPT_GROUP:
            if (!parse_u64(optarg, &group) || group == 0 || group > 1u << 20)
                return cli_usage_error("mkmodel", usage, "--group-size '%s': expected a positive "
                                       "integer such as 128", optarg);
            break;
        case OPT_SEED:
            if (!parse_u64(optarg, &seed))
                return cli_usage_error("mkmodel", usage, "--seed '%s': expected a non-negative "
                                       "integer", optarg);
            break;
        case OPT_SHARD: {
            char *end;
            errno = 0;
            shard_mb = strtod(optarg, &end);
            if (errno || *end || end == optarg || !(shard_mb * 1e6 >= 1.0) || shard_mb > 1e12)
                return cli_usage_error("mkmodel", usage, "--shard-mb '%s': expected a positive "
                                       "number of MB (fractions allowed: 0.1 = 100000 bytes)",
                                       optarg);
            break;
        }
        case OPT_THREADS:
            if (!parse_u64(optarg, &threads) || threads == 0 || threads > 1024)
                return cli_usage_error("mkmodel", usage, "--threads '%s': expected a positive "
                                       "integer", optarg);
            break;
        default:
            return cli_bad_option("mkmodel", opts, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("mkmodel", usage, "unexpected argument '%s'", argv[optind]);
    if (inspect_dir) {
        if (o.preset || o.config_path || out || list)
            return cli_usage_error("mkmodel", usage, "--inspect takes no other options");
        return inspect(inspect_dir);
    }
    if (!list && !o.preset == !o.config_path)
        return cli_usage_error("mkmodel", usage, "give exactly one of --preset NAME or --config FILE");
    if (!list && !out)
        return cli_usage_error("mkmodel", usage, "missing -o DIR (the output folder)");
    if (group) {
        if (!o.quant || strcmp(o.quant, "none") == 0)
            return cli_usage_error("mkmodel", usage, "--group-size goes with --quant");
        if (n_quant_opts == MAX_OPTS)
            return cli_usage_error("mkmodel", usage, "too many --quant-opt");
        snprintf(group_opt, sizeof group_opt, "group_size=%llu", (unsigned long long)group);
        quant_opts[n_quant_opts++] = group_opt;
    }
    if (dtype) {
        o.dtype = !strcmp(dtype, "f16")    ? LLMRT_DTYPE_F16
                  : !strcmp(dtype, "bf16") ? LLMRT_DTYPE_BF16
                  : !strcmp(dtype, "f32")  ? LLMRT_DTYPE_F32
                                           : LLMRT_DTYPE_INVALID;
        if (o.dtype == LLMRT_DTYPE_INVALID)
            return cli_usage_error("mkmodel", usage, "--dtype '%s': expected f16, bf16 or f32",
                                   dtype);
    }
    o.quant_opts = quant_opts;
    o.n_quant_opts = n_quant_opts;
    o.model_opts = model_opts;
    o.n_model_opts = n_model_opts;
    o.seed = seed;
    if (shard_mb > 0)
        o.write.shard_bytes = (uint64_t)(shard_mb * 1e6 + 0.5);
    o.write.threads = (int)threads;
    o.write.show_progress = !quiet;

    llmrt_runtime *rt = NULL;
    llmrt_error err = {0};
    if (llmrt_runtime_open(NULL, NULL, 0, &rt, &err) != LLMRT_OK)
        return cli_fail("mkmodel", &err);
    int rc = 0;
    if (list) {
        char text[8192];
        llmrt_synth_preset_list(rt->reg, text, sizeof text);
        fputs(text, stdout);
    } else {
        llmrt_synth_result res;
        llmrt_status st = llmrt_synth_run(rt, out, &o, &res, &err);
        if (st == LLMRT_ERR_NOT_FOUND) /* an unknown preset or plugin: a usage error */
            rc = cli_usage_error("mkmodel", usage, "%s", err.msg);
        else if (st != LLMRT_OK)
            rc = cli_fail("mkmodel", &err);
        else if (!quiet)
            fprintf(stderr, "llmrt mkmodel: wrote %s: %u tensors, %.1f MB in %u safetensors "
                    "file%s, %.2f s\n", out, res.n_tensors, (double)res.bytes / 1e6,
                    res.n_shards, res.n_shards == 1 ? "" : "s", res.seconds);
    }
    llmrt_runtime_close(rt);
    return rc;
}
