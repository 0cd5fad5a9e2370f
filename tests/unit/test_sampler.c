/* test_sampler.c — the host sampler against an independent reference: chi-square goodness of
 * fit over many seeded draws for temperature / top-k / top-p / min-p, filtered tokens never
 * drawn, seeds reproducible, penalties and logprobs exact. Every draw comes from fixed seeds,
 * so each test is deterministic; the thresholds are the 0.1% critical values, and a
 * deliberately wrong reference is rejected by a wide margin (the test has power). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "test_util.h"

#define V 10
static const float LOGITS[V] = {2.0f, 1.5f, 1.2f, 1.0f, 0.5f, 0.1f, -0.3f, -1.0f, -2.0f, 0.7f};

/* Reference: softmax(logits / T), min_p, top_k (descending, lowest index first on ties),
 * top_p over the renormalised remainder — written independently of sampler.c. */
static void reference(const float *lg, int n, double T, int top_k, double top_p, double min_p,
                      double *out)
{
    double p[64], mx = -1e30, z = 0;
    int order[64], keep[64];
    for (int i = 0; i < n; i++)
        mx = fmax(mx, lg[i] / T);
    for (int i = 0; i < n; i++)
        z += p[i] = exp(lg[i] / T - mx);
    double pmax = 0;
    for (int i = 0; i < n; i++)
        p[i] /= z, pmax = fmax(pmax, p[i]);
    for (int i = 0; i < n; i++)
        keep[i] = p[i] >= min_p * pmax, order[i] = i;
    for (int i = 0; i < n; i++) /* selection sort, stable on index */
        for (int j = i + 1; j < n; j++)
            if (p[order[j]] > p[order[i]] ||
                (p[order[j]] == p[order[i]] && order[j] < order[i])) {
                int t = order[i];
                order[i] = order[j], order[j] = t;
            }
    int kept = 0;
    for (int r = 0; r < n; r++) {
        int i = order[r];
        if (!keep[i])
            continue;
        if (top_k > 0 && kept >= top_k)
            keep[i] = 0;
        else
            kept++;
    }
    double mass = 0;
    for (int i = 0; i < n; i++)
        mass += keep[i] ? p[i] : 0;
    if (top_p < 1) {
        double cum = 0;
        int done = 0;
        for (int r = 0; r < n; r++) {
            int i = order[r];
            if (!keep[i])
                continue;
            if (done)
                keep[i] = 0;
            else if ((cum += p[i] / mass) >= top_p)
                done = 1;
        }
    }
    z = 0;
    for (int i = 0; i < n; i++)
        z += keep[i] ? p[i] : 0;
    for (int i = 0; i < n; i++)
        out[i] = keep[i] ? p[i] / z : 0;
}

/* 0.1% critical values of chi-square for 1..9 degrees of freedom. */
static const double CHI2_999[10] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};

typedef struct sample_case {
    float T;
    int top_k;
    float top_p, min_p;
} sample_case;

static const sample_case CASES[] = {
    {1.0f, 0, 1.0f, 0.0f}, {0.7f, 0, 1.0f, 0.0f}, {1.5f, 0, 1.0f, 0.0f},
    {1.0f, 4, 1.0f, 0.0f}, {1.0f, 0, 0.8f, 0.0f}, {1.0f, 0, 1.0f, 0.2f},
    {0.8f, 5, 0.9f, 0.0f}, {1.2f, 6, 0.85f, 0.05f}, {1.0f, 1, 1.0f, 0.0f},
};

static double chi2(const int *counts, const double *ref, int n, int draws, int *dof,
                   int *forbidden)
{
    double x = 0;
    *dof = -1;
    *forbidden = 0;
    for (int i = 0; i < n; i++) {
        if (ref[i] == 0) {
            *forbidden += counts[i];
            continue;
        }
        double e = ref[i] * draws;
        x += (counts[i] - e) * (counts[i] - e) / e;
        (*dof)++;
    }
    return x;
}

static void draw_counts(llmrt_sampler *s, const llmrt_sampling *sp, uint64_t seed, int draws,
                        int *counts)
{
    memset(counts, 0, sizeof(int) * V);
    for (int i = 0; i < draws; i++) {
        int t = llmrt_sampler_pick(s, LOGITS, sp, llmrt_sampler_uniform(seed, (uint64_t)i));
        ck_assert_int_ge(t, 0);
        ck_assert_int_lt(t, V);
        counts[t]++;
    }
}

START_TEST(test_chi_square_fit)
{
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(V, &s, &err), LLMRT_OK);
    const int draws = 40000;
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        llmrt_sampling sp;
        llmrt_sampling_init(&sp);
        sp.temperature = CASES[c].T;
        sp.top_k = CASES[c].top_k;
        sp.top_p = CASES[c].top_p;
        sp.min_p = CASES[c].min_p;
        double ref[V];
        reference(LOGITS, V, sp.temperature, sp.top_k, sp.top_p, sp.min_p, ref);
        int counts[V], dof, forbidden;
        draw_counts(s, &sp, 1000 + c, draws, counts);
        double x = chi2(counts, ref, V, draws, &dof, &forbidden);
        ck_assert_msg(forbidden == 0, "case %zu: %d draws of filtered tokens", c, forbidden);
        if (dof >= 1)
            ck_assert_msg(x < CHI2_999[dof], "case %zu: chi2 %.2f >= %.2f (dof %d)", c, x,
                          CHI2_999[dof], dof);
        else
            ck_assert_int_eq(counts[0], draws); /* one token kept: always it */
        /* Power: the same counts against a wrong reference (temperature off by 0.3, or
         * the filter's boundary moved by one token) must be rejected. */
        double wrong[V];
        reference(LOGITS, V, sp.temperature + 0.3, sp.top_k, sp.top_p, sp.min_p, wrong);
        int wdof, wforb;
        double wx = chi2(counts, wrong, V, draws, &wdof, &wforb);
        if (dof >= 1)
            ck_assert_msg(wx > 3 * CHI2_999[wdof > 0 ? wdof : 1] || wforb > 0,
                          "case %zu: wrong reference not rejected (chi2 %.2f)", c, wx);
        if (sp.top_k > 1) {
            reference(LOGITS, V, sp.temperature, sp.top_k + 1, sp.top_p, sp.min_p, wrong);
            wx = chi2(counts, wrong, V, draws, &wdof, &wforb);
            int differs = memcmp(wrong, ref, sizeof ref) != 0;
            if (differs)
                ck_assert_msg(wx > 3 * CHI2_999[wdof], "case %zu: top_k+1 not rejected", c);
        }
    }
    llmrt_sampler_free(s);
}
END_TEST

START_TEST(test_distribution_matches_reference)
{
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(V, &s, &err), LLMRT_OK);
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        llmrt_sampling sp;
        llmrt_sampling_init(&sp);
        sp.temperature = CASES[c].T, sp.top_k = CASES[c].top_k;
        sp.top_p = CASES[c].top_p, sp.min_p = CASES[c].min_p;
        double ref[V], got[V];
        reference(LOGITS, V, sp.temperature, sp.top_k, sp.top_p, sp.min_p, ref);
        llmrt_sampler_distribution(s, LOGITS, &sp, got);
        for (int i = 0; i < V; i++)
            ck_assert_msg(fabs(ref[i] - got[i]) < 1e-6, "case %zu token %d: %g vs %g", c, i,
                          got[i], ref[i]);
    }
    llmrt_sampler_free(s);
}
END_TEST

START_TEST(test_large_vocab_top_p)
{
    /* A 151936-token row: top-p must keep exactly the reference's nucleus. */
    const int32_t n = 151936;
    float *lg = malloc(sizeof *lg * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        lg[i] = (float)(llmrt_sampler_uniform(7, (uint64_t)i) * 12.0 - 6.0);
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(n, &s, &err), LLMRT_OK);
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.temperature = 0.6f;
    sp.top_p = 0.3f;
    double *prob = malloc(sizeof *prob * (size_t)n);
    llmrt_sampler_distribution(s, lg, &sp, prob);
    /* the kept set is a prefix by probability: every kept token beats every dropped one,
     * and the kept mass (before renormalising) first reaches top_p at its last token */
    double mx = -1e30, z = 0;
    for (int32_t i = 0; i < n; i++)
        mx = fmax(mx, lg[i] / 0.6);
    for (int32_t i = 0; i < n; i++)
        z += exp(lg[i] / 0.6 - mx);
    double kept_mass = 0, min_kept = 1e30, max_dropped = -1e30;
    int32_t n_kept = 0;
    for (int32_t i = 0; i < n; i++) {
        if (prob[i] > 0) {
            kept_mass += exp(lg[i] / 0.6 - mx) / z;
            min_kept = fmin(min_kept, lg[i]);
            n_kept++;
        } else {
            max_dropped = fmax(max_dropped, lg[i]);
        }
    }
    ck_assert_int_gt(n_kept, 1);
    ck_assert(min_kept >= max_dropped);
    ck_assert(kept_mass >= 0.3 - 1e-9);
    ck_assert(kept_mass - exp(min_kept / 0.6 - mx) / z < 0.3);
    free(prob);
    free(lg);
    llmrt_sampler_free(s);
}
END_TEST

START_TEST(test_seed_reproducible)
{
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(V, &s, &err), LLMRT_OK);
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.temperature = 1.0f;
    int a[200], b[200], c[200], diff = 0;
    for (int i = 0; i < 200; i++) {
        a[i] = llmrt_sampler_pick(s, LOGITS, &sp, llmrt_sampler_uniform(42, (uint64_t)i));
        c[i] = llmrt_sampler_pick(s, LOGITS, &sp, llmrt_sampler_uniform(43, (uint64_t)i));
    }
    for (int i = 199; i >= 0; i--) /* order of draws does not matter: counter-based */
        b[i] = llmrt_sampler_pick(s, LOGITS, &sp, llmrt_sampler_uniform(42, (uint64_t)i));
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(a[i], b[i]);
        diff += a[i] != c[i];
    }
    ck_assert_int_gt(diff, 50); /* another seed gives another stream */
    /* uniform draws: in range, mean near 1/2 */
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        float u = llmrt_sampler_uniform(5, (uint64_t)i);
        ck_assert(u >= 0.0f && u < 1.0f);
        sum += u;
    }
    ck_assert(fabs(sum / 100000 - 0.5) < 0.005);
    llmrt_sampler_free(s);
}
END_TEST

START_TEST(test_greedy_and_argmax)
{
    float lg[6] = {1, 3, 3, NAN, -INFINITY, 2};
    ck_assert_int_eq(llmrt_sampler_argmax(lg, 6), 1); /* lowest index on ties; NaN never */
    float nan_first[3] = {NAN, -5, -7};
    ck_assert_int_eq(llmrt_sampler_argmax(nan_first, 3), 1);
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(6, &s, &err), LLMRT_OK);
    llmrt_sampling sp;
    llmrt_sampling_init(&sp); /* temperature 0 */
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(llmrt_sampler_pick(s, lg, &sp, llmrt_sampler_uniform(1, (uint64_t)i)), 1);
    llmrt_sampler_free(s);
}
END_TEST

START_TEST(test_penalties)
{
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(8, &s, &err), LLMRT_OK);
    const float base[8] = {2, -2, 1, -1, 0.5f, 3, -3, 4};
    const int32_t prompt[] = {0, 1, 1};
    const int32_t output[] = {2, 3, 2, 2, 99 /* out of range: ignored */};
    float lg[8];

    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.repetition_penalty = 2.0f;
    memcpy(lg, base, sizeof lg);
    llmrt_sampler_apply_penalties(s, lg, &sp, prompt, 3, output, 5);
    const float rep[8] = {1, -4, 0.5f, -2, 0.5f, 3, -3, 4}; /* seen: 0 1 2 3, each once */
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq_tol(lg[i], rep[i], 1e-6);

    llmrt_sampling_init(&sp);
    sp.presence_penalty = 0.5f;
    sp.frequency_penalty = 0.25f;
    memcpy(lg, base, sizeof lg);
    llmrt_sampler_apply_penalties(s, lg, &sp, prompt, 3, output, 5);
    /* output only: token 2 three times, token 3 once; the prompt's tokens untouched */
    const float pf[8] = {2, -2, 1 - 0.75f - 0.5f, -1 - 0.25f - 0.5f, 0.5f, 3, -3, 4};
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq_tol(lg[i], pf[i], 1e-6);

    /* scratch state is clean: a second call without history changes nothing */
    memcpy(lg, base, sizeof lg);
    llmrt_sampler_apply_penalties(s, lg, &sp, NULL, 0, NULL, 0);
    ck_assert_mem_eq(lg, base, sizeof lg);
    ck_assert(llmrt_sampler_has_penalties(&sp));
    llmrt_sampling_init(&sp);
    ck_assert(!llmrt_sampler_has_penalties(&sp));
    llmrt_sampler_free(s);
}
END_TEST

START_TEST(test_logprobs)
{
    llmrt_sampler *s = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(V, &s, &err), LLMRT_OK);
    double z = 0;
    for (int i = 0; i < V; i++)
        z += exp(LOGITS[i]);
    float lp;
    int32_t ids[LLMRT_MAX_TOP_LOGPROBS];
    float lps[LLMRT_MAX_TOP_LOGPROBS];
    llmrt_sampler_logprobs(s, LOGITS, 4, 3, &lp, ids, lps);
    ck_assert_float_eq_tol(lp, LOGITS[4] - log(z), 1e-5);
    ck_assert_int_eq(ids[0], 0);
    ck_assert_int_eq(ids[1], 1);
    ck_assert_int_eq(ids[2], 2);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq_tol(lps[i], LOGITS[ids[i]] - log(z), 1e-5);
    /* all of them, sorted */
    llmrt_sampler_logprobs(s, LOGITS, 0, V, &lp, ids, lps);
    for (int i = 1; i < V; i++)
        ck_assert(lps[i] <= lps[i - 1]);
    ck_assert_int_eq(ids[3], 3);
    ck_assert_int_eq(ids[4], 9); /* 0.7 between 1.0 and 0.5 */
    llmrt_sampler_free(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_chi_square_fit);
    tcase_add_test(tc, test_distribution_matches_reference);
    tcase_add_test(tc, test_large_vocab_top_p);
    tcase_add_test(tc, test_seed_reproducible);
    tcase_add_test(tc, test_greedy_and_argmax);
    tcase_add_test(tc, test_penalties);
    tcase_add_test(tc, test_logprobs);
    suite_add_tcase(su, tc);
    return tu_run_suite(su);
}
