/* cmd_doctor.c — `llmrt doctor`: check this machine for what llmrt needs and say which host
 * memory path to use. Each finding is one line with a status and, when something is wrong,
 * a one-line remedy. Exit 1 when something needed is missing (no usable backend, no memory
 * plugins, the configured backend unavailable).
 *
 * Why: the memory path that is fastest differs by platform (WSL2 caps pinned memory,
 * containers cap RLIMIT_MEMLOCK and /dev/shm); measuring beats guessing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <llmrt/ext/collective.h>
#include <llmrt/memory.h>

#include "clock.h"
#include "commands.h"
#include "common.h"
#include "config.h"
#include "safetensors.h"

static const char usage[] =
    "usage: llmrt doctor [-c FILE] [--set K=V] [--pin-cap-gb N] [--offload-gb G] [--no-probe]\n\n"
    "Reports CUDA devices, WSL2, how much host memory can really be pinned (probed in steps\n"
    "up to --pin-cap-gb, default 4), RLIMIT_MEMLOCK, /dev/shm, CPUs and memory limits, and\n"
    "recommends a memory plugin. On a GPU backend it measures host-to-device bandwidth from\n"
    "pageable, pinned and mapped (zero-copy) host memory (`h2d pinned: 24.1 GB/s (64 MiB)`)\n"
    "and says what CPU weight offload costs per token: --offload-gb G (default\n"
    "memory.cpu_offload_gb) of the configured model's (--model) layers over the bus, at the\n"
    "bandwidth of memory.plugin's path. --no-probe skips the pinning probe and the bandwidth\n"
    "measurements. Exit 1 when something needed is missing.\n\n" CLI_COMMON_USAGE;

static int n_bad;

static void finding(const char *status, const char *what, const char *remedy, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finding(const char *status, const char *what, const char *remedy, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("[%-4s] %-14s ", status, what);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (remedy)
        printf("       %-14s remedy: %s\n", "", remedy);
    if (strcmp(status, "FAIL") == 0)
        n_bad++;
}

static double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

/* "MemTotal:  123 kB" → bytes; 0 when absent. */
static unsigned long long meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10) * 1024ull;
            break;
        }
    if (f)
        fclose(f);
    return v;
}

static void read_first_line(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(buf, (int)n, f))
        buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

static int is_wsl2(char *version, size_t n)
{
    read_first_line("/proc/version", version, n);
    return strstr(version, "microsoft") || strstr(version, "Microsoft") || strstr(version, "WSL");
}

static void check_cpu_memory(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long long total = meminfo("MemTotal"), avail = meminfo("MemAvailable");
    finding("ok", "cpu/memory", NULL, "%ld CPUs, %.1f GiB memory (%.1f GiB available)", cpus,
            gib((double)total), gib((double)avail));
    char limit[128];
    read_first_line("/sys/fs/cgroup/memory.max", limit, sizeof limit);
    if (!limit[0])
        read_first_line("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit, sizeof limit);
    unsigned long long lim = strtoull(limit, NULL, 10);
    if (!limit[0] || strcmp(limit, "max") == 0 || lim == 0 || lim >= total)
        finding("ok", "memory limit", NULL, "none below physical memory (cgroup: %s)",
                limit[0] ? limit : "not found");
    else
        finding("warn", "memory limit", "raise the container's memory limit to fit the model and "
                "its KV cache", "cgroup limits this process to %.1f GiB", gib((double)lim));
}

static void check_platform(int *wsl)
{
    struct utsname u;
    uname(&u);
    char version[512];
    *wsl = is_wsl2(version, sizeof version);
    if (*wsl)
        finding("warn", "platform", "WSL2 caps pinned memory; prefer the probe below over "
                "assumptions, and compare paths with `llmrt bench -c conf/pinned.ini -c "
                "conf/pageable.ini`", "WSL2 detected (kernel %s)", u.release);
    else
        finding("ok", "platform", NULL, "%s %s (not WSL2)", u.sysname, u.release);
}

static void check_shm(void)
{
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) != 0) {
        finding("warn", "/dev/shm", "mount a tmpfs on /dev/shm (docker: --shm-size=8g)",
                "not mounted");
        return;
    }
    double size = (double)sv.f_blocks * sv.f_frsize;
    if (size < 1024.0 * 1024 * 1024)
        finding("warn", "/dev/shm", "enlarge /dev/shm (docker: --shm-size=8g); small shm "
                "breaks multi-process tools and IPC-heavy clients",
                "%.0f MiB (small)", size / (1024.0 * 1024.0));
    else
        finding("ok", "/dev/shm", NULL, "%.1f GiB (%.1f GiB free)", gib(size),
                gib((double)sv.f_bavail * sv.f_frsize));
}

static void format_limit(rlim_t v, char *buf, size_t n)
{
    if (v == RLIM_INFINITY)
        snprintf(buf, n, "unlimited");
    else
        snprintf(buf, n, "%.1f MiB", (double)v / (1024.0 * 1024.0));
}

/* 1 when this process may lock memory beyond RLIMIT_MEMLOCK (CAP_IPC_LOCK: root has it). */
static int has_cap_ipc_lock(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long eff = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    if (f)
        fclose(f);
    return (eff >> 14) & 1; /* CAP_IPC_LOCK is capability 14 */
}

/* Why the probe pinned what it did, against RLIMIT_MEMLOCK: mlock (CPU backend) counts
 * against the limit unless the process has CAP_IPC_LOCK; cudaHostAlloc pins through the
 * NVIDIA driver, which does not count against it at all. */
static void explain_memlock(const char *backend, rlim_t limit, double pinned, int refused)
{
    char lim[64];
    format_limit(limit, lim, sizeof lim);
    int cuda = strcmp(backend, "cuda") == 0;
    if (cuda) {
        finding("info", "memlock", NULL,
                "RLIMIT_MEMLOCK %s does not bound cudaHostAlloc: the NVIDIA driver pins "
                "memory itself (%s)",
                lim, refused ? "what refused it is the driver or WSL2's cap"
                             : "the probe stopped at its cap, not at a limit");
    } else if (limit == RLIM_INFINITY) {
        finding("info", "memlock", NULL,
                "RLIMIT_MEMLOCK is unlimited: mlock may pin as much as memory allows%s",
                refused ? " (what refused it is the memory itself)" : "");
    } else if (pinned > (double)limit && has_cap_ipc_lock()) {
        finding("info", "memlock", NULL,
                "pinned %.2f GiB although RLIMIT_MEMLOCK is %s: this process has CAP_IPC_LOCK "
                "(root has it), which lifts the limit; an unprivileged user (a systemd "
                "service's User=) gets %s at most unless LimitMEMLOCK= raises it",
                gib(pinned), lim, lim);
    } else if (refused) {
        finding("warn", "memlock",
                "raise it (ulimit -l unlimited; docker: --ulimit memlock=-1; systemd: "
                "LimitMEMLOCK=infinity) or use memory.plugin = pageable",
                "mlock stopped %s: RLIMIT_MEMLOCK %s is the limit (without CAP_IPC_LOCK "
                "every mlock'ed byte counts against it)",
                pinned > 0 ? "after the blocks above" : "at the first 256 MiB block", lim);
    } else {
        finding("info", "memlock", NULL,
                "RLIMIT_MEMLOCK %s: the probe's %.2f GiB fit under it (mlock counts against "
                "it; the step buffers need a few MiB)",
                lim, gib(pinned));
    }
}

/* Pin host memory through the backend in 256 MiB steps up to `cap` bytes.
 * Returns bytes pinned; *seconds = time spent pinning. */
static double probe_pinned(const llmrt_backend_ref *be, double cap, double *seconds, char *why,
                           size_t why_n)
{
    const size_t step = 256u << 20;
    void *blocks[256];
    int n = 0;
    double t0 = llmrt_now_s();
    why[0] = 0;
    while (n < 256 && (double)(n + 1) * step <= cap) {
        llmrt_error err = {0};
        if (be->vt->host_alloc(be->b, step, LLMRT_HOST_PINNED, &blocks[n], &err) != LLMRT_OK) {
            snprintf(why, why_n, "%s", err.msg);
            break;
        }
        memset(blocks[n], 1, step); /* touch it: pinned memory must really be resident */
        n++;
    }
    *seconds = llmrt_now_s() - t0;
    for (int i = 0; i < n; i++)
        be->vt->host_free(be->b, blocks[i]);
    return (double)n * step;
}

/* ---- host-to-device bandwidth and what CPU weight offload costs ----
 *
 * Each kind of host memory is measured the way the memory plugin of that name moves offloaded
 * weights (memory.h offload_*): pageable — a copy from malloc'd memory that the host waits
 * for (wall clock around copy + synchronize: the pageable plugin copies synchronously);
 * pinned — a copy from page-locked memory, timed on the stream by events (its prefetch runs
 * beside the compute); mapped — a kernel (the backend's add) reading mapped memory in place
 * over the bus, timed by events, as uva's kernels read offloaded weights. Best of H2D_REPS
 * after one warm-up, at each of h2d_sizes. GB/s are 1e9 bytes per second, as bench's
 * bus_gbps. */

enum { H2D_PAGEABLE, H2D_PINNED, H2D_MAPPED, H2D_KINDS };
static const char *const h2d_names[H2D_KINDS] = {"pageable", "pinned", "mapped"};
static const size_t h2d_sizes[] = {(size_t)1 << 20, (size_t)64 << 20};
#define H2D_NSIZES ((int)(sizeof h2d_sizes / sizeof *h2d_sizes))
#define H2D_REPS 5

/* One timed transfer of `bytes` from host (its device address host_dev when mapped) into dev. */
static llmrt_status h2d_once(const llmrt_backend_ref *be, int kind, void *dev, void *host,
                             void *host_dev, size_t bytes, llmrt_event *e0, llmrt_event *e1,
                             double *ms, llmrt_error *err)
{
    llmrt_status st;
    if (kind == H2D_PAGEABLE) {
        double t0 = llmrt_now_s();
        if ((st = be->vt->copy(be->b, dev, host, bytes, LLMRT_COPY_H2D, err)) ||
            (st = be->vt->synchronize(be->b, err)))
            return st;
        *ms = (llmrt_now_s() - t0) * 1e3;
        return LLMRT_OK;
    }
    if ((st = be->vt->event_record(be->b, e0, err)))
        return st;
    if (kind == H2D_PINNED)
        st = be->vt->copy(be->b, dev, host, bytes, LLMRT_COPY_H2D, err);
    else /* dev = host_dev + dev: every float of the mapped memory crosses the bus once */
        st = be->vt->add(be->b, dev, host_dev, dev, (int64_t)(bytes / sizeof(float)), err);
    float f = 0;
    if (st || (st = be->vt->event_record(be->b, e1, err)) ||
        (st = be->vt->event_sync(be->b, e1, err)) ||
        (st = be->vt->event_elapsed_ms(be->b, e0, e1, &f, err)))
        return st;
    *ms = f;
    return LLMRT_OK;
}

/* Measure one kind at every size into gbps[H2D_NSIZES]. */
static llmrt_status h2d_measure(const llmrt_backend_ref *be, int kind, void *dev,
                                double *gbps, llmrt_error *err)
{
    const size_t max = h2d_sizes[H2D_NSIZES - 1];
    const uint32_t flags = kind == H2D_PAGEABLE ? 0
                           : kind == H2D_PINNED ? LLMRT_HOST_PINNED
                                                : LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED;
    void *host = NULL, *host_dev = NULL;
    llmrt_event *e0 = NULL, *e1 = NULL;
    llmrt_status st;
    if ((st = be->vt->host_alloc(be->b, max, flags, &host, err)))
        return st;
    memset(host, 0, max); /* resident, and floats the add can read (0.0f) */
    if (kind == H2D_MAPPED && (st = be->vt->host_device_ptr(be->b, host, &host_dev, err)))
        goto cleanup;
    if ((st = be->vt->event_create(be->b, &e0, err)) ||
        (st = be->vt->event_create(be->b, &e1, err)))
        goto cleanup;
    for (int s = 0; s < H2D_NSIZES; s++) {
        double best = 0, ms = 0;
        for (int r = 0; r <= H2D_REPS; r++) {
            if ((st = h2d_once(be, kind, dev, host, host_dev, h2d_sizes[s], e0, e1, &ms, err)))
                goto cleanup;
            if (r > 0 && (best == 0 || ms < best)) /* r = 0: the warm-up */
                best = ms;
        }
        gbps[s] = best > 0 ? (double)h2d_sizes[s] / (best * 1e-3) / 1e9 : 0;
    }
cleanup:
    if (e0)
        be->vt->event_destroy(be->b, e0);
    if (e1)
        be->vt->event_destroy(be->b, e1);
    be->vt->host_free(be->b, host);
    return st;
}

static const char *mib(size_t bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%zu MiB", bytes >> 20);
    return buf;
}

/* One line per kind; gbps[k] is set to its figure at the largest size (0: not measured). */
static void check_h2d(const llmrt_backend_ref *be, double gbps[H2D_KINDS])
{
    static const char *const how[H2D_KINDS] = {
        "copy from malloc'd memory, host waits", "async copy from page-locked memory",
        "kernel reading mapped memory in place"};
    void *dev = NULL;
    llmrt_error err = {0};
    for (int k = 0; k < H2D_KINDS; k++)
        gbps[k] = 0;
    if (be->vt->dev_alloc(be->b, h2d_sizes[H2D_NSIZES - 1], &dev, &err) != LLMRT_OK) {
        finding("warn", "bus", NULL, "h2d: not measured (%s)", err.msg);
        return;
    }
    const int can_map = (be->vt->caps(be->b) & LLMRT_BACKEND_CAP_MAPPED_HOST) != 0;
    for (int k = 0; k < H2D_KINDS; k++) {
        double g[H2D_NSIZES] = {0};
        err = (llmrt_error){0};
        if (k == H2D_MAPPED && !can_map) {
            finding("warn", "bus", "memory.plugin = uva needs mapped host memory",
                    "h2d mapped: n/a (this device cannot map host memory)");
            continue;
        }
        if (h2d_measure(be, k, dev, g, &err) != LLMRT_OK) {
            finding("warn", "bus", k == H2D_PAGEABLE ? NULL : "see pinned memory below",
                    "h2d %s: not measured (%s)", h2d_names[k], err.msg);
            continue;
        }
        char line[256] = "", sz[32];
        size_t len = 0;
        for (int s = H2D_NSIZES - 1; s >= 0; s--)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%.1f GB/s (%s)",
                                    s == H2D_NSIZES - 1 ? "" : ", ", g[s],
                                    mib(h2d_sizes[s], sz, sizeof sz));
        gbps[k] = g[H2D_NSIZES - 1];
        finding("ok", "bus", NULL, "h2d %s: %s; best of %d, %s", h2d_names[k], line, H2D_REPS,
                how[k]);
    }
    be->vt->dev_free(be->b, dev);
}

/* Bytes of layer 0 (each buffer 256-aligned, as the model sizes its offload slots) and the
 * number of layers, from the checkpoint's "model.layers.N." tensors. 0 on failure (why set). */
static int ckpt_layers(const char *dir, uint64_t *layer_bytes, int32_t *n_layers, char *why,
                       size_t why_n)
{
    llmrt_st_model *m = NULL;
    llmrt_error err = {0};
    *layer_bytes = 0;
    *n_layers = 0;
    if (llmrt_st_model_open(dir, 0, &m, &err) != LLMRT_OK) {
        snprintf(why, why_n, "%s", err.msg);
        return 0;
    }
    for (size_t f = 0; f < llmrt_st_model_file_count(m); f++) {
        const llmrt_st_file *sf = llmrt_st_model_file(m, f);
        for (size_t i = 0; i < llmrt_st_file_count(sf); i++) {
            const llmrt_tensor_view *v = llmrt_st_file_at(sf, i);
            const char *p = "model.layers.";
            if (strncmp(v->name, p, strlen(p)) != 0)
                continue;
            char *end;
            long idx = strtol(v->name + strlen(p), &end, 10);
            if (*end != '.' || idx < 0 || idx > 100000)
                continue;
            if (idx + 1 > *n_layers)
                *n_layers = (int32_t)idx + 1;
            if (idx == 0)
                *layer_bytes += (v->bytes + 255) & ~(uint64_t)255;
        }
    }
    llmrt_st_model_close(m);
    if (*n_layers == 0 || *layer_bytes == 0) {
        snprintf(why, why_n, "no model.layers.N tensors in %s", dir);
        return 0;
    }
    return 1;
}

/* What memory.cpu_offload_gb (or --offload-gb) costs per token: the offloaded bytes cross the
 * bus once per forward, at the measured bandwidth of the configured plugin's path. */
static void offload_cost(llmrt_runtime *rt, const double gbps[H2D_KINDS], double gb,
                         const char *gb_from)
{
    const char *plugin = llmrt_config_get(rt->cfg, "memory.plugin");
    int kind = -1;
    if (plugin && strcmp(plugin, "pageable") == 0)
        kind = H2D_PAGEABLE;
    else if (plugin && strcmp(plugin, "pinned") == 0)
        kind = H2D_PINNED;
    else if (plugin && strcmp(plugin, "uva") == 0)
        kind = H2D_MAPPED;
    const char *dir = llmrt_config_get(rt->cfg, "model.path");
    uint64_t bytes = (uint64_t)(gb * 1e9), layer = 0;
    int32_t n_layers = 0, n_off = 0;
    char what[LLMRT_ERROR_MSG_MAX + 256] = "";
    if (dir && dir[0]) {
        char why[LLMRT_ERROR_MSG_MAX] = "";
        if (!ckpt_layers(dir, &layer, &n_layers, why, sizeof why)) {
            finding("warn", "offload cost", NULL, "cannot size the model's layers: %s", why);
            return;
        }
        if (gb <= 0) {
            /* nothing offloaded: what one layer would cost */
            bytes = layer;
            n_off = 1;
            snprintf(what, sizeof what, "%s = 0: nothing offloaded; each layer offloaded would "
                     "move %.3f GB", gb_from, (double)layer / 1e9);
        } else {
            n_off = n_layers - llmrt_offload_first_layer(n_layers, layer, bytes);
            bytes = (uint64_t)n_off * layer;
            snprintf(what, sizeof what, "%s = %g: %d of %d layers (%.3f GB, checkpoint bytes)",
                     gb_from, gb, n_off, n_layers, (double)bytes / 1e9);
        }
    } else {
        if (gb <= 0) {
            finding("info", "offload cost", NULL, "%s = 0 and no model (--model): nothing to "
                    "offload", gb_from);
            return;
        }
        snprintf(what, sizeof what, "%s = %g: %.3f GB (no model: whole layers not counted)",
                 gb_from, gb, (double)bytes / 1e9);
    }
    char all[256] = "";
    size_t len = 0;
    for (int k = 0; k < H2D_KINDS; k++)
        if (gbps[k] > 0)
            len += (size_t)snprintf(all + len, sizeof all - len, "%s%s %.2f ms", len ? ", " : "",
                                    k == H2D_MAPPED ? "uva" : h2d_names[k],
                                    (double)bytes / (gbps[k] * 1e9) * 1e3);
    if (kind >= 0 && gbps[kind] > 0)
        finding("info", "offload cost", NULL,
                "%s over the bus each forward: %.2f ms per token at %.1f GB/s (h2d %s, "
                "memory.plugin = %s)%s; every plugin: %s",
                what, (double)bytes / (gbps[kind] * 1e9) * 1e3, gbps[kind], h2d_names[kind],
                plugin, kind == H2D_PINNED ? ", overlapped with compute by the prefetch" : "",
                all[0] ? all : "none measured");
    else
        finding("warn", "offload cost", NULL,
                "%s over the bus each forward; memory.plugin = %s: its path was not measured; "
                "measured: %s",
                what, plugin ? plugin : "?", all[0] ? all : "none");
}

int cmd_doctor(int argc, char **argv)
{
    enum { OPT_CAP = CLI_OPT_FIRST_OWN, OPT_NO_PROBE, OPT_OFFLOAD };
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                          {"pin-cap-gb", required_argument, 0, OPT_CAP},
                                          {"offload-gb", required_argument, 0, OPT_OFFLOAD},
                                          {"no-probe", no_argument, 0, OPT_NO_PROBE},
                                          {0, 0, 0, 0}};
    cli_common c = {0};
    double cap_gb = 4.0, offload_gb = -1; /* < 0: memory.cpu_offload_gb */
    int probe = 1, opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        if (opt == OPT_CAP) {
            char *end;
            cap_gb = strtod(optarg, &end);
            if (*end || cap_gb <= 0 || cap_gb > 1024)
                return cli_usage_error("doctor", usage, "--pin-cap-gb wants a number of GiB in "
                                       "(0, 1024], got '%s'", optarg);
            continue;
        }
        if (opt == OPT_OFFLOAD) {
            char *end;
            offload_gb = strtod(optarg, &end);
            if (end == optarg || *end || !(offload_gb >= 0) || offload_gb > 100000)
                return cli_usage_error("doctor", usage, "--offload-gb wants a number of GB in "
                                       "[0, 100000], got '%s'", optarg);
            continue;
        }
        if (opt == OPT_NO_PROBE) {
            probe = 0;
            continue;
        }
        int r = cli_common_opt(&c, opt, optarg, "doctor", usage);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_bad_option("doctor", opts, argv);
    }
    if (optind < argc)
        return cli_usage_error("doctor", usage, "unexpected argument '%s'", argv[optind]);
    llmrt_runtime *rt;
    if (cli_open_runtime(&c, &rt))
        return 1;
    n_bad = 0;
    printf("llmrt doctor (llmrt %s)\n\n", LLMRT_VERSION);
    check_cpu_memory();
    int wsl = 0;
    check_platform(&wsl);

    /* CUDA devices, through the CUDA backend plugin's probe (no instance needed). */
    int gpus = 0;
    const llmrt_plugin_entry *cuda = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_BACKEND, "cuda");
    if (!cuda) {
        finding("info", "cuda", "build with a CUDA toolkit (-DLLMRT_CUDA=ON) to use NVIDIA GPUs",
                "no CUDA backend plugin in this build");
    } else {
        llmrt_device_info info[8];
        int32_t count = 0;
        llmrt_error err = {0};
        const llmrt_backend_vtable *vt = cuda->desc->vtable;
        if (vt->probe(info, 8, &count, &err) != LLMRT_OK || count == 0) {
            finding("info", "cuda", wsl ? "install the NVIDIA driver on Windows (not inside WSL2)"
                                        : "install the NVIDIA driver, or expose the GPU to this "
                                          "container (--gpus all)",
                    "no CUDA device (%s)", err.msg[0] ? err.msg : "none visible");
        } else {
            gpus = count;
            for (int i = 0; i < count && i < 8; i++)
                finding("ok", "cuda", NULL,
                        "device %d: %s, compute %d.%d, %d SMs, %.1f GiB free of %.1f GiB, "
                        "driver %d.%d, runtime %d.%d",
                        i, info[i].name, info[i].cc_major, info[i].cc_minor,
                        info[i].multiprocessors, gib((double)info[i].mem_free),
                        gib((double)info[i].mem_total), info[i].driver_version / 1000,
                        info[i].driver_version % 1000 / 10, info[i].runtime_version / 1000,
                        info[i].runtime_version % 1000 / 10);
        }
    }

    /* Plugins. */
    size_t n_plugins = llmrt_registry_count(rt->reg), n_rej = llmrt_registry_rejected_count(rt->reg);
    char mem_names[256];
    llmrt_registry_names(rt->reg, LLMRT_PLUGIN_MEMORY, mem_names, sizeof mem_names);
    if (n_plugins == 0)
        finding("FAIL", "plugins", "set LLMRT_PLUGIN_PATH or runtime.plugin_dir to the folder "
                "holding the plugin .so files", "none found (searched %s)",
                llmrt_registry_search_path(rt->reg));
    else
        finding(n_rej ? "warn" : "ok", "plugins", n_rej ? "see `llmrt plugins` for the reasons"
                                                        : NULL,
                "%zu loaded, %zu rejected; memory plugins: %s", n_plugins, n_rej, mem_names);
    if (!llmrt_registry_find(rt->reg, LLMRT_PLUGIN_MEMORY, "pageable"))
        finding("FAIL", "memory", "reinstall llmrt (the memory-pageable plugin is missing)",
                "no pageable memory plugin");

    /* Backend and pinned-memory probe. */
    struct rlimit rl;
    getrlimit(RLIMIT_MEMLOCK, &rl);
    char lim[64];
    format_limit(rl.rlim_cur, lim, sizeof lim);
    llmrt_backend_ref be = {0};
    llmrt_error err = {0};
    double pinned = 0, secs = 0;
    char why[LLMRT_ERROR_MSG_MAX] = "";
    if (llmrt_runtime_backend_open(rt, &be, &err) != LLMRT_OK) {
        finding("FAIL", "backend", "check runtime.backend and `llmrt plugins`", "%s", err.msg);
    } else {
        {
            const llmrt_collective_ops *coll =
                llmrt_backend_extension(be.vt, be.b, LLMRT_EXT_COLLECTIVE,
                                        LLMRT_EXT_COLLECTIVE_VERSION);
            char links[1024] = "";
            if (coll && LLMRT_VT_HAS(coll, llmrt_collective_ops, describe_links))
                coll->describe_links(be.b, links, sizeof links);
            finding("info", "tensor parallel",
                    coll ? NULL : "use a backend with the llmrt.collective extension",
                    "runtime.tensor_parallel = %lld; %s",
                    (long long)llmrt_config_int(rt->cfg, "runtime.tensor_parallel"),
                    coll ? links : "this backend has no collectives");
        }
        llmrt_device_info info;
        if (be.vt->device_info(be.b, &info, &err) == LLMRT_OK)
            finding("ok", "backend", NULL, "%s (runtime.backend = %s): %s", be.name,
                    llmrt_config_get(rt->cfg, "runtime.backend"), info.name);
        double cap = cap_gb * 1024 * 1024 * 1024;
        double avail = (double)meminfo("MemAvailable");
        if (avail > 0 && cap > avail / 2)
            cap = avail / 2; /* never push the machine into swap or the OOM killer */
        if (probe) {
            pinned = probe_pinned(&be, cap, &secs, why, sizeof why);
            const char *how = strcmp(be.name, "cuda") == 0 ? "cudaHostAlloc" : "mlock";
            if (pinned <= 0)
                finding("warn", "pinned memory", "raise the limit (ulimit -l unlimited; docker: "
                        "--ulimit memlock=-1) or use memory.plugin = pageable",
                        "cannot pin even 256 MiB via %s (%s); RLIMIT_MEMLOCK %s", how, why, lim);
            else
                finding(why[0] ? "warn" : "ok", "pinned memory",
                        why[0] ? "pinned buffers beyond this fall back to pageable "
                                 "(memory.fallback)" : NULL,
                        "pinned %.2f GiB via %s in %.2f s (%.2f s/GiB)%s%s; RLIMIT_MEMLOCK %s",
                        gib(pinned), how, secs, secs / gib(pinned),
                        why[0] ? ", then refused: " : " (probe cap reached)", why, lim);
            explain_memlock(be.name, rl.rlim_cur, pinned, why[0] != 0);
        } else {
            finding("info", "pinned memory", NULL, "probe skipped (--no-probe); RLIMIT_MEMLOCK %s",
                    lim);
        }
        /* Host-to-device bandwidth and CPU weight offload: only where device memory is not
         * host memory. */
        const char *gb_from = offload_gb >= 0 ? "--offload-gb" : "memory.cpu_offload_gb";
        const double gb =
            offload_gb >= 0 ? offload_gb : llmrt_config_float(rt->cfg, "memory.cpu_offload_gb");
        if (be.vt->caps(be.b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) {
            finding("info", "offload", NULL,
                    "%s = %g: CPU weight offload has no meaning on the %s backend (its device "
                    "memory is host memory); h2d bandwidth: n/a",
                    gb_from, gb, be.name);
        } else if (!probe) {
            finding("info", "bus", NULL, "h2d bandwidth and offload cost not measured "
                    "(--no-probe)");
        } else {
            double gbps[H2D_KINDS];
            check_h2d(&be, gbps);
            offload_cost(rt, gbps, gb, gb_from);
        }
        llmrt_runtime_backend_close(&be);
    }
    check_shm();

    /* Recommendation: measured against the default (memory.plugin's), and said as agreeing
     * with it or why not; the configured value when it is neither. */
    const llmrt_key *mk = llmrt_config_decl(rt->cfg, "memory.plugin");
    const char *def = mk ? mk->def : "pinned";
    const char *conf = llmrt_config_get(rt->cfg, "memory.plugin");
    const char *rec, *reason;
    int cant_pin = probe && pinned <= 0;
    if (cant_pin) {
        rec = "pageable";
        reason = "this machine refuses to pin memory (see above), so pinned and uva would fall "
                 "back to pageable anyway (memory.fallback) and log it";
    } else if (gpus == 0) {
        rec = "pinned";
        reason = "with no GPU, host and device memory are the same and the path changes "
                 "little; pinned only page-locks the few MiB of step buffers (mlock), which "
                 "this machine allows";
    } else {
        rec = "pinned";
        reason = wsl ? "page-locked step buffers give truly async, graph-captured copies "
                       "(WSL2: the probe above shows how much its cap leaves)"
                     : "page-locked step buffers give truly async, graph-captured copies";
    }
    printf("\n");
    if (strcmp(rec, def) == 0)
        printf("recommendation: memory.plugin = %s, the default — %s.", rec, reason);
    else
        printf("recommendation: memory.plugin = %s, not the default %s — %s.", rec, def, reason);
    if (conf && strcmp(conf, rec) != 0)
        printf(" This config sets memory.plugin = %s (%s).", conf,
               llmrt_config_origin(rt->cfg, "memory.plugin"));
    printf(" Measure instead of trusting this: `llmrt bench -c conf/pinned.ini -c "
           "conf/uva.ini -c conf/pageable.ini`.\n");
    llmrt_runtime_close(rt);
    if (n_bad)
        printf("\n%d problem(s) need attention.\n", n_bad);
    return n_bad ? 1 : 0;
}
