/* test_cuda_mem.c — the CUDA backend's mechanisms: the "llmrt.cuda" extension (stream,
 * device, pdl as [backend.cuda] pdl says), device memory, pinned and mapped host memory, registration, device pointers of mapped memory (kernels writing straight into host
 * memory), async copies, events, CUDA graph capture and replay (equal to eager, and reading
 * new data at the same addresses), and recovery from a capture that fails.
 * Exits 77 when no CUDA device is visible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_common.h"

START_TEST(test_info)
{
    llmrt_error err = {0};
    llmrt_device_info info;
    CT_OK(CT.cuda_vt->device_info(CT.cuda.b, &info, &err));
    ck_assert(info.is_gpu);
    ck_assert(info.name[0]);
    ck_assert_int_ge(info.cc_major, 7);
    ck_assert_int_gt(info.multiprocessors, 0);
    ck_assert_int_gt(info.runtime_version, 0);
    ck_assert_int_gt(info.driver_version, 0);
    uint64_t f = 0, t = 0;
    CT_OK(CT.cuda_vt->mem_info(CT.cuda.b, &f, &t, &err));
    ck_assert(t > 0 && f <= t);
    uint32_t caps = CT.cuda_vt->caps(CT.cuda.b);
    ck_assert(caps & LLMRT_BACKEND_CAP_ASYNC);
    ck_assert(caps & LLMRT_BACKEND_CAP_GRAPHS);
    ck_assert(!(caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE));
    /* the CUDA interop for other plugins' kernels: the backend's own stream (non-blocking,
     * on its device), device 0 (ct_open sets no device), and PDL where the device has it
     * (pdl = auto, unless the environment says off) */
    const llmrt_cuda_ext *cx = llmrt_cuda_ext_of(&CT.cuda);
    ck_assert_ptr_nonnull(cx);
    cudaStream_t s = cx->stream(CT.cuda.b);
    ck_assert_ptr_nonnull(s);
    unsigned int flags = 0;
    ck_assert_int_eq(cudaStreamGetFlags(s, &flags), cudaSuccess);
    ck_assert_uint_eq(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
    int dev = -1;
    ck_assert_int_eq(cudaStreamGetDevice(s, &dev), cudaSuccess);
    ck_assert_int_eq(dev, cx->device(CT.cuda.b));
    ck_assert_int_eq(cx->device(CT.cuda.b), 0);
    const char *pdl_env = getenv("LLMRT_BACKEND_CUDA_PDL");
    ck_assert_int_eq(cx->pdl(CT.cuda.b),
                     info.cc_major >= 9 && !(pdl_env && strcmp(pdl_env, "off") == 0));
    /* pdl = off and on are what they say (on: only where the device has PDL) */
    llmrt_backend *b2 = NULL;
    CT_OK(ct_create_cuda("pdl", "off", &b2, &err));
    ck_assert_int_eq(cx->pdl(b2), 0);
    ck_assert_ptr_ne(cx->stream(b2), s);
    CT.cuda_vt->destroy(b2);
    CT_OK(ct_create_cuda("pdl", "on", &b2, &err));
    ck_assert_int_eq(cx->pdl(b2), info.cc_major >= 9);
    CT.cuda_vt->destroy(b2);
    /* device memory shows up in mem_info */
    void *p = ct_alloc(&CT.cuda, (size_t)1 << 30);
    uint64_t f2 = 0;
    CT_OK(CT.cuda_vt->mem_info(CT.cuda.b, &f2, &t, &err));
    ck_assert_msg(f2 + (900ull << 20) < f, "1 GiB allocation not visible: free %llu → %llu",
                  (unsigned long long)f, (unsigned long long)f2);
    ct_free(&CT.cuda, p);
}
END_TEST

/* host buffer of each kind → device → back, through async copies */
START_TEST(test_host_kinds_roundtrip)
{
    llmrt_error err = {0};
    static const uint32_t kinds[] = {0, LLMRT_HOST_PINNED, LLMRT_HOST_MAPPED,
                                     LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED};
    const size_t n = (size_t)3 << 20; /* floats */
    ct_rng r = {21};
    for (size_t k = 0; k < 4; k++) {
        float *src = NULL, *dst = NULL;
        CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, n * 4, kinds[k], (void **)&src, &err));
        CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, n * 4, kinds[k], (void **)&dst, &err));
        for (size_t i = 0; i < n; i++)
            src[i] = ct_uniform(&r, -1, 1), dst[i] = NAN;
        float *d1 = ct_alloc(&CT.cuda, n * 4), *d2 = ct_alloc(&CT.cuda, n * 4);
        CT_OK(CT.cuda_vt->copy(CT.cuda.b, d1, src, n * 4, LLMRT_COPY_H2D, &err));
        CT_OK(CT.cuda_vt->copy(CT.cuda.b, d2, d1, n * 4, LLMRT_COPY_D2D, &err));
        CT_OK(CT.cuda_vt->copy(CT.cuda.b, dst, d2, n * 4, LLMRT_COPY_D2H, &err));
        CT_OK(CT.cuda_vt->synchronize(CT.cuda.b, &err));
        ck_assert_msg(memcmp(src, dst, n * 4) == 0, "round trip through host kind %u differs",
                      kinds[k]);
        ct_free(&CT.cuda, d1), ct_free(&CT.cuda, d2);
        CT.cuda_vt->host_free(CT.cuda.b, src);
        CT.cuda_vt->host_free(CT.cuda.b, dst);
    }
    /* a bad copy kind is an argument error, not a crash */
    char a[4], b[4];
    ck_assert_int_eq(CT.cuda_vt->copy(CT.cuda.b, a, b, 4, (llmrt_copy_kind)9, &err),
                     LLMRT_ERR_INVALID_ARG);
}
END_TEST

/* Small copies between page-locked host memory and the device run as a kernel (cuda_copy.cu),
 * larger ones and pageable ones on the copy engine: every size around the vector width and
 * the kernel's limit, at aligned and unaligned offsets, arrives intact both ways. */
START_TEST(test_small_copies)
{
    llmrt_error err = {0};
    static const size_t sizes[] = {1, 4, 15, 16, 17, 100, 4224, 65535, 65536, 65537, 300000};
    static const size_t offs[] = {0, 1, 16};
    const size_t cap = 300000 + 32;
    static const uint32_t kinds[] = {LLMRT_HOST_PINNED, 0};
    for (size_t k = 0; k < 2; k++) {
        unsigned char *src = NULL, *dst = NULL;
        CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, cap, kinds[k], (void **)&src, &err));
        CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, cap, kinds[k], (void **)&dst, &err));
        unsigned char *dev = ct_alloc(&CT.cuda, cap);
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (size_t oi = 0; oi < sizeof offs / sizeof *offs; oi++) {
                const size_t n = sizes[si], o = offs[oi];
                for (size_t i = 0; i < cap; i++)
                    src[i] = (unsigned char)(i * 7 + n + o), dst[i] = 0xa5;
                CT_OK(CT.cuda_vt->copy(CT.cuda.b, dev + o, src + o, n, LLMRT_COPY_H2D, &err));
                CT_OK(CT.cuda_vt->copy(CT.cuda.b, dst + o, dev + o, n, LLMRT_COPY_D2H, &err));
                CT_OK(CT.cuda_vt->synchronize(CT.cuda.b, &err));
                ck_assert_msg(memcmp(src + o, dst + o, n) == 0,
                              "host kind %u: %zu bytes at offset %zu differ after the round trip",
                              kinds[k], n, o);
                ck_assert_msg(dst[o + n] == 0xa5 && (o == 0 || dst[o - 1] == 0xa5),
                              "host kind %u: %zu bytes at offset %zu wrote past the range",
                              kinds[k], n, o);
            }
        ct_free(&CT.cuda, dev);
        CT.cuda_vt->host_free(CT.cuda.b, src);
        CT.cuda_vt->host_free(CT.cuda.b, dst);
    }
}
END_TEST

/* Kernels read and write mapped host memory through its device pointer (the uva path). */
START_TEST(test_mapped_zero_copy)
{
    llmrt_error err = {0};
    if (!(CT.cuda_vt->caps(CT.cuda.b) & LLMRT_BACKEND_CAP_MAPPED_HOST))
        return;
    const int64_t n = 100003;
    float *a = NULL, *c = NULL, *o = NULL;
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, n * 4, LLMRT_HOST_MAPPED, (void **)&a, &err));
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, n * 4, LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED,
                                 (void **)&c, &err));
    /* registered malloc memory, mapped */
    o = aligned_alloc(4096, ((n * 4 + 4095) / 4096) * 4096);
    CT_OK(CT.cuda_vt->host_register(CT.cuda.b, o, n * 4, LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED, &err));
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)i, c[i] = 0.5f * (float)i, o[i] = NAN;
    void *da, *dc, *dout;
    CT_OK(CT.cuda_vt->host_device_ptr(CT.cuda.b, a, &da, &err));
    CT_OK(CT.cuda_vt->host_device_ptr(CT.cuda.b, c, &dc, &err));
    CT_OK(CT.cuda_vt->host_device_ptr(CT.cuda.b, o, &dout, &err));
    CT_OK(CT.cuda_vt->add(CT.cuda.b, dout, da, dc, n, &err));
    CT_OK(CT.cuda_vt->synchronize(CT.cuda.b, &err));
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(o[i] == 1.5f * (float)i, "mapped add at %lld: %g", (long long)i, o[i]);
    CT.cuda_vt->host_unregister(CT.cuda.b, o);
    free(o);
    CT.cuda_vt->host_free(CT.cuda.b, a);
    CT.cuda_vt->host_free(CT.cuda.b, c);
    /* memory that was never mapped has no device pointer */
    float *plain = malloc(64);
    void *dp = NULL;
    ck_assert_int_ne(CT.cuda_vt->host_device_ptr(CT.cuda.b, plain, &dp, &err), LLMRT_OK);
    free(plain);
}
END_TEST

START_TEST(test_pinned_refusal_is_limit)
{
    llmrt_error err = {0};
    void *p = NULL;
    /* a petabyte cannot be pinned anywhere */
    llmrt_status st = CT.cuda_vt->host_alloc(CT.cuda.b, (size_t)1 << 50, LLMRT_HOST_PINNED, &p, &err);
    ck_assert_int_eq(st, LLMRT_ERR_LIMIT);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.msg, "cudaHostAlloc"), "%s", err.msg);
    /* the backend still works */
    float *d = ct_alloc(&CT.cuda, 16);
    ct_free(&CT.cuda, d);
}
END_TEST

START_TEST(test_events)
{
    llmrt_error err = {0};
    llmrt_event *e0, *e1;
    CT_OK(CT.cuda_vt->event_create(CT.cuda.b, &e0, &err));
    CT_OK(CT.cuda_vt->event_create(CT.cuda.b, &e1, &err));
    const size_t bytes = (size_t)512 << 20;
    void *a = ct_alloc(&CT.cuda, bytes), *b = ct_alloc(&CT.cuda, bytes);
    CT_OK(CT.cuda_vt->event_record(CT.cuda.b, e0, &err));
    for (int i = 0; i < 4; i++)
        CT_OK(CT.cuda_vt->copy(CT.cuda.b, b, a, bytes, LLMRT_COPY_D2D, &err));
    CT_OK(CT.cuda_vt->event_record(CT.cuda.b, e1, &err));
    CT_OK(CT.cuda_vt->event_sync(CT.cuda.b, e1, &err));
    float ms = 0;
    CT_OK(CT.cuda_vt->event_elapsed_ms(CT.cuda.b, e0, e1, &ms, &err));
    const double gbs = 4.0 * 2.0 * bytes / (ms * 1e-3) / 1e9;
    printf("4 x 512 MiB device copies: %.3f ms, %.0f GB/s (read + write)\n", ms, gbs);
    ck_assert_msg(ms > 0.0f, "elapsed %g ms", ms);
    ct_free(&CT.cuda, a), ct_free(&CT.cuda, b);
    CT.cuda_vt->event_destroy(CT.cuda.b, e0);
    CT.cuda_vt->event_destroy(CT.cuda.b, e1);
}
END_TEST

/* ---- graphs ---- */

/* A miniature decode step on fixed buffers: copy inputs in from pinned memory, rmsnorm,
 * gemm (GEMV), silu·mul, add, decode attention over a paged cache (split-K), argmax, copy
 * the ids out to pinned memory. */
typedef struct step {
    int d, out, vocab;
    llmrt_tensor w_norm, w_up, w_head;
    float *x_host, *x, *h, *u, *s, *logits;
    int32_t *ids, *ids_host;
    /* attention */
    llmrt_attn_params ap;
    int32_t *lens_host; /* pinned: copied each step */
    int32_t *lens_dev;
    float *q, *att;
} step;

static void step_init(step *st, ct_rng *r)
{
    llmrt_error err = {0};
    memset(st, 0, sizeof *st);
    st->d = 1024, st->out = 1024, st->vocab = 50000;
    const int d = st->d;
    float *w = ct_rand_f32(r, (size_t)st->vocab * d, -0.05f, 0.05f);
    void *wh = ct_to_dtype(w, (size_t)st->vocab * d, LLMRT_DTYPE_F16, NULL);
    st->w_head = (llmrt_tensor){LLMRT_DTYPE_F16, 2, {st->vocab, d}, ct_dup(&CT.cuda, wh, (size_t)st->vocab * d * 2)};
    st->w_up = (llmrt_tensor){LLMRT_DTYPE_F16, 2, {st->out, d}, ct_dup(&CT.cuda, wh, (size_t)st->out * d * 2)};
    free(w), free(wh);
    float *nw = ct_rand_f32(r, d, 0.5f, 1.5f);
    st->w_norm = (llmrt_tensor){LLMRT_DTYPE_F32, 1, {d}, ct_dup(&CT.cuda, nw, d * 4)};
    free(nw);
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, d * 4, LLMRT_HOST_PINNED, (void **)&st->x_host, &err));
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, 4, LLMRT_HOST_PINNED, (void **)&st->ids_host, &err));
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, 4, LLMRT_HOST_PINNED, (void **)&st->lens_host, &err));
    st->x = ct_alloc(&CT.cuda, d * 4);
    st->h = ct_alloc(&CT.cuda, d * 4);
    st->u = ct_alloc(&CT.cuda, st->out * 4);
    st->s = ct_alloc(&CT.cuda, st->out * 4);
    st->logits = ct_alloc(&CT.cuda, (size_t)st->vocab * 4);
    st->ids = ct_alloc(&CT.cuda, 4);
    /* attention: 1 sequence, 8 heads / 2 kv heads, hd 128, cache for 4096 tokens (bs 16) */
    const int bs = 16, nb = 256, kvh = 2, hd = 128;
    size_t ce = (size_t)nb * bs * kvh * hd;
    float *kv = ct_rand_f32(r, ce, -1, 1);
    void *kvh16 = ct_to_dtype(kv, ce, LLMRT_DTYPE_F16, NULL);
    int32_t table[256], qs[2] = {0, 1};
    for (int i = 0; i < nb; i++)
        table[i] = (i * 97) % nb;
    llmrt_attn_params *p = &st->ap;
    p->n_tokens = 1, p->n_seqs = 1, p->n_heads = 8, p->n_kv_heads = kvh, p->head_dim = hd;
    p->scale = 1.0f / sqrtf((float)hd);
    p->query_start = ct_dup(&CT.cuda, qs, sizeof qs);
    st->lens_dev = ct_alloc(&CT.cuda, 4);
    p->seq_lens = st->lens_dev;
    p->block_tables = ct_dup(&CT.cuda, table, sizeof table);
    p->max_blocks_per_seq = nb, p->block_size = bs, p->max_seq_len = nb * bs, p->max_query_len = 1;
    p->kv_dtype = LLMRT_DTYPE_F16;
    p->k_cache = ct_dup(&CT.cuda, kvh16, ce * 2);
    p->v_cache = ct_dup(&CT.cuda, kvh16, ce * 2);
    free(kv), free(kvh16);
    float *q = ct_rand_f32(r, 8 * hd, -1, 1);
    st->q = ct_dup(&CT.cuda, q, 8 * hd * 4);
    free(q);
    st->att = ct_alloc(&CT.cuda, 8 * hd * 4);
}

static void step_enqueue(step *st)
{
    llmrt_error err = {0};
    const llmrt_backend_vtable *vt = CT.cuda_vt;
    llmrt_backend *b = CT.cuda.b;
    CT_OK(vt->copy(b, st->x, st->x_host, st->d * 4, LLMRT_COPY_H2D, &err));
    CT_OK(vt->copy(b, st->lens_dev, st->lens_host, 4, LLMRT_COPY_H2D, &err));
    CT_OK(vt->rmsnorm(b, st->h, st->x, &st->w_norm, 1, st->d, 1e-6f, &err));
    CT_OK(vt->gemm(b, st->u, st->h, &st->w_up, 1, &err));
    CT_OK(vt->silu_mul(b, st->s, st->u, st->u, st->out, &err));
    CT_OK(vt->add(b, st->h, st->h, st->s, st->d, &err));
    CT_OK(vt->attention(b, st->att, st->q, &st->ap, &err));
    CT_OK(vt->gemm(b, st->logits, st->h, &st->w_head, 1, &err));
    CT_OK(vt->argmax(b, st->ids, st->logits, 1, st->vocab, &err));
    CT_OK(vt->copy(b, st->ids_host, st->ids, 4, LLMRT_COPY_D2H, &err));
}

/* Results of one step: the sampled id, the logits and the attention output. */
static void step_read(step *st, int32_t *id, float *logits, float *att)
{
    ct_sync(&CT.cuda);
    *id = *st->ids_host;
    ct_download(&CT.cuda, logits, st->logits, (size_t)st->vocab * 4);
    ct_download(&CT.cuda, att, st->att, 8 * 128 * 4);
}

static void step_poison(step *st)
{
    ct_poison(&CT.cuda, st->logits, st->vocab);
    ct_poison(&CT.cuda, st->att, 8 * 128);
    ct_poison(&CT.cuda, st->h, st->d);
    *st->ids_host = -1;
}

START_TEST(test_graph_equals_eager)
{
    llmrt_error err = {0};
    ct_rng r = {22};
    step st;
    step_init(&st, &r);
    float *lg_e = malloc(st.vocab * 4), *lg_g = malloc(st.vocab * 4);
    float att_e[1024], att_g[1024];
    int32_t id_e, id_g;

    /* Capture first, with no eager warm-up: the engine captures a bucket's first decode step,
     * so scratch buffers are allocated (and kernels loaded) during the capture. This test
     * must run before any other test of this program that uses attention or argmax.
     * test_small_copies runs before it and frees device memory it filled with non-zero bytes,
     * so scratch allocated during this capture must be zeroed at allocation, not by a memset
     * node of the graph: the eager steps below run before the first replay. */
    for (int i = 0; i < st.d; i++)
        st.x_host[i] = ct_uniform(&r, -1, 1);
    *st.lens_host = 100;
    llmrt_graph *g = NULL;
    CT_OK(CT.cuda_vt->graph_begin(CT.cuda.b, &err));
    step_enqueue(&st);
    CT_OK(CT.cuda_vt->graph_end(CT.cuda.b, &g, &err));
    ck_assert_ptr_nonnull(g);

    static const int lens[] = {1, 100, 777, 4096, 33};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        /* new inputs at the same addresses */
        for (int i = 0; i < st.d; i++)
            st.x_host[i] = ct_uniform(&r, -1, 1);
        *st.lens_host = lens[k];
        step_poison(&st);
        step_enqueue(&st);
        step_read(&st, &id_e, lg_e, att_e);
        step_poison(&st);
        CT_OK(CT.cuda_vt->graph_launch(CT.cuda.b, g, &err));
        step_read(&st, &id_g, lg_g, att_g);
        char what[64];
        snprintf(what, sizeof what, "graph replay, context %d: logits", lens[k]);
        ct_assert_close(lg_g, lg_e, st.vocab, 0.0, what);
        snprintf(what, sizeof what, "graph replay, context %d: attention", lens[k]);
        ct_assert_close(att_g, att_e, 1024, 0.0, what);
        ck_assert_int_eq(id_g, id_e);
        ck_assert_int_ge(id_g, 0);
    }
    CT.cuda_vt->graph_destroy(CT.cuda.b, g);
    free(lg_e), free(lg_g);
}
END_TEST

/* A pageable copy cannot be captured: the capture fails cleanly and the backend recovers. */
START_TEST(test_graph_failed_capture_recovers)
{
    llmrt_error err = {0};
    float *pageable = malloc(1 << 20);
    memset(pageable, 0, 1 << 20);
    float *d = ct_alloc(&CT.cuda, 1 << 20);
    CT_OK(CT.cuda_vt->graph_begin(CT.cuda.b, &err));
    ck_assert_int_eq(CT.cuda_vt->graph_begin(CT.cuda.b, &err), LLMRT_ERR_STATE);
    ck_assert_int_eq(CT.cuda_vt->synchronize(CT.cuda.b, &err), LLMRT_ERR_STATE);
    llmrt_status st1 = CT.cuda_vt->copy(CT.cuda.b, d, pageable, 1 << 20, LLMRT_COPY_H2D, &err);
    llmrt_graph *g = NULL;
    llmrt_status st2 = CT.cuda_vt->graph_end(CT.cuda.b, &g, &err);
    printf("pageable copy in capture: copy %s, graph_end %s (%s)\n", llmrt_status_str(st1),
           llmrt_status_str(st2), err.msg);
    if (g)
        CT.cuda_vt->graph_destroy(CT.cuda.b, g);
    /* the stream works again */
    float one = 1.0f, back = 0;
    ct_upload(&CT.cuda, d, &one, 4);
    ct_download(&CT.cuda, &back, d, 4);
    ck_assert(back == 1.0f);
    ck_assert_int_eq(CT.cuda_vt->graph_end(CT.cuda.b, &g, &err), LLMRT_ERR_STATE);
    ct_free(&CT.cuda, d);
    free(pageable);
}
END_TEST

/* CAP_GRAPH_EVENTS: events recorded during a capture are recorded again at every replay, in
 * graph order, and can be timed: [A before the launch] gather (a small copy from mapped host
 * memory) [B in the graph] device work [C in the graph] ids back to the host [D after]. The
 * spans are those of the replay, not of the capture: a replay that copies 256 MiB between
 * B and C takes longer there than an empty one. */
START_TEST(test_graph_events)
{
    llmrt_error err = {0};
    ck_assert(CT.cuda_vt->caps(CT.cuda.b) & LLMRT_BACKEND_CAP_GRAPH_EVENTS);
    llmrt_event *ev[4];
    for (int i = 0; i < 4; i++)
        CT_OK(CT.cuda_vt->event_create(CT.cuda.b, &ev[i], &err));
    int32_t *in_host = NULL, *out_host = NULL;
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, 4096, LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED,
                                 (void **)&in_host, &err));
    CT_OK(CT.cuda_vt->host_alloc(CT.cuda.b, 4096, LLMRT_HOST_PINNED | LLMRT_HOST_MAPPED,
                                 (void **)&out_host, &err));
    int32_t *mirror = ct_alloc(&CT.cuda, 4096);
    const size_t big = (size_t)256 << 20;
    void *a = ct_alloc(&CT.cuda, big), *b = ct_alloc(&CT.cuda, big);
    llmrt_graph *g[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) { /* k = 1: 256 MiB of device copies between B and C */
        CT_OK(CT.cuda_vt->graph_begin(CT.cuda.b, &err));
        CT_OK(CT.cuda_vt->copy(CT.cuda.b, mirror, in_host, 4096, LLMRT_COPY_H2D, &err));
        CT_OK(CT.cuda_vt->event_record(CT.cuda.b, ev[1], &err));
        if (k)
            CT_OK(CT.cuda_vt->copy(CT.cuda.b, b, a, big, LLMRT_COPY_D2D, &err));
        CT_OK(CT.cuda_vt->copy(CT.cuda.b, out_host, mirror, 4096, LLMRT_COPY_D2H, &err));
        CT_OK(CT.cuda_vt->event_record(CT.cuda.b, ev[2], &err));
        CT_OK(CT.cuda_vt->graph_end(CT.cuda.b, &g[k], &err));
    }
    float mid[2] = {0, 0};
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 1024; i++)
                in_host[i] = rep * 10000 + k * 1000 + i;
            memset(out_host, 0xff, 4096);
            CT_OK(CT.cuda_vt->event_record(CT.cuda.b, ev[0], &err));
            CT_OK(CT.cuda_vt->graph_launch(CT.cuda.b, g[k], &err));
            CT_OK(CT.cuda_vt->event_record(CT.cuda.b, ev[3], &err));
            CT_OK(CT.cuda_vt->event_sync(CT.cuda.b, ev[3], &err));
            for (int i = 0; i < 1024; i += 97)
                ck_assert_int_eq(out_host[i], rep * 10000 + k * 1000 + i);
            float ms[3];
            for (int i = 0; i < 3; i++) {
                CT_OK(CT.cuda_vt->event_elapsed_ms(CT.cuda.b, ev[i], ev[i + 1], &ms[i], &err));
                ck_assert_msg(ms[i] >= 0, "span %d: %g ms", i, ms[i]);
            }
            mid[k] = ms[1];
        }
    printf("graph events: B..C %.3f ms empty, %.3f ms with 256 MiB of copies\n", mid[0], mid[1]);
    ck_assert_msg(mid[1] > mid[0] + 0.02, "the span inside the graph is not the replay's");
    for (int k = 0; k < 2; k++)
        CT.cuda_vt->graph_destroy(CT.cuda.b, g[k]);
    ct_free(&CT.cuda, a), ct_free(&CT.cuda, b), ct_free(&CT.cuda, mirror);
    CT.cuda_vt->host_free(CT.cuda.b, in_host);
    CT.cuda_vt->host_free(CT.cuda.b, out_host);
    for (int i = 0; i < 4; i++)
        CT.cuda_vt->event_destroy(CT.cuda.b, ev[i]);
}
END_TEST

int main(void)
{
    ct_open(0);
    Suite *s = suite_create("backend-cuda.mem");
    TCase *tc = tcase_create("mem");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_info);
    tcase_add_test(tc, test_host_kinds_roundtrip);
    tcase_add_test(tc, test_small_copies);
    tcase_add_test(tc, test_mapped_zero_copy);
    tcase_add_test(tc, test_pinned_refusal_is_limit);
    tcase_add_test(tc, test_events);
    tcase_add_test(tc, test_graph_equals_eager);
    tcase_add_test(tc, test_graph_failed_capture_recovers);
    tcase_add_test(tc, test_graph_events);
    suite_add_tcase(s, tc);
    int rc = ct_run(s);
    ct_close();
    return rc;
}
