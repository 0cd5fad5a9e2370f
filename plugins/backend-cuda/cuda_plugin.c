/* cuda_plugin.c — the CUDA backend's descriptor and vtable, its lifecycle (probe, create,
 * destroy), its [backend.cuda] keys, device information, the extensions it offers and its
 * error helpers.
 *
 * Why: this .so must load everywhere the binary ships, including machines with no GPU and
 * no driver: nothing runs at load or in init(); probe() reports "0 devices" with the CUDA
 * runtime's reason; only create() needs a device. */
#include "cuda_backend.h"

#include <llmrt/cuda.h>
#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/collective.h>
#include <llmrt/ext/fused.h>
#include <llmrt/ext/logits_mask.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_BACKEND_VERSION "0.1.0"
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20) /* NVIDIA's advice for Hopper */

/* ---- errors ---- */

llmrt_status cuda_fail(llmrt_error *err, llmrt_status code, cudaError_t e, const char *what)
{
    return llmrt_fail(err, code, "cuda backend: %s: %s (%s)", what, cudaGetErrorName(e),
                      cudaGetErrorString(e));
}

llmrt_status cuda_check_launch(llmrt_error *err, const char *kernel)
{
    return llmrt_cuda_check_launch(err, "cuda backend", kernel);
}

llmrt_status cuda_use(llmrt_backend *b, llmrt_error *err)
{
    cudaError_t e = cudaSetDevice(b->device);
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaSetDevice");
    return LLMRT_OK;
}

static const char *cublas_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_(other)";
    }
}

/* ---- device information ---- */

static void fill_info(int dev, const struct cudaDeviceProp *prop, llmrt_device_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", prop->name);
    out->is_gpu = 1;
    out->cc_major = prop->major;
    out->cc_minor = prop->minor;
    out->multiprocessors = prop->multiProcessorCount;
    out->mem_total = (uint64_t)prop->totalGlobalMem;
    int v = 0;
    if (cudaDriverGetVersion(&v) == cudaSuccess)
        out->driver_version = v;
    v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        out->runtime_version = v;
    /* free memory needs the device's context; the primary context is reused by create() */
    int prev = -1;
    cudaGetDevice(&prev);
    if (cudaSetDevice(dev) == cudaSuccess) {
        size_t f = 0, t = 0;
        if (cudaMemGetInfo(&f, &t) == cudaSuccess) {
            out->mem_free = f;
            out->mem_total = t;
        }
    }
    if (prev >= 0)
        cudaSetDevice(prev);
    cudaGetLastError(); /* nothing above is fatal; leave no sticky error behind */
}

/* Never fails: no driver, no device or a broken install all mean "0 devices", with the
 * CUDA runtime's reason in err->msg (err->code stays LLMRT_OK). */
static llmrt_status cuda_probe(llmrt_device_info *out, int32_t max, int32_t *count,
                               llmrt_error *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = 0;
    if (e != cudaSuccess) {
        if (err) {
            err->code = LLMRT_OK;
            snprintf(err->msg, sizeof err->msg, "cudaGetDeviceCount: %s (%s)",
                     cudaGetErrorName(e), cudaGetErrorString(e));
        }
        cudaGetLastError();
        return LLMRT_OK;
    }
    if (n == 0 && err) {
        err->code = LLMRT_OK;
        snprintf(err->msg, sizeof err->msg, "cudaGetDeviceCount: 0 devices");
    }
    for (int i = 0; i < n && i < max && out; i++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
            cudaGetLastError();
            memset(&out[i], 0, sizeof out[i]);
            snprintf(out[i].name, sizeof out[i].name, "CUDA device %d (properties unavailable)", i);
            out[i].is_gpu = 1;
            continue;
        }
        fill_info(i, &prop, &out[i]);
    }
    *count = n;
    return LLMRT_OK;
}

/* ---- [backend.cuda] ---- */

#define CUDA_MAX_DEVICE 1023 /* the largest device index [backend.cuda] device takes */
#define CUDA_STR_(x) #x
#define CUDA_STR(x) CUDA_STR_(x)

/* The section's keys, declared in the descriptor: the host validates them, applies
 * LLMRT_BACKEND_CUDA_<KEY> from the environment and fills in the defaults. create() reads
 * every value through llmrt_key_value, and still checks names and values itself, for a host
 * that hands over the section as written. */
static const llmrt_key cuda_keys[] = {
    {"device", LLMRT_KEY_INT, "0", "0.." CUDA_STR(CUDA_MAX_DEVICE),
     "Index of the CUDA device to run on, among the visible ones (CUDA_VISIBLE_DEVICES).", 0},
    {"pdl", LLMRT_KEY_ENUM, "auto", "auto|on|off",
     "Programmatic dependent launch: each kernel's launch and prologue overlap the previous "
     "kernel's end. auto = on where the device supports it (compute capability 9.0, Hopper).",
     0},
    {"tune", LLMRT_KEY_STRING, "", NULL,
     "Kernel tuning knobs for benchmark sweeps, \"key=value,...\" (0 = the built-in choice): "
     "att_cmin, att_fill, att_maxs, att_win (decode attention splits and K/V staging), "
     "att_gb (decode attention: most query heads per block, 1, 2, 4 or 8), "
     "att_pf_mma=0 (prefill attention on the fp32 kernel instead of the tensor cores), "
     "att_pf_split (prefill attention's keys per split, a multiple of 64, default 512; -1 = "
     "one split), "
     "att_pf_fill (split blocks below this many tile blocks per SM; -1 = never), "
     "att_inv=0 (decode splits capped by the batch size: batch-dependent rounding), "
     "att_mixed=0 (a mixed step's decode rows through the prefill kernel), att_bpf=0 (batch "
     "decode attention without its one-step-ahead K/V loads), ah_rows (most "
     "rows of a greedy argmax_head call), sample_full, copy_k, ah_stats; unknown knobs are "
     "ignored with a warning.",
     LLMRT_KEY_DEVELOPER},
};
#define N_CUDA_KEYS ((uint32_t)(sizeof cuda_keys / sizeof cuda_keys[0]))

/* Where the section set `key` ("conf/runtime.ini:12", "env ..."), or "default". */
static const char *key_where(const llmrt_section *cfg, const char *key)
{
    for (size_t i = 0; cfg && i < cfg->n; i++)
        if (strcmp(cfg->keys[i], key) == 0)
            return cfg->where && cfg->where[i] ? cfg->where[i] : "?";
    return "default";
}

/* Names and value syntax first (so a typo is reported even where no GPU is visible); the
 * device index is checked against the visible devices afterwards. *pdl: -1 auto, 0 off, 1 on. */
static llmrt_status parse_section(const llmrt_section *cfg, int *device, int *pdl,
                                  const char **tune, llmrt_error *err)
{
    for (size_t i = 0; cfg && i < cfg->n; i++) {
        uint32_t k = 0;
        while (k < N_CUDA_KEYS && strcmp(cfg->keys[i], cuda_keys[k].name) != 0)
            k++;
        if (k == N_CUDA_KEYS)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "[backend.cuda] unknown key '%s' (%s); the keys of this section "
                              "are: device, pdl, tune",
                              cfg->keys[i], cfg->where && cfg->where[i] ? cfg->where[i] : "?");
    }
    const char *v = llmrt_key_value(cfg, cuda_keys, N_CUDA_KEYS, "device");
    char *end = NULL;
    errno = 0;
    long dev = strtol(v, &end, 10);
    if (errno || end == v || *end || dev < 0 || dev > CUDA_MAX_DEVICE)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "[backend.cuda] device = '%s' (%s): expected a CUDA device index "
                          "(0, 1, ... up to %d)",
                          v, key_where(cfg, "device"), CUDA_MAX_DEVICE);
    *device = (int)dev;
    v = llmrt_key_value(cfg, cuda_keys, N_CUDA_KEYS, "pdl");
    if (strcmp(v, "auto") == 0)
        *pdl = -1;
    else if (strcmp(v, "on") == 0)
        *pdl = 1;
    else if (strcmp(v, "off") == 0)
        *pdl = 0;
    else
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "[backend.cuda] pdl = '%s' (%s): expected auto, on or off", v,
                          key_where(cfg, "pdl"));
    *tune = llmrt_key_value(cfg, cuda_keys, N_CUDA_KEYS, "tune");
    return LLMRT_OK;
}

/* tune = "att_cmin=32,att_fill=8": see cuda_tune. Unknown knobs are ignored (and logged), so
 * an old binary runs a newer sweep script. */
static void parse_tune(const llmrt_host *host, const char *text, const char *where, cuda_tune *t)
{
    memset(t, 0, sizeof *t);
    if (!text || !*text)
        return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int v = eq ? atoi(eq + 1) : 0;
        if (eq)
            *eq = 0;
        if (strcmp(tok, "att_cmin") == 0)
            t->att_cmin = v;
        else if (strcmp(tok, "att_fill") == 0)
            t->att_fill = v;
        else if (strcmp(tok, "att_maxs") == 0)
            t->att_maxs = v;
        else if (strcmp(tok, "att_win") == 0)
            t->att_win = v;
        else if (strcmp(tok, "copy_k") == 0)
            t->copy_kernel = v;
        else if (strcmp(tok, "sample_full") == 0)
            t->sample_full = v;
        else if (strcmp(tok, "ah_stats") == 0)
            t->ah_stats = v;
        else if (strcmp(tok, "att_pf_mma") == 0)
            t->att_pf_mma = v > 0 ? 1 : -1;
        else if (strcmp(tok, "att_inv") == 0)
            t->att_inv = v > 0 ? 1 : -1;
        else if (strcmp(tok, "att_mixed") == 0)
            t->att_mixed = v > 0 ? 1 : -1;
        else if (strcmp(tok, "att_bpf") == 0)
            t->att_bpf = v > 0 ? 1 : -1;
        else if (strcmp(tok, "ah_rows") == 0)
            t->ah_rows = v;
        else if (strcmp(tok, "att_pf_split") == 0)
            t->att_pf_split = v;
        else if (strcmp(tok, "att_pf_fill") == 0)
            t->att_pf_fill = v;
        else if (strcmp(tok, "att_gb") == 0)
            t->att_gb = v;
        else if (host && host->log)
            host->log(host->ctx, LLMRT_LOG_WARN, "cuda",
                      "[backend.cuda] tune (%s): unknown knob '%s' ignored", where, tok);
    }
    if (host && host->log)
        host->log(host->ctx, LLMRT_LOG_INFO, "cuda", "[backend.cuda] tune = %s (%s)", text, where);
}

/* ---- lifecycle ---- */

static void cuda_destroy(llmrt_backend *b)
{
    if (!b)
        return;
    cudaSetDevice(b->device);
    if (b->stream)
        cudaStreamSynchronize(b->stream);
    if (b->cublas)
        cublasDestroy(b->cublas);
    if (b->cublas_ws)
        cudaFree(b->cublas_ws);
    cuda_scratch_release_all(b);
    cuda_pinned_release_all(b);
    if (b->copy_stream) {
        cudaStreamSynchronize(b->copy_stream);
        cudaStreamDestroy(b->copy_stream);
    }
    if (b->fork_ev)
        cudaEventDestroy(b->fork_ev);
    if (b->stream)
        cudaStreamDestroy(b->stream);
    cudaGetLastError();
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static llmrt_status cuda_create(const llmrt_host *host, const llmrt_section *cfg,
                                llmrt_backend **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_backend *b = NULL;
    cudaError_t e;
    *out = NULL;

    int device = 0, pdl = -1;
    const char *tune = NULL;
    if ((st = parse_section(cfg, &device, &pdl, &tune, err)) != LLMRT_OK)
        return st;
    int n = 0;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        return llmrt_fail(err, LLMRT_ERR_DEVICE,
                          "cuda backend: no CUDA device is visible (%s); use runtime.backend = "
                          "cpu, or check the driver with nvidia-smi",
                          e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    if (device >= n)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "[backend.cuda] device = %d (%s): only %d CUDA device%s visible "
                          "(indices 0..%d)",
                          device, key_where(cfg, "device"), n, n == 1 ? " is" : "s are",
                          n - 1);

    b = calloc(1, sizeof *b);
    if (!b)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cuda backend: out of memory");
    b->host = host;
    b->device = device;
    pthread_mutex_init(&b->mu, NULL);

    if ((e = cudaSetDevice(device)) != cudaSuccess) {
        st = cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaSetDevice");
        goto cleanup;
    }
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
        st = cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaGetDeviceProperties");
        goto cleanup;
    }
    snprintf(b->name, sizeof b->name, "%s", prop.name);
    b->cc_major = prop.major;
    b->cc_minor = prop.minor;
    b->sm_count = prop.multiProcessorCount;
    b->l2_bytes = (size_t)prop.l2CacheSize;
    b->smem_optin = prop.sharedMemPerBlockOptin;
    b->can_map_host = prop.canMapHostMemory;
    /* Programmatic dependent launch needs compute capability 9.0; auto turns it on there. */
    b->pdl = prop.major >= 9 && pdl != 0;
    parse_tune(host, tune, key_where(cfg, "tune"), &b->tune);
    if (prop.major < 7) {
        st = llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                        "cuda backend: device %d (%s) has compute capability %d.%d; llmrt's "
                        "CUDA kernels need 7.0 or newer (built for 8.6, 8.9, 9.0)",
                        device, prop.name, prop.major, prop.minor);
        goto cleanup;
    }
    /* A non-blocking stream: it never synchronizes with the legacy default stream, so work
     * elsewhere in the process cannot break a graph capture on it. */
    if ((e = cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        st = cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaStreamCreateWithFlags");
        goto cleanup;
    }
    /* copy_side's stream and fork event (weight prefetch): made here, never inside a capture */
    if ((e = cudaStreamCreateWithFlags(&b->copy_stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&b->fork_ev, cudaEventDisableTiming)) != cudaSuccess) {
        st = cuda_fail(err, LLMRT_ERR_DEVICE, e, "the copy stream");
        goto cleanup;
    }
    cublasStatus_t cs = cublasCreate(&b->cublas);
    if (cs != CUBLAS_STATUS_SUCCESS) {
        b->cublas = NULL;
        st = llmrt_fail(err, LLMRT_ERR_DEVICE, "cuda backend: cublasCreate: %s",
                        cublas_status_name(cs));
        goto cleanup;
    }
    /* cuBLAS inside a graph capture must not allocate: give it a fixed workspace. */
    b->cublas_ws_bytes = CUBLAS_WORKSPACE_BYTES;
    if ((e = cudaMalloc(&b->cublas_ws, b->cublas_ws_bytes)) != cudaSuccess) {
        b->cublas_ws = NULL;
        st = cuda_fail(err, LLMRT_ERR_NOMEM, e, "cudaMalloc(cuBLAS workspace, 32 MiB)");
        goto cleanup;
    }
    if ((cs = cublasSetStream(b->cublas, b->stream)) != CUBLAS_STATUS_SUCCESS ||
        (cs = cublasSetWorkspace(b->cublas, b->cublas_ws, b->cublas_ws_bytes)) !=
            CUBLAS_STATUS_SUCCESS ||
        (cs = cublasSetMathMode(b->cublas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS) {
        st = llmrt_fail(err, LLMRT_ERR_DEVICE, "cuda backend: configuring cuBLAS: %s",
                        cublas_status_name(cs));
        goto cleanup;
    }
    if ((st = cuda_attention_init(b, err)) != LLMRT_OK)
        goto cleanup;
    if (host && host->log)
        host->log(host->ctx, LLMRT_LOG_INFO, "cuda",
                  "device %d: %s, cc %d.%d, %d SMs, L2 %zu KiB, programmatic dependent launch %s",
                  device, b->name, b->cc_major, b->cc_minor, b->sm_count, b->l2_bytes >> 10,
                  b->pdl ? "on" : "off");
    *out = b;
    b = NULL;
cleanup:
    if (b)
        cuda_destroy(b);
    return st;
}

static uint32_t cuda_caps(llmrt_backend *b)
{
    uint32_t c = LLMRT_BACKEND_CAP_ASYNC | LLMRT_BACKEND_CAP_GRAPHS | LLMRT_BACKEND_CAP_GRAPH_EVENTS;
    if (b->can_map_host)
        c |= LLMRT_BACKEND_CAP_MAPPED_HOST;
    return c;
}

static llmrt_status cuda_device_info(llmrt_backend *b, llmrt_device_info *out, llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, b->device);
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaGetDeviceProperties");
    fill_info(b->device, &prop, out);
    return LLMRT_OK;
}

/* ---- extensions ---- */

static cudaStream_t ext_stream(llmrt_backend *b) { return b->stream; }
static int ext_device(llmrt_backend *b) { return b->device; }
static int ext_pdl(llmrt_backend *b) { return b->pdl; }

static const llmrt_cuda_ext cuda_ext = {
    .struct_size = sizeof(llmrt_cuda_ext),
    .stream = ext_stream,
    .device = ext_device,
    .pdl = ext_pdl,
};

static const llmrt_fused_ops fused_ext = {
    .struct_size = sizeof(llmrt_fused_ops),
    .add_rmsnorm = cuda_add_rmsnorm,
    .qk_norm_rope_store = cuda_qk_norm_rope_store,
    .swiglu = cuda_swiglu,
};

static const llmrt_argmax_head_ops argmax_head_ext = {
    .struct_size = sizeof(llmrt_argmax_head_ops),
    .create = cuda_argmax_head_create,
    .forward = cuda_argmax_head_forward,
    .destroy = cuda_argmax_head_destroy,
};

/* "llmrt.cuda" (CUDA interop for other plugins' kernels), "llmrt.fused" (cuda_fused.cu),
 * "llmrt.argmax_head" (cuda_argmax_head.cu), "llmrt.logits_mask" and "llmrt.collective"
 * (cuda_collective.c: NCCL, when built with it), each at its version or older. */
static const void *cuda_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    static const struct {
        const char *name;
        uint32_t version;
        const void *table;
    } ext[] = {
        {LLMRT_EXT_CUDA, LLMRT_EXT_CUDA_VERSION, &cuda_ext},
        {LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION, &fused_ext},
        {LLMRT_EXT_ARGMAX_HEAD, LLMRT_EXT_ARGMAX_HEAD_VERSION, &argmax_head_ext},
        {LLMRT_EXT_LOGITS_MASK, LLMRT_EXT_LOGITS_MASK_VERSION, &cuda_logits_mask_ext},
        {LLMRT_EXT_COLLECTIVE, LLMRT_EXT_COLLECTIVE_VERSION, NULL}, /* cuda_collective.c */
    };
    (void)b;
    for (size_t i = 0; name && i < sizeof ext / sizeof ext[0]; i++)
        if (strcmp(name, ext[i].name) == 0) {
            const void *table = ext[i].table ? ext[i].table : (const void *)cuda_collective_ext;
            return version <= ext[i].version ? table : NULL;
        }
    return NULL;
}

static const llmrt_backend_vtable cuda_vtable = {
    .struct_size = sizeof(llmrt_backend_vtable),
    .probe = cuda_probe,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .caps = cuda_caps,
    .device_info = cuda_device_info,
    .dev_alloc = cuda_dev_alloc,
    .dev_free = cuda_dev_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .host_device_ptr = cuda_host_device_ptr,
    .copy = cuda_copy,
    .synchronize = cuda_synchronize,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_sync = cuda_event_sync,
    .event_elapsed_ms = cuda_event_elapsed_ms,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
    .embedding = cuda_embedding,
    .rmsnorm = cuda_rmsnorm,
    .rope = cuda_rope,
    .kv_store = cuda_kv_store,
    .attention = cuda_attention,
    .silu_mul = cuda_silu_mul,
    .add = cuda_add,
    .gemm = cuda_gemm,
    .argmax = cuda_argmax,
    .sample = cuda_sample,
    /* native_handle and the deprecated fused / argmax_head slots stay NULL: the same
     * services are the extensions below (backend.h) */
    .native_handle = NULL,
    .parallel_for = NULL,
    .mem_info = cuda_mem_info,
    .extension = cuda_extension,
    .copy_side = cuda_copy_side,
    .event_wait = cuda_event_wait,
};

static const llmrt_plugin_desc cuda_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_BACKEND,
    .name = "cuda",
    .version = CUDA_BACKEND_VERSION,
    .description = "NVIDIA GPUs through the CUDA runtime: kernels, cuBLAS, one stream, events, "
                   "CUDA graphs, pinned and mapped host memory",
    .license = "MIT",
    .vtable = &cuda_vtable,
    .init = NULL, /* nothing to check that would not fail on a machine without a GPU */
    .keys = cuda_keys,
    .n_keys = N_CUDA_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &cuda_desc : NULL;
}
