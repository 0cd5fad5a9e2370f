/* awq.c — the quant-awq plugin: recognises AutoAWQ "gemm" checkpoints, validates and loads
 * their linears, and dispatches y = x·Wᵀ to the kernels the backend can run, chosen by what
 * it offers (never by its name): awq_cuda.cu on a backend with the "llmrt.cuda" extension,
 * awq_cpu.c on one whose device memory is host memory (caps HOST_IS_DEVICE).
 *
 * Why: AWQ int4 is the format the decode benchmarks run. What is not supported (other bit
 * widths, the GEMV/Marlin/ExLlama layouts, no zero point, compressed-tensors packing) is
 * refused at probe time with the field that decides it, instead of producing wrong numbers.
 *
 * Tensors of a linear at `prefix` (AutoAWQ WQLinear_GEMM):
 *   prefix.qweight int32 [in, out/8]        prefix.qzeros int32 [in/group, out/8]
 *   prefix.scales  f16   [in/group, out]    w[o][i] = (q[i][o] - z[i/group][o]) * s[i/group][o]
 * (nibble order in awq_pack.h). A linear without qweight is dense in the checkpoint
 * (modules_to_not_convert, lm_head): linear_load answers NOT_FOUND and the model loads it.
 *
 * Grouped linears (a MoE layer's experts, quant.h since 1.2) run every row against its own
 * linear in one call, the row's linear read on the device: a loop on the host over the CPU
 * kernel, one kernel on CUDA (awq_cuda_grouped.cu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include <llmrt/ext/cpu.h>
#include <llmrt/quant.h>

#ifdef AWQ_HAVE_CUDA
#include <llmrt/cuda.h>
#else
/* llmrt/cuda.h needs the CUDA toolkit's headers; a build without them needs only the
 * extension's name, to tell a backend that offers it why this build cannot run there. */
#define LLMRT_EXT_CUDA "llmrt.cuda"
#define LLMRT_EXT_CUDA_VERSION 1
#endif

#include "awq_config.h"
#include "awq_cpu.h"
#include "awq_cuda.h"
#include "awq_cuda_grouped.h"

typedef enum { AWQ_ON_CPU = 1, AWQ_ON_CUDA = 2 } awq_target;

struct llmrt_quant {
    llmrt_backend_ref backend;
    awq_target target;
    awq_cpu_simd simd; /* CPU: the kernel family */
    int64_t group;
    float *scratch; /* CPU: group sums of x, grown on demand */
    int64_t scratch_cap;
    awq_cuda_ctx *cuda; /* NULL unless target is CUDA and CUDA support is built in */
};

struct llmrt_qlinear {
    int64_t in, out;
    awq_cpu_linear *cpu;
    awq_cuda_linear *cuda;
};

/* ---- quantization_config ---- */

/* An integer field, or `def` when absent; -1 status when present but not an integer. */
static int get_int(json_t *obj, const char *k1, const char *k2, int64_t def, int64_t *out)
{
    json_t *v = json_object_get(obj, k1);
    if (!v && k2)
        v = json_object_get(obj, k2);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v))
        return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

static int is_pack_quantized(json_t *root)
{
    json_t *fmt = json_object_get(root, "format");
    if (json_is_string(fmt) && strcasecmp(json_string_value(fmt), "pack-quantized") == 0)
        return 1;
    json_t *groups = json_object_get(root, "config_groups");
    const char *key;
    json_t *grp;
    if (json_is_object(groups))
        json_object_foreach(groups, key, grp) {
            json_t *gf = json_object_get(grp, "format");
            if (json_is_string(gf) && strcasecmp(json_string_value(gf), "pack-quantized") == 0)
                return 1;
        }
    return 0;
}

/* The shared decision of probe, create and synth_linear. */
llmrt_status awq_parse_config(const char *text, awq_params *p, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_error_t jerr;
    json_t *root = json_loads(text ? text : "", 0, &jerr);
    if (!root)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-awq: quantization_config is not valid JSON (line %d, column %d: %s)",
                          jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        st = llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "quant-awq: quantization_config is not an object");
        goto cleanup;
    }
    json_t *method = json_object_get(root, "quant_method");
    const char *m = json_is_string(method) ? json_string_value(method) : "";
    if (strcasecmp(m, "compressed-tensors") == 0) {
        if (is_pack_quantized(root))
            st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                            "compressed-tensors pack-quantized checkpoints are not supported (AWQ "
                            "GEMM layout only); use an AutoAWQ export (quantization_config "
                            "quant_method \"awq\", version \"gemm\") or the unquantized model");
        else
            st = llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                            "quant-awq: compressed-tensors is not an AWQ format");
        goto cleanup;
    }
    if (strcasecmp(m, "awq") != 0) {
        st = llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "quant-awq: quant_method '%s' is not \"awq\"", m);
        goto cleanup;
    }
    /* AwqConfig's defaults (transformers) when a field is absent: bits 4, group_size 128,
     * zero_point true, version "gemm"; AutoAWQ's own files spell bits/group w_bit/q_group_size. */
    if (get_int(root, "bits", "w_bit", 4, &p->bits) != 0) {
        st = llmrt_fail(err, LLMRT_ERR_FORMAT, "AWQ quantization_config: bits must be an integer");
        goto cleanup;
    }
    if (p->bits != 4) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "AWQ quantization_config: bits = %lld is not supported (quant-awq runs "
                        "4-bit weights only: bits = 4)",
                        (long long)p->bits);
        goto cleanup;
    }
    if (get_int(root, "group_size", "q_group_size", 128, &p->group) != 0) {
        st = llmrt_fail(err, LLMRT_ERR_FORMAT,
                        "AWQ quantization_config: group_size must be an integer");
        goto cleanup;
    }
    if (p->group != 32 && p->group != 64 && p->group != 128) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "AWQ quantization_config: group_size = %lld is not supported (supported: "
                        "32, 64, 128)",
                        (long long)p->group);
        goto cleanup;
    }
    json_t *zp = json_object_get(root, "zero_point");
    if (zp && !json_is_null(zp) && !json_is_true(zp)) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "AWQ quantization_config: zero_point = %s is not supported (quant-awq "
                        "needs asymmetric weights with zero points: zero_point = true)",
                        json_is_false(zp) ? "false" : "a non-boolean");
        goto cleanup;
    }
    json_t *ver = json_object_get(root, "version");
    if (ver && !json_is_null(ver)) {
        const char *v = json_is_string(ver) ? json_string_value(ver) : "(not a string)";
        if (strcasecmp(v, "gemm") != 0) {
            st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                            "AWQ quantization_config: version = \"%s\" is not supported (quant-awq "
                            "reads the GEMM packing only: version = \"gemm\")",
                            v);
            goto cleanup;
        }
    }
cleanup:
    json_decref(root);
    return st;
}

static llmrt_status awq_probe(const char *quant_config_json, llmrt_error *err)
{
    awq_params p;
    return awq_parse_config(quant_config_json, &p, err);
}

/* ---- instance ---- */

/* [quant.awq], declared in the descriptor (the host validates it, applies
 * LLMRT_QUANT_AWQ_<KEY> from the environment and fills in the default); create() reads it
 * through llmrt_key_value and still rejects unknown keys itself, for a host that hands over
 * the section as written. */
static const llmrt_key awq_keys[] = {
    {"tune", LLMRT_KEY_STRING, "", NULL,
     "CUDA kernel tuning knobs for benchmark sweeps, \"key=value,...\": kw = K-splitting "
     "warps per block (1, 2, 4, 8, 16), sx=0 = read x from global memory instead of staging it "
     "in shared memory, fx=0 = no folds (SwiGLU in the gate/up GEMV); the batch kernel: mma=0 "
     "= off (the GEMV to 32 rows, then dequant + cuBLAS), mma_min / mma_max = its row range "
     "(9 / 256: the GEMV below, cuBLAS above), mma_w = row warps per block (4, 8), mma_split "
     "= K ranges across blocks, mma_fill = target blocks per SM (2), mma_stages = depth of "
     "its weight ring in iterations (2..5, 2), mma_bn = most tokens per block (8..32), mma_smem_kb = "
     "cap its shared memory per block (a smaller GPU's limit, e.g. 99); unknown knobs are "
     "ignored.",
     LLMRT_KEY_DEVELOPER},
};
#define N_AWQ_KEYS ((uint32_t)(sizeof awq_keys / sizeof awq_keys[0]))

static llmrt_status check_section(const llmrt_section *cfg, llmrt_error *err)
{
    for (size_t i = 0; cfg && i < cfg->n; i++) {
        uint32_t k = 0;
        while (k < N_AWQ_KEYS && strcmp(cfg->keys[i], awq_keys[k].name) != 0)
            k++;
        if (k == N_AWQ_KEYS)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: unknown key '%s' in [%s] (the keys of quant-awq are: tune)",
                              cfg->where && cfg->where[i] ? cfg->where[i] : "runtime.ini",
                              cfg->keys[i], cfg->name ? cfg->name : "quant.awq");
    }
    return LLMRT_OK;
}

/* The kernels to run on `be`, by what it offers: the CUDA kernels when it has the
 * "llmrt.cuda" extension (and this build has them), else the CPU kernels when its device
 * memory is host memory; neither is LLMRT_ERR_UNSUPPORTED naming what is missing. */
static llmrt_status choose_target(const llmrt_backend_ref *be, awq_target *out, llmrt_error *err)
{
    const char *name = be->name ? be->name : "?";
#ifdef AWQ_HAVE_CUDA
    const char *no_cuda = "";
    if (llmrt_cuda_ext_of(be)) {
        *out = AWQ_ON_CUDA;
        return LLMRT_OK;
    }
#else
    const char *no_cuda = "; this build of quant-awq has no CUDA kernels either";
#endif
    if (be->vt->caps(be->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) {
        *out = AWQ_ON_CPU;
        return LLMRT_OK;
    }
#ifndef AWQ_HAVE_CUDA
    if (llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_CUDA, LLMRT_EXT_CUDA_VERSION))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-awq was built without CUDA: backend '%s' offers the \"%s\" "
                          "extension, but this build has no CUDA kernels to run on it (rebuild "
                          "with a CUDA toolkit, LLMRT_CUDA=ON)",
                          name, LLMRT_EXT_CUDA);
#endif
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                      "quant-awq has no kernels for backend '%s': it offers neither the \"%s\" "
                      "extension (version %d, for the CUDA kernels) nor host-addressable device "
                      "memory (caps LLMRT_BACKEND_CAP_HOST_IS_DEVICE, for the CPU kernels)%s",
                      name, LLMRT_EXT_CUDA, LLMRT_EXT_CUDA_VERSION, no_cuda);
}

static llmrt_status awq_create(const llmrt_host *host, const llmrt_section *cfg,
                               const char *quant_config_json, const llmrt_backend_ref *backend,
                               llmrt_quant **out, llmrt_error *err)
{
    *out = NULL;
    awq_params p;
    llmrt_status st = awq_parse_config(quant_config_json, &p, err);
    if (st != LLMRT_OK || (st = check_section(cfg, err)) != LLMRT_OK)
        return st;
    if (!backend || !backend->vt || !backend->b)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-awq: no backend given");
    awq_target target = AWQ_ON_CPU;
    if ((st = choose_target(backend, &target, err)) != LLMRT_OK)
        return st;
    llmrt_quant *q = calloc(1, sizeof *q);
    if (!q)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory");
    q->backend = *backend;
    q->target = target;
    q->group = p.group;
    if (target == AWQ_ON_CPU)
        q->simd = awq_cpu_choose_simd(backend);
#ifdef AWQ_HAVE_CUDA
    if (target == AWQ_ON_CUDA) {
        st = awq_cuda_create(backend, llmrt_key_value(cfg, awq_keys, N_AWQ_KEYS, "tune"), &q->cuda,
                             err);
        if (st != LLMRT_OK) {
            free(q);
            return st;
        }
    }
#endif
    if (host && host->log) {
        char kernels[32] = "CUDA";
        if (target == AWQ_ON_CPU)
            snprintf(kernels, sizeof kernels, "CPU (%s)", awq_cpu_simd_name(q->simd));
        host->log(host->ctx, LLMRT_LOG_INFO, "awq", "backend '%s': %s kernels",
                  backend->name ? backend->name : "?", kernels);
    }
    *out = q;
    return LLMRT_OK;
}

static void awq_destroy(llmrt_quant *q)
{
    if (!q)
        return;
#ifdef AWQ_HAVE_CUDA
    if (q->cuda)
        awq_cuda_destroy(q->cuda);
#endif
    free(q->scratch);
    free(q);
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

/* Find prefix.suffix and check it is `dt` [d0, d1]; in/out/group only word the message. */
static llmrt_status find_checked(const llmrt_checkpoint *ck, const char *prefix, const char *suffix,
                                 llmrt_dtype dt, int64_t d0, int64_t d1, int64_t in, int64_t out,
                                 int64_t group, llmrt_tensor_view *v, llmrt_error *err)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    if (!ck->has(ck->ctx, name))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-awq: %s is missing: an AWQ linear needs %s.qweight, %s.qzeros and "
                          "%s.scales",
                          name, prefix, prefix, prefix);
    llmrt_status st = ck->find(ck->ctx, name, v, err);
    if (st != LLMRT_OK)
        return st;
    int64_t want[2] = {d0, d1};
    if (v->dtype != dt || v->ndim != 2 || v->shape[0] != d0 || v->shape[1] != d1) {
        char ws[64], fs[96];
        shape_str(ws, sizeof ws, 2, want);
        shape_str(fs, sizeof fs, v->ndim, v->shape);
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-awq: %s%s%s: expected %s %s, found %s %s (AutoAWQ GEMM layout "
                          "for in_features %lld, out_features %lld, group_size %lld: qweight I32 "
                          "[in, out/8], qzeros I32 [in/group, out/8], scales F16 [in/group, out])",
                          name, v->file ? " in " : "", v->file ? v->file : "",
                          llmrt_dtype_name(dt), ws, llmrt_dtype_name(v->dtype), fs, (long long)in,
                          (long long)out, (long long)group);
    }
    if (!v->data || v->bytes != (size_t)(d0 * d1) * llmrt_dtype_size(dt))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-awq: %s: the checkpoint gives %zu bytes of data for %s [%lld, %lld] "
                          "(%zu expected)",
                          name, v->bytes, llmrt_dtype_name(dt), (long long)d0, (long long)d1,
                          (size_t)(d0 * d1) * llmrt_dtype_size(dt));
    return LLMRT_OK;
}

/* The three tensors of the AWQ linear at `prefix`, checked against [out, in] and the group:
 * NOT_FOUND when the linear is dense in the checkpoint. */
static llmrt_status find_linear(const llmrt_quant *q, const llmrt_checkpoint *ckpt,
                                const char *prefix, int64_t in, int64_t out,
                                llmrt_tensor_view *qw, llmrt_tensor_view *qz,
                                llmrt_tensor_view *sc, llmrt_error *err)
{
    char name[512];
    snprintf(name, sizeof name, "%s.qweight", prefix);
    if (!ckpt->has(ckpt->ctx, name))
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "quant-awq: %s is not in the checkpoint (the linear is dense)", name);
    const int64_t g = q->group;
    if (in <= 0 || out <= 0 || in % g != 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-awq: %s: in_features %lld is not a multiple of group_size %lld",
                          prefix, (long long)in, (long long)g);
    if (out % 8 != 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-awq: %s: out_features %lld is not a multiple of 8 (eight 4-bit "
                          "values per int32)",
                          prefix, (long long)out);
    llmrt_status st =
        find_checked(ckpt, prefix, "qweight", LLMRT_DTYPE_I32, in, out / 8, in, out, g, qw, err);
    if (st == LLMRT_OK)
        st = find_checked(ckpt, prefix, "qzeros", LLMRT_DTYPE_I32, in / g, out / 8, in, out, g, qz,
                          err);
    if (st == LLMRT_OK)
        st = find_checked(ckpt, prefix, "scales", LLMRT_DTYPE_F16, in / g, out, in, out, g, sc, err);
    return st;
}

static llmrt_status awq_linear_load(llmrt_quant *q, const llmrt_checkpoint *ckpt, const char *prefix,
                                    int64_t in, int64_t out, llmrt_qlinear **out_l, llmrt_error *err)
{
    *out_l = NULL;
    const int64_t g = q->group;
    llmrt_tensor_view qw, qz, sc;
    llmrt_status st = find_linear(q, ckpt, prefix, in, out, &qw, &qz, &sc, err);
    if (st != LLMRT_OK)
        return st;

    llmrt_qlinear *l = calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory");
    l->in = in;
    l->out = out;
    if (q->target == AWQ_ON_CPU) {
        st = awq_cpu_load(&q->backend, q->simd, qw.data, qz.data, sc.data, in, out, g, &l->cpu,
                          err);
    } else {
#ifdef AWQ_HAVE_CUDA
        st = awq_cuda_load(q->cuda, qw.data, qz.data, sc.data, in, out, g, &l->cuda, err);
#else
        st = llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-awq: a CUDA target in a build without CUDA");
#endif
    }
    if (st != LLMRT_OK) {
        free(l);
        return st;
    }
    *out_l = l;
    return LLMRT_OK;
}

#define AWQ_MAX_PARTS 8

/* Columns [c0, c0 + w) of every row of dst [rows, dst_w] from src [rows, w] (elem bytes each). */
static void copy_columns(void *dst, int64_t dst_w, int64_t c0, const void *src, int64_t w,
                         int64_t rows, size_t elem)
{
    for (int64_t r = 0; r < rows; r++)
        memcpy((char *)dst + ((size_t)r * (size_t)dst_w + (size_t)c0) * elem,
               (const char *)src + (size_t)r * (size_t)w * elem, (size_t)w * elem);
}

/* Several linears of one input as one [sum(out), in]. CUDA repacks each part into its rows
 * on the device; the CPU kernel takes the parts' tensors concatenated along out (qweight,
 * qzeros and scales are all [.., out (/8)] row-major, so that is a per-row column copy). */
static llmrt_status awq_linear_load_fused(llmrt_quant *q, const llmrt_checkpoint *ckpt,
                                          const char *const *prefixes, int32_t n_parts,
                                          int64_t in, const int64_t *outs, llmrt_qlinear **out_l,
                                          llmrt_error *err)
{
    *out_l = NULL;
    if (n_parts < 1 || n_parts > AWQ_MAX_PARTS)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-awq: a fused linear has 1..%d parts (got %d)", AWQ_MAX_PARTS,
                          n_parts);
    const int64_t g = q->group;
    llmrt_tensor_view qw[AWQ_MAX_PARTS], qz[AWQ_MAX_PARTS], sc[AWQ_MAX_PARTS];
    int64_t total = 0;
    llmrt_status st = LLMRT_OK;
    for (int32_t p = 0; p < n_parts; p++) {
        if ((st = find_linear(q, ckpt, prefixes[p], in, outs[p], &qw[p], &qz[p], &sc[p], err)))
            return st;
        total += outs[p];
    }
    llmrt_qlinear *l = calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory");
    l->in = in;
    l->out = total;
    if (q->target == AWQ_ON_CUDA) {
#ifdef AWQ_HAVE_CUDA
        awq_cuda_part parts[AWQ_MAX_PARTS];
        for (int32_t p = 0; p < n_parts; p++) {
            parts[p].qweight = qw[p].data;
            parts[p].qzeros = qz[p].data;
            parts[p].scales = sc[p].data;
            parts[p].out = outs[p];
        }
        st = awq_cuda_load_parts(q->cuda, parts, n_parts, in, g, &l->cuda, err);
#else
        st = llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-awq: a CUDA target in a build without CUDA");
#endif
    } else {
        int32_t *cqw = malloc((size_t)in * (size_t)(total / 8) * 4);
        int32_t *cqz = malloc((size_t)(in / g) * (size_t)(total / 8) * 4);
        uint16_t *csc = malloc((size_t)(in / g) * (size_t)total * 2);
        if (!cqw || !cqz || !csc) {
            st = llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory fusing %d linears",
                            n_parts);
        } else {
            int64_t c0 = 0;
            for (int32_t p = 0; p < n_parts; p++) {
                copy_columns(cqw, total / 8, c0 / 8, qw[p].data, outs[p] / 8, in, 4);
                copy_columns(cqz, total / 8, c0 / 8, qz[p].data, outs[p] / 8, in / g, 4);
                copy_columns(csc, total, c0, sc[p].data, outs[p], in / g, 2);
                c0 += outs[p];
            }
            st = awq_cpu_load(&q->backend, q->simd, cqw, cqz, csc, in, total, g, &l->cpu, err);
        }
        free(cqw), free(cqz), free(csc);
    }
    if (st != LLMRT_OK) {
        free(l);
        return st;
    }
    *out_l = l;
    return LLMRT_OK;
}

static void awq_linear_free(llmrt_quant *q, llmrt_qlinear *l)
{
    if (!l)
        return;
    if (l->cpu)
        awq_cpu_free(&q->backend, l->cpu);
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        awq_cuda_free(q->cuda, l->cuda);
#endif
    free(l);
}

/* CPU weight offload: the CUDA linears move (memory.h offload_*); on the CPU backend there is
 * nothing to offload (the host refuses it first). */
static llmrt_status awq_linear_move(llmrt_quant *q, llmrt_qlinear *l, const llmrt_buffer_mover *mv,
                                    llmrt_error *err)
{
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        return awq_cuda_move(q->cuda, l->cuda, mv, err);
#endif
    (void)q, (void)mv;
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                      "awq: the CPU kernels' weights cannot move into host memory (they are "
                      "there already)");
}

static llmrt_status awq_linear_forward(llmrt_quant *q, const llmrt_qlinear *l, float *y,
                                       const float *x, int32_t n, llmrt_error *err)
{
    if (n < 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-awq: linear_forward with n = %d", n);
    if (n == 0)
        return LLMRT_OK;
    if (l->cpu) {
        int64_t need = awq_cpu_scratch_floats(l->cpu, n);
        if (need > q->scratch_cap) {
            float *s = realloc(q->scratch, (size_t)need * sizeof(float));
            if (!s)
                return llmrt_fail(err, LLMRT_ERR_NOMEM,
                                  "quant-awq: out of memory for %lld floats of scratch",
                                  (long long)need);
            q->scratch = s;
            q->scratch_cap = need;
        }
        awq_cpu_forward(&q->backend, l->cpu, y, x, n, q->scratch);
        return LLMRT_OK;
    }
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        return awq_cuda_forward(q->cuda, l->cuda, y, x, n, err);
#endif
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-awq: linear has no kernel");
}

/* The folds run on CUDA only; on the CPU the caller runs the separate ops. */
static int32_t awq_linear_fused_max_rows(llmrt_quant *q, const llmrt_qlinear *l, uint32_t flags)
{
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        return awq_cuda_fused_max_rows(q->cuda, l->cuda, flags);
#endif
    (void)q, (void)l, (void)flags;
    return 0;
}

static llmrt_status awq_linear_forward_fused(llmrt_quant *q, const llmrt_qlinear *l, float *y,
                                             const float *x, int32_t n, uint32_t flags,
                                             llmrt_error *err)
{
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        return awq_cuda_forward_fused(q->cuda, l->cuda, y, x, n, flags, err);
#endif
    (void)q, (void)l, (void)y, (void)x;
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                      "quant-awq: folds 0x%x are not available on this backend (%d rows)", flags,
                      n);
}

static uint64_t awq_linear_bytes(llmrt_quant *q, const llmrt_qlinear *l)
{
    if (l->cpu)
        return awq_cpu_bytes(l->cpu);
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        return awq_cuda_bytes(l->cuda);
#endif
    return 0;
}

static llmrt_status awq_linear_dequant(llmrt_quant *q, const llmrt_qlinear *l, float *out,
                                       llmrt_error *err)
{
    if (l->cpu) {
        awq_cpu_dequant(l->cpu, out);
        return LLMRT_OK;
    }
#ifdef AWQ_HAVE_CUDA
    if (l->cuda)
        return awq_cuda_dequant(q->cuda, l->cuda, out, err);
#endif
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-awq: linear has no kernel");
}

/* ---- grouped linears (quant.h, since 1.2): a MoE layer's experts ----
 * CPU: the rows are host memory, so the call groups them by linear on the host (or takes the
 * caller's linear_start), gathers each linear's input rows, runs the CPU kernel over them
 * (its results do not depend on which rows share a call) and scatters the outputs, folding
 * SwiGLU there. CUDA: awq_cuda_grouped.cu, one launch reading each row's expert on the
 * device. */

struct llmrt_qgroup {
    int32_t n, max_rows;
    int64_t in, out;
    uint32_t flags;
    const llmrt_qlinear **l; /* [n], NULL entries: rows left to the caller */
    float *xg, *yg;          /* CPU: gathered inputs [max_rows, in], outputs [max_rows, out] */
    int32_t *idx;            /* CPU: [max_rows] one linear's rows of an unsorted call */
#ifdef AWQ_HAVE_CUDA
    awq_cuda_group *cuda;
#endif
};

static void awq_linear_group_destroy(llmrt_quant *q, llmrt_qgroup *g)
{
    if (!g)
        return;
#ifdef AWQ_HAVE_CUDA
    if (g->cuda)
        awq_cuda_group_destroy(g->cuda);
#endif
    (void)q;
    free(g->xg);
    free(g->yg);
    free(g->idx);
    free(g->l);
    free(g);
}

static llmrt_status awq_linear_group_create(llmrt_quant *q, const llmrt_qlinear *const *ls,
                                            int32_t n, int32_t max_rows, uint32_t flags,
                                            llmrt_qgroup **out, llmrt_error *err)
{
    *out = NULL;
    if (n < 1 || max_rows < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "quant-awq: a group of %d linears for %d rows", n, max_rows);
    if (flags & ~(uint32_t)LLMRT_FUSE_OUT_SWIGLU)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "quant-awq: grouped folds 0x%x", flags);
    const llmrt_qlinear *first = NULL;
    for (int32_t i = 0; i < n; i++) {
        if (!ls[i])
            continue;
        if (!first)
            first = ls[i];
        if (ls[i]->in != first->in || ls[i]->out != first->out)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "quant-awq: linear %d of a group is [%lld, %lld], linear 0's [%lld, "
                              "%lld]: grouped linears share a shape",
                              i, (long long)ls[i]->out, (long long)ls[i]->in,
                              (long long)first->out, (long long)first->in);
    }
    if (!first)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "quant-awq: a group of no linears");
    if ((flags & LLMRT_FUSE_OUT_SWIGLU) && first->out % 2 != 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "quant-awq: SwiGLU over %lld outputs (not [gate; up])",
                          (long long)first->out);
    llmrt_qgroup *g = calloc(1, sizeof *g);
    if (!g || !(g->l = calloc((size_t)n, sizeof *g->l))) {
        free(g);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory");
    }
    memcpy(g->l, ls, (size_t)n * sizeof *ls);
    g->n = n, g->max_rows = max_rows, g->flags = flags;
    g->in = first->in, g->out = first->out;
    llmrt_status st = LLMRT_OK;
    if (q->target == AWQ_ON_CPU) {
        const int64_t need = awq_cpu_scratch_floats(first->cpu, max_rows);
        g->xg = malloc((size_t)max_rows * (size_t)g->in * sizeof(float));
        g->yg = malloc((size_t)max_rows * (size_t)g->out * sizeof(float));
        g->idx = malloc((size_t)max_rows * sizeof *g->idx);
        if (!g->xg || !g->yg || !g->idx)
            st = llmrt_fail(err, LLMRT_ERR_NOMEM,
                            "quant-awq: out of memory for a group's %d rows of [%lld, %lld]",
                            max_rows, (long long)g->out, (long long)g->in);
        if (st == LLMRT_OK && need > q->scratch_cap) {
            float *sc = realloc(q->scratch, (size_t)need * sizeof(float));
            if (!sc)
                st = llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory for scratch");
            else
                q->scratch = sc, q->scratch_cap = need;
        }
    } else {
#ifdef AWQ_HAVE_CUDA
        const awq_cuda_linear **cl = calloc((size_t)n, sizeof *cl);
        if (!cl) {
            st = llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory");
        } else {
            for (int32_t i = 0; i < n; i++)
                cl[i] = ls[i] ? ls[i]->cuda : NULL;
            st = awq_cuda_group_create(&q->backend, cl, n, max_rows, flags, &g->cuda, err);
            free(cl);
        }
#else
        st = llmrt_fail(err, LLMRT_ERR_INTERNAL, "quant-awq: a CUDA target in a build without CUDA");
#endif
    }
    if (st) {
        awq_linear_group_destroy(q, g);
        return st;
    }
    *out = g;
    return LLMRT_OK;
}

/* The CPU: linear i's rows [r0, r0 + cnt) of a sorted call, or the rows listed in idx. */
static void cpu_group_rows(llmrt_quant *q, const llmrt_qgroup *g, const llmrt_qlinear *l,
                           float *y, const float *x, const int32_t *row_src, const int32_t *idx,
                           int32_t r0, int32_t cnt, int swiglu)
{
    const int64_t in = g->in, out = g->out, yw = swiglu ? out / 2 : out;
    const float *xe = x + (int64_t)r0 * in;
    if (row_src || idx) {
        for (int32_t i = 0; i < cnt; i++) {
            const int32_t r = idx ? idx[i] : r0 + i;
            memcpy(g->xg + (int64_t)i * in, x + (int64_t)(row_src ? row_src[r] : r) * in,
                   (size_t)in * sizeof(float));
        }
        xe = g->xg;
    }
    const int direct = !idx && !swiglu;
    float *ye = direct ? y + (int64_t)r0 * out : g->yg;
    awq_cpu_forward(&q->backend, l->cpu, ye, xe, cnt, q->scratch);
    if (direct)
        return;
    for (int32_t i = 0; i < cnt; i++) {
        const int32_t r = idx ? idx[i] : r0 + i;
        const float *src = g->yg + (int64_t)i * out;
        float *dst = y + (int64_t)r * yw;
        if (swiglu)
            for (int64_t k = 0; k < yw; k++) {
                const float gate = src[k];
                dst[k] = gate / (1.0f + expf(-gate)) * src[yw + k];
            }
        else
            memcpy(dst, src, (size_t)out * sizeof(float));
    }
}

static llmrt_status awq_linear_forward_grouped(llmrt_quant *q, const llmrt_qgroup *g, float *y,
                                               const float *x, const int32_t *row_linear,
                                               const int32_t *row_src, const int32_t *linear_start,
                                               int32_t n_rows, uint32_t flags, llmrt_error *err)
{
    if (n_rows < 0 || n_rows > g->max_rows)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "quant-awq: a grouped call of %d rows; the group was made for 0..%d",
                          n_rows, g->max_rows);
    if (flags & ~g->flags)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "quant-awq: folds 0x%x asked of a group made for 0x%x", flags, g->flags);
    if (n_rows == 0)
        return LLMRT_OK;
#ifdef AWQ_HAVE_CUDA
    if (g->cuda)
        return awq_cuda_group_forward(g->cuda, y, x, row_linear, row_src, linear_start, n_rows,
                                      flags, err);
#endif
    const int swiglu = (flags & LLMRT_FUSE_OUT_SWIGLU) != 0;
    int32_t *idx = g->idx;
    for (int32_t i = 0; i < g->n; i++) {
        if (!g->l[i])
            continue;
        if (linear_start) {
            const int32_t r0 = linear_start[i], cnt = linear_start[i + 1] - r0;
            if (cnt > 0)
                cpu_group_rows(q, g, g->l[i], y, x, row_src, NULL, r0, cnt, swiglu);
            continue;
        }
        int32_t cnt = 0;
        for (int32_t r = 0; r < n_rows; r++)
            if (row_linear[r] == i)
                idx[cnt++] = r;
        if (cnt > 0)
            cpu_group_rows(q, g, g->l[i], y, x, row_src, idx, 0, cnt, swiglu);
    }
    return LLMRT_OK;
}

static const llmrt_quant_vtable awq_vtable = {
    .struct_size = sizeof(llmrt_quant_vtable),
    .probe = awq_probe,
    .create = awq_create,
    .destroy = awq_destroy,
    .linear_load = awq_linear_load,
    .linear_free = awq_linear_free,
    .linear_forward = awq_linear_forward,
    .linear_bytes = awq_linear_bytes,
    .linear_move = awq_linear_move,
    .linear_dequant = awq_linear_dequant,
    .linear_load_fused = awq_linear_load_fused,
    .linear_forward_fused = awq_linear_forward_fused,
    .linear_fused_max_rows = awq_linear_fused_max_rows,
    .synth_config = awq_synth_config,
    .synth_linear = awq_synth_linear,
    .linear_group_create = awq_linear_group_create,
    .linear_forward_grouped = awq_linear_forward_grouped,
    .linear_group_destroy = awq_linear_group_destroy,
};

static const llmrt_plugin_desc awq_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_QUANT,
    .name = "awq",
    .version = "1.0.0",
    .description = "AWQ int4 (AutoAWQ GEMM layout, group 32/64/128): CPU and CUDA kernels",
    .license = "MIT",
    .vtable = &awq_vtable,
    .init = NULL,
    .keys = awq_keys,
    .n_keys = N_AWQ_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &awq_desc : NULL;
}
