/* stats.c — seeded RNG, quantiles, summaries and the cluster bootstrap (see stats.h).
 *
 * The bootstrap is the percentile method: resample clusters with replacement, pool their
 * values, take the median of each side, and read the interval off the sorted resampled
 * ratios. Medians use quickselect, so 2000 resamples of a few thousand values take
 * milliseconds. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* ---- RNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void llmrt_rng_seed(llmrt_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t llmrt_rng_next(llmrt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t llmrt_rng_below(llmrt_rng *r, uint64_t n)
{
    /* Rejection sampling over the largest multiple of n that fits in 2^64. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do
        v = llmrt_rng_next(r);
    while (v >= limit);
    return v % n;
}

double llmrt_rng_uniform(llmrt_rng *r) { return (double)(llmrt_rng_next(r) >> 11) * 0x1.0p-53; }

double llmrt_rng_normal(llmrt_rng *r)
{
    double u1 = 1.0 - llmrt_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = llmrt_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---- quantiles ---- */

double llmrt_stats_quantile_sorted(const double *x, size_t n, double q)
{
    if (n == 0)
        return NAN;
    if (q <= 0)
        return x[0];
    if (q >= 1)
        return x[n - 1];
    double h = (double)(n - 1) * q;
    size_t lo = (size_t)floor(h);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return x[lo] + (h - (double)lo) * (x[hi] - x[lo]);
}

static void swap_d(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange x[n] so that x[k] is the k-th smallest, everything before it <= it and
 * everything after >= it (Hoare selection, median-of-three pivot). */
static void select_kth(double *x, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (hi > lo) {
        size_t mid = lo + (hi - lo) / 2;
        if (x[mid] < x[lo])
            swap_d(&x[mid], &x[lo]);
        if (x[hi] < x[lo])
            swap_d(&x[hi], &x[lo]);
        if (x[hi] < x[mid])
            swap_d(&x[hi], &x[mid]);
        double pivot = x[mid];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] < pivot)
                i++;
            while (x[j] > pivot)
                j--;
            if (i <= j) {
                swap_d(&x[i], &x[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        /* now x[lo..j] <= pivot <= x[i..hi], and j < i */
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return; /* j < k < i: x[k] == pivot, in place */
    }
}

double llmrt_stats_median_inplace(double *x, size_t n)
{
    if (n == 0)
        return NAN;
    size_t k = n / 2;
    select_kth(x, n, k);
    if (n % 2)
        return x[k];
    double below = x[0]; /* the largest of x[0..k-1] is the (k-1)-th smallest */
    for (size_t i = 1; i < k; i++)
        if (x[i] > below)
            below = x[i];
    return 0.5 * (below + x[k]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void llmrt_stats_sort(double *x, size_t n) { qsort(x, n, sizeof *x, cmp_double); }

llmrt_status llmrt_stats_summarize(const double *x, size_t n, llmrt_summary *out,
                                   llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    double *s = NULL;
    out->n = n;
    out->mean = out->stdev = out->min = out->p50 = out->p90 = out->p99 = out->max = NAN;
    if (n == 0)
        return LLMRT_OK;
    s = malloc(n * sizeof *s);
    TRY_ALLOC(err, s, "a sorted copy of a sample");
    memcpy(s, x, n * sizeof *s);
    llmrt_stats_sort(s, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (s[i] - mean) * (s[i] - mean);
    out->mean = mean;
    out->stdev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
    out->min = s[0];
    out->max = s[n - 1];
    out->p50 = llmrt_stats_quantile_sorted(s, n, 0.50);
    out->p90 = llmrt_stats_quantile_sorted(s, n, 0.90);
    out->p99 = llmrt_stats_quantile_sorted(s, n, 0.99);
cleanup:
    free(s);
    return st;
}

/* ---- cluster bootstrap ---- */

void llmrt_bootstrap_opts_init(llmrt_bootstrap_opts *o)
{
    o->n_resamples = 2000;
    o->level = 0.95;
    o->seed = 0;
    o->paired = 0;
}

static size_t largest_cluster(const llmrt_clusters *c)
{
    size_t m = 0;
    for (size_t i = 0; i < c->n_clusters; i++)
        if (c->offsets[i + 1] - c->offsets[i] > m)
            m = c->offsets[i + 1] - c->offsets[i];
    return m;
}

/* Pool the clusters idx[0..n_clusters) into buf and return their median. */
static double pooled_median(const llmrt_clusters *c, const size_t *idx, double *buf)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_clusters; i++) {
        size_t b = c->offsets[idx[i]], e = c->offsets[idx[i] + 1];
        memcpy(buf + n, c->values + b, (e - b) * sizeof *buf);
        n += e - b;
    }
    return llmrt_stats_median_inplace(buf, n);
}

static llmrt_status check_clusters(const llmrt_clusters *c, const char *side, llmrt_error *err)
{
    if (c->n_clusters == 0 || c->offsets[c->n_clusters] == 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "bootstrap: side %s has no values", side);
    if (c->offsets[0] != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "bootstrap: side %s: offsets[0] is %zu, expected 0", side, c->offsets[0]);
    for (size_t i = 0; i < c->n_clusters; i++)
        if (c->offsets[i + 1] < c->offsets[i])
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "bootstrap: side %s: offsets decrease at cluster %zu", side, i);
    return LLMRT_OK;
}

llmrt_status llmrt_stats_bootstrap_median_diff(const llmrt_clusters *a, const llmrt_clusters *b,
                                               const llmrt_bootstrap_opts *opts,
                                               llmrt_rel_diff *out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    double *buf_a = NULL, *buf_b = NULL, *ratios = NULL;
    size_t *idx_a = NULL, *idx_b = NULL;
    memset(out, 0, sizeof *out);
    out->a = out->b = out->rel = out->lo = out->hi = NAN;

    TRY(check_clusters(a, "A", err));
    TRY(check_clusters(b, "B", err));
    if (opts->n_resamples < 10)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "bootstrap: %d resamples is too few (expected >= 10)",
             opts->n_resamples);
    if (!(opts->level > 0 && opts->level < 1))
        FAIL(err, LLMRT_ERR_INVALID_ARG, "bootstrap: confidence level %g is not in (0, 1)",
             opts->level);
    if (opts->paired && a->n_clusters != b->n_clusters)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "bootstrap: paired resampling needs equal cluster counts (A has %zu, B has %zu)",
             a->n_clusters, b->n_clusters);

    size_t cap_a = a->n_clusters * largest_cluster(a), cap_b = b->n_clusters * largest_cluster(b);
    buf_a = malloc(cap_a * sizeof *buf_a);
    buf_b = malloc(cap_b * sizeof *buf_b);
    idx_a = malloc(a->n_clusters * sizeof *idx_a);
    idx_b = malloc(b->n_clusters * sizeof *idx_b);
    ratios = malloc((size_t)opts->n_resamples * sizeof *ratios);
    TRY_ALLOC(err, buf_a && buf_b && idx_a && idx_b && ratios, "bootstrap buffers");

    /* point estimate: every cluster once */
    for (size_t i = 0; i < a->n_clusters; i++)
        idx_a[i] = i;
    for (size_t i = 0; i < b->n_clusters; i++)
        idx_b[i] = i;
    out->a = pooled_median(a, idx_a, buf_a);
    out->b = pooled_median(b, idx_b, buf_b);
    if (!(out->a > 0) || !isfinite(out->b))
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "bootstrap: the median of A is %g; a relative difference needs a positive, finite "
             "baseline", out->a);
    out->rel = (out->b - out->a) / out->a;

    llmrt_rng rng;
    llmrt_rng_seed(&rng, opts->seed);
    size_t kept = 0;
    for (int32_t r = 0; r < opts->n_resamples; r++) {
        for (size_t i = 0; i < a->n_clusters; i++)
            idx_a[i] = (size_t)llmrt_rng_below(&rng, a->n_clusters);
        if (opts->paired)
            memcpy(idx_b, idx_a, b->n_clusters * sizeof *idx_b);
        else
            for (size_t i = 0; i < b->n_clusters; i++)
                idx_b[i] = (size_t)llmrt_rng_below(&rng, b->n_clusters);
        double ma = pooled_median(a, idx_a, buf_a), mb = pooled_median(b, idx_b, buf_b);
        double q = (mb - ma) / ma;
        if (ma > 0 && isfinite(q))
            ratios[kept++] = q;
    }
    if (kept < 10)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "bootstrap: only %zu of %d resamples had a positive median of A", kept,
             opts->n_resamples);
    llmrt_stats_sort(ratios, kept);
    double tail = (1.0 - opts->level) / 2.0;
    out->lo = llmrt_stats_quantile_sorted(ratios, kept, tail);
    out->hi = llmrt_stats_quantile_sorted(ratios, kept, 1.0 - tail);
    out->n_resamples = (int32_t)kept;
    out->significant = out->lo > 0 || out->hi < 0;
cleanup:
    free(buf_a);
    free(buf_b);
    free(idx_a);
    free(idx_b);
    free(ratios);
    return st;
}

/* ---- verdicts over a family ---- */

llmrt_outcome llmrt_stats_outcome(double lo, double hi, double margin)
{
    if (lo > margin || hi < -margin)
        return LLMRT_OUTCOME_DIFFERENT;
    if (lo >= -margin && hi <= margin)
        return LLMRT_OUTCOME_EQUIVALENT;
    return LLMRT_OUTCOME_INCONCLUSIVE;
}

double llmrt_stats_bonferroni_level(double family_level, size_t m)
{
    return 1.0 - (1.0 - family_level) / (double)(m ? m : 1);
}

/* P(T+ <= t) for t = 0 .. N of the signed-rank statistic of n pairs, into cdf[N + 1]: the
 * exact distribution by the recurrence over ranks (each rank in or out with 1/2). */
static void signed_rank_cdf(int32_t n, double *cdf)
{
    const int64_t N = (int64_t)n * (n + 1) / 2;
    for (int64_t t = 0; t <= N; t++)
        cdf[t] = t == 0;
    for (int32_t i = 1; i <= n; i++) {
        int64_t top = (int64_t)i * (i + 1) / 2;
        for (int64_t t = top; t >= 0; t--)
            cdf[t] = 0.5 * (cdf[t] + (t >= i ? cdf[t - i] : 0));
    }
    for (int64_t t = 1; t <= N; t++)
        cdf[t] += cdf[t - 1];
}

/* P(T+ <= t) by the normal approximation with continuity correction. */
static double signed_rank_cdf_normal(int32_t n, double t)
{
    double mu = (double)n * (n + 1) / 4.0;
    double sd = sqrt((double)n * (n + 1) * (2.0 * n + 1) / 24.0);
    return 0.5 * erfc(-((t + 0.5 - mu) / sd) / sqrt(2.0));
}

#define EXACT_MAX_PAIRS 400
#define MAX_PAIRS 20000

/* k >= 1 such that P(T+ <= k - 1) <= (1 - level) / 2 is as large as it gets (0: none), and
 * the coverage 1 - 2 P(T+ <= k - 1) of [W_(k), W_(N + 1 - k)]. */
static int64_t critical_k(int32_t n, double level, double *coverage, llmrt_error *err,
                          llmrt_status *st)
{
    const int64_t N = (int64_t)n * (n + 1) / 2;
    const double alpha2 = (1.0 - level) / 2.0;
    int64_t k = 0;
    *st = LLMRT_OK;
    if (n <= EXACT_MAX_PAIRS) {
        double *cdf = malloc((size_t)(N + 1) * sizeof *cdf);
        if (!cdf) {
            *st = llmrt_fail(err, LLMRT_ERR_NOMEM, "signed-rank distribution of %d pairs", n);
            return 0;
        }
        signed_rank_cdf(n, cdf);
        while (k <= N / 2 && cdf[k] <= alpha2 * (1 + 1e-12))
            k++;
        *coverage = k ? 1.0 - 2.0 * cdf[k - 1] : 0;
        free(cdf);
    } else {
        int64_t lo = 0, hi = N / 2 + 1; /* P(T <= lo - 1) <= alpha2 < P(T <= hi - 1) */
        while (hi - lo > 1) {
            int64_t mid = (lo + hi) / 2;
            if (signed_rank_cdf_normal(n, (double)(mid - 1)) <= alpha2)
                lo = mid;
            else
                hi = mid;
        }
        k = lo;
        *coverage = k ? 1.0 - 2.0 * signed_rank_cdf_normal(n, (double)(k - 1)) : 0;
    }
    return k;
}

int32_t llmrt_stats_paired_min_pairs(double level)
{
    /* the widest interval, [W_(1), W_(N)], covers 1 - 2^(1-n) */
    int32_t n = 1;
    while (n < 64 && ldexp(1.0, 1 - n) > 1.0 - level)
        n++;
    return n;
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

llmrt_status llmrt_stats_paired_rel_diff(const double *a, const double *b, size_t n,
                                         double level, llmrt_paired_diff *out,
                                         llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    double *d = NULL, *w = NULL;
    memset(out, 0, sizeof *out);
    out->a = out->b = out->rel = out->lo = out->hi = NAN;
    if (!(level > 0 && level < 1))
        FAIL(err, LLMRT_ERR_INVALID_ARG, "paired interval: level %g is not in (0, 1)", level);
    int32_t need = llmrt_stats_paired_min_pairs(level);
    if (n < (size_t)need)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "%zu pairs give no interval at %.4g%%: at least %d are needed", n, 100 * level, need);
    if (n > MAX_PAIRS)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "paired interval: %zu pairs is more than %d", n,
             MAX_PAIRS);
    d = malloc(n * sizeof *d);
    const size_t N = n * (n + 1) / 2;
    w = malloc(N * sizeof *w);
    TRY_ALLOC(err, d && w, "the paired interval");
    for (size_t i = 0; i < n; i++) {
        if (!(a[i] > 0) || !(b[i] > 0) || !isfinite(a[i]) || !isfinite(b[i]))
            FAIL(err, LLMRT_ERR_INVALID_ARG,
                 "paired interval: pair %zu is (%g, %g); a relative change needs positive, "
                 "finite values", i, a[i], b[i]);
        d[i] = log(b[i] / a[i]);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++)
            w[k++] = 0.5 * (d[i] + d[j]);
    qsort(w, N, sizeof *w, cmp_dbl);
    double coverage = 0;
    int64_t c = critical_k((int32_t)n, level, &coverage, err, &st);
    if (st)
        goto cleanup;
    if (c < 1)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%zu pairs give no interval at %.4g%%", n, 100 * level);
    double hl = llmrt_stats_quantile_sorted(w, N, 0.5);
    out->rel = expm1(hl);
    out->lo = expm1(w[c - 1]);
    out->hi = expm1(w[N - (size_t)c]);
    out->coverage = coverage;
    out->n = (int32_t)n;
    out->significant = out->lo > 0 || out->hi < 0;
    memcpy(d, a, n * sizeof *d);
    out->a = llmrt_stats_median_inplace(d, n);
    memcpy(d, b, n * sizeof *d);
    out->b = llmrt_stats_median_inplace(d, n);
cleanup:
    free(d);
    free(w);
    return st;
}
