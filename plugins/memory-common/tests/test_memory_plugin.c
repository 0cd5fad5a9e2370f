/* test_memory_plugin.c — unit tests of one memory plugin (PLUGIN_NAME), compiled once per
 * plugin. argv[1] picks the backend underneath:
 *   mock  the policy: which memory is asked for, copies made or skipped, double buffering,
 *         caps, fallback when pinning fails, memory.fallback = error, stats, section keys;
 *   cpu   the real CPU backend .so: data round trips, and a real mlock failure (RLIMIT_MEMLOCK
 *         with CAP_IPC_LOCK dropped) falling back to pageable;
 *   cuda  the real CUDA backend .so: data round trips through device memory or mapped host
 *         memory (exits 77 when no CUDA device is visible or the plugin was not built). */
#include <check.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llmrt/memory.h>

#include "clock.h"
#include "config.h"
#include "mock_backend.h"
#include "test_util.h"

static const llmrt_memory_vtable *vt;
static const llmrt_plugin_desc *desc;
static const char *backend_kind;

/* What each policy must do. */
typedef struct expect {
    const char *name;
    uint32_t caps;
    llmrt_mem_path path;
    int copies_in;  /* to_device copies (0: the device reads the host memory in place) */
    int copies_out; /* to_host copies (0: the device writes the host memory in place) */
    int halves;
} expect;

/* uva gathers step inputs into a device mirror once per step (on a backend whose device
 * memory is not host memory: the mock's) and writes outputs in place. */
static const expect expectations[] = {
    {"pageable", 0, LLMRT_MEM_PATH_PAGEABLE, 1, 1, 1},
    {"pinned", LLMRT_MEM_CAP_COPIES_CAPTURABLE | LLMRT_MEM_CAP_DOUBLE_BUFFERED,
     LLMRT_MEM_PATH_PINNED, 1, 1, 2},
    {"uva",
     LLMRT_MEM_CAP_ZERO_COPY | LLMRT_MEM_CAP_DOUBLE_BUFFERED | LLMRT_MEM_CAP_COPIES_CAPTURABLE |
         LLMRT_MEM_CAP_INPUTS_GATHERED,
     LLMRT_MEM_PATH_MAPPED, 1, 0, 2},
};
static const expect *ex;

static const char *const kv_pageable[] = {"memory.fallback", "pageable", NULL};
static const char *const kv_error[] = {"memory.fallback", "error", NULL};

static llmrt_memory *make(llmrt_backend_ref *be, const char *const *kv, llmrt_host *host_out)
{
    *host_out = mock_host(kv);
    llmrt_memory *m = NULL;
    llmrt_error err = {0};
    ck_assert_msg(vt->create(host_out, NULL, be, &m, &err) == LLMRT_OK, "create: %s", err.msg);
    return m;
}

START_TEST(test_policy_roundtrip)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_host host;
    llmrt_memory *m = make(&be, kv_pageable, &host);
    llmrt_mem_buffer in, out;
    llmrt_error err = {0};
    ck_assert_int_eq(vt->buffer_alloc(m, 256, LLMRT_MEM_TO_DEVICE, &in, &err), LLMRT_OK);
    ck_assert_int_eq(vt->buffer_alloc(m, 64, LLMRT_MEM_TO_HOST, &out, &err), LLMRT_OK);
    ck_assert_int_eq(in.path, ex->path);
    ck_assert_uint_eq(vt->caps(m), ex->caps);
    if (ex->halves == 2)
        ck_assert_ptr_ne(in.host[0], in.host[1]);
    else
        ck_assert_ptr_eq(in.host[0], in.host[1]);
    ck_assert_ptr_ne(in.device[0], in.host[0]); /* a device mirror, read once per step */
    ck_assert_ptr_eq(in.device[0], in.device[1]);
    if (ex->copies_out) {
        ck_assert_ptr_ne(out.device[0], out.host[0]);
        ck_assert_ptr_eq(out.device[0], out.device[1]);
    } else {
        ck_assert_ptr_ne(out.device[0], out.device[1]); /* each half mapped on its own */
    }
    for (int h = 0; h < 2; h++) {
        memset(in.host[h], 0x10 + h, 256);
        ck_assert_int_eq(vt->to_device(m, &in, h, 200, &err), LLMRT_OK);
        unsigned char *d = in.device[h];
        ck_assert_int_eq(d[0], 0x10 + h);
        ck_assert_int_eq(d[199], 0x10 + h);
    }
    memset(out.device[1], 0x7f, 64);
    ck_assert_int_eq(vt->to_host(m, &out, 1, 64, &err), LLMRT_OK);
    ck_assert_int_eq(((unsigned char *)out.host[1])[63], 0x7f);

    mock_backend_stats bs = mock_backend_get_stats(&be);
    ck_assert_int_eq(bs.copies_h2d, ex->copies_in ? 2 : 0);
    ck_assert_int_eq(bs.copies_d2h, ex->copies_out ? 1 : 0);
    ck_assert_int_eq(bs.host_alloc_pinned, ex->path == LLMRT_MEM_PATH_PAGEABLE ? 0 : 2 * ex->halves);
    ck_assert_int_eq(bs.host_alloc_mapped, ex->path == LLMRT_MEM_PATH_MAPPED ? 2 * ex->halves : 0);

    llmrt_mem_stats s;
    vt->stats(m, &s);
    ck_assert_str_eq(s.path_in_use, ex->name);
    ck_assert_uint_eq(s.h2d_copies, ex->copies_in ? 2 : 0);
    ck_assert_uint_eq(s.h2d_bytes, ex->copies_in ? 400 : 0);
    ck_assert_uint_eq(s.d2h_bytes, ex->copies_out ? 64 : 0);
    uint64_t host_bytes = (256 + 64) * (uint64_t)ex->halves;
    uint64_t *slot = ex->path == LLMRT_MEM_PATH_MAPPED   ? &s.host_mapped_bytes
                     : ex->path == LLMRT_MEM_PATH_PINNED ? &s.host_pinned_bytes
                                                         : &s.host_pageable_bytes;
    ck_assert_uint_eq(*slot, host_bytes);
    ck_assert_uint_eq(s.device_bytes, (ex->copies_in ? 256 : 0) + (ex->copies_out ? 64 : 0));
    ck_assert_uint_eq(s.fallbacks, 0);

    /* a copy larger than the buffer is refused, not performed */
    ck_assert_int_eq(vt->to_device(m, &in, 0, 257, &err), LLMRT_ERR_INVALID_ARG);

    vt->buffer_free(m, &in);
    vt->buffer_free(m, &out);
    vt->stats(m, &s);
    ck_assert_uint_eq(s.host_pageable_bytes + s.host_pinned_bytes + s.host_mapped_bytes, 0);
    bs = mock_backend_get_stats(&be);
    ck_assert_int_eq(bs.live_host, 0);
    ck_assert_int_eq(bs.live_dev, 0);
    vt->destroy(m);
    mock_backend_free(&be);
}
END_TEST

START_TEST(test_fallback_to_pageable)
{
    if (ex->path == LLMRT_MEM_PATH_PAGEABLE)
        return; /* nothing to fall back from */
    llmrt_backend_ref be = mock_backend_new(100, 1); /* pinning beyond 100 bytes fails */
    llmrt_host host;
    llmrt_memory *m = make(&be, kv_pageable, &host);
    llmrt_mem_buffer b;
    llmrt_error err = {0};
    ck_assert_int_eq(vt->buffer_alloc(m, 4096, LLMRT_MEM_TO_DEVICE, &b, &err), LLMRT_OK);
    ck_assert_int_eq(b.path, LLMRT_MEM_PATH_PAGEABLE);
    ck_assert_uint_eq(vt->caps(m), 0); /* behaves exactly like pageable now */
    memset(b.host[0], 3, 4096);
    ck_assert_int_eq(vt->to_device(m, &b, 0, 4096, &err), LLMRT_OK);
    ck_assert_int_eq(((unsigned char *)b.device[0])[4095], 3);
    llmrt_mem_stats s;
    vt->stats(m, &s);
    ck_assert_uint_eq(s.fallbacks, 1);
    ck_assert_uint_eq(s.host_pageable_bytes, 4096);
    ck_assert_msg(strstr(s.path_in_use, "pageable (fallback from"), "path_in_use: %s",
                  s.path_in_use);
    vt->buffer_free(m, &b);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_host, 0);
    vt->destroy(m);
    mock_backend_free(&be);
}
END_TEST

START_TEST(test_fallback_error)
{
    if (ex->path == LLMRT_MEM_PATH_PAGEABLE)
        return;
    llmrt_backend_ref be = mock_backend_new(100, 1);
    llmrt_host host;
    llmrt_memory *m = make(&be, kv_error, &host);
    llmrt_mem_buffer b;
    llmrt_error err = {0};
    ck_assert_int_eq(vt->buffer_alloc(m, 4096, LLMRT_MEM_TO_DEVICE, &b, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "memory.fallback = error"), "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "limit"), "backend reason kept: %s", err.msg);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_host, 0); /* nothing leaked */
    vt->destroy(m);
    mock_backend_free(&be);
}
END_TEST

/* CPU weight offload (memory.cpu_offload_gb): layer k's buffers go into host memory of the
 * policy's kind; kernels read them where offload_place says — a staging slot the fetches
 * fill (pinned: two, so layer k + 1 arrives while k computes; pageable: one) or the mapped
 * host memory itself (uva: no copies). */
START_TEST(test_offload)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_host host;
    llmrt_memory *m = make(&be, kv_pageable, &host);
    llmrt_error err = {0};
    enum { N = 3, LB = 1024, B0 = 700, B1 = 100, OFF1 = 768 };
    ck_assert_int_eq(vt->offload_init(m, N, LB, &err), LLMRT_OK);
    void *kp[N][2];
    for (int k = 0; k < N; k++) {
        void *d0 = NULL, *d1 = NULL;
        ck_assert_int_eq(be.vt->dev_alloc(be.b, B0, &d0, &err), LLMRT_OK);
        ck_assert_int_eq(be.vt->dev_alloc(be.b, B1, &d1, &err), LLMRT_OK);
        memset(d0, 10 + k, B0);
        memset(d1, 20 + k, B1);
        ck_assert_int_eq(vt->offload_place(m, k, 0, d0, B0, &kp[k][0], &err), LLMRT_OK);
        ck_assert_int_eq(vt->offload_place(m, k, OFF1, d1, B1, &kp[k][1], &err), LLMRT_OK);
        ck_assert_ptr_eq((char *)kp[k][1], (char *)kp[k][0] + OFF1);
        be.vt->dev_free(be.b, d0);
        be.vt->dev_free(be.b, d1);
    }
    /* out of the layer, misaligned, or a layer that is not there: refused */
    void *bad = NULL, *src = kp[0][0];
    ck_assert_int_eq(vt->offload_place(m, 0, LB - 8, src, 16, &bad, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(vt->offload_place(m, 0, 8, src, 16, &bad, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(vt->offload_place(m, N, 0, src, 16, &bad, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(vt->offload_fetch(m, N, &err), LLMRT_ERR_INVALID_ARG);
    const int mapped = ex->path == LLMRT_MEM_PATH_MAPPED;
    const int slots = mapped ? 0 : ex->path == LLMRT_MEM_PATH_PINNED ? 2 : 1;
    if (slots == 2) {
        ck_assert_ptr_ne(kp[0][0], kp[1][0]);
        ck_assert_ptr_eq(kp[0][0], kp[2][0]);
    } else if (slots == 1) {
        ck_assert_ptr_eq(kp[0][0], kp[1][0]);
    } else {
        ck_assert_ptr_ne(kp[0][0], kp[1][0]);
        ck_assert_ptr_ne(kp[1][0], kp[2][0]);
    }
    /* a forward: each layer's bytes are at its kernel addresses when its kernels run */
    mock_backend_stats before = mock_backend_get_stats(&be);
    ck_assert_int_eq(vt->offload_fetch(m, -1, &err), LLMRT_OK);
    for (int k = 0; k < N; k++) {
        ck_assert_int_eq(vt->offload_fetch(m, k, &err), LLMRT_OK);
        const unsigned char *w0 = kp[k][0], *w1 = kp[k][1];
        ck_assert_int_eq(w0[0], 10 + k);
        ck_assert_int_eq(w0[B0 - 1], 10 + k);
        ck_assert_int_eq(w1[0], 20 + k);
        ck_assert_int_eq(w1[B1 - 1], 20 + k);
    }
    mock_backend_stats after = mock_backend_get_stats(&be);
    ck_assert_int_eq(after.copies_h2d - before.copies_h2d, mapped ? 0 : N);
    llmrt_mem_stats st;
    vt->stats(m, &st);
    ck_assert_int_eq(st.offload_layers, N);
    ck_assert_uint_eq(st.offload_bytes, (uint64_t)N * (OFF1 + B1));
    ck_assert_msg(strstr(st.offload_path, mapped ? "mapped" : slots == 2 ? "prefetch" : "sync"),
                  "offload_path: %s", st.offload_path);
    ck_assert_uint_eq(vt->caps(m) & LLMRT_MEM_CAP_OFFLOAD_CAPTURABLE,
                      slots == 1 ? 0 : LLMRT_MEM_CAP_OFFLOAD_CAPTURABLE);
    ck_assert_int_eq(vt->offload_init(m, N, LB, &err), LLMRT_ERR_INVALID_ARG); /* once */
    vt->destroy(m);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_host, 0);
    mock_backend_free(&be);
}
END_TEST

/* Pinning the offloaded layers fails: memory.fallback = pageable copies them synchronously
 * from pageable memory (said in offload_path, counted as a fallback, not capturable);
 * memory.fallback = error fails offload_init naming the key. */
START_TEST(test_offload_fallback)
{
    if (ex->path == LLMRT_MEM_PATH_PAGEABLE)
        return;
    for (int fail = 0; fail < 2; fail++) {
        llmrt_backend_ref be = mock_backend_new(100, 1);
        llmrt_host host;
        llmrt_memory *m = make(&be, fail ? kv_error : kv_pageable, &host);
        llmrt_error err = {0};
        llmrt_status st = vt->offload_init(m, 2, 4096, &err);
        if (fail) {
            ck_assert_int_eq(st, LLMRT_ERR_LIMIT);
            ck_assert_msg(strstr(err.msg, "memory.fallback = error"), "%s", err.msg);
        } else {
            ck_assert_msg(st == LLMRT_OK, "%s", err.msg);
            llmrt_mem_stats s;
            vt->stats(m, &s);
            ck_assert_uint_eq(s.fallbacks, 1);
            ck_assert_msg(strstr(s.offload_path, "sync (pageable, fallback)"), "%s",
                          s.offload_path);
            ck_assert_uint_eq(vt->caps(m) & LLMRT_MEM_CAP_OFFLOAD_CAPTURABLE, 0);
        }
        vt->destroy(m);
        ck_assert_int_eq(mock_backend_get_stats(&be).live_host, 0);
        mock_backend_free(&be);
    }
}
END_TEST

/* The plan: the last layers, as few as hold the bytes asked (all when more is asked). */
START_TEST(test_offload_plan)
{
    ck_assert_int_eq(llmrt_offload_first_layer(36, 100, 0), 36);   /* nothing asked */
    ck_assert_int_eq(llmrt_offload_first_layer(36, 100, 1), 35);   /* a byte: one layer */
    ck_assert_int_eq(llmrt_offload_first_layer(36, 100, 900), 27); /* exactly 9 layers */
    ck_assert_int_eq(llmrt_offload_first_layer(36, 100, 901), 26); /* rounded up to 10 */
    ck_assert_int_eq(llmrt_offload_first_layer(36, 100, 3600), 0); /* all */
    ck_assert_int_eq(llmrt_offload_first_layer(36, 100, 1000000), 0);
    ck_assert_int_eq(llmrt_offload_first_layer(0, 100, 1000), 0);
}
END_TEST

/* The section's keys are declared in the descriptor (double_buffer for a policy that
 * double-buffers, and the developer key delay_us), so the host rejects a misspelt key naming
 * file:line; the plugin reads what the host filled in. */
START_TEST(test_section_keys)
{
    ck_assert_ptr_nonnull(desc->keys);
    ck_assert_uint_eq(desc->n_keys, ex->halves == 2 ? 2 : 1);
    ck_assert_str_eq(desc->keys[desc->n_keys - 1].name, "delay_us");
    ck_assert_uint_eq(desc->keys[desc->n_keys - 1].flags, LLMRT_KEY_DEVELOPER);
    llmrt_error err = {0};
    ck_assert_msg(llmrt_key_table_check("memory." PLUGIN_NAME, desc->keys, desc->n_keys, &err) ==
                      LLMRT_OK,
                  "%s", err.msg);
    char *dir = tu_mkdtemp();
    char *ini = tu_write_file(dir, "x.ini", "[memory." PLUGIN_NAME "]\ndouble_bufer = false\n");
    llmrt_config *cfg = NULL;
    ck_assert_int_eq(llmrt_config_build(ini, NULL, 0, &cfg, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_config_declare(cfg, "memory." PLUGIN_NAME, desc->keys, desc->n_keys,
                                          NULL, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "x.ini:2") && strstr(err.msg, "double_bufer"), "%s", err.msg);
    if (ex->halves == 2)
        ck_assert_msg(strstr(err.msg, "did you mean memory." PLUGIN_NAME ".double_buffer"), "%s",
                      err.msg);
    llmrt_config_free(cfg);
    free(ini);
    tu_rmtree(dir);
    free(dir);

    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_host host = mock_host(kv_pageable);
    const char *keys[] = {"double_buffer"};
    const char *vals[] = {"false"};
    const char *where[] = {"conf/x.ini:7"};
    llmrt_section sec = {"memory." PLUGIN_NAME, 1, keys, vals, where};
    llmrt_memory *m = NULL;
    if (ex->halves == 2) { /* double_buffer = false gives a single buffer */
        ck_assert_int_eq(vt->create(&host, &sec, &be, &m, &err), LLMRT_OK);
        llmrt_mem_buffer b;
        ck_assert_int_eq(vt->buffer_alloc(m, 64, LLMRT_MEM_TO_DEVICE, &b, &err), LLMRT_OK);
        ck_assert_ptr_eq(b.host[0], b.host[1]);
        ck_assert_uint_eq(vt->caps(m) & LLMRT_MEM_CAP_DOUBLE_BUFFERED, 0);
        vt->buffer_free(m, &b);
        vt->destroy(m);
        vals[0] = "maybe";
        ck_assert_int_eq(vt->create(&host, &sec, &be, &m, &err), LLMRT_ERR_INVALID_ARG);
        ck_assert_msg(strstr(err.msg, "conf/x.ini:7") && strstr(err.msg, "not a boolean"), "%s",
                      err.msg);
    }
    /* delay_us: each step-input transfer takes at least that long; outputs are not delayed */
    keys[0] = "delay_us";
    vals[0] = "20000";
    ck_assert_int_eq(vt->create(&host, &sec, &be, &m, &err), LLMRT_OK);
    llmrt_mem_buffer in, out;
    ck_assert_int_eq(vt->buffer_alloc(m, 64, LLMRT_MEM_TO_DEVICE, &in, &err), LLMRT_OK);
    ck_assert_int_eq(vt->buffer_alloc(m, 64, LLMRT_MEM_TO_HOST, &out, &err), LLMRT_OK);
    double t0 = llmrt_now_s();
    ck_assert_int_eq(vt->to_device(m, &in, 0, 64, &err), LLMRT_OK);
    double t1 = llmrt_now_s();
    ck_assert_int_eq(vt->to_host(m, &out, 0, 64, &err), LLMRT_OK);
    double t2 = llmrt_now_s();
    ck_assert_msg(t1 - t0 >= 0.020, "to_device took %.4f s with delay_us = 20000", t1 - t0);
    ck_assert_msg(t2 - t1 < 0.020, "to_host is not delayed (%.4f s)", t2 - t1);
    vt->buffer_free(m, &in);
    vt->buffer_free(m, &out);
    vt->destroy(m);
    vals[0] = "-3";
    ck_assert_int_eq(vt->create(&host, &sec, &be, &m, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "conf/x.ini:7") && strstr(err.msg, "delay_us"), "%s", err.msg);
    mock_backend_free(&be);
}
END_TEST

/* ---- real backends ---- */

static llmrt_backend_ref open_real(const char *name)
{
    char file[64];
    snprintf(file, sizeof file, "backend-%s.so", name);
    char *path = tu_plugin_path(file);
    llmrt_backend_ref ref = {0};
    if (access(path, R_OK) != 0) {
        free(path);
        return ref;
    }
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    free(path);
    if (!d) /* reported by tu_load_plugin; callers treat a NULL vt as "not available" */
        return ref;
    ref.vt = d->vtable;
    ref.name = d->name;
    return ref;
}

/* Round trip through the real backend: host → device (copy or mapping) → device-to-device
 * copy into an output buffer → host. Data must survive, whatever the path. */
static void roundtrip_real(llmrt_backend_ref *be, const char *const *kv)
{
    llmrt_host host;
    llmrt_memory *m = make(be, kv, &host);
    llmrt_mem_buffer in, out;
    llmrt_error err = {0};
    const size_t n = 1 << 20;
    ck_assert_msg(vt->buffer_alloc(m, n, LLMRT_MEM_TO_DEVICE, &in, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_msg(vt->buffer_alloc(m, n, LLMRT_MEM_TO_HOST, &out, &err) == LLMRT_OK, "%s", err.msg);
    if (strcmp(PLUGIN_NAME, "uva") == 0) {
        /* where device memory is host memory the mapped address is the host address: inputs
         * are read in place (a gather would copy them onto themselves); elsewhere gathered */
        int host_mem = (be->vt->caps(be->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) != 0;
        ck_assert_int_eq((vt->caps(m) & LLMRT_MEM_CAP_INPUTS_GATHERED) != 0, !host_mem);
        if (host_mem)
            ck_assert_ptr_eq(in.device[1], in.host[1]);
        else
            ck_assert_ptr_eq(in.device[0], in.device[1]);
    }
    for (int h = 0; h < 2; h++) {
        unsigned char *src = in.host[h];
        for (size_t i = 0; i < n; i++)
            src[i] = (unsigned char)(i * 7 + h);
        memset(out.host[h], 0, n); /* before the device writes: with zero-copy it is the same memory */
        ck_assert_int_eq(vt->to_device(m, &in, h, n, &err), LLMRT_OK);
        ck_assert_int_eq(be->vt->copy(be->b, out.device[h], in.device[h], n, LLMRT_COPY_D2D, &err),
                         LLMRT_OK);
        ck_assert_int_eq(vt->to_host(m, &out, h, n, &err), LLMRT_OK);
        ck_assert_int_eq(be->vt->synchronize(be->b, &err), LLMRT_OK);
        unsigned char *dst = out.host[h];
        for (size_t i = 0; i < n; i += 4093)
            ck_assert_int_eq(dst[i], (unsigned char)(i * 7 + h));
    }
    llmrt_mem_stats s;
    vt->stats(m, &s);
    printf("%s on %s: path in use '%s', pinned %llu, mapped %llu, pageable %llu bytes\n",
           PLUGIN_NAME, be->name, s.path_in_use, (unsigned long long)s.host_pinned_bytes,
           (unsigned long long)s.host_mapped_bytes, (unsigned long long)s.host_pageable_bytes);
    vt->buffer_free(m, &in);
    vt->buffer_free(m, &out);
    vt->destroy(m);
}

START_TEST(test_real_roundtrip)
{
    llmrt_backend_ref be = open_real(backend_kind);
    ck_assert_msg(be.vt != NULL, "cannot load backend-%s.so", backend_kind);
    llmrt_error err = {0};
    llmrt_host host = mock_host(kv_pageable);
    ck_assert_msg(be.vt->create(&host, NULL, &be.b, &err) == LLMRT_OK, "%s", err.msg);
    roundtrip_real(&be, kv_pageable);
    be.vt->destroy(be.b);
}
END_TEST

/* Drop CAP_IPC_LOCK (root ignores RLIMIT_MEMLOCK otherwise) and lower the limit, in a child,
 * so a real mlock fails; the plugin must fall back and still move data correctly. */
START_TEST(test_cpu_mlock_limit)
{
    if (ex->path == LLMRT_MEM_PATH_PAGEABLE)
        return;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) == 0) {
        data[0].effective &= ~(1u << CAP_IPC_LOCK);
        data[0].permitted &= ~(1u << CAP_IPC_LOCK);
        syscall(SYS_capset, &hdr, data);
    }
    struct rlimit rl = {64 * 1024, 64 * 1024};
    ck_assert_int_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
    llmrt_backend_ref be = open_real("cpu");
    llmrt_error err = {0};
    llmrt_host host = mock_host(kv_pageable);
    ck_assert_msg(be.vt->create(&host, NULL, &be.b, &err) == LLMRT_OK, "%s", err.msg);
    llmrt_memory *m = make(&be, kv_pageable, &host);
    llmrt_mem_buffer b;
    ck_assert_int_eq(vt->buffer_alloc(m, 1 << 20, LLMRT_MEM_TO_DEVICE, &b, &err), LLMRT_OK);
    ck_assert_int_eq(b.path, LLMRT_MEM_PATH_PAGEABLE);
    llmrt_mem_stats s;
    vt->stats(m, &s);
    ck_assert_uint_eq(s.fallbacks, 1);
    vt->buffer_free(m, &b);
    vt->destroy(m);
    m = make(&be, kv_error, &host);
    ck_assert_int_eq(vt->buffer_alloc(m, 1 << 20, LLMRT_MEM_TO_DEVICE, &b, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "RLIMIT_MEMLOCK"), "names the limit: %s", err.msg);
    vt->destroy(m);
    be.vt->destroy(be.b);
}
END_TEST

int main(int argc, char **argv)
{
    backend_kind = argc > 1 ? argv[1] : "mock";
    for (size_t i = 0; i < sizeof expectations / sizeof *expectations; i++)
        if (strcmp(expectations[i].name, PLUGIN_NAME) == 0)
            ex = &expectations[i];
    if (!ex) {
        fprintf(stderr, "no expectations for plugin %s\n", PLUGIN_NAME);
        return 1;
    }
    char *path = tu_plugin_path(PLUGIN_FILE);
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    if (!d) {
        fprintf(stderr, "cannot load %s\n", path);
        return 1;
    }
    free(path);
    vt = d->vtable;
    desc = d;

    int real = strcmp(backend_kind, "mock") != 0;
    if (real) { /* check availability before building the suite (an early exit leaks nothing) */
        llmrt_backend_ref be = open_real(backend_kind);
        if (!be.vt) { /* the CPU backend is always built; CUDA only with a toolkit */
            printf("%s: backend-%s.so not built\n", strcmp(backend_kind, "cpu") ? "SKIP" : "FAIL",
                   backend_kind);
            return strcmp(backend_kind, "cpu") ? 77 : 1;
        }
        llmrt_device_info info;
        int32_t count = 0;
        llmrt_error err = {0};
        if (be.vt->probe(&info, 1, &count, &err) != LLMRT_OK || count == 0) {
            printf("SKIP: no %s device visible (%s)\n", backend_kind, err.msg);
            return 77;
        }
    }
    Suite *s = suite_create("memory-" PLUGIN_NAME);
    TCase *tc = tcase_create(backend_kind);
    if (!real) {
        tcase_add_test(tc, test_policy_roundtrip);
        tcase_add_test(tc, test_fallback_to_pageable);
        tcase_add_test(tc, test_fallback_error);
        tcase_add_test(tc, test_section_keys);
        tcase_add_test(tc, test_offload);
        tcase_add_test(tc, test_offload_fallback);
        tcase_add_test(tc, test_offload_plan);
    } else {
        tcase_add_test(tc, test_real_roundtrip);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* sanitizers intercept mlock */
        if (strcmp(backend_kind, "cpu") == 0)
            tcase_add_test(tc, test_cpu_mlock_limit);
#endif
    }
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    /* CUDA was already initialised here by the probe: a forked child cannot use it. (The CPU
     * tests keep forking: the mlock test lowers limits and drops capabilities in its child.) */
    if (strcmp(backend_kind, "cuda") == 0)
        srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
