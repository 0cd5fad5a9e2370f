/* test_progress.c — the load/write progress display: plain lines every 10% for logs (none
 * for jobs shorter than the quiet period), a redrawn bar on a terminal that the final line
 * replaces, and exact totals when many threads count at once. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"

/* Everything written to f, as a string (caller frees). */
static char *slurp(FILE *f)
{
    long n = ftell(f);
    char *s = calloc(1, (size_t)n + 1);
    rewind(f);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

START_TEST(test_plain_lines_every_tenth)
{
    FILE *f = tmpfile();
    llmrt_progress p;
    llmrt_progress_init(&p, f, 0, "loading", "tensors", 1000000000ull, 20);
    p.quiet_s = 0;
    for (int i = 0; i < 20; i++)
        llmrt_progress_add(&p, 50000000ull, 1);
    llmrt_progress_done(&p);
    llmrt_progress_done(&p); /* once only */
    llmrt_progress_free(&p);
    char *s = slurp(f);
    ck_assert_int_eq(count(s, "\n"), 10); /* 10% .. 90%, then the final line */
    ck_assert_msg(strstr(s, "loading: 10% (0.10/1.00 GB, 2/20 tensors, "), "%s", s);
    ck_assert_msg(strstr(s, "loading: 50% (0.50/1.00 GB, 10/20 tensors, "), "%s", s);
    ck_assert_msg(strstr(s, "loading: done: 1.00 GB, 20 tensors in "), "%s", s);
    ck_assert_ptr_null(strchr(s, '\r'));
    free(s);
    fclose(f);
}
END_TEST

START_TEST(test_plain_short_job_prints_only_the_total)
{
    FILE *f = tmpfile();
    llmrt_progress p;
    llmrt_progress_init(&p, f, 0, "writing", "tensors", 3000000000ull, 3);
    for (int i = 0; i < 3; i++)
        llmrt_progress_add(&p, 1000000000ull, 1);
    llmrt_progress_done(&p);
    llmrt_progress_free(&p);
    char *s = slurp(f);
    ck_assert_int_eq(count(s, "\n"), 1);
    ck_assert_msg(strstr(s, "writing: done: 3.00 GB, 3 tensors in "), "%s", s);
    free(s);
    fclose(f);
}
END_TEST

START_TEST(test_tty_bar_replaced_by_total)
{
    FILE *f = tmpfile();
    llmrt_progress p;
    llmrt_progress_init(&p, f, 1, "loading", "tensors", 2000000000ull, 4);
    llmrt_progress_add(&p, 1000000000ull, 2); /* first add always draws */
    llmrt_progress_done(&p);
    llmrt_progress_free(&p);
    char *s = slurp(f);
    ck_assert_msg(strstr(s, "\rloading [############------------]  50%  1.00/2.00 GB  2/4 tensors"),
                  "%s", s);
    ck_assert_msg(strstr(s, "\r\033[Kloading: done: 1.00 GB, 2 tensors in "), "%s", s);
    ck_assert_int_eq(count(s, "\n"), 1);
    free(s);
    fclose(f);
}
END_TEST

static void *adder(void *arg)
{
    llmrt_progress *p = arg;
    for (int i = 0; i < 10000; i++)
        llmrt_progress_add(p, 3, 1);
    return NULL;
}

START_TEST(test_threads_count_exactly)
{
    FILE *f = tmpfile();
    llmrt_progress p;
    llmrt_progress_init(&p, f, 0, "loading", "tensors", 0, 0); /* totals unknown */
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, adder, &p);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    ck_assert_uint_eq(p.done_items, 40000);
    ck_assert_uint_eq(p.done_bytes, 120000);
    llmrt_progress_done(&p);
    llmrt_progress_free(&p);
    char *s = slurp(f);
    ck_assert_msg(strstr(s, "loading: done: 0.1 MB, 40000 tensors in "), "%s", s);
    free(s);
    fclose(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("progress");
    tcase_add_test(tc, test_plain_lines_every_tenth);
    tcase_add_test(tc, test_plain_short_job_prints_only_the_total);
    tcase_add_test(tc, test_tty_bar_replaced_by_total);
    tcase_add_test(tc, test_threads_count_exactly);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
