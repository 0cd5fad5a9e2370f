/* test_qwen3.c — unit tests of the model-qwen3 plugin (the built .so), argv[1] picks a group:
 *   forward_bf16      bf16 weights, untied lm_head, one sequence, logits of every position
 *   forward_f32_tied  f32 weights, tied embeddings with a decoy lm_head.weight in the
 *                     checkpoint (must be ignored, as transformers does), rope_parameters spelling
 *   forward_quant     decoder linears through a fake quant plugin, one linear left dense
 *   forward_gather    two sequences prefilled in one batch (logits_rows), then a decode step
 *   fused             fuse = auto (fused projections and the backend's "llmrt.fused" ops,
 *                     counted through a wrapped extension) equals fuse = off, prefill + decode;
 *                     without the extension fuse = auto runs the separate ops
 *   greedy_head       forward_argmax equals the argmax of forward's logits, with the backend's
 *                     "llmrt.argmax_head" extension (faked over backend-cpu), with
 *                     greedy_head = off, when the backend refuses the lm_head, and without the
 *                     extension
 *   errors            probe, config rejections, missing op, missing tensor, shape and dtype
 *                     mismatches, a bad [model.qwen3] value, forward argument checks, config
 *                     values that would size absurd allocations
 * The forward groups run on the real backend-cpu.so (exit 77 until it is built) and compare
 * with a double-precision reference forward written here from the Qwen3 definition. The
 * checkpoint is a fake llmrt_checkpoint over tensors built in memory with random values. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llmrt/ext/argmax_head.h>
#include <llmrt/ext/fused.h>
#include <llmrt/model.h>

#include "fake_checkpoint.h"
#include "mock_backend.h"
#include "test_util.h"

/* ------------------------------------------------------------------ the tiny model */

typedef struct tcfg {
    int vocab, hidden, inter, layers, heads, kv_heads, head_dim, max_pos;
    double eps, theta;
    int tie;
    llmrt_dtype dtype;
    int rope_parameters; /* 1: transformers 5 spelling rope_parameters.rope_theta */
    int fake_quant;      /* decoder linears as fq_weight/fq_scale (layer 1 down_proj stays dense) */
    int decoy_lm_head;   /* tied, but the checkpoint also carries a (different) lm_head.weight */
} tcfg;

static tcfg tiny(llmrt_dtype dtype)
{
    /* head_dim (16) deliberately differs from hidden / heads (8), as in real Qwen3 */
    tcfg c = {.vocab = 96, .hidden = 32, .inter = 48, .layers = 2, .heads = 4, .kv_heads = 2,
              .head_dim = 16, .max_pos = 128, .eps = 1e-6, .theta = 1000000.0, .dtype = dtype};
    return c;
}

static void write_config(fckpt *f, const tcfg *c)
{
    char rope[128];
    if (c->rope_parameters)
        snprintf(rope, sizeof rope, "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": %.1f}",
                 c->theta);
    else
        snprintf(rope, sizeof rope, "\"rope_theta\": %.1f, \"rope_scaling\": null", c->theta);
    snprintf(f->config, sizeof f->config,
             "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
             "\"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
             "\"head_dim\": %d, \"max_position_embeddings\": %d, \"rms_norm_eps\": 1e-06, %s, "
             "\"tie_word_embeddings\": %s, \"%s\": \"%s\", \"hidden_act\": \"silu\", "
             "\"attention_bias\": false, \"use_sliding_window\": false}",
             c->vocab, c->hidden, c->inter, c->layers, c->heads, c->kv_heads, c->head_dim,
             c->max_pos, rope, c->tie ? "true" : "false", c->rope_parameters ? "dtype" : "torch_dtype",
             c->dtype == LLMRT_DTYPE_BF16 ? "bfloat16" : c->dtype == LLMRT_DTYPE_F16 ? "float16" : "float32");
}

static void add_linear(fckpt *f, const tcfg *c, const char *prefix, int out, int in, int quant)
{
    char name[160];
    double a = 1.0 / sqrt((double)in) * 1.7; /* ~unit-variance outputs */
    if (quant) {
        snprintf(name, sizeof name, "%s.fq_weight", prefix);
        fk_add(f, name, LLMRT_DTYPE_I8, 2, out, in, 0.0, 100.0);
        snprintf(name, sizeof name, "%s.fq_scale", prefix);
        fk_add(f, name, LLMRT_DTYPE_F32, 1, out, 0, a / 100.0, a / 400.0);
    } else {
        snprintf(name, sizeof name, "%s.weight", prefix);
        fk_add(f, name, c->dtype, 2, out, in, 0.0, a);
    }
}

static fckpt *make_ckpt(const tcfg *c, uint64_t seed)
{
    rng_state = seed;
    fckpt *f = fk_new("fake-model");
    write_config(f, c);
    const int H = c->hidden, D = c->head_dim;
    fk_add(f, "model.embed_tokens.weight", c->dtype, 2, c->vocab, H, 0.0, 1.0);
    for (int l = 0; l < c->layers; l++) {
        char p[128];
#define P(s) (snprintf(p, sizeof p, "model.layers.%d." s, l), p)
        fk_add(f, P("input_layernorm.weight"), c->dtype, 1, H, 0, 1.0, 0.2);
        add_linear(f, c, P("self_attn.q_proj"), c->heads * D, H, c->fake_quant);
        add_linear(f, c, P("self_attn.k_proj"), c->kv_heads * D, H, c->fake_quant);
        add_linear(f, c, P("self_attn.v_proj"), c->kv_heads * D, H, c->fake_quant);
        fk_add(f, P("self_attn.q_norm.weight"), c->dtype, 1, D, 0, 1.0, 0.2);
        fk_add(f, P("self_attn.k_norm.weight"), c->dtype, 1, D, 0, 1.0, 0.2);
        add_linear(f, c, P("self_attn.o_proj"), H, c->heads * D, c->fake_quant);
        fk_add(f, P("post_attention_layernorm.weight"), c->dtype, 1, H, 0, 1.0, 0.2);
        add_linear(f, c, P("mlp.gate_proj"), c->inter, H, c->fake_quant);
        add_linear(f, c, P("mlp.up_proj"), c->inter, H, c->fake_quant);
        add_linear(f, c, P("mlp.down_proj"), H, c->inter, c->fake_quant && l != 1);
#undef P
    }
    fk_add(f, "model.norm.weight", c->dtype, 1, H, 0, 1.0, 0.2);
    if (!c->tie || c->decoy_lm_head)
        fk_add(f, "lm_head.weight", c->dtype, 2, c->vocab, H, 0.0, 0.5);
    return f;
}

/* ------------------------------------------------------------------ reference forward */

/* Weights as doubles: a dense tensor, or a fake-quantized one dequantized (q * scale[row]). */
static double *ref_tensor(fckpt *f, const char *name)
{
    ftensor *t = fk_get(f, name);
    ck_assert_msg(t != NULL, "reference: no %s", name);
    int64_t n = t->ndim > 1 ? t->shape[0] * t->shape[1] : t->shape[0];
    double *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++)
        w[i] = llmrt_load_f(t->data, t->dtype, i);
    return w;
}

static double *ref_linear(fckpt *f, const char *prefix)
{
    char name[160];
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (fk_get(f, name))
        return ref_tensor(f, name);
    snprintf(name, sizeof name, "%s.fq_weight", prefix);
    ftensor *q = fk_get(f, name);
    snprintf(name, sizeof name, "%s.fq_scale", prefix);
    ftensor *s = fk_get(f, name);
    ck_assert(q && s);
    double *w = malloc((size_t)(q->shape[0] * q->shape[1]) * sizeof *w);
    for (int64_t o = 0; o < q->shape[0]; o++)
        for (int64_t i = 0; i < q->shape[1]; i++)
            w[o * q->shape[1] + i] =
                ((int8_t *)q->data)[o * q->shape[1] + i] * (double)((float *)s->data)[o];
    return w;
}

static void ref_rmsnorm(double *y, const double *x, const double *w, int d, double eps)
{
    double ss = 0;
    for (int i = 0; i < d; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / d + eps);
    for (int i = 0; i < d; i++)
        y[i] = x[i] * r * w[i];
}

static void ref_matvec(double *y, const double *w, const double *x, int out, int in)
{
    for (int o = 0; o < out; o++) {
        double acc = 0;
        for (int i = 0; i < in; i++)
            acc += w[(size_t)o * in + i] * x[i];
        y[o] = acc;
    }
}

static void ref_rope(double *x, int pos, int d, double theta)
{
    for (int i = 0; i < d / 2; i++) {
        double ang = pos * pow(theta, -2.0 * i / d);
        double x1 = x[i], x2 = x[i + d / 2];
        x[i] = x1 * cos(ang) - x2 * sin(ang);
        x[i + d / 2] = x2 * cos(ang) + x1 * sin(ang);
    }
}

/* logits [T, vocab] of one causal sequence, in double precision. */
static void ref_forward(fckpt *f, const tcfg *c, const int32_t *ids, int T, double *logits)
{
    const int H = c->hidden, D = c->head_dim, NH = c->heads, KV = c->kv_heads, I = c->inter;
    double *x = calloc((size_t)T * H, sizeof *x), *xn = calloc(H, sizeof *xn);
    double *q = calloc((size_t)T * NH * D, sizeof *q), *k = calloc((size_t)T * KV * D, sizeof *k);
    double *v = calloc((size_t)T * KV * D, sizeof *v), *att = calloc((size_t)NH * D, sizeof *att);
    double *tmp = calloc(H > I ? H : I, sizeof *tmp), *g = calloc(I, sizeof *g), *u = calloc(I, sizeof *u);
    double *p = calloc(T, sizeof *p);
    double *emb = ref_tensor(f, "model.embed_tokens.weight");
    for (int t = 0; t < T; t++)
        memcpy(x + (size_t)t * H, emb + (size_t)ids[t] * H, H * sizeof *x);
    for (int l = 0; l < c->layers; l++) {
        char n[160];
#define W(s) (snprintf(n, sizeof n, "model.layers.%d." s, l), n)
        double *in_norm = ref_tensor(f, W("input_layernorm.weight"));
        double *post_norm = ref_tensor(f, W("post_attention_layernorm.weight"));
        double *qn = ref_tensor(f, W("self_attn.q_norm.weight"));
        double *kn = ref_tensor(f, W("self_attn.k_norm.weight"));
        double *wq = ref_linear(f, W("self_attn.q_proj")), *wk = ref_linear(f, W("self_attn.k_proj"));
        double *wv = ref_linear(f, W("self_attn.v_proj")), *wo = ref_linear(f, W("self_attn.o_proj"));
        double *wg = ref_linear(f, W("mlp.gate_proj")), *wu = ref_linear(f, W("mlp.up_proj"));
        double *wd = ref_linear(f, W("mlp.down_proj"));
#undef W
        for (int t = 0; t < T; t++) {
            ref_rmsnorm(xn, x + (size_t)t * H, in_norm, H, c->eps);
            double *qt = q + (size_t)t * NH * D, *kt = k + (size_t)t * KV * D;
            ref_matvec(qt, wq, xn, NH * D, H);
            ref_matvec(kt, wk, xn, KV * D, H);
            ref_matvec(v + (size_t)t * KV * D, wv, xn, KV * D, H);
            for (int h = 0; h < NH; h++) {
                ref_rmsnorm(qt + h * D, qt + h * D, qn, D, c->eps);
                ref_rope(qt + h * D, t, D, c->theta);
            }
            for (int h = 0; h < KV; h++) {
                ref_rmsnorm(kt + h * D, kt + h * D, kn, D, c->eps);
                ref_rope(kt + h * D, t, D, c->theta);
            }
        }
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                int kh = h / (NH / KV);
                const double *qh = q + ((size_t)t * NH + h) * D;
                double mx = -INFINITY, sum = 0;
                for (int s = 0; s <= t; s++) {
                    double dot = 0;
                    for (int d = 0; d < D; d++)
                        dot += qh[d] * k[((size_t)s * KV + kh) * D + d];
                    p[s] = dot / sqrt((double)D);
                    mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++)
                    sum += (p[s] = exp(p[s] - mx));
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int s = 0; s <= t; s++)
                        acc += p[s] * v[((size_t)s * KV + kh) * D + d];
                    att[h * D + d] = acc / sum;
                }
            }
            double *xt = x + (size_t)t * H;
            ref_matvec(tmp, wo, att, H, NH * D);
            for (int i = 0; i < H; i++)
                xt[i] += tmp[i];
            ref_rmsnorm(xn, xt, post_norm, H, c->eps);
            ref_matvec(g, wg, xn, I, H);
            ref_matvec(u, wu, xn, I, H);
            for (int i = 0; i < I; i++)
                g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            ref_matvec(tmp, wd, g, H, I);
            for (int i = 0; i < H; i++)
                xt[i] += tmp[i];
        }
        free(in_norm), free(post_norm), free(qn), free(kn), free(wq), free(wk), free(wv);
        free(wo), free(wg), free(wu), free(wd);
    }
    double *fnorm = ref_tensor(f, "model.norm.weight");
    double *head = c->tie ? emb : ref_tensor(f, "lm_head.weight");
    for (int t = 0; t < T; t++) {
        ref_rmsnorm(xn, x + (size_t)t * H, fnorm, H, c->eps);
        ref_matvec(logits + (size_t)t * c->vocab, head, xn, c->vocab, H);
    }
    if (head != emb)
        free(head);
    free(fnorm), free(emb), free(x), free(xn), free(q), free(k), free(v), free(att), free(tmp);
    free(g), free(u), free(p);
}

/* ‖a − b‖ / ‖b‖ over one row. */
static double rel_err(const float *a, const double *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* ------------------------------------------------------------------ plugins */

static const llmrt_model_vtable *mvt;
static const llmrt_backend_vtable *cpu_vt; /* the real CPU backend, when built */
static llmrt_backend_ref cpu;              /* an instance, created inside each test: Check
                                              forks per test, and a thread pool does not
                                              survive a fork */
static llmrt_host host;

static int find_cpu(void)
{
    char *path = tu_plugin_path("backend-cpu.so");
    const llmrt_plugin_desc *d = access(path, R_OK) == 0 ? tu_load_plugin(path, 0) : NULL;
    free(path);
    if (!d || d->kind != LLMRT_PLUGIN_BACKEND)
        return 0;
    cpu_vt = d->vtable;
    return 1;
}

static void cpu_open(void)
{
    llmrt_error err = {0};
    /* the exact path: the double-precision reference's tolerances assume f32 arithmetic */
    const char *keys[] = {"simd"}, *vals[] = {"exact"};
    llmrt_section exact = {"backend.cpu", 1, keys, vals, NULL};
    cpu = (llmrt_backend_ref){cpu_vt, NULL, "cpu"};
    ck_assert_msg(cpu_vt->create(&host, &exact, &cpu.b, &err) == LLMRT_OK, "backend-cpu: %s", err.msg);
}

static void cpu_close(void)
{
    cpu_vt->destroy(cpu.b);
    cpu.b = NULL;
}

/* A fake quant plugin: int8 weights with a per-row f32 scale (prefix.fq_weight [out, in],
 * prefix.fq_scale [out]), dequantized at load and run with the backend's gemm. It counts
 * forward calls so the test can see the model really used it. */
struct llmrt_quant {
    llmrt_backend_ref be;
    int forwards;
};
struct llmrt_qlinear {
    llmrt_tensor w; /* F32 [out, in] in backend memory */
};

static llmrt_status fq_load(llmrt_quant *q, const llmrt_checkpoint *ck, const char *prefix,
                            int64_t in, int64_t out, llmrt_qlinear **res, llmrt_error *err)
{
    char n[160];
    llmrt_tensor_view w, s;
    snprintf(n, sizeof n, "%s.fq_weight", prefix);
    if (!ck->has(ck->ctx, n))
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "no %s", n);
    llmrt_status st = ck->find(ck->ctx, n, &w, err);
    if (st)
        return st;
    snprintf(n, sizeof n, "%s.fq_scale", prefix);
    if ((st = ck->find(ck->ctx, n, &s, err)))
        return st;
    if (w.shape[0] != out || w.shape[1] != in)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s.fq_weight: bad shape", prefix);
    llmrt_qlinear *l = calloc(1, sizeof *l);
    l->w = (llmrt_tensor){.dtype = LLMRT_DTYPE_F32, .ndim = 2, .shape = {out, in}};
    float *host_w = malloc((size_t)(out * in) * sizeof *host_w);
    for (int64_t i = 0; i < out * in; i++)
        host_w[i] = ((const int8_t *)w.data)[i] * ((const float *)s.data)[i / in];
    q->be.vt->dev_alloc(q->be.b, (size_t)(out * in) * 4, &l->w.data, err);
    q->be.vt->copy(q->be.b, l->w.data, host_w, (size_t)(out * in) * 4, LLMRT_COPY_H2D, err);
    free(host_w);
    *res = l;
    return LLMRT_OK;
}
static void fq_free(llmrt_quant *q, llmrt_qlinear *l)
{
    q->be.vt->dev_free(q->be.b, l->w.data);
    free(l);
}
static llmrt_status fq_forward(llmrt_quant *q, const llmrt_qlinear *l, float *y, const float *x,
                               int32_t n, llmrt_error *err)
{
    q->forwards++;
    return q->be.vt->gemm(q->be.b, y, x, &l->w, n, err);
}
static uint64_t fq_bytes(llmrt_quant *q, const llmrt_qlinear *l)
{
    return (uint64_t)(l->w.shape[0] * l->w.shape[1]) + 4u * (uint64_t)l->w.shape[0];
}
static const llmrt_quant_vtable fq_vtable = {.struct_size = sizeof(llmrt_quant_vtable),
                                             .linear_load = fq_load, .linear_free = fq_free,
                                             .linear_forward = fq_forward, .linear_bytes = fq_bytes};

/* ------------------------------------------------------------------ running the plugin */

#define BLOCK 4
#define NBLOCKS 32

typedef struct kvbuf {
    llmrt_kv_cache kv;
    void *k[8], *v[8];
} kvbuf;

static void kv_alloc(const llmrt_backend_ref *be, const tcfg *c, kvbuf *out)
{
    llmrt_error err = {0};
    size_t bytes = (size_t)NBLOCKS * BLOCK * c->kv_heads * c->head_dim * sizeof(float);
    for (int l = 0; l < c->layers; l++) {
        ck_assert(be->vt->dev_alloc(be->b, bytes, &out->k[l], &err) == LLMRT_OK);
        ck_assert(be->vt->dev_alloc(be->b, bytes, &out->v[l], &err) == LLMRT_OK);
    }
    out->kv = (llmrt_kv_cache){.n_layers = c->layers, .n_blocks = NBLOCKS, .block_size = BLOCK,
                               .n_kv_heads = c->kv_heads, .head_dim = c->head_dim,
                               .dtype = LLMRT_DTYPE_F32, .k = out->k, .v = out->v};
}

static void kv_free(const llmrt_backend_ref *be, const tcfg *c, kvbuf *kb)
{
    for (int l = 0; l < c->layers; l++) {
        be->vt->dev_free(be->b, kb->k[l]);
        be->vt->dev_free(be->b, kb->v[l]);
    }
}

/* Copy an int32 host array into backend memory (freed by the caller). */
static int32_t *dev_ints(const llmrt_backend_ref *be, const int32_t *a, int n)
{
    void *p = NULL;
    llmrt_error err = {0};
    ck_assert(be->vt->dev_alloc(be->b, (size_t)n * 4 + 4, &p, &err) == LLMRT_OK);
    ck_assert(be->vt->copy(be->b, p, a, (size_t)n * 4, LLMRT_COPY_H2D, &err) == LLMRT_OK);
    return p;
}

/* A step: sequences s = 0..n_seqs-1 with context length seq_lens[s] after the step and
 * qlens[s] new tokens (ids concatenated in `ids`). Block tables are fixed per sequence and
 * deliberately out of order. Fills logits (host) with [rows, vocab]. */
static void run_step_ex(llmrt_model *m, const llmrt_backend_ref *be, kvbuf *kb, const tcfg *c,
                        int n_seqs, const int *seq_lens, const int *qlens, const int32_t *ids,
                        int all_logits, float *logits, int32_t *argmax_out);

static void run_step(llmrt_model *m, const llmrt_backend_ref *be, kvbuf *kb, const tcfg *c,
                     int n_seqs, const int *seq_lens, const int *qlens, const int32_t *ids,
                     int all_logits, float *logits)
{
    run_step_ex(m, be, kb, c, n_seqs, seq_lens, qlens, ids, all_logits, logits, NULL);
}

/* As run_step; with argmax_out, through forward_argmax: the ids (host) instead of logits. */
static void run_step_ex(llmrt_model *m, const llmrt_backend_ref *be, kvbuf *kb, const tcfg *c,
                        int n_seqs, const int *seq_lens, const int *qlens, const int32_t *ids,
                        int all_logits, float *logits, int32_t *argmax_out)
{
    enum { MAXB = 8 };
    int32_t tok[64], pos[64], slot[64], qs[9], sl[8], bt[8 * MAXB], rows[8];
    int n = 0, max_sl = 0, max_q = 0;
    qs[0] = 0;
    for (int s = 0; s < n_seqs; s++) {
        for (int j = 0; j < MAXB; j++)
            bt[s * MAXB + j] = NBLOCKS - 1 - (j * 3 + s * 2) % NBLOCKS; /* scattered, disjoint */
        for (int i = 0; i < qlens[s]; i++, n++) {
            int p = seq_lens[s] - qlens[s] + i;
            tok[n] = ids[n];
            pos[n] = p;
            slot[n] = bt[s * MAXB + p / BLOCK] * BLOCK + p % BLOCK;
        }
        qs[s + 1] = n;
        sl[s] = seq_lens[s];
        rows[s] = n - 1;
        if (seq_lens[s] > max_sl)
            max_sl = seq_lens[s];
        if (qlens[s] > max_q)
            max_q = qlens[s];
    }
    int32_t *d_tok = dev_ints(be, tok, n), *d_pos = dev_ints(be, pos, n), *d_slot = dev_ints(be, slot, n);
    int32_t *d_qs = dev_ints(be, qs, n_seqs + 1), *d_sl = dev_ints(be, sl, n_seqs);
    int32_t *d_bt = dev_ints(be, bt, n_seqs * MAXB), *d_rows = dev_ints(be, rows, n_seqs);
    llmrt_batch b = {.n_tokens = n, .n_seqs = n_seqs, .token_ids = d_tok, .positions = d_pos,
                     .slot_mapping = d_slot, .query_start = d_qs, .seq_lens = d_sl,
                     .block_tables = d_bt, .logits_rows = d_rows, .max_blocks_per_seq = MAXB,
                     .max_seq_len = max_sl, .max_query_len = max_q, .all_logits = all_logits};
    int out_rows = all_logits ? n : n_seqs;
    void *d_logits = NULL;
    llmrt_error err = {0};
    ck_assert(be->vt->dev_alloc(be->b, (size_t)out_rows * c->vocab * 4, &d_logits, &err) == LLMRT_OK);
    if (argmax_out) {
        void *d_ids = NULL;
        ck_assert(be->vt->dev_alloc(be->b, (size_t)n_seqs * 4, &d_ids, &err) == LLMRT_OK);
        ck_assert_msg(mvt->forward_argmax(m, &b, &kb->kv, d_logits, d_ids, &err) == LLMRT_OK,
                      "forward_argmax: %s", err.msg);
        ck_assert(be->vt->copy(be->b, argmax_out, d_ids, (size_t)n_seqs * 4, LLMRT_COPY_D2H,
                               &err) == LLMRT_OK);
        ck_assert(be->vt->synchronize(be->b, &err) == LLMRT_OK);
        be->vt->dev_free(be->b, d_ids);
    } else {
        ck_assert_msg(mvt->forward(m, &b, &kb->kv, d_logits, &err) == LLMRT_OK, "forward: %s",
                      err.msg);
        ck_assert(be->vt->copy(be->b, logits, d_logits, (size_t)out_rows * c->vocab * 4,
                               LLMRT_COPY_D2H, &err) == LLMRT_OK);
        ck_assert(be->vt->synchronize(be->b, &err) == LLMRT_OK);
    }
    be->vt->dev_free(be->b, d_logits);
    int32_t *bufs[] = {d_tok, d_pos, d_slot, d_qs, d_sl, d_bt, d_rows};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        be->vt->dev_free(be->b, bufs[i]);
}

static llmrt_model *create(fckpt *f, const llmrt_backend_ref *be, const llmrt_quant_ref *q,
                           int max_tokens, int max_seqs)
{
    llmrt_model_params params = {.max_tokens = max_tokens, .max_seqs = max_seqs};
    llmrt_model *m = NULL;
    llmrt_error err = {0};
    llmrt_section empty = {.name = "model.qwen3"};
    ck_assert_msg(mvt->create(&host, &empty, &f->ck, be, q, &params, &m, &err) == LLMRT_OK,
                  "create: %s", err.msg);
    return m;
}

/* Tolerance for plugin (f32 activations, f32 KV cache, fp32 accumulation) vs the double
 * reference on identical weights: relative error per row ~1e-6 in practice; 1e-4 leaves
 * room for other summation orders while any real mistake (a wrong rotation, a missing
 * norm, a wrong head mapping) gives errors of order 1. */
#define TOL 1e-4

static void check_single_sequence(const tcfg *c, const llmrt_quant_ref *quant_in, int *forwards)
{
    cpu_open();
    fckpt *f = make_ckpt(c, 1234 + (uint64_t)c->dtype);
    enum { T = 11 };
    int32_t ids[T];
    for (int i = 0; i < T; i++)
        ids[i] = (i * 37 + 5) % c->vocab;
    double *ref = malloc((size_t)T * c->vocab * sizeof *ref);
    ref_forward(f, c, ids, T, ref);

    llmrt_quant q = {.be = cpu};
    llmrt_quant_ref qref = {&fq_vtable, &q, "fake"};
    llmrt_model *m = create(f, &cpu, quant_in ? &qref : NULL, 16, 2);
    llmrt_model_info info;
    mvt->info(m, &info);
    ck_assert_str_eq(info.arch, "Qwen3ForCausalLM");
    ck_assert_int_eq(info.head_dim, c->head_dim);
    ck_assert_int_eq(info.n_kv_heads, c->kv_heads);
    ck_assert_int_eq(info.vocab, c->vocab);
    ck_assert(info.weight_bytes > 0);
    fk_free(f); /* the model must not point into the checkpoint */

    kvbuf kb;
    kv_alloc(&cpu, c, &kb);
    float *logits = malloc((size_t)T * c->vocab * sizeof *logits);
    int seq_len = T, qlen = T;
    run_step(m, &cpu, &kb, c, 1, &seq_len, &qlen, ids, 1, logits);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double e = rel_err(logits + (size_t)t * c->vocab, ref + (size_t)t * c->vocab, c->vocab);
        ck_assert_msg(e < TOL, "position %d: relative error %.3g (tolerance %.0e)", t, e, TOL);
        worst = fmax(worst, e);
    }
    printf("max relative error %.3g over %d positions\n", worst, T);
    if (forwards)
        *forwards = q.forwards;
    kv_free(&cpu, c, &kb);
    mvt->destroy(m);
    free(logits);
    free(ref);
    cpu_close();
}

START_TEST(test_forward_bf16)
{
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    check_single_sequence(&c, NULL, NULL);
}
END_TEST

START_TEST(test_forward_f32_tied)
{
    tcfg c = tiny(LLMRT_DTYPE_F32);
    c.tie = 1;
    c.decoy_lm_head = 1;
    c.rope_parameters = 1;
    c.theta = 10000.0;
    check_single_sequence(&c, NULL, NULL);
}
END_TEST

START_TEST(test_forward_quant)
{
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    c.fake_quant = 1;
    int forwards = 0;
    llmrt_quant_ref dummy = {0};
    check_single_sequence(&c, &dummy, &forwards);
    /* 7 linears per layer go through the quant plugin, except layer 1's dense down_proj */
    ck_assert_int_eq(forwards, 7 * c.layers - 1);
}
END_TEST

START_TEST(test_forward_gather)
{
    cpu_open();
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    c.inter = 40;
    fckpt *f = make_ckpt(&c, 99);
    enum { L0 = 5, L1 = 8 };
    int32_t s0[L0 + 1], s1[L1 + 1];
    for (int i = 0; i <= L0; i++)
        s0[i] = (i * 13 + 3) % c.vocab;
    for (int i = 0; i <= L1; i++)
        s1[i] = (i * 29 + 11) % c.vocab;
    double *r0 = malloc((size_t)(L0 + 1) * c.vocab * sizeof *r0);
    double *r1 = malloc((size_t)(L1 + 1) * c.vocab * sizeof *r1);
    ref_forward(f, &c, s0, L0 + 1, r0);
    ref_forward(f, &c, s1, L1 + 1, r1);
    llmrt_model *m = create(f, &cpu, NULL, L0 + L1, 2);
    fk_free(f);
    kvbuf kb;
    kv_alloc(&cpu, &c, &kb);
    float *logits = malloc((size_t)2 * c.vocab * sizeof *logits);

    /* prefill both prompts in one batch: logits of each last row */
    int32_t ids[L0 + L1];
    memcpy(ids, s0, L0 * sizeof *ids);
    memcpy(ids + L0, s1, L1 * sizeof *ids);
    int lens[2] = {L0, L1}, q[2] = {L0, L1};
    run_step(m, &cpu, &kb, &c, 2, lens, q, ids, 0, logits);
    double e0 = rel_err(logits, r0 + (size_t)(L0 - 1) * c.vocab, c.vocab);
    double e1 = rel_err(logits + c.vocab, r1 + (size_t)(L1 - 1) * c.vocab, c.vocab);
    ck_assert_msg(e0 < TOL && e1 < TOL, "prefill: relative errors %.3g %.3g", e0, e1);

    /* decode one more token each, attending to the cached prefix */
    int32_t next[2] = {s0[L0], s1[L1]};
    int lens2[2] = {L0 + 1, L1 + 1}, q2[2] = {1, 1};
    run_step(m, &cpu, &kb, &c, 2, lens2, q2, next, 0, logits);
    e0 = rel_err(logits, r0 + (size_t)L0 * c.vocab, c.vocab);
    e1 = rel_err(logits + c.vocab, r1 + (size_t)L1 * c.vocab, c.vocab);
    ck_assert_msg(e0 < TOL && e1 < TOL, "decode: relative errors %.3g %.3g", e0, e1);

    kv_free(&cpu, &c, &kb);
    mvt->destroy(m);
    free(logits), free(r0), free(r1);
    cpu_close();
}
END_TEST

/* backend-cpu behind a vtable of its own whose extension() answers "llmrt.fused" with
 * backend-cpu's fused ops wrapped to count their calls (or, with wrap.offer_fused = 0, not at
 * all), so the test sees which ops the model took; other extensions are backend-cpu's. */
static struct {
    llmrt_backend_vtable vt;
    const llmrt_fused_ops *cpu_fused; /* backend-cpu's own table */
    int offer_fused;
    int add_rmsnorm, qk_norm_rope_store, swiglu; /* calls */
} wrap;

static llmrt_status cf_add_rmsnorm(llmrt_backend *b, float *out, float *x, const float *res,
                                   const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                                   llmrt_error *err)
{
    wrap.add_rmsnorm++;
    return wrap.cpu_fused->add_rmsnorm(b, out, x, res, w, rows, d, eps, err);
}

static llmrt_status cf_qk_norm_rope_store(llmrt_backend *b, float *q_out, const float *qkv,
                                          const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                          const int32_t *positions, const int32_t *slot_mapping,
                                          int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                          int32_t head_dim, float eps, float theta, void *k_cache,
                                          void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err)
{
    wrap.qk_norm_rope_store++;
    return wrap.cpu_fused->qk_norm_rope_store(b, q_out, qkv, q_norm, k_norm, positions,
                                              slot_mapping, n, n_heads, n_kv_heads, head_dim, eps,
                                              theta, k_cache, v_cache, kv_dtype, err);
}

static llmrt_status cf_swiglu(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                              llmrt_error *err)
{
    wrap.swiglu++;
    return wrap.cpu_fused->swiglu(b, out, gu, n, d, err);
}

static const llmrt_fused_ops counting_fused = {sizeof(llmrt_fused_ops), cf_add_rmsnorm,
                                               cf_qk_norm_rope_store, cf_swiglu};

static const void *wrap_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    if (name && strcmp(name, LLMRT_EXT_FUSED) == 0)
        return wrap.offer_fused && version <= LLMRT_EXT_FUSED_VERSION ? &counting_fused : NULL;
    return llmrt_backend_extension(cpu_vt, b, name, version);
}

/* The wrapped backend over the open backend-cpu instance (cpu_open first). */
static llmrt_backend_ref wrap_cpu(int offer_fused)
{
    wrap.vt = *cpu_vt;
    wrap.vt.extension = wrap_extension;
    wrap.cpu_fused = llmrt_backend_extension(cpu_vt, cpu.b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
    ck_assert_ptr_nonnull(wrap.cpu_fused);
    wrap.offer_fused = offer_fused;
    wrap.add_rmsnorm = wrap.qk_norm_rope_store = wrap.swiglu = 0;
    return (llmrt_backend_ref){&wrap.vt, cpu.b, "cpu+counting"};
}

static int fused_calls(void) { return wrap.add_rmsnorm + wrap.qk_norm_rope_store + wrap.swiglu; }

/* fuse = auto (fused q/k/v and gate/up projections and the backend's fused ops, which it
 * takes: every fused op is called) and fuse = off (separate projections and ops: none is)
 * compute the same logits: two sequences prefilled in one batch, then two decode steps, for a
 * dense (bf16) and an f32 tied checkpoint. Also the reference says both are right, and
 * fuse = auto on a backend without the "llmrt.fused" extension falls back to the separate ops:
 * the same bits as fuse = off. */
static void check_fused_vs_separate(tcfg c)
{
    cpu_open();
    fckpt *f = make_ckpt(&c, 77 + (uint64_t)c.dtype);
    enum { L0 = 6, L1 = 4, STEPS = 2, NM = 3 };
    int32_t s0[L0 + STEPS], s1[L1 + STEPS];
    for (int i = 0; i < L0 + STEPS; i++)
        s0[i] = (i * 17 + 2) % c.vocab;
    for (int i = 0; i < L1 + STEPS; i++)
        s1[i] = (i * 23 + 9) % c.vocab;
    double *r0 = malloc((size_t)(L0 + STEPS) * c.vocab * sizeof *r0);
    double *r1 = malloc((size_t)(L1 + STEPS) * c.vocab * sizeof *r1);
    ref_forward(f, &c, s0, L0 + STEPS, r0);
    ref_forward(f, &c, s1, L1 + STEPS, r1);
    llmrt_model_params params = {.max_tokens = L0 + L1, .max_seqs = 2};
    const char *keys[] = {"fuse"}, *auto_v[] = {"auto"}, *off_v[] = {"off"}, *where[] = {"test"};
    llmrt_section sec_auto = {"model.qwen3", 1, keys, auto_v, where};
    llmrt_section sec_off = {"model.qwen3", 1, keys, off_v, where};
    /* m[0]: fuse = auto, m[1]: fuse = off, m[2]: fuse = auto without the extension (the model
     * looks for it at create) */
    llmrt_model *m[NM] = {NULL, NULL, NULL};
    llmrt_error err = {0};
    llmrt_backend_ref be = wrap_cpu(0);
    ck_assert_msg(mvt->create(&host, &sec_auto, &f->ck, &be, NULL, &params, &m[2], &err) == LLMRT_OK,
                  "create (fuse = auto, no fused ops): %s", err.msg);
    be = wrap_cpu(1);
    ck_assert_msg(mvt->create(&host, &sec_auto, &f->ck, &be, NULL, &params, &m[0], &err) == LLMRT_OK,
                  "create (fuse = auto): %s", err.msg);
    ck_assert_msg(mvt->create(&host, &sec_off, &f->ck, &be, NULL, &params, &m[1], &err) == LLMRT_OK,
                  "create (fuse = off): %s", err.msg);
    fk_free(f);
    kvbuf kb[NM];
    float *logits[NM];
    for (int v = 0; v < NM; v++) {
        kv_alloc(&be, &c, &kb[v]);
        logits[v] = malloc((size_t)2 * c.vocab * sizeof(float));
    }
    double worst = 0;
    for (int step = 0; step <= STEPS; step++) {
        int32_t ids[L0 + L1];
        int lens[2], q[2];
        if (step == 0) {
            memcpy(ids, s0, L0 * sizeof *ids);
            memcpy(ids + L0, s1, L1 * sizeof *ids);
            lens[0] = q[0] = L0, lens[1] = q[1] = L1;
        } else {
            ids[0] = s0[L0 + step - 1], ids[1] = s1[L1 + step - 1];
            lens[0] = L0 + step, lens[1] = L1 + step, q[0] = q[1] = 1;
        }
        for (int v = 0; v < NM; v++) {
            const int a0 = wrap.add_rmsnorm, q0 = wrap.qk_norm_rope_store, w0 = wrap.swiglu;
            run_step(m[v], &be, &kb[v], &c, 2, lens, q, ids, 0, logits[v]);
            if (v == 0)
                ck_assert_msg(wrap.add_rmsnorm > a0 && wrap.qk_norm_rope_store > q0 &&
                                  wrap.swiglu > w0,
                              "step %d, fuse = auto: fused ops called %d %d %d times", step,
                              wrap.add_rmsnorm - a0, wrap.qk_norm_rope_store - q0, wrap.swiglu - w0);
            else
                ck_assert_msg(wrap.add_rmsnorm == a0 && wrap.qk_norm_rope_store == q0 &&
                                  wrap.swiglu == w0,
                              "step %d, model %d: took a fused op it should not", step, v);
        }
        ck_assert_msg(memcmp(logits[2], logits[1], (size_t)2 * c.vocab * sizeof(float)) == 0,
                      "step %d: fuse = auto without the fused ops differs from fuse = off", step);
        for (int sq = 0; sq < 2; sq++) {
            const float *a = logits[0] + (size_t)sq * c.vocab, *b = logits[1] + (size_t)sq * c.vocab;
            double num = 0, den = 0;
            for (int i = 0; i < c.vocab; i++) {
                num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
                den += (double)b[i] * b[i];
            }
            const double e = sqrt(num / (den > 0 ? den : 1));
            worst = fmax(worst, e);
            ck_assert_msg(e < 1e-6, "step %d sequence %d: fused vs separate relative error %.3g", step,
                          sq, e);
            const double *ref = sq == 0 ? r0 + (size_t)(lens[0] - 1) * c.vocab
                                        : r1 + (size_t)(lens[1] - 1) * c.vocab;
            const double er = rel_err(a, ref, c.vocab);
            ck_assert_msg(er < TOL, "step %d sequence %d: fused vs reference %.3g", step, sq, er);
        }
    }
    printf("fused vs separate: max relative difference %.3g (%d fused op calls)\n", worst,
           fused_calls());
    for (int v = 0; v < NM; v++) {
        kv_free(&be, &c, &kb[v]);
        mvt->destroy(m[v]);
        free(logits[v]);
    }
    free(r0), free(r1);
    cpu_close();
}

START_TEST(test_fused)
{
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    c.inter = 40;
    check_fused_vs_separate(c);
    c = tiny(LLMRT_DTYPE_F32);
    c.tie = 1;
    check_fused_vs_separate(c);
}
END_TEST

/* ------------------------------------------------------------------ greedy_head */

/* backend-cpu plus a fake "llmrt.argmax_head" extension (gemm + argmax underneath) that
 * counts its calls, so the test sees when the model uses it: qwen3's forward_argmax must give
 * the argmax of forward's logits whether it takes the head (greedy_head = auto, the backend
 * offers the extension), or lm_head + argmax (greedy_head = off, or the backend refuses or
 * fails to make the head, or offers no such extension). */
static llmrt_backend_vtable head_vt;
static struct {
    int offer; /* head_vt's extension() answers "llmrt.argmax_head" */
    int creates, forwards, destroys, last_n, refuse;
    const llmrt_tensor *w;
} hs;
struct llmrt_argmax_head {
    llmrt_tensor w;
    int32_t max_rows;
};

static llmrt_status fh_create(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                              llmrt_argmax_head **out, llmrt_error *err)
{
    if (hs.refuse)
        return llmrt_fail(err, (llmrt_status)hs.refuse, "fake head: refused");
    llmrt_argmax_head *h = malloc(sizeof *h);
    h->w = *w;
    h->max_rows = max_rows;
    hs.creates++;
    *out = h;
    return LLMRT_OK;
}

static llmrt_status fh_forward(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                               const float *x, int32_t n, llmrt_error *err)
{
    ck_assert(n >= 1 && n <= h->max_rows);
    hs.forwards++;
    hs.last_n = n;
    float *logits = malloc((size_t)n * (size_t)h->w.shape[0] * sizeof *logits);
    llmrt_status st = cpu_vt->gemm(b, logits, x, &h->w, n, err);
    if (st == LLMRT_OK)
        st = cpu_vt->argmax(b, out, logits, n, (int32_t)h->w.shape[0], err);
    free(logits);
    return st;
}

static void fh_destroy(llmrt_backend *b, llmrt_argmax_head *h)
{
    hs.destroys++;
    free(h);
}

static const llmrt_argmax_head_ops fake_head = {sizeof(llmrt_argmax_head_ops), fh_create,
                                                fh_forward, fh_destroy};

static const void *head_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    if (name && strcmp(name, LLMRT_EXT_ARGMAX_HEAD) == 0)
        return hs.offer && version <= LLMRT_EXT_ARGMAX_HEAD_VERSION ? &fake_head : NULL;
    return llmrt_backend_extension(cpu_vt, b, name, version);
}

static int32_t host_argmax(const float *row, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* Two sequences prefilled, then two decode steps, on a model made with `value` for
 * greedy_head: forward_argmax's ids equal the argmax of forward's logits every step. */
static void check_greedy_head(const char *value, int offer, int refuse, int expect_head)
{
    cpu_open();
    head_vt = *cpu_vt;
    head_vt.extension = head_extension;
    llmrt_backend_ref be = {&head_vt, cpu.b, "cpu+head"};
    memset(&hs, 0, sizeof hs);
    hs.offer = offer;
    hs.refuse = refuse;
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    fckpt *f = make_ckpt(&c, 4321);
    enum { L0 = 5, L1 = 3, STEPS = 2 };
    llmrt_model_params params = {.max_tokens = L0 + L1, .max_seqs = 2};
    const char *keys[] = {"greedy_head"}, *vals[] = {value}, *where[] = {"test"};
    llmrt_section sec = {"model.qwen3", 1, keys, vals, where};
    llmrt_model *m = NULL;
    llmrt_error err = {0};
    ck_assert_msg(mvt->create(&host, &sec, &f->ck, &be, NULL, &params, &m, &err) == LLMRT_OK,
                  "create (greedy_head = %s): %s", value, err.msg);
    fk_free(f);
    ck_assert_int_eq(hs.creates, expect_head);
    kvbuf kb;
    kv_alloc(&be, &c, &kb);
    float logits[2 * 96];
    ck_assert_int_le(c.vocab, 96);
    for (int step = 0; step <= STEPS; step++) {
        int32_t ids[L0 + L1];
        int lens[2], q[2];
        for (int i = 0; i < L0 + L1; i++)
            ids[i] = (i * 31 + step * 7 + 3) % c.vocab;
        if (step == 0)
            lens[0] = q[0] = L0, lens[1] = q[1] = L1;
        else
            lens[0] = L0 + step, lens[1] = L1 + step, q[0] = q[1] = 1;
        int32_t got[2] = {-1, -1};
        run_step(m, &be, &kb, &c, 2, lens, q, ids, 0, logits);
        run_step_ex(m, &be, &kb, &c, 2, lens, q, ids, 0, NULL, got);
        for (int sq = 0; sq < 2; sq++)
            ck_assert_msg(got[sq] == host_argmax(logits + sq * c.vocab, c.vocab),
                          "greedy_head = %s, step %d, sequence %d: forward_argmax %d, argmax %d",
                          value, step, sq, got[sq], host_argmax(logits + sq * c.vocab, c.vocab));
    }
    ck_assert_int_eq(hs.forwards, expect_head ? STEPS + 1 : 0);
    if (expect_head)
        ck_assert_int_eq(hs.last_n, 2);
    /* all_logits is not an argmax step */
    int32_t dummy[2];
    llmrt_batch b = {.n_tokens = 1, .n_seqs = 1, .all_logits = 1};
    ck_assert_int_eq(mvt->forward_argmax(m, &b, &kb.kv, logits, dummy, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "all_logits"), "%s", err.msg);
    kv_free(&be, &c, &kb);
    mvt->destroy(m);
    ck_assert_int_eq(hs.destroys, expect_head);
    cpu_close();
}

START_TEST(test_greedy_head)
{
    check_greedy_head("auto", 1, 0, 1);
    check_greedy_head("off", 1, 0, 0);
    /* the backend refuses this lm_head, or cannot make the copy: lm_head + argmax */
    check_greedy_head("auto", 1, LLMRT_ERR_UNSUPPORTED, 0);
    check_greedy_head("auto", 1, LLMRT_ERR_NOMEM, 0);
    /* the backend offers no argmax_head extension: lm_head + argmax */
    check_greedy_head("auto", 0, 0, 0);
}
END_TEST

/* ------------------------------------------------------------------ errors */

/* A mock backend whose ops exist but do nothing: creation gets past the op check, and
 * loading errors can be tested without the CPU backend. */
static llmrt_status s_embedding(llmrt_backend *b, float *o, const llmrt_tensor *t, const int32_t *i,
                                int32_t n, llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_rmsnorm(llmrt_backend *b, float *o, const float *x, const llmrt_tensor *w,
                              int32_t r, int32_t d, float eps, llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_rope(llmrt_backend *b, float *x, const int32_t *p, int32_t n, int32_t h,
                           int32_t d, float th, llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_kv_store(llmrt_backend *b, void *kc, void *vc, llmrt_dtype t, const float *k,
                               const float *v, const int32_t *s, int32_t n, int32_t h, int32_t d,
                               llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_attention(llmrt_backend *b, float *o, const float *q,
                                const llmrt_attn_params *p, llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_silu_mul(llmrt_backend *b, float *o, const float *g, const float *u, int64_t n,
                               llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_add(llmrt_backend *b, float *o, const float *a, const float *c, int64_t n,
                          llmrt_error *e) { return LLMRT_OK; }
static llmrt_status s_gemm(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                           int32_t n, llmrt_error *e) { return LLMRT_OK; }

static llmrt_backend_vtable stub_vt;
static llmrt_backend_ref stub_backend(void)
{
    llmrt_backend_ref r = mock_backend_new(-1, 1);
    stub_vt = mock_backend_vtable;
    stub_vt.embedding = s_embedding, stub_vt.rmsnorm = s_rmsnorm, stub_vt.rope = s_rope;
    stub_vt.kv_store = s_kv_store, stub_vt.attention = s_attention, stub_vt.silu_mul = s_silu_mul;
    stub_vt.add = s_add, stub_vt.gemm = s_gemm;
    r.vt = &stub_vt;
    r.name = "stub";
    return r;
}

/* create() must fail with `code` and a message containing every given substring. */
static void expect_fail(fckpt *f, const llmrt_backend_ref *be, const llmrt_quant_ref *q,
                        const llmrt_section *sec, llmrt_status code, ...)
{
    llmrt_model_params params = {.max_tokens = 8, .max_seqs = 2};
    llmrt_model *m = NULL;
    llmrt_error err = {0};
    llmrt_section empty = {.name = "model.qwen3"};
    llmrt_status st = mvt->create(&host, sec ? sec : &empty, &f->ck, be, q, &params, &m, &err);
    ck_assert_msg(st == code, "expected status %d, got %d (%s)", code, st, err.msg);
    ck_assert(m == NULL);
    va_list ap;
    va_start(ap, code);
    for (const char *s; (s = va_arg(ap, const char *));)
        ck_assert_msg(strstr(err.msg, s), "message \"%s\" lacks \"%s\"", err.msg, s);
    va_end(ap);
    printf("ok: %s\n", err.msg);
}

START_TEST(test_probe)
{
    llmrt_error err = {0};
    ck_assert_int_eq(mvt->probe("{\"architectures\": [\"Qwen3ForCausalLM\"]}", &err), LLMRT_OK);
    ck_assert_int_eq(mvt->probe("{\"architectures\": [\"LlamaForCausalLM\"]}", &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_int_eq(mvt->probe("{}", &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_int_eq(mvt->probe("not json", &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_int_eq(mvt->probe(NULL, &err), LLMRT_ERR_NOT_FOUND);
}
END_TEST

START_TEST(test_load_errors)
{
    llmrt_backend_ref be = stub_backend();
    tcfg c = tiny(LLMRT_DTYPE_BF16);

    /* a loadable checkpoint loads on the stub backend, and frees everything it took */
    fckpt *f = make_ckpt(&c, 5);
    llmrt_model *m = create(f, &be, NULL, 8, 2);
    mvt->destroy(m);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0);

    /* missing tensor */
    fk_remove(f, "model.layers.1.mlp.up_proj.weight");
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_NOT_FOUND, "model.layers.1.mlp.up_proj.weight", NULL);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0); /* partial load freed */
    fk_free(f);

    /* shape mismatch with config.json */
    f = make_ckpt(&c, 5);
    ftensor *t = fk_get(f, "model.layers.0.self_attn.k_proj.weight");
    t->shape[0] = 16, t->shape[1] = 64; /* same element count, wrong shape */
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_FORMAT, "model.layers.0.self_attn.k_proj.weight",
                "[16, 64]", "[32, 32]", "num_key_value_heads * head_dim", "does not match config.json",
                NULL);
    fk_free(f);

    /* config.json disagrees with the tensors (it says head_dim 8; the tensors have 16) */
    f = make_ckpt(&c, 5);
    c.head_dim = 8;
    write_config(f, &c);
    c.head_dim = 16;
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_FORMAT, "model.layers.0.self_attn.q_proj.weight",
                "[64, 32]", "[32, 32]", "does not match config.json", NULL);
    fk_free(f);

    /* a dense weight in an integer dtype */
    f = make_ckpt(&c, 5);
    t = fk_get(f, "model.norm.weight");
    t->dtype = LLMRT_DTYPE_I16;
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_UNSUPPORTED, "model.norm.weight", "I16", NULL);
    fk_free(f);

    /* untied without lm_head.weight */
    f = make_ckpt(&c, 5);
    fk_remove(f, "lm_head.weight");
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_NOT_FOUND, "lm_head.weight", NULL);
    fk_free(f);

    /* quantized checkpoint with a linear that is neither quantized nor dense */
    c.fake_quant = 1;
    f = make_ckpt(&c, 5);
    fk_remove(f, "model.layers.1.mlp.down_proj.weight");
    llmrt_quant q = {.be = be};
    llmrt_quant_ref qref = {&fq_vtable, &q, "fake"};
    expect_fail(f, &be, &qref, NULL, LLMRT_ERR_NOT_FOUND, "model.layers.1.mlp.down_proj", "fake",
                "no dense model.layers.1.mlp.down_proj.weight", NULL);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0);
    fk_free(f);
    c.fake_quant = 0;

    /* a bad [model.qwen3] value (unknown keys are the host's to reject: the keys are declared
     * in the descriptor; tests/integration/test_conf.sh) */
    f = make_ckpt(&c, 5);
    const char *where[] = {"conf/test.ini:7"};
    const char *gkeys[] = {"greedy_head"}, *gvals[] = {"always"};
    llmrt_section gsec = {"model.qwen3", 1, gkeys, gvals, where};
    expect_fail(f, &be, NULL, &gsec, LLMRT_ERR_INVALID_ARG, "conf/test.ini:7", "greedy_head",
                "always", "auto", NULL);

    /* config variants the plugin does not implement */
    char *json = strdup(f->config);
    char *p = strstr(f->config, "\"attention_bias\": false");
    memcpy(p, "\"attention_bias\": true ", strlen("\"attention_bias\": false"));
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_UNSUPPORTED, "attention_bias", NULL);
    strcpy(f->config, json);
    p = strstr(f->config, "\"rope_scaling\": null");
    ck_assert(p);
    snprintf(f->config + (p - f->config), sizeof f->config - (size_t)(p - f->config),
             "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}");
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_UNSUPPORTED, "yarn", NULL);
    strcpy(f->config, "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 64}");
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_FORMAT, "vocab_size", "config.json", NULL);
    free(json);
    fk_free(f);
    mock_backend_free(&be);
}
END_TEST

/* The stub's device memory with a ceiling: a larger request fails as a real backend's would. */
static llmrt_status capped_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err)
{
    if (bytes > (1u << 30))
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "stub: out of memory allocating %zu bytes", bytes);
    return mock_backend_vtable.dev_alloc(b, bytes, out, err);
}

/* config.json values that would size absurd allocations: refused naming the key, before the
 * allocation they would size. */
START_TEST(test_absurd_config)
{
    llmrt_backend_ref be = stub_backend();
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    fckpt *f = make_ckpt(&c, 5);

    /* num_hidden_layers sizes the layer array first: the checkpoint must hold the last layer */
    c.layers = 1000000000;
    write_config(f, &c);
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_FORMAT, "config.json: num_hidden_layers is 1000000000",
                "no model.layers.999999999.input_layernorm.weight", "it holds layers 0 to 1", NULL);
    ck_assert_int_eq(mock_backend_get_stats(&be).dev_alloc_calls, 0);
    ck_assert_int_eq(f->finds, 0);
    c.layers = 3;
    write_config(f, &c);
    int (*has)(void *, const char *) = f->ck.has;
    f->ck.has = NULL; /* has is optional: find answers too */
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_FORMAT, "num_hidden_layers is 3",
                "no model.layers.2.input_layernorm.weight", "it holds layers 0 to 1", NULL);
    f->ck.has = has;
    ck_assert_int_eq(mock_backend_get_stats(&be).dev_alloc_calls, 0);
    c.layers = 2;

    /* huge but consistent: the tensor really is [vocab_size, hidden_size] = 16 GiB (its data
     * is never read: the allocation fails first); the failure names the tensor and keys */
    c.vocab = 1 << 28;
    write_config(f, &c);
    ftensor *t = fk_get(f, "model.embed_tokens.weight");
    t->shape[0] = c.vocab;
    t->bytes = (size_t)c.vocab * (size_t)c.hidden * 2;
    stub_vt.dev_alloc = capped_alloc;
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_NOMEM, "tensor model.embed_tokens.weight",
                "[vocab_size, hidden_size] = [268435456, 32]", "16.0 GiB",
                "stub: out of memory allocating 17179869184 bytes", NULL);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0);
    fk_free(f);
    mock_backend_free(&be);
}
END_TEST

START_TEST(test_missing_op)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1); /* the plain mock has no ops at all */
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    fckpt *f = make_ckpt(&c, 5);
    expect_fail(f, &be, NULL, NULL, LLMRT_ERR_UNSUPPORTED, "backend 'mock'", "'embedding'", NULL);
    llmrt_backend_ref st = stub_backend();
    stub_vt.rope = NULL;
    expect_fail(f, &st, NULL, NULL, LLMRT_ERR_UNSUPPORTED, "'rope'", NULL);
    ck_assert_int_eq(f->finds, 0); /* rejected before loading anything */
    fk_free(f);
    mock_backend_free(&be);
    mock_backend_free(&st);
}
END_TEST

START_TEST(test_forward_args)
{
    llmrt_backend_ref be = stub_backend();
    tcfg c = tiny(LLMRT_DTYPE_BF16);
    fckpt *f = make_ckpt(&c, 5);
    llmrt_model *m = create(f, &be, NULL, 8, 2);
    fk_free(f);
    kvbuf kb;
    kv_alloc(&be, &c, &kb);
    int32_t ids[16] = {0};
    float logits[96 * 16];
    llmrt_batch b = {.n_tokens = 9, .n_seqs = 1, .token_ids = ids, .positions = ids,
                     .slot_mapping = ids, .query_start = ids, .seq_lens = ids, .block_tables = ids,
                     .logits_rows = ids, .max_blocks_per_seq = 1, .max_seq_len = 9, .max_query_len = 9};
    llmrt_error err = {0};
    ck_assert_int_eq(mvt->forward(m, &b, &kb.kv, logits, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "9 token rows") && strstr(err.msg, "1..8"), "%s", err.msg);
    b.n_tokens = 4;
    b.n_seqs = 3;
    ck_assert_int_eq(mvt->forward(m, &b, &kb.kv, logits, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "3 sequences"), "%s", err.msg);
    b.n_seqs = 1;
    kb.kv.head_dim = 8;
    ck_assert_int_eq(mvt->forward(m, &b, &kb.kv, logits, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "KV cache geometry"), "%s", err.msg);
    kb.kv.head_dim = c.head_dim;
    ck_assert_int_eq(mvt->forward(m, &b, &kb.kv, logits, &err), LLMRT_OK);
    kv_free(&be, &c, &kb);
    mvt->destroy(m);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0);
    mock_backend_free(&be);
}
END_TEST

int main(int argc, char **argv)
{
    const char *group = argc > 1 ? argv[1] : "errors";
    static const char *const kv[] = {NULL};
    host = mock_host(kv);
    char *path = tu_plugin_path("model-qwen3.so");
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    if (!d) {
        fprintf(stderr, "cannot load %s\n", path);
        return 1;
    }
    free(path);
    if (d->kind != LLMRT_PLUGIN_MODEL) {
        fprintf(stderr, "model-qwen3.so: descriptor 0 is of kind %d, not model\n", (int)d->kind);
        return 1;
    }
    mvt = d->vtable;

    Suite *s = suite_create("model-qwen3");
    TCase *tc = tcase_create(group);
    tcase_set_timeout(tc, 120);
    if (strcmp(group, "errors") == 0) {
        tcase_add_test(tc, test_probe);
        tcase_add_test(tc, test_load_errors);
        tcase_add_test(tc, test_absurd_config);
        tcase_add_test(tc, test_missing_op);
        tcase_add_test(tc, test_forward_args);
    } else {
        if (!find_cpu()) {
            printf("SKIP: backend-cpu.so is not built yet (looked in $LLMRT_PLUGIN_DIR)\n");
            return 77;
        }
        if (strcmp(group, "forward_bf16") == 0)
            tcase_add_test(tc, test_forward_bf16);
        else if (strcmp(group, "forward_f32_tied") == 0)
            tcase_add_test(tc, test_forward_f32_tied);
        else if (strcmp(group, "forward_quant") == 0)
            tcase_add_test(tc, test_forward_quant);
        else if (strcmp(group, "forward_gather") == 0)
            tcase_add_test(tc, test_forward_gather);
        else if (strcmp(group, "fused") == 0)
            tcase_add_test(tc, test_fused);
        else if (strcmp(group, "greedy_head") == 0)
            tcase_add_test(tc, test_greedy_head);
        else {
            fprintf(stderr, "unknown test group %s\n", group);
            return 2;
        }
    }
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
