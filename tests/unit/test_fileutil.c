/* test_fileutil.c — the bounded readers every file of a model folder, plugin folder or INI
 * goes through: a FIFO is refused without blocking, /dev/zero (or a link to it) and a
 * directory are refused by kind, a file over its kind's limit is refused with its size and
 * the limit, streams (standard input, /proc files whose size reads 0) stop at the bound. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileutil.h"
#include "test_util.h"

#define ASSERT_MSG(err, s)                                                                    \
    ck_assert_msg(strstr((err).msg, (s)), "message \"%s\" lacks \"%s\"", (err).msg, (s))

START_TEST(test_regular_files_read_whole)
{
    char *d = tu_mkdtemp();
    char *p = tu_write_file(d, "config.json", "{\"a\": 1}");
    char *data = NULL;
    size_t len = 0;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_read_file_bounded(p, 64, "config.json", &data, &len, &err), LLMRT_OK);
    ck_assert_uint_eq(len, 8);
    ck_assert_str_eq(data, "{\"a\": 1}");
    free(data);
    /* exactly at the limit is fine, one byte more is not */
    ck_assert_int_eq(llmrt_read_file_bounded(p, 8, "config.json", &data, &len, &err), LLMRT_OK);
    free(data);
    ck_assert_int_eq(llmrt_read_file_bounded(p, 7, "config.json", &data, &len, &err),
                     LLMRT_ERR_LIMIT);
    ck_assert_ptr_null(data);
    ASSERT_MSG(err, p);
    ASSERT_MSG(err, "8 bytes is larger than the 7 bytes a config.json may be");
    /* an empty file reads as "" */
    char *e = tu_write_file(d, "empty", "");
    ck_assert_int_eq(llmrt_read_file_bounded(e, 8, "file", &data, &len, &err), LLMRT_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(data, "");
    free(data);
    free(e);
    free(p);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* The figures of the brief: 17 MiB against config.json's 16 MiB, refused before reading. */
START_TEST(test_size_limit_message)
{
    char *d = tu_mkdtemp();
    char *p = tu_sized_file(d, "config.json", 17ll << 20);
    char *data = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_read_file_bounded(p, LLMRT_MAX_CONFIG_BYTES, "config.json", &data,
                                             NULL, &err),
                     LLMRT_ERR_LIMIT);
    ASSERT_MSG(err, p);
    ASSERT_MSG(err, ": 17.0 MiB is larger than the 16 MiB a config.json may be");
    int fd = 99;
    uint64_t size = 0;
    ck_assert_int_eq(llmrt_open_regular(p, O_RDONLY, 1ull << 30, "index", &fd, &size, &err),
                     LLMRT_OK);
    ck_assert_uint_eq(size, 17ull << 20);
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* blocking again for the caller */
    close(fd);
    ck_assert_int_eq(llmrt_open_regular(p, O_RDONLY, 1ull << 20, "index", &fd, &size, &err),
                     LLMRT_ERR_LIMIT);
    ck_assert_int_eq(fd, -1);
    ASSERT_MSG(err, "17.0 MiB is larger than the 1 MiB an index may be");
    free(p);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_not_regular_refused_without_blocking)
{
    char *d = tu_mkdtemp();
    char *fifo = tu_mkfifo(d, "config.json");
    char *zero = tu_symlink(d, "zero.json", "/dev/zero");
    char *data = NULL;
    llmrt_error err = {0};
    int fd = 99;
    tu_guard(20); /* a FIFO opened for reading blocks until a writer comes */
    ck_assert_int_eq(llmrt_read_file_bounded(fifo, 1024, "config.json", &data, NULL, &err),
                     LLMRT_ERR_IO);
    ASSERT_MSG(err, fifo);
    ASSERT_MSG(err, ": not a regular file (a FIFO)");
    ck_assert_int_eq(llmrt_open_regular(fifo, O_RDONLY, 0, "plugin", &fd, NULL, &err),
                     LLMRT_ERR_IO);
    ck_assert_int_eq(fd, -1);
    ASSERT_MSG(err, "not a regular file (a FIFO)");
    tu_guard(0);
    /* /dev/zero would read until memory runs out */
    ck_assert_int_eq(llmrt_read_file(zero, &data, NULL, &err), LLMRT_ERR_IO);
    ASSERT_MSG(err, zero);
    ASSERT_MSG(err, "not a regular file (a character device)");
    ck_assert_int_eq(llmrt_read_file(d, &data, NULL, &err), LLMRT_ERR_IO);
    ASSERT_MSG(err, "not a regular file (a directory)");
    ck_assert_ptr_null(data);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/missing.json", d);
    ck_assert_int_eq(llmrt_read_file(missing, &data, NULL, &err), LLMRT_ERR_IO);
    ASSERT_MSG(err, "missing.json: cannot open: No such file or directory");
    /* llmrt_path_exists sees them all (a dangling link too), never opening anything */
    char *dangling = tu_symlink(d, "dangling", "nowhere");
    ck_assert(llmrt_path_exists(fifo) && llmrt_path_exists(zero) && llmrt_path_exists(dangling));
    ck_assert(!llmrt_path_exists(missing));
    free(dangling);
    free(fifo);
    free(zero);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* Files whose size reads 0 (/proc) and standard input are streams: the bound holds as read. */
START_TEST(test_streams_stop_at_the_bound)
{
    char *data = NULL;
    size_t len = 0;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_read_file_bounded("/proc/self/status", 1 << 20, "status", &data,
                                             &len, &err),
                     LLMRT_OK);
    ck_assert(len > 0 && strstr(data, "Name:"));
    free(data);
    ck_assert_int_eq(llmrt_read_file_bounded("/proc/self/status", 16, "status file", &data, &len,
                                             &err),
                     LLMRT_ERR_LIMIT);
    ASSERT_MSG(err, "/proc/self/status: longer than the 16 bytes a status file may be");

    /* "-": standard input, here a pipe holding 3000 bytes */
    int saved = dup(0), p[2];
    ck_assert_int_eq(pipe(p), 0);
    char text[3000];
    memset(text, 'x', sizeof text);
    ck_assert_int_eq(write(p[1], text, sizeof text), (ssize_t)sizeof text);
    close(p[1]);
    dup2(p[0], 0);
    close(p[0]);
    ck_assert_int_eq(llmrt_read_file_bounded("-", 2999, "prompt", &data, &len, &err),
                     LLMRT_ERR_LIMIT);
    ASSERT_MSG(err, "standard input: longer than the 2.9 KiB a prompt may be");
    dup2(saved, 0);

    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(write(p[1], text, sizeof text), (ssize_t)sizeof text);
    close(p[1]);
    dup2(p[0], 0);
    close(p[0]);
    ck_assert_int_eq(llmrt_read_file("-", &data, &len, &err), LLMRT_OK);
    ck_assert_uint_eq(len, sizeof text);
    free(data);
    dup2(saved, 0);
    close(saved);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fileutil");
    TCase *tc = tcase_create("fileutil");
    tcase_add_test(tc, test_regular_files_read_whole);
    tcase_add_test(tc, test_size_limit_message);
    tcase_add_test(tc, test_not_regular_refused_without_blocking);
    tcase_add_test(tc, test_streams_stop_at_the_bound);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
