/* test_serve_metrics.c — `llmrt serve`'s /metrics page: valid Prometheus text (every sample
 * line is `name{labels} value`, every family has HELP and TYPE), cumulative histogram
 * buckets that end with +Inf == _count and the right _sum, counters by route/status and
 * finish reason, engine gauges only once an engine exists, the memory path as a labelled
 * info metric (fallback recognised), and label values escaped; model_name on every series;
 * vLLM's names with metrics_prefix = vllm. Also: concurrent recording loses nothing. */
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
static void check_format(const char *page, const char *prefix)
{
    char *copy = strdup(page);
    int n = 0;
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), n++) {
        if (line[0] == '#') {
            ck_assert_msg(strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0,
                          "bad comment: %s", line);
            const char *name = line + 7;
            ck_assert_msg(strncmp(name, prefix, strlen(prefix)) == 0 ||
                              strncmp(name, "llmrt_", 6) == 0 ||
                              strncmp(name, "process_", 8) == 0,
                          "bad family name: %s", line);
            continue;
        }
        ck_assert_msg(strncmp(line, prefix, strlen(prefix)) == 0 ||
                          strncmp(line, "llmrt_", 6) == 0 || strncmp(line, "process_", 8) == 0,
                      "bad name: %s", line);
        /* every series carries model_name, first */
        ck_assert_msg(strstr(line, "{model_name=\"") != NULL, "no model_name label: %s", line);
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
    check_format(page, "llmrt_");
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.001\"}"), 0);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.005\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"2560\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"}"), 3);
    ck_assert_double_eq(sample(page, "llmrt_time_to_first_token_seconds_count{model_name=\"tiny\"}"), 3);
    ck_assert_double_eq_tol(sample(page, "llmrt_time_to_first_token_seconds_sum{model_name=\"tiny\"}"), 5000.008, 1e-9);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{model_name=\"tiny\",route=\"/v1/completions\",status=\"200\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{model_name=\"tiny\",route=\"/v1/completions\",status=\"400\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{model_name=\"tiny\",route=\"other\",status=\"404\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_requests_finished_total{model_name=\"tiny\",finish_reason=\"length\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_requests_finished_total{model_name=\"tiny\",finish_reason=\"cancelled\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_requests_finished_total{model_name=\"tiny\",finish_reason=\"stop\"}"), 0);
    ck_assert_double_eq(sample(page, "llmrt_request_generation_tokens_sum{model_name=\"tiny\"}"), 18);
    ck_assert_double_eq_tol(sample(page, "llmrt_e2e_request_latency_seconds_sum{model_name=\"tiny\"}"), 1.75, 1e-9);
    ck_assert_double_eq_tol(sample(page, "llmrt_step_device_busy_seconds_sum{model_name=\"tiny\"}"), 0.0015, 1e-12);
    ck_assert_double_eq_tol(sample(page, "llmrt_step_device_idle_seconds_sum{model_name=\"tiny\"}"), 0.00025, 1e-12);
    ck_assert_double_eq(sample(page, "llmrt_engine_ready{model_name=\"tiny\"}"), 0);
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
    check_format(page, "llmrt_");
    ck_assert_double_eq(sample(page, "llmrt_engine_ready{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_in_flight{model_name=\"tiny\"}"), 2);
    ck_assert_double_eq(sample(page, "llmrt_num_requests_running{model_name=\"tiny\"}"), 3);
    ck_assert_double_eq(sample(page, "llmrt_num_requests_waiting{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(sample(page, "llmrt_kv_cache_usage_perc{model_name=\"tiny\"}"), 0.25);
    ck_assert_double_eq(sample(page, "llmrt_kv_cache_blocks_used{model_name=\"tiny\"}"), 50);
    ck_assert_double_eq(sample(page, "llmrt_generation_tokens_total{model_name=\"tiny\"}"), 1234);
    ck_assert_double_eq(sample(page, "llmrt_prompt_tokens_total{model_name=\"tiny\"}"), 99);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_queries_total{model_name=\"tiny\"}"), 5000);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_hits_total{model_name=\"tiny\"}"), 3072);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_evictions_total{model_name=\"tiny\"}"), 7);
    ck_assert_double_eq(sample(page, "llmrt_prefix_cache_blocks{model_name=\"tiny\"}"), 160);
    ck_assert_double_eq(sample(page, "llmrt_prefix_caching_enabled{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(
        sample(page, "llmrt_memory_path_info{model_name=\"tiny\",plugin=\"pinned\",path=\"pageable\",fallback=\"true\"}"), 1);
    ck_assert_msg(strstr(page, "device=\"GPU \\\"0\\\"\\\\x\""), "label not escaped:\n%s", page);
    free(page);
    snprintf(st.memory_path, sizeof st.memory_path, "pinned");
    page = llmrt_serve_metrics_render(m, &info, NULL);
    ck_assert_double_eq(
        sample(page, "llmrt_memory_path_info{model_name=\"tiny\",plugin=\"pinned\",path=\"pinned\",fallback=\"false\"}"), 1);
    free(page);
    llmrt_serve_metrics_free(m);
}
END_TEST

/* Bus traffic: counters of the step records' h2d + d2h bytes and of their offloaded weights,
 * the latest step's, the achieved GB/s over decode steps only (bench's bus_gbps: a prefill
 * step's bytes and busy time do not count), and the offload plan's gauges from the stats; the
 * llmrt_ names under either prefix. */
START_TEST(test_bus_and_offload)
{
    for (int vllm = 0; vllm <= 1; vllm++) {
        llmrt_serve_metrics *m;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_serve_metrics_new(&m, &err), LLMRT_OK);
        llmrt_engine_stats st = {0};
        st.mem.offload_layers = 3;
        st.mem.offload_bytes = 3000000;
        llmrt_serve_metrics_info info = {.model_name = "tiny", .ready = 1, .stats = &st,
                                         .vllm_names = vllm};
        char *page = llmrt_serve_metrics_render(m, &info, NULL);
        check_format(page, vllm ? "vllm:" : "llmrt_");
        ck_assert_double_eq(sample(page, "llmrt_bus_bytes_total{model_name=\"tiny\"}"), 0);
        ck_assert_double_eq(sample(page, "llmrt_bus_gbps{model_name=\"tiny\"}"), 0);
        free(page);
        /* a prefill step: counted in bytes, not in the decode GB/s */
        llmrt_step_record pre = {.n_tokens = 8, .n_prefill_tokens = 8, .gpu_busy_ms = 50,
                                 .h2d_bytes = 3000500, .d2h_bytes = 40, .offload_bytes = 3000000};
        llmrt_serve_metrics_step(m, &pre);
        /* two decode steps: 3 MB of weights and 500 bytes of inputs in, 40 bytes out, 1 ms */
        llmrt_step_record dec = {.n_tokens = 1, .n_decode_seqs = 1, .gpu_busy_ms = 1.0,
                                 .h2d_bytes = 3000500, .d2h_bytes = 40, .offload_bytes = 3000000};
        llmrt_serve_metrics_step(m, &dec);
        dec.gpu_busy_ms = 3.0;
        dec.h2d_bytes = 3000460; /* a step with fewer inputs: the latest step's figure */
        llmrt_serve_metrics_step(m, &dec);
        page = llmrt_serve_metrics_render(m, &info, NULL);
        check_format(page, vllm ? "vllm:" : "llmrt_");
        ck_assert_ptr_nonnull(strstr(page, "# TYPE llmrt_bus_bytes_total counter\n"));
        ck_assert_ptr_nonnull(strstr(page, "# TYPE llmrt_offload_bytes_total counter\n"));
        ck_assert_ptr_nonnull(strstr(page, "# TYPE llmrt_bus_gbps gauge\n"));
        ck_assert_double_eq(sample(page, "llmrt_bus_bytes_total{model_name=\"tiny\"}"),
                            3000540.0 * 2 + 3000500);
        ck_assert_double_eq(sample(page, "llmrt_offload_bytes_total{model_name=\"tiny\"}"),
                            9000000);
        ck_assert_double_eq(sample(page, "llmrt_step_bus_bytes{model_name=\"tiny\"}"), 3000500);
        ck_assert_double_eq(sample(page, "llmrt_step_offload_bytes{model_name=\"tiny\"}"),
                            3000000);
        /* (3000540 + 3000500) bytes in 4 ms = 1.50026 GB/s */
        ck_assert_double_eq_tol(sample(page, "llmrt_bus_gbps{model_name=\"tiny\"}"),
                                6001040.0 / 4e-3 / 1e9, 1e-9);
        ck_assert_double_eq(sample(page, "llmrt_offload_layers{model_name=\"tiny\"}"), 3);
        ck_assert_double_eq(sample(page, "llmrt_offload_weight_bytes{model_name=\"tiny\"}"),
                            3000000);
        free(page);
        llmrt_serve_metrics_free(m);
    }
}
END_TEST

/* metrics_prefix = vllm: vLLM's names and labels for what vLLM has (what its Grafana
 * dashboard and the routers read), llmrt_ for the rest, process_* either way; the new
 * request-phase, parameter and iteration histograms in both namings. */
START_TEST(test_vllm_names)
{
    llmrt_serve_metrics *m;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_serve_metrics_new(&m, &err), LLMRT_OK);
    llmrt_serve_metrics_ttft(m, 0.02);
    llmrt_serve_metrics_itl(m, 0.004);
    llmrt_serve_metrics_itl(m, 0.006);
    llmrt_serve_metrics_finished(m, LLMRT_FINISH_CANCELLED, 3, 2, 0.5);
    llmrt_serve_metrics_finished(m, LLMRT_FINISH_STOP, 3, 2, 0.5);
    llmrt_serve_phases ph = {.queue_s = 0.25, .prefill_s = 0.5, .decode_s = 1.0,
                             .inference_s = 1.5};
    llmrt_serve_metrics_phases(m, &ph);
    llmrt_serve_phases waited = {.queue_s = -1, .prefill_s = -1, .decode_s = -1,
                                 .inference_s = -1}; /* cancelled while queued */
    llmrt_serve_metrics_phases(m, &waited);
    llmrt_serve_metrics_params(m, 2, 100);
    llmrt_serve_metrics_max_generation(m, 77);
    llmrt_step_record rec = {.n_tokens = 40};
    llmrt_serve_metrics_step(m, &rec);
    llmrt_serve_metrics_conn_closed(m, "request_timeout");
    llmrt_engine_stats st = {0};
    st.kv_blocks_total = 100;
    st.kv_blocks_used = 10;
    st.kv_block_size = 16;
    st.running = 2;
    st.waiting = 5;
    st.prompt_tokens = 7;
    st.generated_tokens = 8;
    st.preemptions = 1;
    snprintf(st.memory_path, sizeof st.memory_path, "pinned");
    snprintf(st.kv_dtype, sizeof st.kv_dtype, "F32");
    llmrt_serve_metrics_info info = {.model_name = "tiny", .vllm_names = 1, .ready = 1,
                                     .stats = &st};
    char *page = llmrt_serve_metrics_render(m, &info, NULL);
    check_format(page, "vllm:");
    ck_assert_double_eq(sample(page, "vllm:num_requests_running{model_name=\"tiny\"}"), 2);
    ck_assert_double_eq(sample(page, "vllm:num_requests_waiting{model_name=\"tiny\"}"), 5);
    ck_assert_double_eq(sample(page, "vllm:kv_cache_usage_perc{model_name=\"tiny\"}"), 0.1);
    ck_assert_double_eq(sample(page, "vllm:gpu_cache_usage_perc{model_name=\"tiny\"}"), 0.1);
    ck_assert_double_eq(sample(page, "vllm:prompt_tokens_total{model_name=\"tiny\"}"), 7);
    ck_assert_double_eq(sample(page, "vllm:generation_tokens_total{model_name=\"tiny\"}"), 8);
    ck_assert_double_eq(sample(page, "vllm:num_preemptions_total{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(
        sample(page, "vllm:time_to_first_token_seconds_count{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(
        sample(page, "vllm:inter_token_latency_seconds_count{model_name=\"tiny\"}"), 2);
    ck_assert_double_eq(
        sample(page, "vllm:time_per_output_token_seconds_count{model_name=\"tiny\"}"), 2);
    ck_assert_double_eq(
        sample(page, "vllm:request_success_total{model_name=\"tiny\",finished_reason=\"abort\"}"), 1);
    ck_assert_double_eq(
        sample(page, "vllm:request_success_total{model_name=\"tiny\",finished_reason=\"stop\"}"), 1);
    ck_assert_double_eq(
        sample(page, "vllm:request_queue_time_seconds_sum{model_name=\"tiny\"}"), 0.25);
    ck_assert_double_eq(
        sample(page, "vllm:request_queue_time_seconds_count{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(
        sample(page, "vllm:request_prefill_time_seconds_sum{model_name=\"tiny\"}"), 0.5);
    ck_assert_double_eq(
        sample(page, "vllm:request_decode_time_seconds_sum{model_name=\"tiny\"}"), 1.0);
    ck_assert_double_eq(
        sample(page, "vllm:request_inference_time_seconds_sum{model_name=\"tiny\"}"), 1.5);
    ck_assert_double_eq(
        sample(page, "vllm:iteration_tokens_total_bucket{model_name=\"tiny\",le=\"32\"}"), 0);
    ck_assert_double_eq(
        sample(page, "vllm:iteration_tokens_total_bucket{model_name=\"tiny\",le=\"64\"}"), 1);
    ck_assert_double_eq(sample(page, "vllm:request_params_n_sum{model_name=\"tiny\"}"), 2);
    ck_assert_double_eq(
        sample(page, "vllm:request_params_max_tokens_sum{model_name=\"tiny\"}"), 100);
    ck_assert_double_eq(
        sample(page, "vllm:request_max_num_generation_tokens_sum{model_name=\"tiny\"}"), 77);
    ck_assert_double_eq(
        sample(page, "vllm:cache_config_info{model_name=\"tiny\",block_size=\"16\","
                     "num_gpu_blocks=\"100\",cache_dtype=\"F32\"}"), 1);
    ck_assert_double_eq(
        sample(page, "llmrt_http_connections_closed_total{model_name=\"tiny\",reason=\"request_timeout\"}"), 1);
    ck_assert_double_gt(sample(page, "process_resident_memory_bytes{model_name=\"tiny\"}"), 1e5);
    ck_assert_double_gt(sample(page, "process_start_time_seconds{model_name=\"tiny\"}"), 1.6e9);
    ck_assert_double_ge(sample(page, "process_cpu_seconds_total{model_name=\"tiny\"}"), 0);
    ck_assert_double_gt(sample(page, "process_open_fds{model_name=\"tiny\"}"), 2);
    /* what vLLM has is not also under llmrt_ names */
    ck_assert_ptr_null(strstr(page, "llmrt_num_requests_waiting"));
    ck_assert_ptr_null(strstr(page, "llmrt_time_to_first_token_seconds"));
    ck_assert_ptr_null(strstr(page, "llmrt_requests_finished_total"));
    free(page);

    info.vllm_names = 0;
    page = llmrt_serve_metrics_render(m, &info, NULL);
    check_format(page, "llmrt_");
    ck_assert_ptr_null(strstr(page, "vllm:"));
    ck_assert_double_eq(
        sample(page, "llmrt_request_queue_time_seconds_count{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(
        sample(page, "llmrt_iteration_tokens_total_count{model_name=\"tiny\"}"), 1);
    ck_assert_double_eq(
        sample(page, "llmrt_requests_finished_total{model_name=\"tiny\",finish_reason=\"cancelled\"}"), 1);
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
    ck_assert_double_eq(sample(page, "llmrt_inter_token_latency_seconds_count{model_name=\"x\"}"), 40000);
    ck_assert_double_eq(sample(page, "llmrt_http_requests_total{model_name=\"x\",route=\"/v1/chat/completions\",status=\"200\"}"), 40000);
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
    tcase_add_test(tc, test_vllm_names);
    tcase_add_test(tc, test_bus_and_offload);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
