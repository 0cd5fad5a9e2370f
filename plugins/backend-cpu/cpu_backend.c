/* cpu_backend.c — the CPU backend plugin: descriptor, vtable, instance lifecycle, the
 * [backend.cpu] section and device information.
 *
 * Why: the reference backend that runs everywhere (and CI's backend). Device memory is host
 * memory (caps HOST_IS_DEVICE | MAPPED_HOST), ops run synchronously on the calling thread
 * plus a persistent thread pool, graphs and on-device sampling are absent (NULL).
 *
 * [backend.cpu]: its keys are the table cpu_keys below, which the host validates (names,
 * values) and fills in with defaults before create() sees the section. simd names the kernel
 * path (cpu_simd.c: exact and baseline give the reference bits, avx2, avx512 and amx are the
 * fast paths within documented bounds of them); it also serves plugins with CPU kernels of
 * their own, which ask for it through the "llmrt.cpu" extension. */
#include "cpu_internal.h"

#include <llmrt/ext/collective.h>
#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/cpu.h>
#include <llmrt/ext/fused.h>
#include <llmrt/ext/logits_mask.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define CPU_MAX_THREADS 1024

#define STR_(x) #x
#define STR(x) STR_(x)

static const llmrt_key cpu_keys[] = {
    {"threads", LLMRT_KEY_INT, "0", "0.." STR(CPU_MAX_THREADS),
     "Worker threads for the CPU backend, the calling thread included (0: one per core this "
     "process may run on).",
     0},
    {"simd", LLMRT_KEY_ENUM, "auto", "auto|amx|avx512|avx2|exact|baseline",
     "Kernel path of the CPU ops and of other plugins' CPU kernels (AWQ, FP8). exact and "
     "baseline give the reference f32 bits (exact with the widest vectors here, baseline with "
     "SSE2); avx2, avx512 and amx are the fast paths (AWQ with int8 activations, prefill "
     "GEMMs in FMA register tiles, amx: those of bf16 weights on AMX tiles), within "
     "documented bounds of exact; auto = the fastest this CPU has.",
     LLMRT_KEY_DEVELOPER},
};
#define N_CPU_KEYS ((uint32_t)(sizeof cpu_keys / sizeof cpu_keys[0]))

/* The CPU quota of this process's cgroup in whole cores, rounded up (a container given
 * "--cpus=2" on a 16-core host sees 16 cores in its affinity mask); 0 when there is none.
 * cgroup v2 cpu.max ("max 100000" or "200000 100000"), else v1 cpu.cfs_quota_us / period. */
static int cgroup_quota_cores(void)
{
    long long quota = -1, period = 0;
    char buf[128];
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f) && strncmp(buf, "max", 3) != 0)
            sscanf(buf, "%lld %lld", &quota, &period);
        fclose(f);
    } else if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r"))) {
        if (fscanf(f, "%lld", &quota) != 1)
            quota = -1;
        fclose(f);
        if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r"))) {
            if (fscanf(f, "%lld", &period) != 1)
                period = 0;
            fclose(f);
        }
    }
    if (quota <= 0 || period <= 0)
        return 0;
    long long cores = (quota + period - 1) / period;
    return cores > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)cores;
}

/* Cores this process may run on (affinity mask, else online cores), no more than its cgroup's
 * CPU quota: threads = 0 must not start more busy threads than the process may run at once. */
static int available_cores(void)
{
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0) {
        long on = sysconf(_SC_NPROCESSORS_ONLN);
        n = on > 0 ? (int)on : 1;
    }
    int quota = cgroup_quota_cores();
    return quota > 0 && quota < n ? quota : n;
}

/* Where the section's `key` came from ("conf/x.ini:4", "default"). */
static const char *where_of(const llmrt_section *cfg, const char *key)
{
    for (size_t i = 0; cfg && cfg->where && i < cfg->n; i++)
        if (strcmp(cfg->keys[i], key) == 0 && cfg->where[i])
            return cfg->where[i];
    return "default";
}

/* Read [backend.cpu] (the host validated it against cpu_keys; a caller without a host, such
 * as a test, may pass NULL or a partial section: absent keys take their defaults). *threads
 * gets the requested count (0 = auto), *simd the kernel choice. */
static llmrt_status parse_config(const llmrt_section *cfg, int *threads, cpu_simd *simd,
                                 llmrt_error *err)
{
    const char *name = cfg && cfg->name ? cfg->name : "backend.cpu";
    const char *tv = llmrt_key_value(cfg, cpu_keys, N_CPU_KEYS, "threads");
    const char *sv = llmrt_key_value(cfg, cpu_keys, N_CPU_KEYS, "simd");
    char *end = NULL;
    errno = 0;
    long v = strtol(tv, &end, 10);
    if (end == tv || *end || errno || v < 0 || v > CPU_MAX_THREADS)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: [%s] threads = '%s' is not valid (expected an integer from 0 to "
                          "%d; 0 = one thread per available core)",
                          where_of(cfg, "threads"), name, tv, CPU_MAX_THREADS);
    *threads = (int)v;
    /* the host checked the name; whether this CPU has the path is for the backend to say */
    const char *why;
    int rc = cpu_simd_parse(sv, simd, &why);
    if (rc == -2)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "%s: [%s] simd = %s, but %s; use simd = auto, exact or baseline",
                          where_of(cfg, "simd"), name, sv, why);
    if (rc != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s: [%s] simd = '%s' is not valid (%s)",
                          where_of(cfg, "simd"), name, sv, why);
    return LLMRT_OK;
}

/* "x86_64 CPU (2 threads, amx)": every report names the thread count and the kernel path. */
static void device_name(char *out, size_t n, int threads, cpu_simd simd)
{
    struct utsname u;
    const char *arch = uname(&u) == 0 ? u.machine : "unknown";
    snprintf(out, n, "%s CPU (%d thread%s, %s)", arch, threads, threads == 1 ? "" : "s",
             cpu_simd_name(simd));
}

static llmrt_status fill_info(llmrt_device_info *out, int threads, cpu_simd simd,
                              llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    device_name(out->name, sizeof out->name, threads, simd);
    out->multiprocessors = threads;
    return cpu_meminfo(&out->mem_total, &out->mem_free, err);
}

static llmrt_status cpu_probe(llmrt_device_info *out, int32_t max, int32_t *count, llmrt_error *err)
{
    *count = 1;
    if (max >= 1 && out)
        return fill_info(&out[0], available_cores(), cpu_simd_detect(), err);
    return LLMRT_OK;
}

static void cpu_destroy(llmrt_backend *b)
{
    if (!b)
        return;
    cpu_pool_destroy(b->pool);
    cpu_memory_release_all(b);
    pthread_mutex_destroy(&b->mem_mu);
    free(b);
}

static llmrt_status cpu_create(const llmrt_host *host, const llmrt_section *cfg, llmrt_backend **out,
                               llmrt_error *err)
{
    *out = NULL;
    int threads = 0;
    cpu_simd simd = CPU_SIMD_BASELINE;
    llmrt_status st = parse_config(cfg, &threads, &simd, err);
    if (st != LLMRT_OK)
        return st;
    if (threads == 0)
        threads = available_cores();
    llmrt_backend *b = calloc(1, sizeof *b);
    if (!b)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: out of memory");
    b->host = host;
    b->n_threads = threads;
    b->simd = simd;
    b->isa = cpu_simd_isa(simd);
    b->bf16_dot = (simd == CPU_SIMD_AVX512 || simd == CPU_SIMD_AMX) && cpu_has_avx512bf16();
    pthread_mutex_init(&b->mem_mu, NULL);
    st = cpu_pool_create(threads, &b->pool, err);
    if (st != LLMRT_OK) {
        cpu_destroy(b);
        return st;
    }
    if (host && host->log)
        host->log(host->ctx, LLMRT_LOG_DEBUG, "cpu", "cpu backend: %d thread%s, %s kernels",
                  threads, threads == 1 ? "" : "s", cpu_simd_name(simd));
    *out = b;
    return LLMRT_OK;
}

static uint32_t cpu_caps(llmrt_backend *b)
{
    return LLMRT_BACKEND_CAP_HOST_IS_DEVICE | LLMRT_BACKEND_CAP_MAPPED_HOST;
}

static llmrt_status cpu_device_info(llmrt_backend *b, llmrt_device_info *out, llmrt_error *err)
{
    return fill_info(out, b->n_threads, b->simd, err);
}

static llmrt_status cpu_synchronize(llmrt_backend *b, llmrt_error *err)
{
    return LLMRT_OK; /* ops complete before they return */
}

static void cpu_parallel_for(llmrt_backend *b, int64_t n, void (*fn)(void *, int64_t, int64_t),
                             void *ctx)
{
    cpu_pool_run(b->pool, n, 0, fn, ctx);
}

static llmrt_status cpu_mem_info(llmrt_backend *b, uint64_t *free_bytes, uint64_t *total_bytes,
                                 llmrt_error *err)
{
    return cpu_meminfo(total_bytes, free_bytes, err);
}

/* ---- extensions ---- */

static const char *ext_simd(llmrt_backend *b) { return cpu_simd_name(b->simd); }
static int32_t ext_threads(llmrt_backend *b) { return b->n_threads; }

static const llmrt_cpu_ext cpu_ext = {
    .struct_size = sizeof(llmrt_cpu_ext),
    .simd = ext_simd,
    .threads = ext_threads,
};

static const llmrt_fused_ops fused_ext = {
    .struct_size = sizeof(llmrt_fused_ops),
    .add_rmsnorm = cpu_add_rmsnorm,
    .qk_norm_rope_store = cpu_qk_norm_rope_store,
    .swiglu = cpu_swiglu,
};

static const llmrt_argmax_head_ops argmax_head_ext = {
    .struct_size = sizeof(llmrt_argmax_head_ops),
    .create = cpu_argmax_head_create,
    .forward = cpu_argmax_head_forward,
    .destroy = cpu_argmax_head_destroy,
};

/* "llmrt.cpu" (the kernel path and thread count, for other plugins' CPU kernels),
 * "llmrt.fused" (cpu_fused.c), "llmrt.argmax_head" (cpu_argmax_head.c),
 * "llmrt.logits_mask" (cpu_logits_mask.c) and "llmrt.collective" (cpu_collective.c:
 * tensor-parallel ranks as threads), each at its version or older. */
static const void *cpu_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    (void)b;
    if (name && strcmp(name, LLMRT_EXT_CPU) == 0)
        return version <= LLMRT_EXT_CPU_VERSION ? &cpu_ext : NULL;
    if (name && strcmp(name, LLMRT_EXT_FUSED) == 0)
        return version <= LLMRT_EXT_FUSED_VERSION ? &fused_ext : NULL;
    if (name && strcmp(name, LLMRT_EXT_ARGMAX_HEAD) == 0)
        return version <= LLMRT_EXT_ARGMAX_HEAD_VERSION ? &argmax_head_ext : NULL;
    if (name && strcmp(name, LLMRT_EXT_LOGITS_MASK) == 0)
        return version <= LLMRT_EXT_LOGITS_MASK_VERSION ? &cpu_logits_mask_ext : NULL;
    if (name && strcmp(name, LLMRT_EXT_COLLECTIVE) == 0)
        return version <= LLMRT_EXT_COLLECTIVE_VERSION ? &cpu_collective_ext : NULL;
    return NULL;
}

static const llmrt_backend_vtable cpu_vtable = {
    .struct_size = sizeof(llmrt_backend_vtable),
    .probe = cpu_probe,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .caps = cpu_caps,
    .device_info = cpu_device_info,
    .dev_alloc = cpu_dev_alloc,
    .dev_free = cpu_dev_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .host_register = cpu_host_register,
    .host_unregister = cpu_host_unregister,
    .host_device_ptr = cpu_host_device_ptr,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_sync = cpu_event_sync,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .graph_begin = NULL,
    .graph_end = NULL,
    .graph_launch = NULL,
    .graph_destroy = NULL,
    .embedding = cpu_embedding,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .silu_mul = cpu_silu_mul,
    .add = cpu_add,
    .gemm = cpu_gemm,
    .argmax = cpu_argmax,
    .sample = NULL,
    /* native_handle and the deprecated fused and argmax_head slots stay NULL: the same
     * services are the extensions above (backend.h) */
    .native_handle = NULL,
    .parallel_for = cpu_parallel_for,
    .mem_info = cpu_mem_info,
    .extension = cpu_extension,
};

static const llmrt_plugin_desc cpu_desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_BACKEND,
    .name = "cpu",
    .version = "1.0.0",
    .description = "CPU backend: the exact f32 reference ops and AVX2 / AVX-512 / AMX fast paths "
                   "on a thread pool, mlock for pinned memory",
    .license = "MIT",
    .vtable = &cpu_vtable,
    .init = NULL,
    .keys = cpu_keys,
    .n_keys = N_CPU_KEYS,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &cpu_desc : NULL;
}
