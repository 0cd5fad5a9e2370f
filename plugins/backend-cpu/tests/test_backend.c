/* test_backend.c — backend-cpu outside the ops: [backend.cpu] validation, probe and device
 * info, memory mechanisms (dev/host alloc, pinned with mlock and its RLIMIT_MEMLOCK failure,
 * mapped and registered memory), copies, events, and the thread pool's parallel_for. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "cpu_test_common.h"

#include "test_util.h"

static llmrt_status create_with(const char *const *kv, llmrt_backend **out, llmrt_error *err)
{
    const char *keys[8], *vals[8], *where[8];
    size_t n = 0;
    for (; kv[2 * n]; n++) {
        keys[n] = kv[2 * n];
        vals[n] = kv[2 * n + 1];
        where[n] = n == 0 ? "conf/test.ini:3" : "conf/test.ini:4";
    }
    llmrt_section sec = {"backend.cpu", n, keys, vals, where};
    return ct_vtable()->create(NULL, &sec, out, err);
}

/* What threads = 0 means: the affinity mask's cores, capped by a cgroup CPU quota. */
static int cores(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                        : (int)sysconf(_SC_NPROCESSORS_ONLN);
    long long quota = -1, period = 0;
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        if (fscanf(f, "%lld %lld", &quota, &period) != 2)
            quota = -1; /* "max": no quota */
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
    if (quota > 0 && period > 0 && (quota + period - 1) / period < n)
        n = (int)((quota + period - 1) / period);
    return n;
}

/* Threads of this process, from /proc/self/task. */
static int process_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

START_TEST(config_threads_validated)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = NULL;
    llmrt_error err = {0};
    const char *bad[] = {"abc", "-1", "2x", "", "99999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *kv[] = {"threads", bad[i], NULL};
        ck_assert_int_eq(create_with(kv, &b, &err), LLMRT_ERR_INVALID_ARG);
        ck_assert_ptr_null(b);
        ck_assert_msg(strstr(err.msg, "conf/test.ini:3") && strstr(err.msg, "threads") &&
                          strstr(err.msg, "integer"),
                      "message: %s", err.msg);
    }
    const char *two[] = {"threads", "2", NULL};
    ck_assert_int_eq(create_with(two, &b, &err), LLMRT_OK);
    llmrt_device_info info;
    ck_assert_int_eq(vt->device_info(b, &info, &err), LLMRT_OK);
    /* the name says the thread count and the kernel path */
    char want2[64];
    snprintf(want2, sizeof want2, "CPU (2 threads, %s)", ct_cpu_ext(b)->simd(b));
    ck_assert_msg(strstr(info.name, want2) != NULL, "name: %s", info.name);
    ck_assert_int_eq(info.multiprocessors, 2);
    ck_assert_int_eq(info.is_gpu, 0);
    vt->destroy(b);

    const char *autot[] = {"threads", "0", NULL};
    ck_assert_int_eq(create_with(autot, &b, &err), LLMRT_OK);
    ck_assert_int_eq(vt->device_info(b, &info, &err), LLMRT_OK);
    ck_assert_int_eq(info.multiprocessors, cores());
    vt->destroy(b);

    /* simd: the kernel family, reported through the "llmrt.cpu" extension */
    const char *base[] = {"simd", "baseline", NULL};
    ck_assert_int_eq(create_with(base, &b, &err), LLMRT_OK);
    ck_assert_str_eq(ct_cpu_ext(b)->simd(b), "baseline");
    vt->destroy(b);
    const char *badsimd[] = {"simd", "avx1024", NULL};
    ck_assert_int_eq(create_with(badsimd, &b, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "conf/test.ini:3") && strstr(err.msg, "avx1024") &&
                      strstr(err.msg, "auto, amx, avx512, avx2, exact or baseline"),
                  "message: %s", err.msg);
    /* every named path either runs (and is reported by its name) or is refused as
     * unsupported on this CPU, naming what is missing; the fast paths are ordered */
    const char *paths[] = {"exact", "avx2", "avx512", "amx"};
    int have_prev = 1;
    for (int p = 0; p < 4; p++) {
        const char *kv[] = {"simd", paths[p], NULL};
        llmrt_status st = create_with(kv, &b, &err);
        if (st == LLMRT_OK) {
            ck_assert_msg(have_prev, "simd = %s runs but a path below it does not", paths[p]);
            ck_assert_str_eq(ct_cpu_ext(b)->simd(b), paths[p]);
            vt->destroy(b);
        } else {
            ck_assert_int_eq(st, LLMRT_ERR_UNSUPPORTED);
            ck_assert_msg(strstr(err.msg, "this CPU has no") && strstr(err.msg, paths[p]),
                          "message: %s", err.msg);
            have_prev = 0;
        }
    }
    const char *autosimd[] = {"simd", "auto", NULL};
    ck_assert_int_eq(create_with(autosimd, &b, &err), LLMRT_OK);
    const char *simd = ct_cpu_ext(b)->simd(b);
    ck_assert(strcmp(simd, "amx") == 0 || strcmp(simd, "avx512") == 0 ||
              strcmp(simd, "avx2") == 0 || strcmp(simd, "baseline") == 0);
    vt->destroy(b);

    /* no section at all: defaults */
    ck_assert_int_eq(vt->create(NULL, NULL, &b, &err), LLMRT_OK);
    vt->destroy(b);
}
END_TEST

/* The keys are declared in the descriptor, so the host validates them: the table passes the
 * registry's check, and a config with [backend.cpu] rejects a misspelt key (file:line, "did
 * you mean") and fills in the defaults create() then reads. */
START_TEST(config_keys_declared)
{
    char *path = tu_plugin_path("backend-cpu.so");
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    free(path);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(d->n_keys, 2);
    ck_assert_str_eq(d->keys[0].name, "threads");
    ck_assert_int_eq(d->keys[0].type, LLMRT_KEY_INT);
    ck_assert_str_eq(d->keys[1].name, "simd");
    ck_assert_uint_eq(d->keys[1].flags & LLMRT_KEY_DEVELOPER, LLMRT_KEY_DEVELOPER);
    llmrt_error err = {0};
    ck_assert_msg(llmrt_key_table_check("backend.cpu", d->keys, d->n_keys, &err) == LLMRT_OK,
                  "%s", err.msg);

    char *dir = tu_mkdtemp();
    char *ini = tu_write_file(dir, "t.ini", "[backend.cpu]\nthreads = 1\nsmid = auto\n");
    llmrt_config *cfg = NULL;
    ck_assert_int_eq(llmrt_config_build(ini, NULL, 0, &cfg, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_config_declare(cfg, "backend.cpu", d->keys, d->n_keys, NULL, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "t.ini:3") && strstr(err.msg, "did you mean backend.cpu.simd"),
                  "message: %s", err.msg);
    llmrt_config_free(cfg);
    free(ini);

    ini = tu_write_file(dir, "t.ini", "[backend.cpu]\nthreads = 2\n");
    ck_assert_int_eq(llmrt_config_build(ini, NULL, 0, &cfg, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_config_declare(cfg, "backend.cpu", d->keys, d->n_keys, NULL, &err),
                     LLMRT_OK);
    const llmrt_section *sec = llmrt_config_plugin_section(cfg, "backend.cpu");
    ck_assert_uint_eq(sec->n, 2);
    ck_assert_str_eq(llmrt_section_get(sec, "simd"), "auto");
    llmrt_backend *b = NULL;
    ck_assert_int_eq(ct_vtable()->create(NULL, sec, &b, &err), LLMRT_OK);
    llmrt_device_info info;
    ck_assert_int_eq(ct_vtable()->device_info(b, &info, &err), LLMRT_OK);
    ck_assert_int_eq(info.multiprocessors, 2);
    ct_vtable()->destroy(b);
    llmrt_config_free(cfg);
    free(ini);
    tu_rmtree(dir);
    free(dir);
}
END_TEST

/* The extensions: "llmrt.cpu" (simd, threads), "llmrt.fused" and "llmrt.argmax_head" at
 * their version or older, nothing else (not "llmrt.cuda", not a newer version); the
 * deprecated 1.0 slots and native_handle are left NULL. */
START_TEST(extensions_offered)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    ck_assert_ptr_nonnull(vt->extension);
    ck_assert_ptr_null(vt->native_handle);
    ck_assert_ptr_null(vt->add_rmsnorm);
    ck_assert_ptr_null(vt->qk_norm_rope_store);
    ck_assert_ptr_null(vt->swiglu);
    ck_assert_ptr_null(vt->argmax_head_create);
    ck_assert_ptr_null(vt->argmax_head_forward);
    ck_assert_ptr_null(vt->argmax_head_destroy);
    llmrt_backend *b = ct_create_simd(3, "baseline");
    const llmrt_cpu_ext *cx = llmrt_backend_extension(vt, b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION);
    ck_assert_ptr_nonnull(cx);
    ck_assert_uint_ge(cx->struct_size, sizeof(llmrt_cpu_ext));
    ck_assert_str_eq(cx->simd(b), "baseline");
    ck_assert_int_eq(cx->threads(b), 3);
    ck_assert_ptr_eq(llmrt_backend_extension(vt, b, LLMRT_EXT_CPU, 0), cx);
    ck_assert_ptr_null(llmrt_backend_extension(vt, b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION + 1));
    const llmrt_fused_ops *f =
        llmrt_backend_extension(vt, b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_ge(f->struct_size, sizeof(llmrt_fused_ops));
    ck_assert(f->add_rmsnorm && f->qk_norm_rope_store && f->swiglu);
    ck_assert_ptr_null(llmrt_backend_extension(vt, b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION + 1));
    ck_assert_ptr_null(llmrt_backend_extension(vt, b, "llmrt.cuda", 1));
    const llmrt_argmax_head_ops *ah =
        llmrt_backend_extension(vt, b, LLMRT_EXT_ARGMAX_HEAD, LLMRT_EXT_ARGMAX_HEAD_VERSION);
    ck_assert_ptr_nonnull(ah);
    ck_assert_uint_ge(ah->struct_size, sizeof(llmrt_argmax_head_ops));
    ck_assert(ah->create && ah->forward && ah->destroy);
    ck_assert_ptr_eq(llmrt_backend_extension(vt, b, LLMRT_EXT_ARGMAX_HEAD, 0), ah);
    ck_assert_ptr_null(llmrt_backend_extension(vt, b, LLMRT_EXT_ARGMAX_HEAD,
                                               LLMRT_EXT_ARGMAX_HEAD_VERSION + 1));
    ck_assert_ptr_null(llmrt_backend_extension(vt, b, "", 1));
    ck_assert_ptr_null(vt->extension(b, NULL, 1));
    vt->destroy(b);
}
END_TEST

START_TEST(probe_and_mem_info)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_device_info info[2];
    int32_t count = -1;
    llmrt_error err = {0};
    ck_assert_int_eq(vt->probe(info, 2, &count, &err), LLMRT_OK);
    ck_assert_int_eq(count, 1);
    char want[64];
    snprintf(want, sizeof want, "CPU (%d thread", cores());
    ck_assert_msg(strstr(info[0].name, want) != NULL, "name: %s", info[0].name);
    ck_assert(info[0].mem_total > 0 && info[0].mem_free > 0 && info[0].mem_free <= info[0].mem_total);
    llmrt_backend *b = ct_create(1);
    uint64_t fr = 0, tot = 0;
    ck_assert_int_eq(vt->mem_info(b, &fr, &tot, &err), LLMRT_OK);
    ck_assert(tot == info[0].mem_total && fr > 0 && fr <= tot);
    ck_assert_uint_eq(vt->caps(b), LLMRT_BACKEND_CAP_HOST_IS_DEVICE | LLMRT_BACKEND_CAP_MAPPED_HOST);
    ck_assert_ptr_null(vt->graph_begin);
    ck_assert_ptr_null(vt->sample);
    ck_assert_ptr_nonnull(vt->parallel_for);
    vt->destroy(b);
}
END_TEST

START_TEST(memory_mechanisms)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = ct_create(1);
    llmrt_error err = {0};
    void *d = NULL, *dev = NULL;
    ck_assert_int_eq(vt->dev_alloc(b, 1000, &d, &err), LLMRT_OK);
    ck_assert_uint_eq((uintptr_t)d % 64, 0);
    memset(d, 1, 1000);

    /* plain host memory has no device address */
    void *plain = NULL;
    ck_assert_int_eq(vt->host_alloc(b, 4096, 0, &plain, &err), LLMRT_OK);
    ck_assert_int_eq(vt->host_device_ptr(b, plain, &dev, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "MAPPED"));

    /* mapped (with and without pinned): the same pointer, also inside the buffer */
    const uint32_t mapped_flags[2] = {LLMRT_HOST_MAPPED, LLMRT_HOST_MAPPED | LLMRT_HOST_PINNED};
    for (int i = 0; i < 2; i++) {
        void *m = NULL;
        ck_assert_int_eq(vt->host_alloc(b, 8192, mapped_flags[i], &m, &err), LLMRT_OK);
        ck_assert_int_eq(vt->host_device_ptr(b, m, &dev, &err), LLMRT_OK);
        ck_assert_ptr_eq(dev, m);
        ck_assert_int_eq(vt->host_device_ptr(b, (char *)m + 100, &dev, &err), LLMRT_OK);
        ck_assert_ptr_eq(dev, (char *)m + 100);
        vt->host_free(b, m);
        ck_assert_int_eq(vt->host_device_ptr(b, m, &dev, &err), LLMRT_ERR_INVALID_ARG);
    }

    /* copies of every kind move the bytes */
    unsigned char src[300], dst[300];
    for (int i = 0; i < 300; i++)
        src[i] = (unsigned char)i;
    const llmrt_copy_kind kinds[3] = {LLMRT_COPY_H2D, LLMRT_COPY_D2H, LLMRT_COPY_D2D};
    for (int k = 0; k < 3; k++) {
        memset(dst, 0, sizeof dst);
        ck_assert_int_eq(vt->copy(b, dst, src, sizeof src, kinds[k], &err), LLMRT_OK);
        ck_assert(memcmp(dst, src, sizeof src) == 0);
    }
    ck_assert_int_eq(vt->copy(b, dst, src, 4, (llmrt_copy_kind)9, &err), LLMRT_ERR_INVALID_ARG);

    /* registered memory: mapped → same pointer; unregister forgets it */
    static unsigned char user[3 * 4096];
    ck_assert_int_eq(vt->host_register(b, user, sizeof user, LLMRT_HOST_MAPPED, &err), LLMRT_OK);
    ck_assert_int_eq(vt->host_device_ptr(b, user + 5, &dev, &err), LLMRT_OK);
    ck_assert_ptr_eq(dev, user + 5);
    vt->host_unregister(b, user);
    ck_assert_int_eq(vt->host_device_ptr(b, user, &dev, &err), LLMRT_ERR_INVALID_ARG);
    /* pinned registration locks and unlocks (well under any RLIMIT_MEMLOCK) */
    ck_assert_int_eq(vt->host_register(b, user, 4096, LLMRT_HOST_PINNED, &err), LLMRT_OK);
    vt->host_unregister(b, user);

    ck_assert_int_eq(vt->synchronize(b, &err), LLMRT_OK);
    vt->host_free(b, plain);
    vt->dev_free(b, d);
    vt->destroy(b);
}
END_TEST

/* Remove CAP_IPC_LOCK (root ignores RLIMIT_MEMLOCK with it). */
static int drop_ipc_lock(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return -1;
    d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
    return (int)syscall(SYS_capset, &h, d);
}

/* In a child process: lower RLIMIT_MEMLOCK to 64 KiB, then ask for 1 MiB of pinned memory. */
START_TEST(pinned_alloc_over_memlock_limit)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* the sanitizers turn mlock into a no-op, so no limit can be hit */
    fprintf(stderr, "pinned_alloc_over_memlock_limit: skipped under a sanitizer\n");
    return;
#endif
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        llmrt_error err = {0};
        llmrt_status st = LLMRT_ERR_INTERNAL;
        struct rlimit rl = {65536, 65536};
        if (drop_ipc_lock() != 0 || setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
            snprintf(err.msg, sizeof err.msg, "setup failed: %s", strerror(errno));
        } else {
            const llmrt_backend_vtable *vt = ct_vtable();
            llmrt_backend *b = ct_create(1);
            void *p = NULL;
            st = vt->host_alloc(b, 1 << 20, LLMRT_HOST_PINNED, &p, &err);
            if (st == LLMRT_OK)
                vt->host_free(b, p);
            /* a small pinned buffer still fits under the limit */
            void *small = NULL;
            llmrt_error e2 = {0};
            if (vt->host_alloc(b, 4096, LLMRT_HOST_PINNED, &small, &e2) != LLMRT_OK)
                st = LLMRT_ERR_INTERNAL, snprintf(err.msg, sizeof err.msg, "small: %s", e2.msg);
            vt->host_free(b, small);
            vt->destroy(b);
        }
        int code = (int)st;
        if (write(fds[1], &code, sizeof code) < 0 || write(fds[1], err.msg, sizeof err.msg) < 0)
            _exit(2);
        _exit(0);
    }
    close(fds[1]);
    int code = -1;
    char msg[LLMRT_ERROR_MSG_MAX] = {0};
    ck_assert_int_eq(read(fds[0], &code, sizeof code), (ssize_t)sizeof code);
    ck_assert_int_eq(read(fds[0], msg, sizeof msg), (ssize_t)sizeof msg);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(code == LLMRT_ERR_LIMIT, "status %d, message: %s", code, msg);
    ck_assert_msg(strstr(msg, "RLIMIT_MEMLOCK") && strstr(msg, "65536 bytes") &&
                      strstr(msg, "1048576 bytes"),
                  "message: %s", msg);
}
END_TEST

START_TEST(events_measure_host_time)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = ct_create(1);
    llmrt_error err = {0};
    llmrt_event *e0, *e1;
    ck_assert_int_eq(vt->event_create(b, &e0, &err), LLMRT_OK);
    ck_assert_int_eq(vt->event_create(b, &e1, &err), LLMRT_OK);
    float ms = -1;
    ck_assert_int_eq(vt->event_elapsed_ms(b, e0, e1, &ms, &err), LLMRT_ERR_STATE);
    ck_assert_int_eq(vt->event_record(b, e0, &err), LLMRT_OK);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(vt->event_record(b, e1, &err), LLMRT_OK);
    ck_assert_int_eq(vt->event_sync(b, e1, &err), LLMRT_OK);
    ck_assert_int_eq(vt->event_elapsed_ms(b, e0, e1, &ms, &err), LLMRT_OK);
    ck_assert_msg(ms >= 19.9f, "elapsed %g ms across a 20 ms sleep", (double)ms);
    vt->event_destroy(b, e0);
    vt->event_destroy(b, e1);
    vt->destroy(b);
}
END_TEST

typedef struct {
    atomic_int *hits;
    const llmrt_backend_vtable *vt;
    llmrt_backend *b;
    atomic_int nested;
} pf_ctx;

static void count_hits(void *c, int64_t begin, int64_t end)
{
    pf_ctx *p = c;
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add(&p->hits[i], 1);
}

static void nested_inner(void *c, int64_t begin, int64_t end)
{
    pf_ctx *p = c;
    atomic_fetch_add(&p->nested, (int)(end - begin));
}

static void count_and_nest(void *c, int64_t begin, int64_t end)
{
    pf_ctx *p = c;
    count_hits(c, begin, end);
    p->vt->parallel_for(p->b, 10, nested_inner, c); /* runs inline: must not deadlock */
}

START_TEST(parallel_for_covers_range_once)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    const int threads[] = {1, 2, 3};
    for (int t = 0; t < 3; t++) {
        llmrt_backend *b = ct_create(threads[t]);
        const int64_t sizes[] = {0, 1, 2, 3, 7, 1000, 100003};
        for (int s = 0; s < 7; s++) {
            int64_t n = sizes[s];
            atomic_int *hits = calloc((size_t)n + 1, sizeof *hits);
            pf_ctx c = {hits, vt, b, 0};
            for (int rep = 0; rep < 20; rep++)
                vt->parallel_for(b, n, rep % 2 ? count_and_nest : count_hits, &c);
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(atomic_load(&hits[i]) == 20, "threads %d n %lld: item %lld ran %d times",
                              threads[t], (long long)n, (long long)i, atomic_load(&hits[i]));
            free(hits);
        }
        vt->destroy(b);
    }
}
END_TEST

/* threads = N is N threads in all: the caller of each op is one of them, so a backend adds
 * N - 1 workers (the serving stepper plus the pool never exceed N busy threads), and every
 * chunk runs on one of those N. */
typedef struct {
    pthread_mutex_t mu;
    pthread_t seen[64];
    int n_seen;
} who_ctx;

static void note_thread(void *c, int64_t begin, int64_t end)
{
    who_ctx *w = c;
    pthread_t me = pthread_self();
    pthread_mutex_lock(&w->mu);
    int known = 0;
    for (int i = 0; i < w->n_seen; i++)
        known |= pthread_equal(w->seen[i], me);
    if (!known && w->n_seen < 64)
        w->seen[w->n_seen++] = me;
    pthread_mutex_unlock(&w->mu);
    for (volatile int64_t i = 0; i < (end - begin) * 20; i++) /* some work, so all may join */
        ;
}

static void *no_work(void *p)
{
    return p;
}

START_TEST(pool_adds_threads_minus_one)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    /* ThreadSanitizer starts a helper thread at a process's first pthread_create: let that
     * happen before counting, so only the pool's threads are counted */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, no_work, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    for (int threads = 1; threads <= 4; threads++) {
        const int before = process_threads();
        llmrt_backend *b = ct_create(threads);
        ck_assert_int_eq(process_threads(), before + threads - 1);
        who_ctx w = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};
        for (int rep = 0; rep < 20; rep++)
            vt->parallel_for(b, 4096, note_thread, &w);
        ck_assert_msg(w.n_seen >= 1 && w.n_seen <= threads, "%d threads ran chunks with threads = %d",
                      w.n_seen, threads);
        vt->destroy(b);
        ck_assert_int_eq(process_threads(), before);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("backend-cpu.backend");
    TCase *tc = tcase_create("backend");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, config_threads_validated);
    tcase_add_test(tc, config_keys_declared);
    tcase_add_test(tc, extensions_offered);
    tcase_add_test(tc, probe_and_mem_info);
    tcase_add_test(tc, memory_mechanisms);
    tcase_add_test(tc, pinned_alloc_over_memlock_limit);
    tcase_add_test(tc, events_measure_host_time);
    tcase_add_test(tc, parallel_for_covers_range_once);
    tcase_add_test(tc, pool_adds_threads_minus_one);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
