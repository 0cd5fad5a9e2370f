/* test_server.c — the server library's life cycle through server.h alone, as an embedder
 * drives it (no CLI, no signals): open refuses a config without a model; listen binds a
 * free port and answers at once (/health 503 "model_loading" while nothing is loaded, the
 * model card already there); a load that fails reports the engine's error; a load that
 * works makes /health 200 and serves a completion; drain refuses new connections and
 * close frees everything (ASan checks the leaks). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "server.h"
#include "test_util.h"

/* One HTTP/1.0 exchange with 127.0.0.1:port. Returns the status code, or -1 when nobody
 * answered (connection refused, or closed without a byte: a connection the kernel took on
 * a listening socket that was being closed), and the response's body in body[cap]. */
static int http(int port, const char *method, const char *path, const char *json, char *body,
                size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.0\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, json ? strlen(json) : 0, json ? json : "");
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    static char resp[65536];
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof resp && (r = read(fd, resp + len, sizeof resp - 1 - len)) > 0)
        len += (size_t)r;
    resp[len] = 0;
    close(fd);
    if (len == 0)
        return -1;
    int status = -1;
    ck_assert_msg(sscanf(resp, "HTTP/1.%*d %d", &status) == 1, "%s %s: no status line in: %s",
                  method, path, resp);
    const char *b = strstr(resp, "\r\n\r\n");
    snprintf(body, cap, "%s", b ? b + 4 : "");
    return status;
}

/* The port of "http://127.0.0.1:PORT". */
static int url_port(const char *url)
{
    const char *prefix = "http://127.0.0.1:";
    ck_assert_msg(strncmp(url, prefix, strlen(prefix)) == 0, "url %s", url);
    int port = atoi(url + strlen(prefix));
    ck_assert_int_gt(port, 0);
    return port;
}

static llmrt_runtime *runtime(const char *model_set)
{
    const char *sets[] = {"server.host=127.0.0.1", "server.port=0",
                          "server.served_model_name=tiny", model_set};
    llmrt_runtime *rt = NULL;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_runtime_open(NULL, sets, model_set ? 4 : 3, &rt, &err) == LLMRT_OK,
                  "%s", err.msg);
    return rt;
}

/* Poll until the load ends (at most 120 s); returns its status. */
static llmrt_status wait_loaded(llmrt_server *s, llmrt_error *err)
{
    double t0 = llmrt_now_s();
    for (;;) {
        int done = 0;
        llmrt_status st = llmrt_server_loaded(s, &done, err);
        if (done)
            return st;
        ck_assert_int_eq(st, LLMRT_OK);
        ck_assert_msg(llmrt_now_s() - t0 < 120, "the load did not end within 120 s");
        usleep(20000);
    }
}

/* Nothing in flight, within 10 s: a request counts as in flight until libmicrohttpd has
 * called it complete, which may be just after the client read the response. */
static void wait_idle(llmrt_server *s)
{
    double t0 = llmrt_now_s();
    while (llmrt_server_busy(s, NULL, NULL) && llmrt_now_s() - t0 < 10)
        usleep(1000);
    long h = -1, e = -1;
    ck_assert_int_eq(llmrt_server_busy(s, &h, &e), 0);
    ck_assert(h == 0 && e == 0);
}

START_TEST(test_open_needs_a_model)
{
    llmrt_runtime *rt = runtime(NULL);
    llmrt_server *s = (llmrt_server *)1;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_server_open(rt, &s, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.msg, "model.path"), "%s", err.msg);
    llmrt_server_close(NULL);
    llmrt_runtime_close(rt);
}
END_TEST

/* A server listening on a free loopback port for the model folder dir/<model> (made by the
 * caller, or absent). */
typedef struct fixture {
    char *dir;
    llmrt_runtime *rt;
    llmrt_server *s;
    int port;
} fixture;

static void fixture_open(fixture *f, char *dir /* taken */, const char *model)
{
    char set[4200];
    snprintf(set, sizeof set, "model.path=%s/%s", dir, model);
    f->dir = dir;
    f->rt = runtime(set);
    llmrt_error err = {0};
    const char *url = NULL;
    ck_assert_int_eq(llmrt_server_open(f->rt, &f->s, &err), LLMRT_OK);
    ck_assert_msg(llmrt_server_listen(f->s, &url, &err) == LLMRT_OK, "%s", err.msg);
    f->port = url_port(url);
}

static void fixture_close(fixture *f)
{
    llmrt_server_close(f->s);
    llmrt_runtime_close(f->rt);
    tu_rmtree(f->dir);
    free(f->dir);
}

START_TEST(test_failed_load)
{
    fixture f;
    llmrt_error err = {0};
    char body[65536];
    /* a folder that does not exist is refused before anything listens */
    {
        char *dir = tu_mkdtemp(), set[4200];
        snprintf(set, sizeof set, "model.path=%s/none", dir);
        llmrt_runtime *rt = runtime(set);
        llmrt_server *s = NULL;
        ck_assert_int_eq(llmrt_server_open(rt, &s, &err), LLMRT_ERR_NOT_FOUND);
        ck_assert_msg(strstr(err.msg, "/none") && strstr(err.msg, "model.path"), "%s", err.msg);
        ck_assert_ptr_null(s);
        llmrt_runtime_close(rt);
        tu_rmtree(dir);
        free(dir);
        memset(&err, 0, sizeof err);
    }
    /* one that looks like a model (config.json) but holds no weights fails at load */
    char *dir = tu_mkdtemp(), sub[4200];
    snprintf(sub, sizeof sub, "%s/absent", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    free(tu_write_file(sub, "config.json", "{\"architectures\": [\"Qwen3ForCausalLM\"]}"));
    fixture_open(&f, dir, "absent");

    /* listening, nothing loaded: /health says so, the model card is there already */
    ck_assert_int_eq(http(f.port, "GET", "/health", NULL, body, sizeof body), 503);
    ck_assert_msg(strstr(body, "model_loading"), "%s", body);
    ck_assert_int_eq(http(f.port, "GET", "/v1/models", NULL, body, sizeof body), 200);
    ck_assert_msg(strstr(body, "\"id\":\"tiny\""), "%s", body);
    ck_assert_int_eq(http(f.port, "POST", "/v1/completions", "{\"prompt\":[1,2]}", body,
                          sizeof body), 503);

    ck_assert_int_eq(llmrt_server_load(f.s, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_server_load(f.s, &err), LLMRT_ERR_STATE); /* only once */
    memset(&err, 0, sizeof err);
    ck_assert_int_ne(wait_loaded(f.s, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "absent"), "the error should name the folder: %s", err.msg);
    ck_assert_int_eq(http(f.port, "GET", "/health", NULL, body, sizeof body), 503);

    wait_idle(f.s);
    fixture_close(&f);
}
END_TEST

START_TEST(test_load_serve_drain)
{
    char *dir = tu_mkdtemp(), cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' mkmodel --preset tiny -q -o '%s/m'", tu_env("LLMRT"), dir);
    int rc = tu_run(cmd, &out);
    ck_assert_msg(rc == 0, "mkmodel: %s", out);
    free(out);
    fixture f;
    fixture_open(&f, dir, "m");
    llmrt_error err = {0};
    char body[65536];
    ck_assert_int_eq(llmrt_server_load(f.s, &err), LLMRT_OK);
    ck_assert_msg(wait_loaded(f.s, &err) == LLMRT_OK, "%s", err.msg);

    ck_assert_int_eq(http(f.port, "GET", "/health", NULL, body, sizeof body), 200);
    ck_assert_int_eq(http(f.port, "POST", "/v1/completions",
                          "{\"prompt\":[1,2,3],\"max_tokens\":3,\"ignore_eos\":true}", body,
                          sizeof body),
                     200);
    ck_assert_msg(strstr(body, "\"completion_tokens\":3"), "%s", body);
    wait_idle(f.s);

    llmrt_server_drain(f.s);
    ck_assert_int_eq(http(f.port, "GET", "/health", NULL, body, sizeof body), -1);
    llmrt_server_abort(f.s); /* nothing in flight: a no-op */
    fixture_close(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("life cycle");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_open_needs_a_model);
    tcase_add_test(tc, test_failed_load);
    tcase_add_test(tc, test_load_serve_drain);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
