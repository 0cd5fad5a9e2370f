/* test_stats.c — bench/stats: sorting, quantiles and summaries on known data, the RNG's
 * reproducibility and range, and the cluster bootstrap: exact answers on degenerate data,
 * error cases, and coverage on simulated experiments (the interval contains the truth about
 * as often as it claims, and resampling single values instead of clusters would not). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

#define NEAR(a, b) ck_assert_msg(fabs((a) - (b)) < 1e-9, "%.12g != %.12g", (double)(a), (double)(b))

START_TEST(test_sort_ascending)
{
    double x[] = {3, -1, 2.5, 3, 0, -7, 1e9, 2.5};
    const double want[] = {-7, -1, 0, 2.5, 2.5, 3, 3, 1e9};
    llmrt_stats_sort(x, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(x[i] == want[i], "x[%d] = %g, expected %g", i, x[i], want[i]);
    llmrt_stats_sort(x, 0); /* nothing to do, no crash */
}
END_TEST

START_TEST(test_quantile_known_values)
{
    const double x[] = {1, 2, 3, 4};
    NEAR(llmrt_stats_quantile_sorted(x, 4, 0.0), 1);
    NEAR(llmrt_stats_quantile_sorted(x, 4, 0.5), 2.5);
    NEAR(llmrt_stats_quantile_sorted(x, 4, 0.9), 3.7); /* numpy.quantile([1,2,3,4], 0.9) */
    NEAR(llmrt_stats_quantile_sorted(x, 4, 1.0), 4);
    NEAR(llmrt_stats_quantile_sorted(x, 1, 0.3), 1);
    ck_assert(isnan(llmrt_stats_quantile_sorted(x, 0, 0.5)));
}
END_TEST

START_TEST(test_summary_known_values)
{
    const double x[] = {9, 4, 2, 5, 4, 7, 4, 5}; /* unsorted on purpose */
    llmrt_summary s;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_stats_summarize(x, 8, &s, &err), LLMRT_OK);
    ck_assert_uint_eq(s.n, 8);
    NEAR(s.mean, 5);
    NEAR(s.stdev, sqrt(32.0 / 7.0));
    NEAR(s.min, 2);
    NEAR(s.max, 9);
    NEAR(s.p50, 4.5);
    NEAR(s.p90, 7.6);  /* h = 6.3 → 7 + 0.3 * (9 − 7) */
    NEAR(s.p99, 8.86); /* h = 6.93 */
    ck_assert(x[0] == 9 && x[7] == 5); /* input untouched */

    ck_assert_int_eq(llmrt_stats_summarize(x, 1, &s, &err), LLMRT_OK);
    NEAR(s.stdev, 0);
    NEAR(s.p99, 9);
    ck_assert_int_eq(llmrt_stats_summarize(x, 0, &s, &err), LLMRT_OK);
    ck_assert(s.n == 0 && isnan(s.mean) && isnan(s.p50));
}
END_TEST

START_TEST(test_median_matches_sorting)
{
    llmrt_rng rng;
    llmrt_rng_seed(&rng, 42);
    double x[301], y[301];
    for (size_t n = 1; n <= 301; n += 7) {
        for (int rep = 0; rep < 5; rep++) {
            for (size_t i = 0; i < n; i++) /* rep 0..1: many ties; later: continuous */
                x[i] = rep < 2 ? (double)llmrt_rng_below(&rng, 4) : llmrt_rng_normal(&rng);
            if (rep == 4)
                for (size_t i = 0; i < n; i++)
                    x[i] = (double)i; /* already sorted */
            memcpy(y, x, n * sizeof *x);
            llmrt_stats_sort(y, n);
            NEAR(llmrt_stats_median_inplace(x, n), llmrt_stats_quantile_sorted(y, n, 0.5));
        }
    }
}
END_TEST

START_TEST(test_rng_reproducible_and_in_range)
{
    llmrt_rng a, b, c;
    llmrt_rng_seed(&a, 7);
    llmrt_rng_seed(&b, 7);
    llmrt_rng_seed(&c, 8);
    int same_c = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t va = llmrt_rng_next(&a);
        ck_assert(va == llmrt_rng_next(&b));
        same_c += va == llmrt_rng_next(&c);
    }
    ck_assert_int_lt(same_c, 2);

    /* below(10): every value in range and each of the 10 near 10% of 100000 draws */
    int counts[10] = {0};
    double sum = 0, sum2 = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = llmrt_rng_below(&a, 10);
        ck_assert(v < 10);
        counts[v]++;
        double u = llmrt_rng_uniform(&a);
        ck_assert(u >= 0 && u < 1);
        double z = llmrt_rng_normal(&a);
        sum += z;
        sum2 += z * z;
    }
    for (int i = 0; i < 10; i++)
        ck_assert_msg(counts[i] > 9500 && counts[i] < 10500, "value %d drawn %d times", i, counts[i]);
    ck_assert(fabs(sum / 1e5) < 0.02 && fabs(sum2 / 1e5 - 1) < 0.03);
    ck_assert(llmrt_rng_below(&a, 1) == 0);
}
END_TEST

/* Clusters of equal size `per`, values[] filled by the caller. */
typedef struct sim {
    double *values;
    size_t *offsets;
    llmrt_clusters c;
} sim;

static void sim_init(sim *s, size_t n_clusters, size_t per)
{
    s->values = calloc(n_clusters * per, sizeof *s->values);
    s->offsets = calloc(n_clusters + 1, sizeof *s->offsets);
    for (size_t i = 0; i <= n_clusters; i++)
        s->offsets[i] = i * per;
    s->c = (llmrt_clusters){s->values, s->offsets, n_clusters};
}

static void sim_free(sim *s)
{
    free(s->values);
    free(s->offsets);
}

START_TEST(test_bootstrap_exact_cases)
{
    sim a, b;
    sim_init(&a, 6, 5);
    sim_init(&b, 6, 5);
    for (size_t i = 0; i < 30; i++) {
        a.values[i] = 10;
        b.values[i] = 11;
    }
    llmrt_bootstrap_opts o;
    llmrt_bootstrap_opts_init(&o);
    llmrt_rel_diff d;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d, &err), LLMRT_OK);
    NEAR(d.a, 10);
    NEAR(d.b, 11);
    NEAR(d.rel, 0.1);
    NEAR(d.lo, 0.1);
    NEAR(d.hi, 0.1);
    ck_assert_int_eq(d.significant, 1);
    ck_assert_int_eq(d.n_resamples, 2000);

    /* identical data, paired: every resample gives 0 exactly → not significant */
    for (size_t i = 0; i < 30; i++)
        a.values[i] = b.values[i] = 1.0 + (double)(i % 7);
    o.paired = 1;
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d, &err), LLMRT_OK);
    NEAR(d.rel, 0);
    NEAR(d.lo, 0);
    NEAR(d.hi, 0);
    ck_assert_int_eq(d.significant, 0);

    /* same seed → same interval; the interval is reproducible */
    for (size_t i = 0; i < 30; i++)
        b.values[i] = a.values[i] * (1.0 + 0.01 * (double)(i % 5));
    llmrt_rel_diff d2;
    o.seed = 99;
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d2, &err), LLMRT_OK);
    ck_assert(d.lo == d2.lo && d.hi == d2.hi);
    ck_assert(d.lo <= d.rel && d.rel <= d.hi);
    sim_free(&a);
    sim_free(&b);
}
END_TEST

START_TEST(test_bootstrap_errors)
{
    sim a, b;
    sim_init(&a, 3, 2);
    sim_init(&b, 4, 2);
    for (size_t i = 0; i < 6; i++)
        a.values[i] = 1;
    llmrt_bootstrap_opts o;
    llmrt_bootstrap_opts_init(&o);
    llmrt_rel_diff d;
    llmrt_error err = {0};
    o.paired = 1;
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "A has 3, B has 4"), "%s", err.msg);
    o.paired = 0;
    o.level = 1.5;
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "1.5"), "%s", err.msg);
    o.level = 0.95;
    for (size_t i = 0; i < 6; i++)
        a.values[i] = 0; /* baseline median 0: no relative difference */
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&a.c, &b.c, &o, &d, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "positive"), "%s", err.msg);
    llmrt_clusters empty = {a.values, (size_t[]){0}, 0};
    ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(&empty, &b.c, &o, &d, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "no values"), "%s", err.msg);
    sim_free(&a);
    sim_free(&b);
}
END_TEST

/* One simulated side: n_clusters requests of `per` tokens; each request has its own level
 * (cluster effect, sd 4%) and each token its own noise (sd 2%), around `center`. */
static void simulate(sim *s, llmrt_rng *rng, size_t n_clusters, size_t per, double center)
{
    for (size_t c = 0; c < n_clusters; c++) {
        double level = center * (1.0 + 0.04 * llmrt_rng_normal(rng));
        for (size_t t = 0; t < per; t++)
            s->values[c * per + t] = level * (1.0 + 0.02 * llmrt_rng_normal(rng));
    }
}

/* Run `runs` simulated A/B experiments with a true relative shift; count intervals that
 * contain the truth and that are significant. flat: resample single values (wrong). */
static void coverage(double shift, int flat, int paired, int *covered, int *significant)
{
    const size_t n_clusters = 16, per = 40, runs = 100;
    sim a, b, fa, fb;
    sim_init(&a, n_clusters, per);
    sim_init(&b, n_clusters, per);
    sim_init(&fa, n_clusters * per, 1);
    sim_init(&fb, n_clusters * per, 1);
    llmrt_rng rng;
    llmrt_rng_seed(&rng, 2024);
    llmrt_bootstrap_opts o;
    llmrt_bootstrap_opts_init(&o);
    o.n_resamples = 400;
    o.paired = paired;
    *covered = *significant = 0;
    for (size_t r = 0; r < runs; r++) {
        simulate(&a, &rng, n_clusters, per, 10.0);
        simulate(&b, &rng, n_clusters, per, 10.0 * (1.0 + shift));
        memcpy(fa.values, a.values, n_clusters * per * sizeof(double));
        memcpy(fb.values, b.values, n_clusters * per * sizeof(double));
        o.seed = r;
        llmrt_rel_diff d;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_stats_bootstrap_median_diff(flat ? &fa.c : &a.c,
                                                           flat ? &fb.c : &b.c, &o, &d, &err),
                         LLMRT_OK);
        *covered += d.lo <= shift && shift <= d.hi;
        *significant += d.significant;
    }
    sim_free(&a);
    sim_free(&b);
    sim_free(&fa);
    sim_free(&fb);
}

START_TEST(test_bootstrap_coverage)
{
    int cov, sig;
    /* A/A: the 95% interval contains 0 in most runs (percentile intervals with 16 clusters
     * run a little narrow, so allow down to 85 of 100) */
    coverage(0.0, 0, 0, &cov, &sig);
    ck_assert_msg(cov >= 85, "A/A: 0 covered in only %d of 100 runs", cov);
    ck_assert_int_eq(cov + sig, 100);
    coverage(0.0, 0, 1, &cov, &sig);
    ck_assert_msg(cov >= 85, "A/A paired: 0 covered in only %d of 100 runs", cov);
    /* a real 8% slowdown: detected with the right sign nearly always, truth covered */
    coverage(0.08, 0, 0, &cov, &sig);
    ck_assert_msg(sig >= 95, "8%% shift detected in only %d of 100 runs", sig);
    ck_assert_msg(cov >= 85, "8%% shift covered in only %d of 100 runs", cov);
    /* why clusters: treating correlated tokens as independent gives intervals far too
     * narrow — an A/A would be "significant" in a large share of runs */
    coverage(0.0, 1, 0, &cov, &sig);
    ck_assert_msg(cov < 70, "flat resampling covered 0 in %d of 100 runs; the simulation no "
                            "longer shows the cluster effect", cov);
}
END_TEST

/* The three outcomes against a margin, at its edges; Bonferroni's levels; resamples enough
 * for the tails. */
START_TEST(test_outcomes_and_family)
{
    const double m = 0.01;
    ck_assert_int_eq(llmrt_stats_outcome(0.012, 0.05, m), LLMRT_OUTCOME_DIFFERENT);
    ck_assert_int_eq(llmrt_stats_outcome(-0.05, -0.011, m), LLMRT_OUTCOME_DIFFERENT);
    ck_assert_int_eq(llmrt_stats_outcome(-0.004, 0.009, m), LLMRT_OUTCOME_EQUIVALENT);
    ck_assert_int_eq(llmrt_stats_outcome(-0.01, 0.01, m), LLMRT_OUTCOME_EQUIVALENT);
    /* excludes 0 but reaches into the margin: real, perhaps, but maybe not meaningful */
    ck_assert_int_eq(llmrt_stats_outcome(0.002, 0.03, m), LLMRT_OUTCOME_INCONCLUSIVE);
    /* the H200 A/A: 0.2% [0.2%, 0.3%] is no meaningful difference */
    ck_assert_int_eq(llmrt_stats_outcome(0.002, 0.003, m), LLMRT_OUTCOME_EQUIVALENT);
    ck_assert_int_eq(llmrt_stats_outcome(-0.02, 0.02, m), LLMRT_OUTCOME_INCONCLUSIVE);
    ck_assert_int_eq(llmrt_stats_outcome(0.001, 0.002, 0), LLMRT_OUTCOME_DIFFERENT);
    ck_assert_int_eq(llmrt_stats_outcome(0, 0, 0), LLMRT_OUTCOME_EQUIVALENT);
    NEAR(llmrt_stats_bonferroni_level(0.95, 1), 0.95);
    NEAR(llmrt_stats_bonferroni_level(0.95, 3), 1 - 0.05 / 3);
    NEAR(llmrt_stats_bonferroni_level(0.95, 0), 0.95);
    ck_assert_int_eq(llmrt_stats_paired_min_pairs(0.95), 6);          /* 2^-5 = 0.031 */
    ck_assert_int_eq(llmrt_stats_paired_min_pairs(1 - 0.05 / 3), 7);   /* 2^-6 = 0.0156 */
    ck_assert_int_eq(llmrt_stats_paired_min_pairs(1 - 0.05 / 54), 12);
}
END_TEST

/* The signed-rank interval on known values: d = ln(b/a) = 0.01 * (1..8). The 36 Walsh
 * averages run from 0.01 to 0.08 (median 0.045); at 95% Wilcoxon's table gives T+ <= 3
 * (P = 0.0195) as the tail, so the interval is the 4th and the 33rd of them: [0.02, 0.07],
 * with coverage 1 - 2 * 5/256. */
START_TEST(test_paired_exact_cases)
{
    double a[8], b[8];
    for (int i = 0; i < 8; i++) {
        a[i] = 2.0 + i;
        b[i] = a[i] * exp(0.01 * (i + 1));
    }
    llmrt_paired_diff d;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, 8, 0.95, &d, &err), LLMRT_OK);
    NEAR(d.rel, expm1(0.045));
    NEAR(d.lo, expm1(0.02));
    NEAR(d.hi, expm1(0.07));
    NEAR(d.coverage, 1 - 2 * 5.0 / 256);
    ck_assert_int_eq(d.significant, 1);
    ck_assert_int_eq(d.n, 8);
    NEAR(d.a, 5.5);
    /* identical sides: exactly 0, not significant */
    ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, a, 8, 0.95, &d, &err), LLMRT_OK);
    NEAR(d.rel, 0);
    NEAR(d.lo, 0);
    NEAR(d.hi, 0);
    ck_assert_int_eq(d.significant, 0);
    /* a constant 10% */
    for (int i = 0; i < 8; i++)
        b[i] = 1.1 * a[i];
    ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, 8, 0.95, &d, &err), LLMRT_OK);
    NEAR(d.rel, 0.1);
    NEAR(d.lo, 0.1);
    NEAR(d.hi, 0.1);
    /* errors: too few pairs for the level, a non-positive value, a bad level */
    ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, 6, 1 - 0.05 / 3, &d, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "at least 7"), "%s", err.msg);
    b[3] = 0;
    ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, 8, 0.95, &d, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "pair 3"), "%s", err.msg);
    ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, a, 8, 1.5, &d, &err), LLMRT_ERR_INVALID_ARG);
}
END_TEST

/* Simulated blocks: each block has a shared level (drift and load hit both configs of a
 * block alike, sd 5%), each side its own noise (sd 1.5%) and, one block in twelve, a burst
 * that makes one side (either) 30% slower: heavy tails like a loaded machine's. */
static void simulate_pairs(llmrt_rng *rng, size_t n, double shift, double *a, double *b)
{
    for (size_t i = 0; i < n; i++) {
        double level = 10.0 * exp(0.05 * llmrt_rng_normal(rng));
        a[i] = level * exp(0.015 * llmrt_rng_normal(rng));
        b[i] = level * (1 + shift) * exp(0.015 * llmrt_rng_normal(rng));
        if (llmrt_rng_below(rng, 12) == 0)
            *(llmrt_rng_below(rng, 2) ? &a[i] : &b[i]) *= 1.3;
    }
}

/* A family of three A/A comparisons read at 95% each errs in about 1 - 0.95^3 = 14% of runs;
 * at Bonferroni's 98.3% the intervals of all three hold the truth together in >= 95% of runs,
 * and with the margin a difference is declared far more rarely still. A 5% shift is a
 * difference with the right sign in nearly every run (here ~95%: heavy bursts).  */
START_TEST(test_family_verdicts)
{
    enum { N = 24, RUNS = 400 };
    double a[N], b[N];
    llmrt_rng rng;
    llmrt_rng_seed(&rng, 77);
    const double level = llmrt_stats_bonferroni_level(0.95, 3);
    int family_miss = 0, false_claims = 0, found = 0, wrong_sign = 0, naive_miss = 0;
    for (int r = 0; r < RUNS; r++) {
        int miss = 0, nmiss = 0;
        for (int metric = 0; metric < 3; metric++) {
            simulate_pairs(&rng, N, 0, a, b);
            llmrt_paired_diff d, d95;
            llmrt_error err = {0};
            ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, N, level, &d, &err), LLMRT_OK);
            ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, N, 0.95, &d95, &err), LLMRT_OK);
            ck_assert(d.coverage >= level && d.lo <= d.rel && d.rel <= d.hi);
            miss |= d.significant;
            nmiss |= d95.significant;
            false_claims += llmrt_stats_outcome(d.lo, d.hi, 0.01) == LLMRT_OUTCOME_DIFFERENT;
        }
        family_miss += miss;
        naive_miss += nmiss;
        simulate_pairs(&rng, N, 0.05, a, b);
        llmrt_paired_diff d;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_stats_paired_rel_diff(a, b, N, level, &d, &err), LLMRT_OK);
        if (llmrt_stats_outcome(d.lo, d.hi, 0.01) == LLMRT_OUTCOME_DIFFERENT)
            d.rel > 0 ? found++ : wrong_sign++;
    }
    /* expected: <= 5% of 400 = 20 (binomial sd ~4.4); 95% each: ~14% = 57 */
    ck_assert_msg(family_miss <= 32, "A/A: some interval of the family missed 0 in %d of %d runs",
                  family_miss, RUNS);
    ck_assert_msg(naive_miss >= 35, "95%% per metric missed in only %d of %d families: the "
                                    "simulation no longer shows the multiplicity", naive_miss, RUNS);
    ck_assert_msg(false_claims <= 8, "A/A: %d differences beyond the margin in %d families",
                  false_claims, RUNS);
    ck_assert_int_eq(wrong_sign, 0);
    printf("family: %d of %d A/A families missed 0 somewhere (95%% each: %d), %d differences "
           "beyond the margin; a 5%% shift found in %d\n",
           family_miss, RUNS, naive_miss, false_claims, found);
    ck_assert_msg(found >= RUNS * 90 / 100, "a 5%% shift found in only %d of %d runs", found, RUNS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_quantile_known_values);
    tcase_add_test(tc, test_summary_known_values);
    tcase_add_test(tc, test_sort_ascending);
    tcase_add_test(tc, test_median_matches_sorting);
    tcase_add_test(tc, test_rng_reproducible_and_in_range);
    tcase_add_test(tc, test_bootstrap_exact_cases);
    tcase_add_test(tc, test_bootstrap_errors);
    tcase_add_test(tc, test_bootstrap_coverage);
    tcase_add_test(tc, test_outcomes_and_family);
    tcase_add_test(tc, test_paired_exact_cases);
    tcase_add_test(tc, test_family_verdicts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
