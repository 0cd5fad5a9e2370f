/* fp8.c — the quant-fp8 plugin: recognises block-scaled FP8 checkpoints (Qwen3-*-FP8: e4m3
 * weights with 128x128 weight_scale_inv blocks, "dynamic" activations), validates and loads
 * their linears, and runs y = x·Wᵀ with the kernels the backend allows: CUDA kernels when it
 * offers the "llmrt.cuda" extension (fp8_cuda.cu), CPU kernels when its device memory is host
 * memory (fp8_cpu.c).
 *
 * Which semantics serve which row count ([quant.fp8] activations, README.md):
 *   w8a16  activations stay 32-bit (CPU) / 16-bit (CUDA) against the dequantized weights;
 *   w8a8   activations quantized per token per 128 inputs to e4m3 (fp8_act.h), as the
 *          checkpoint's "dynamic" scheme defines and vLLM runs it;
 *   auto   w8a8 only where it buys speed: on FP8 tensor cores (CUDA, compute capability
 *          8.9+) from w8a8_min_rows rows (17: where the FP8 GEMM takes over from the GEMV,
 *          which streams the weights at the same speed either way); w8a16 below, and
 *          everywhere on devices without FP8 matrix units (CPU, sm_86).
 *
 * A linear whose weight is not F8 (lm_head, embeddings, modules_to_not_convert) is dense in
 * the checkpoint: linear_load answers NOT_FOUND and the model loads it itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/quant.h>

#include "fp8_config.h"
#include "fp8_cpu.h"
#ifdef FP8_HAVE_CUDA
#include "fp8_cuda.h"
#endif

/* ---- the plugin's keys ([quant.fp8]) ---- */

static const llmrt_key fp8_keys[] = {
    {"activations", LLMRT_KEY_ENUM, "auto", "auto|w8a16|w8a8",
     "How activations meet the FP8 weights. w8a16: activations stay f32 (CPU) or f16 (CUDA) "
     "against the exactly dequantized weights. w8a8: activations are quantized per token per "
     "128 inputs to e4m3 (scale = amax / 448), the checkpoint's \"dynamic\" scheme. auto: "
     "w8a8 on FP8 tensor cores (CUDA sm_89+) from w8a8_min_rows rows, w8a16 for decode and on "
     "devices without FP8 matrix units (CPU, sm_86).",
     0},
    {"w8a8_min_rows", LLMRT_KEY_INT, FP8_STR(FP8_W8A8_MIN_ROWS), "1..1048576",
     "With activations = auto on FP8 tensor cores: the row count (tokens of a step) from which "
     "linears run W8A8 (above the GEMV's 16 rows: the FP8 tensor-core GEMM; below: the GEMV "
     "with quantized activations); below it W8A16.",
     LLMRT_KEY_DEVELOPER},
    {"tune", LLMRT_KEY_STRING, "", NULL,
     "CUDA kernel knobs for benchmark sweeps, \"key=value,...\": kw=N (K-splitting warps of the "
     "decode GEMV, 1..16), mma=0 (run the paths of devices without FP8 tensor cores), gemv_rows=N (the most rows "
     "the GEMV serves, 1..32; 16 by default).",
     LLMRT_KEY_DEVELOPER},
};
#define FP8_N_KEYS ((uint32_t)(sizeof fp8_keys / sizeof fp8_keys[0]))

typedef enum { FP8_ON_CPU = 1, FP8_ON_CUDA = 2 } fp8_target;

struct llmrt_quant {
    llmrt_backend_ref backend;
    fp8_target target;
    fp8_params params;
    fp8_act act;
    int32_t w8a8_min_rows;
    int fp8_units;  /* the device has FP8 matrix units (auto may pick W8A8) */
    float *scratch; /* CPU W8A8: quantized activations and their scales, grown on demand */
    int64_t scratch_cap;
#ifdef FP8_HAVE_CUDA
    fp8_cuda_ctx *cuda;
#endif
};

struct llmrt_qlinear {
    int64_t in, out;
    fp8_cpu_linear *cpu;
#ifdef FP8_HAVE_CUDA
    fp8_cuda_linear *cuda;
#endif
};

static llmrt_status fp8_probe(const char *quant_config_json, llmrt_error *err)
{
    fp8_params p;
    return fp8_parse_config(quant_config_json, &p, err);
}

/* Where `key` of the section was set ("conf/runtime.ini:12", "--set"), or "default". */
static const char *key_where(const llmrt_section *cfg, const char *key)
{
    for (size_t i = 0; cfg && i < cfg->n; i++)
        if (strcmp(cfg->keys[i], key) == 0)
            return cfg->where && cfg->where[i] ? cfg->where[i] : "runtime.ini";
    return "default";
}

/* [quant.fp8]: every key declared and its value allowed (the host checks too when it reads
 * key tables; a 1.0-style host hands the section over as written). */
static llmrt_status parse_section(const llmrt_section *cfg, llmrt_quant *q, llmrt_error *err)
{
    const char *sec = cfg && cfg->name ? cfg->name : "quant.fp8";
    for (size_t i = 0; cfg && i < cfg->n; i++) {
        int known = 0;
        for (uint32_t k = 0; k < FP8_N_KEYS; k++)
            known |= strcmp(cfg->keys[i], fp8_keys[k].name) == 0;
        if (!known)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: unknown key '%s' in [%s] (quant-fp8's keys: activations = "
                              "auto|w8a16|w8a8, w8a8_min_rows, tune)",
                              key_where(cfg, cfg->keys[i]), cfg->keys[i], sec);
    }
    const char *act = llmrt_key_value(cfg, fp8_keys, FP8_N_KEYS, "activations");
    if (strcmp(act, "auto") == 0)
        q->act = FP8_ACT_AUTO;
    else if (strcmp(act, "w8a16") == 0)
        q->act = FP8_ACT_W8A16;
    else if (strcmp(act, "w8a8") == 0)
        q->act = FP8_ACT_W8A8;
    else
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: [%s] activations = '%s' is not one of auto, w8a16, w8a8",
                          key_where(cfg, "activations"), sec, act);
    const char *rows = llmrt_key_value(cfg, fp8_keys, FP8_N_KEYS, "w8a8_min_rows");
    char *end;
    long long v = strtoll(rows, &end, 10);
    if (end == rows || *end || v < 1 || v > 1048576)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: [%s] w8a8_min_rows = '%s' is not an integer in 1..1048576",
                          key_where(cfg, "w8a8_min_rows"), sec, rows);
    q->w8a8_min_rows = (int32_t)v;
    return LLMRT_OK;
}

/* The backend offers CUDA interop ("llmrt.cuda", llmrt/cuda.h). */
static int cuda_offered(const llmrt_backend_ref *be)
{
#ifdef FP8_HAVE_CUDA
    return fp8_cuda_offered(be);
#else
    return llmrt_backend_extension(be->vt, be->b, "llmrt.cuda", 1) != NULL;
#endif
}


static llmrt_status fp8_create(const llmrt_host *host, const llmrt_section *cfg,
                               const char *quant_config_json, const llmrt_backend_ref *backend,
                               llmrt_quant **out, llmrt_error *err)
{
    *out = NULL;
    llmrt_quant *q = calloc(1, sizeof *q);
    if (!q)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8: out of memory");
    llmrt_status st = fp8_parse_config(quant_config_json, &q->params, err);
    if (st == LLMRT_OK)
        st = parse_section(cfg, q, err);
    if (st != LLMRT_OK) {
        free(q);
        return st;
    }
    if (!backend || !backend->vt || !backend->vt->caps) {
        free(q);
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-fp8: no backend given");
    }
    const char *bname = backend->name ? backend->name : "?";
    q->backend = *backend;
    char how[256] = "";
    if (cuda_offered(backend)) {
        q->target = FP8_ON_CUDA;
#ifdef FP8_HAVE_CUDA
        if ((st = fp8_cuda_create(backend, llmrt_key_value(cfg, fp8_keys, FP8_N_KEYS, "tune"),
                                  &q->cuda, err)) != LLMRT_OK) {
            free(q);
            return st;
        }
        q->fp8_units = fp8_cuda_has_fp8_mma(q->cuda);
        snprintf(how, sizeof how, "CUDA kernels on %s", fp8_cuda_device_name(q->cuda));
#else
        free(q);
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8 was built without CUDA: backend '%s' offers the llmrt.cuda "
                          "extension, but this plugin has no CUDA kernels (rebuild with a CUDA "
                          "toolkit, LLMRT_CUDA=ON)",
                          bname);
#endif
    } else if (backend->vt->caps(backend->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) {
        q->target = FP8_ON_CPU;
        snprintf(how, sizeof how, "CPU kernels (backend '%s')", bname);
    } else {
        free(q);
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8 has no kernels for backend '%s': it offers neither the "
                          "llmrt.cuda extension (CUDA kernels) nor host-addressable device "
                          "memory (LLMRT_BACKEND_CAP_HOST_IS_DEVICE, CPU kernels)",
                          bname);
    }
    if (host && host->log) {
        char sem[96];
        if (q->act == FP8_ACT_W8A16)
            snprintf(sem, sizeof sem, "W8A16 (activations = w8a16)");
        else if (q->act == FP8_ACT_W8A8)
            snprintf(sem, sizeof sem, "W8A8 (activations = w8a8)");
        else if (q->fp8_units)
            snprintf(sem, sizeof sem, "activations = auto: W8A16 below %d rows, W8A8 from %d",
                     (int)q->w8a8_min_rows, (int)q->w8a8_min_rows);
        else
            snprintf(sem, sizeof sem, "activations = auto: W8A16 (no FP8 matrix units)");
        host->log(host->ctx, LLMRT_LOG_INFO, "quant-fp8", "%s, %s", how, sem);
    }
    *out = q;
    return LLMRT_OK;
}

static void fp8_destroy(llmrt_quant *q)
{
    if (!q)
        return;
#ifdef FP8_HAVE_CUDA
    if (q->cuda)
        fp8_cuda_destroy(q->cuda);
#endif
    free(q->scratch);
    free(q);
}

/* W8A8 for a call of n rows? */
static int use_w8a8(const llmrt_quant *q, int32_t n)
{
    switch (q->act) {
    case FP8_ACT_W8A16: return 0;
    case FP8_ACT_W8A8: return 1;
    default: return q->fp8_units && n >= q->w8a8_min_rows;
    }
}

/* ---- linears ---- */

static void shape_str(char *buf, size_t n, int32_t ndim, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int32_t i = 0; i < ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
}

/* The tensors of one linear, checked. Names live in `names` (2 x 512 bytes per part). */
typedef struct found {
    fp8_part part;
    char weight[512], scale[512];
} found;

static llmrt_status check_view(const llmrt_tensor_view *v, const char *name, const char *what,
                               int64_t d0, int64_t d1, const char *rule, llmrt_error *err)
{
    const int64_t want[2] = {d0, d1};
    if (v->ndim != 2 || v->shape[0] != d0 || v->shape[1] != d1) {
        char ws[64], fs[96];
        shape_str(ws, sizeof ws, 2, want);
        shape_str(fs, sizeof fs, v->ndim, v->shape);
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-fp8: %s%s%s: expected %s %s, found %s %s (%s)", name,
                          v->file ? " in " : "", v->file ? v->file : "", what, ws,
                          llmrt_dtype_name(v->dtype), fs, rule);
    }
    const size_t bytes = (size_t)(d0 * d1) * llmrt_dtype_size(v->dtype);
    if (!v->data || v->bytes != bytes)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-fp8: %s: the checkpoint gives %zu bytes of data for %s [%lld, "
                          "%lld] (%zu expected)",
                          name, v->bytes, llmrt_dtype_name(v->dtype), (long long)d0,
                          (long long)d1, bytes);
    return LLMRT_OK;
}

/* prefix.weight and prefix.weight_scale_inv, checked against [out, in]: NOT_FOUND when the
 * checkpoint keeps the linear dense. */
static llmrt_status find_linear(const llmrt_quant *q, const llmrt_checkpoint *ck,
                                const char *prefix, int64_t in, int64_t out, found *f,
                                llmrt_error *err)
{
    memset(f, 0, sizeof *f);
    snprintf(f->weight, sizeof f->weight, "%s.weight", prefix);
    snprintf(f->scale, sizeof f->scale, "%s.weight_scale_inv", prefix);
    const int has_w = ck->has(ck->ctx, f->weight), has_s = ck->has(ck->ctx, f->scale);
    llmrt_tensor_view w, s;
    llmrt_status st;
    if (!has_w) {
        if (has_s)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "quant-fp8: %s is missing, but %s is there (an FP8 linear needs "
                              "both)",
                              f->weight, f->scale);
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "quant-fp8: %s is not in the checkpoint",
                          f->weight);
    }
    if ((st = ck->find(ck->ctx, f->weight, &w, err)) != LLMRT_OK)
        return st;
    if (fp8_skipped(&q->params, prefix)) {
        if (w.dtype == LLMRT_DTYPE_F8_E4M3 || w.dtype == LLMRT_DTYPE_F8_E5M2)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "quant-fp8: %s is stored as %s, but quantization_config's "
                              "modules_to_not_convert lists %s (dense)",
                              f->weight, llmrt_dtype_name(w.dtype), prefix);
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "quant-fp8: %s is in modules_to_not_convert (dense)", prefix);
    }
    if (w.dtype != LLMRT_DTYPE_F8_E4M3) {
        if (w.dtype == LLMRT_DTYPE_F8_E5M2)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "quant-fp8: %s is F8_E5M2, but quantization_config says fmt "
                              "\"e4m3\" (F8_E4M3 weights)",
                              f->weight);
        if (has_s)
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "quant-fp8: %s is %s, expected F8_E4M3 (the linear has a %s)",
                              f->weight, llmrt_dtype_name(w.dtype), f->scale);
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "quant-fp8: %s is %s: the linear is dense in the checkpoint",
                          f->weight, llmrt_dtype_name(w.dtype));
    }
    if ((st = check_view(&w, f->weight, "F8_E4M3", out, in,
                         "an FP8 linear's weight is [out_features, in_features]", err)))
        return st;
    if (!has_s)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-fp8: %s is missing: an FP8 linear needs %s (F8_E4M3 [out, in]) "
                          "and %s (F32 or BF16 [ceil(out / 128), ceil(in / 128)])",
                          f->scale, f->weight, f->scale);
    if ((st = ck->find(ck->ctx, f->scale, &s, err)) != LLMRT_OK)
        return st;
    if (s.dtype != LLMRT_DTYPE_F32 && s.dtype != LLMRT_DTYPE_BF16)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "quant-fp8: %s%s%s is %s, expected F32 or BF16",
                          f->scale, s.file ? " in " : "", s.file ? s.file : "",
                          llmrt_dtype_name(s.dtype));
    const int64_t rb = fp8_blocks(out), kb = fp8_blocks(in);
    if ((st = check_view(&s, f->scale, s.dtype == LLMRT_DTYPE_F32 ? "F32" : "BF16", rb, kb,
                         "one scale per 128x128 block of the weight: [ceil(out_features / 128), "
                         "ceil(in_features / 128)]",
                         err)))
        return st;
    f->part.name = f->weight;
    f->part.scale_name = f->scale;
    f->part.weight = w.data;
    f->part.scale = s.data;
    f->part.scale_dtype = s.dtype;
    f->part.out = out;
    for (int64_t i = 0; i < rb * kb; i++) {
        const float v = fp8_part_scale(&f->part, i);
        if (!isfinite(v))
            return llmrt_fail(err, LLMRT_ERR_FORMAT,
                              "quant-fp8: %s: block [%lld, %lld] is %g (scales must be finite)",
                              f->scale, (long long)(i / kb), (long long)(i % kb), (double)v);
    }
    return LLMRT_OK;
}

static llmrt_status load_parts(llmrt_quant *q, const fp8_part *parts, int n_parts, int64_t in,
                               llmrt_qlinear **out_l, llmrt_error *err)
{
    llmrt_qlinear *l = calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8: out of memory");
    l->in = in;
    for (int p = 0; p < n_parts; p++)
        l->out += parts[p].out;
    llmrt_status st;
#ifdef FP8_HAVE_CUDA
    if (q->target == FP8_ON_CUDA)
        st = fp8_cuda_load(q->cuda, parts, n_parts, in, &l->cuda, err);
    else
#endif
        st = fp8_cpu_load(&q->backend, parts, n_parts, in, &l->cpu, err);
    if (st != LLMRT_OK) {
        free(l);
        return st;
    }
    *out_l = l;
    return LLMRT_OK;
}

static llmrt_status fp8_linear_load(llmrt_quant *q, const llmrt_checkpoint *ckpt,
                                    const char *prefix, int64_t in, int64_t out,
                                    llmrt_qlinear **out_l, llmrt_error *err)
{
    *out_l = NULL;
    if (in <= 0 || out <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-fp8: %s: shape [%lld, %lld]", prefix,
                          (long long)out, (long long)in);
    found *f = malloc(sizeof *f);
    if (!f)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8: out of memory");
    llmrt_status st = find_linear(q, ckpt, prefix, in, out, f, err);
    if (st == LLMRT_OK)
        st = load_parts(q, &f->part, 1, in, out_l, err);
    free(f);
    return st;
}

/* Several linears of one input as one [sum(out), in]: parts before the last must cover whole
 * 128-row blocks, so every block of the fused weight keeps one scale. */
static llmrt_status fp8_linear_load_fused(llmrt_quant *q, const llmrt_checkpoint *ckpt,
                                          const char *const *prefixes, int32_t n_parts,
                                          int64_t in, const int64_t *outs, llmrt_qlinear **out_l,
                                          llmrt_error *err)
{
    *out_l = NULL;
    if (n_parts < 1 || n_parts > FP8_MAX_PARTS)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8: a fused linear has 1..%d parts (got %d)", FP8_MAX_PARTS,
                          n_parts);
    for (int32_t p = 0; p + 1 < n_parts; p++)
        if (outs[p] % FP8_BLOCK != 0)
            return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                              "quant-fp8: cannot fuse %s: its %lld outputs are not whole "
                              "128-row scale blocks",
                              prefixes[p], (long long)outs[p]);
    found *f = malloc((size_t)n_parts * sizeof *f);
    fp8_part parts[FP8_MAX_PARTS];
    if (!f)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8: out of memory");
    llmrt_status st = LLMRT_OK;
    for (int32_t p = 0; p < n_parts && st == LLMRT_OK; p++) {
        if (in <= 0 || outs[p] <= 0)
            st = llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-fp8: %s: shape [%lld, %lld]",
                            prefixes[p], (long long)outs[p], (long long)in);
        else if ((st = find_linear(q, ckpt, prefixes[p], in, outs[p], &f[p], err)) == LLMRT_OK)
            parts[p] = f[p].part;
    }
    if (st == LLMRT_OK)
        st = load_parts(q, parts, n_parts, in, out_l, err);
    free(f);
    return st;
}

static void fp8_linear_free(llmrt_quant *q, llmrt_qlinear *l)
{
    if (!l)
        return;
    if (l->cpu)
        fp8_cpu_free(&q->backend, l->cpu);
#ifdef FP8_HAVE_CUDA
    if (l->cuda)
        fp8_cuda_free(q->cuda, l->cuda);
#endif
    free(l);
}

static llmrt_status fp8_linear_forward(llmrt_quant *q, const llmrt_qlinear *l, float *y,
                                       const float *x, int32_t n, llmrt_error *err)
{
    if (n < 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-fp8: linear_forward with n = %d", n);
    if (n == 0)
        return LLMRT_OK;
    const int w8a8 = use_w8a8(q, n);
#ifdef FP8_HAVE_CUDA
    if (l->cuda)
        return fp8_cuda_forward(q->cuda, l->cuda, y, x, n, w8a8, err);
#endif
    if (!l->cpu)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-fp8: linear has no kernel");
    if (!w8a8) {
        fp8_cpu_forward_w8a16(&q->backend, l->cpu, y, x, n);
        return LLMRT_OK;
    }
    const int64_t need = fp8_cpu_scratch_floats(l->cpu, n);
    if (need > q->scratch_cap) {
        float *s = realloc(q->scratch, (size_t)need * sizeof(float));
        if (!s)
            return llmrt_fail(err, LLMRT_ERR_NOMEM,
                              "quant-fp8: out of memory for %lld floats of activation scratch",
                              (long long)need);
        q->scratch = s;
        q->scratch_cap = need;
    }
    fp8_cpu_forward_w8a8(&q->backend, l->cpu, y, x, n, q->scratch);
    return LLMRT_OK;
}

/* SwiGLU folded into the decode GEMV on CUDA; on the CPU the caller runs the separate ops. */
static int32_t fp8_linear_fused_max_rows(llmrt_quant *q, const llmrt_qlinear *l, uint32_t flags)
{
#ifdef FP8_HAVE_CUDA
    if (l->cuda && flags == LLMRT_FUSE_OUT_SWIGLU)
        return fp8_cuda_fused_max_rows(q->cuda, l->cuda);
#endif
    (void)q, (void)l, (void)flags;
    return 0;
}

static llmrt_status fp8_linear_forward_fused(llmrt_quant *q, const llmrt_qlinear *l, float *y,
                                             const float *x, int32_t n, uint32_t flags,
                                             llmrt_error *err)
{
    const int32_t max_rows = fp8_linear_fused_max_rows(q, l, flags);
    if (n < 1 || n > max_rows)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-fp8: folds 0x%x on linear [%lld, %lld] take 1..%d rows, not %d",
                          flags, (long long)l->out, (long long)l->in, max_rows, n);
#ifdef FP8_HAVE_CUDA
    return fp8_cuda_forward_swiglu(q->cuda, l->cuda, y, x, n, use_w8a8(q, n), err);
#else
    (void)y, (void)x;
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-fp8: no fused kernel");
#endif
}

static uint64_t fp8_linear_bytes(llmrt_quant *q, const llmrt_qlinear *l)
{
    (void)q;
    if (l->cpu)
        return fp8_cpu_bytes(l->cpu);
#ifdef FP8_HAVE_CUDA
    if (l->cuda)
        return fp8_cuda_bytes(l->cuda);
#endif
    return 0;
}

static llmrt_status fp8_linear_dequant(llmrt_quant *q, const llmrt_qlinear *l, float *out,
                                       llmrt_error *err)
{
    if (l->cpu) {
        fp8_cpu_dequant(l->cpu, out);
        return LLMRT_OK;
    }
#ifdef FP8_HAVE_CUDA
    if (l->cuda)
        return fp8_cuda_dequant(q->cuda, l->cuda, out, err);
#endif
    (void)q;
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-fp8: linear has no kernel");
}

static const llmrt_quant_vtable fp8_vtable = {
    .struct_size = sizeof(llmrt_quant_vtable),
    .probe = fp8_probe,
    .create = fp8_create,
    .destroy = fp8_destroy,
    .linear_load = fp8_linear_load,
    .linear_free = fp8_linear_free,
    .linear_forward = fp8_linear_forward,
    .linear_bytes = fp8_linear_bytes,
    .linear_dequant = fp8_linear_dequant,
    .linear_load_fused = fp8_linear_load_fused,
    .linear_forward_fused = fp8_linear_forward_fused,
    .linear_fused_max_rows = fp8_linear_fused_max_rows,
    .synth_config = fp8_synth_config,
    .synth_linear = fp8_synth_linear,
};

static const llmrt_plugin_desc fp8_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_QUANT,
    .name = "fp8",
    .version = "1.0.0",
    .description = "FP8 e4m3 with 128x128 block scales (Qwen3-*-FP8, dynamic activations): CPU "
                   "and CUDA kernels, W8A16 and W8A8",
    .license = "MIT",
    .vtable = &fp8_vtable,
    .init = NULL,
    .keys = fp8_keys,
    .n_keys = FP8_N_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &fp8_desc : NULL;
}
