/* stats.h — the statistics behind `llmrt bench`: a seeded RNG, quantiles, summaries, and a
 * cluster bootstrap confidence interval for the relative difference of two medians.
 *
 * Why: a benchmark verdict ("B is 12% faster than A [10.8%, 13.5%]") is only as good as its
 * interval. Inter-token latencies of one request are correlated (they share a KV cache, a
 * prompt and whatever the machine was doing at that moment), so resampling single tokens
 * would give intervals that are far too narrow. Here whole clusters (requests, or batches of
 * concurrent requests) are resampled, keeping each cluster's values together. Everything is
 * seeded so the same data and seed always give the same interval. */
#ifndef LLMRT_BENCH_STATS_H
#define LLMRT_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

/* xoshiro256** seeded through splitmix64: fast, good, reproducible across platforms. */
typedef struct llmrt_rng {
    uint64_t s[4];
} llmrt_rng;

void llmrt_rng_seed(llmrt_rng *r, uint64_t seed);
uint64_t llmrt_rng_next(llmrt_rng *r);
/* Uniform integer in [0, n) without modulo bias; n >= 1. */
uint64_t llmrt_rng_below(llmrt_rng *r, uint64_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double llmrt_rng_uniform(llmrt_rng *r);
/* Standard normal (Box–Muller; one value per call). */
double llmrt_rng_normal(llmrt_rng *r);

/* Sort x[n] ascending (the input llmrt_stats_quantile_sorted wants). */
void llmrt_stats_sort(double *x, size_t n);
/* Quantile q in [0, 1] of ascending data x[n], linear interpolation between closest ranks
 * (Hyndman & Fan type 7, numpy's default): q = 0 is the min, q = 1 the max. NaN if n == 0. */
double llmrt_stats_quantile_sorted(const double *x, size_t n, double q);
/* Median of x[n] in O(n) expected time; reorders x. NaN if n == 0. */
double llmrt_stats_median_inplace(double *x, size_t n);

/* Summary of a sample. For n == 0 every field but n is NaN; stdev is the sample standard
 * deviation (n − 1 in the denominator), 0 for n == 1. */
typedef struct llmrt_summary {
    size_t n;
    double mean, stdev;
    double min, p50, p90, p99, max;
} llmrt_summary;

/* Summarize x[n] (x is not modified; a sorted copy is made). */
llmrt_status llmrt_stats_summarize(const double *x, size_t n, llmrt_summary *out,
                                   llmrt_error *err);

/* Values grouped in clusters: cluster i holds values[offsets[i] .. offsets[i + 1]).
 * offsets has n_clusters + 1 entries, offsets[0] == 0, non-decreasing. */
typedef struct llmrt_clusters {
    const double *values;   /* [offsets[n_clusters]] */
    const size_t *offsets;  /* [n_clusters + 1] */
    size_t n_clusters;
} llmrt_clusters;

typedef struct llmrt_bootstrap_opts {
    int32_t n_resamples; /* e.g. 2000 */
    double level;        /* confidence level in (0, 1), e.g. 0.95 */
    uint64_t seed;
    /* 1: paired — A and B have the same number of clusters and cluster i of A and of B were
     * measured together (back to back, same round); each resample draws one set of indices
     * and uses it for both, so drift shared by a pair cancels. 0: A and B resampled
     * independently (any cluster counts). */
    int32_t paired;
} llmrt_bootstrap_opts;

/* n_resamples 2000, level 0.95, seed 0, paired 0. */
void llmrt_bootstrap_opts_init(llmrt_bootstrap_opts *o);

/* The relative difference (b − a) / a of the medians of the pooled values of A and B. */
typedef struct llmrt_rel_diff {
    double a, b;        /* median of all of A's values, of all of B's values */
    double rel;         /* (b − a) / a: the point estimate */
    double lo, hi;      /* percentile bootstrap interval of rel at the requested level */
    int32_t n_resamples;/* resamples that gave a finite ratio (the others are dropped) */
    int32_t significant;/* 1 when the interval excludes 0 */
} llmrt_rel_diff;

/* ---- verdicts over a family of comparisons ----
 *
 * A bench compares m things at once (metrics x configs x concurrency levels). Reading each at
 * 95% lets the family err far more often than 5% (three metrics: up to 14%). Bonferroni's
 * answer, used here: each interval at level 1 - (1 - family_level) / m, so that all m of
 * them hold their true values at once with probability >= family_level whatever their
 * dependence. Each interval then decides against an equivalence margin:
 *   lo > +margin or hi < -margin       a difference (the whole interval lies beyond it),
 *   -margin <= lo and hi <= +margin    no meaningful difference (it lies within it),
 *   anything else                       inconclusive.
 * A family of such decisions is wrong anywhere (a difference declared where the truth lies
 * within the margin, or "no meaningful difference" where it lies beyond) with probability
 * <= 1 - family_level, because each wrong decision needs an interval that misses its truth. */
typedef enum llmrt_outcome {
    LLMRT_OUTCOME_INCONCLUSIVE = 0,
    LLMRT_OUTCOME_DIFFERENT = 1,  /* the interval lies entirely beyond +-margin */
    LLMRT_OUTCOME_EQUIVALENT = 2  /* the interval lies entirely within +-margin */
} llmrt_outcome;

/* The outcome of the interval [lo, hi] of a relative change against +-margin (margin >= 0). */
llmrt_outcome llmrt_stats_outcome(double lo, double hi, double margin);
/* The level of each of m >= 1 intervals whose family holds at family_level (Bonferroni). */
double llmrt_stats_bonferroni_level(double family_level, size_t m);

/* ---- the paired comparison behind a bench verdict ----
 *
 * n pairs (a_i, b_i) of positive values measured together (batch i of config A and of config
 * B ran in the same block, in random order). The relative change of B against A is read off
 * d_i = ln(b_i / a_i): the Hodges-Lehmann estimate (the median of the Walsh averages
 * (d_i + d_j) / 2, i <= j) and its interval from Wilcoxon's signed-rank test, as
 * exp(.) - 1. Why this and not a bootstrap: the interval is exact and distribution-free — its
 * coverage is at least `level` for any distribution of the d_i that is symmetric about its
 * centre, which an A/A comparison in random order is by construction (swapping the configs'
 * labels in a block changes nothing), whatever the outliers, bursts or bimodality of the
 * values. A percentile bootstrap of medians over a few dozen clusters is not: on a loaded
 * 2-core machine it put 2 of 60 A/A TTFT intervals (one value per request, bursty) beyond
 * zero at 98.3%, e.g. "+21.4% [+5.5%, +140.9%]"; the signed-rank interval none of them.
 * Against the sign test (exact without symmetry) it is nearly as efficient as a t interval:
 * a planted 5% slowdown was found in 20 of 20 runs where the sign test found 19. */
typedef struct llmrt_paired_diff {
    double a, b;        /* medians of a[] and of b[] (descriptive) */
    double rel;         /* the Hodges-Lehmann relative change exp(HL(d)) - 1 */
    double lo, hi;      /* its interval */
    double coverage;    /* the interval's exact coverage (>= the level asked for) */
    int32_t n;          /* pairs */
    int32_t significant;/* 1 when the interval excludes 0 */
} llmrt_paired_diff;

/* The fewest pairs that can give an interval at `level`. */
int32_t llmrt_stats_paired_min_pairs(double level);
/* Fails (INVALID_ARG) when a value is not positive and finite, level is not in (0, 1), or n
 * is below llmrt_stats_paired_min_pairs(level) (the message says how many are needed).
 * Exact signed-rank probabilities up to 400 pairs, the normal approximation (continuity
 * corrected) beyond; up to 20000 pairs. */
llmrt_status llmrt_stats_paired_rel_diff(const double *a, const double *b, size_t n,
                                         double level, llmrt_paired_diff *out,
                                         llmrt_error *err);

/* Cluster bootstrap of the relative difference of pooled medians. Fails (INVALID_ARG) when
 * a side has no values, a's median is not positive, paired is requested with unequal
 * cluster counts, or the options are out of range. */
llmrt_status llmrt_stats_bootstrap_median_diff(const llmrt_clusters *a, const llmrt_clusters *b,
                                               const llmrt_bootstrap_opts *opts,
                                               llmrt_rel_diff *out, llmrt_error *err);

#endif
