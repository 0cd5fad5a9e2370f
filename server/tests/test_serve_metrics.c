/* test_serve_metrics.c — `llmrt serve`'s /metrics page: valid Prometheus text (every sample
 * line is `name{labels} value`, every family has HELP and TYPE), cumulative histogram
 * buckets that end with +Inf == _count and the right _sum, counters by route/status and
 * finish reason, engine gauges only once an engine exists, the memory path as a labelled
 * info metric (fallback recognised), and label values escaped. Also: concurrent recording
 * loses nothing. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_metrics.h"

/* The value of the sample line `key` in page, or -1 when absent. */
static double sample(const char *page, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = page; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, key, k) == 0 && p[k] == ' ')
            return strtod(p + k + 1, NULL);
    return -1;
}

/* Every line is a comment (# HELP / # TYPE) or "name[{...}] number". */
static void check_format(const char *page)
{
    char *copy = strdup(page);
    int n = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), n++) {
        if (line[0] == '#') {
            ck_assert_msg(strncmp(line, "# HELP llmrt_", 13) == 0 || strncmp(line, "# TYPE llmrt_", 13) == 0,
                          "bad comment: %s", line);
            continue;
        }
        ck_assert_msg(strncmp(line, "llmrt_", 6) == 0, "bad name: %s", line);
        char *sp = strrchr(line, ' ');
        ck_assert_msg(sp != NULL, "no value: %s", line);
        char *end;
        strtod(sp + 1, &end);
        ck_assert_msg(*end == 0 && end != sp + 1, "value not a number: %s", line);
        char *brace = strchr(line, '{');
        if (brace && brace < sp)
            ck_assert_msg(sp[-1] == '}', "labels not closed: %s", line);
    }
    ck_assert_int_gt(n, 10);
    free(copy);
}

START_TEST(test_histograms_and_counters)
{
    llmrt_serve_metrics *m;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_serve_metrics_new(&m, &err), LLMRT_OK);
    llmrt_serve_metrics_ttft(m, 0.003);  /* bucket le=0.005 */
    llmrt_serve_metrics_ttft(m, 0.005);  /* le=0.005: bounds are inclusive */
    llmrt_serve_metrics_ttft(m, 5000.0); /* only +Inf */
    llmrt_serve_metrics_http(m, "/v1/completions", 200);
    llmrt_serve_metrics_http(m, "/v1/completions", 200);
    llmrt_serve_metrics_http(m, "/v1/completions", 400);
    llmrt_serve_metrics_http(m, "/nope", 404);
    llmrt_serve_metrics_finished(m, LLMRT_FINISH_LENGTH, 10, 16, 1.25);
    llmrt_serve_metrics_finished(m, LLMRT_FINISH_CANCELLED, 3, 2, 0.5);
    llmrt_step_record rec = {.gpu_busy_ms = 1.5, .idle_ms = 0.25};
    llmrt_serve_metrics_step(m, &rec);

    llmrt_serve_metrics_info info = {.model_name = "tiny", .ready = 0};
    size_t len = 0;
    char *page = llmrt_serve_metrics_render(m, &info, &len);
    ck_assert_uint_eq(len, strlen(page));
    check_format(page);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{le=\"0.001\"}"), 0);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{le=\"0.005\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{le=\"2560\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{le=\"+Inf\"}"), 3);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_count"), 3);
    ck_assert_double_eq_tol(sample(page, "llmrt_time_to_first_token_seconds_sum"), 5000.008, 1e-9);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{route=\"/v1/completions\",status=\"200\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{route=\"/v1/completions\",status=\"400\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{route=\"other\",status=\"404\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_requests_finished_total{finish_reason=\"length\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_requests_finished_total{finish_reason=\"cancelled\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_requests_finished_total{finish_reason=\"stop\"}"), 0);
    ck_assert_double_eq(sample(page, "llmrt_request_generation_tokens_sum"), 18);
    ck_assert_double_eq_tol(sample(page, "llmrt_e2e_request_latency_seconds_sum"), 1.75, 1e-9);
    ck_assert_double_eq_tol(sample(page, "llmrt_step_device_busy_seconds_sum"), 0.0015, 1e-12);
    ck_assert_double_eq_tol(sample(page, "llmrt_step_device_idle_seconds_sum"), 0.00025, 1e-12);
    ck_assert_double_eq(sample(page, "llmrt_engine_ready"), 0);
    /* no engine yet: no engine gauges */
    ck_assert_ptr_null(strstr(page, "llmrt_num_requests_running"));
    ck_assert_ptr_null(strstr(page, "llmrt_memory_path_info"));
    ck_assert_ptr_nonnull(strstr(page, "# TYPE llmrt_time_to_first_token_seconds histogram\n"));
    free(page);
    llmrt_serve_metrics_free(m);
}
END_TEST

START_TEST(test_engine_gauges_and_info)
{
    llmrt_serve_metrics *m;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_serve_metrics_new(&m, &err), LLMRT_OK);
    llmrt_engine_stats st = {0};
    st.kv_blocks_total = 200;
    st.kv_blocks_used = 50;
    st.running = 3;
    st.waiting = 1;
    st.generated_tokens = 1234;
    st.prompt_tokens = 99;
    st.max_model_len = 4096;
    st.prefix_caching = 1;
    st.prefix_cache_queries = 5000;
    st.prefix_cache_hits = 3072;
    st.prefix_cache_evictions = 7;
    st.prefix_cache_blocks = 160;
    snprintf(st.memory_plugin, sizeof st.memory_plugin, "pinned");
    snprintf(st.memory_path, sizeof st.memory_path, "pageable (fallback from pinned)");
    snprintf(st.device, sizeof st.device, "GPU \"0\"\\x");
    snprintf(st.backend, sizeof st.backend, "cuda");
    llmrt_serve_metrics_info info = {.model_name = "tiny", .ready = 1, .stats = &st,
                                     .http_in_flight = 2};
    char *page = llmrt_serve_metrics_render(m, &info, NULL);
    check_format(page);
    ck_assert_double_eq(sample(page, "llmrt_engine_ready"), 1);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_in_flight"), 2);
    ck_assert_double_eq(sample(page, "llmrt_num_requests_running"), 3);
    ck_assert_double_eq(sample(page, "llmrt_num_requests_waiting"), 1);
    ck_assert_double_eq(sample(page, "llmrt_kv_cache_usage_perc"), 0.25);
    ck_assert_double_eq(sample(page, "llmrt_kv_cache_blocks_used"), 50);
    ck_assert_double_eq(sample(page, "llmrt_generation_tokens_total"), 1234);
    ck_assert_double_eq(sample(page, "llmrt_prompt_tokens_total"), 99);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_queries_total"), 5000);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_hits_total"), 3072);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_evictions_total"), 7);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_blocks"), 160);
    ck_assert_double_eq(sample(page, "llmrt_prefix_caching_enabled"), 1);
    ck_assert_double_eq(
        sample(page, "llmrt_memory_path_info{plugin=\"pinned\",path=\"pageable\",fallback=\"true\"}"), 1);
    ck_assert_msg(strstr(page, "device=\"GPU \\\"0\\\"\\\\x\""), "label not escaped:\n%s", page);
    free(page);
    snprintf(st.memory_path, sizeof st.memory_path, "pinned");
    page = llmrt_serve_metrics_render(m, &info, NULL);
    ck_assert_double_eq(
        sample(page, "llmrt_memory_path_info{plugin=\"pinned\",path=\"pinned\",fallback=\"false\"}"), 1);
    free(page);
    llmrt_serve_metrics_free(m);
}
END_TEST

static void *record_many(void *arg)
{
    llmrt_serve_metrics *m = arg;
    for (int i = 0; i < 10000; i++) {
        llmrt_serve_metrics_itl(m, 0.002);
        llmrt_serve_metrics_http(m, "/v1/chat/completions", 200);
    }
    return NULL;
}

START_TEST(test_concurrent_recording)
{
    llmrt_serve_metrics *m;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_serve_metrics_new(&m, &err), LLMRT_OK);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, record_many, m);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    llmrt_serve_metrics_info info = {.model_name = "x"};
    char *page = llmrt_serve_metrics_render(m, &info, NULL);
    ck_assert_double_eq(sample(page, "llmrt_inter_token_latency_seconds_count"), 40000);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"), 40000);
    free(page);
    llmrt_serve_metrics_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve_metrics");
    TCase *tc = tcase_create("serve_metrics");
    tcase_add_test(tc, test_histograms_and_counters);
    tcase_add_test(tc, test_engine_gauges_and_info);
    tcase_add_test(tc, test_concurrent_recording);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
