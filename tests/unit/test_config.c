/* test_config.c — runtime.ini parsing and validation: every rejection names file:line (or
 * the env variable / --set) and what would be right; overrides apply by level; integer
 * bounds hold exactly; the INI reader's traps (long lines, continuation lines, duplicates,
 * sections without keys, folders and FIFOs as files) are errors; plugin sections of
 * undeclared plugins pass through untouched, declared ones are validated and filled in with
 * defaults; key tables are checked; secrets are never shown. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "test_util.h"

static char *dir;

/* Load `text` as an INI file; returns status and fills err. */
static llmrt_status load(const char *text, llmrt_config **cfg, llmrt_error *err)
{
    char *path = tu_write_file(dir, "t.ini", text);
    llmrt_status st = llmrt_config_build(path, NULL, 0, cfg, err);
    free(path);
    return st;
}

static void expect_error(const char *text, const char *a, const char *b)
{
    llmrt_config *cfg = NULL;
    llmrt_error err = {0};
    ck_assert_int_ne(load(text, &cfg, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, a) && (!b || strstr(err.msg, b)), "message '%s' lacks '%s'/'%s'",
                  err.msg, a, b ? b : "");
}

static llmrt_config *load_ok(const char *text)
{
    llmrt_config *cfg = NULL;
    llmrt_error err = {0};
    ck_assert_msg(load(text, &cfg, &err) == LLMRT_OK, "'%s': %s", text, err.msg);
    return cfg;
}

/* What llmrt_config_show (or the template) prints, as a string (caller frees). */
static char *shown_text(const llmrt_config *cfg, int template)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    if (template)
        llmrt_config_write_template(cfg, f);
    else
        llmrt_config_show(cfg, f);
    fclose(f);
    return buf;
}

START_TEST(test_defaults_and_values)
{
    llmrt_config *cfg = load_ok("; comment\n[cache]\nblock_size = 32\n\n[memory]\nplugin = uva\n"
                                "fallback = error\n[scheduler]\nasync_scheduling = off\n");
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.block_size"), 32);
    ck_assert_str_eq(llmrt_config_get(cfg, "memory.plugin"), "uva");
    ck_assert_int_eq(llmrt_config_bool(cfg, "scheduler.async_scheduling"), 0);
    ck_assert_str_eq(llmrt_config_get(cfg, "runtime.backend"), "auto"); /* default */
    ck_assert_str_eq(llmrt_config_origin(cfg, "runtime.backend"), "default");
    ck_assert_msg(strstr(llmrt_config_origin(cfg, "cache.block_size"), "t.ini:3"), "%s",
                  llmrt_config_origin(cfg, "cache.block_size"));
    ck_assert_ptr_null(llmrt_config_get(cfg, "cache.nonexistent"));
    ck_assert(llmrt_config_is_default(cfg, "runtime.backend"));
    ck_assert(!llmrt_config_is_default(cfg, "cache.block_size"));
    llmrt_config_free(cfg);
    cfg = load_ok("[cache]\ngpu_memory_utilization = 0.8\nblock_size = +16\n");
    ck_assert(llmrt_config_is_default(cfg, "cache.gpu_memory_utilization")); /* "0.80" */
    ck_assert(llmrt_config_is_default(cfg, "cache.block_size"));
    llmrt_config_free(cfg);
}
END_TEST

START_TEST(test_errors_name_the_place)
{
    expect_error("[cache]\nblock_sise = 8\n", "t.ini:2", "did you mean cache.block_size?");
    expect_error("[cahce]\nblock_size = 8\n", "t.ini:1", "did you mean [cache]?");
    expect_error("[nonsense_section_name]\nx = 1\n", "unknown section [nonsense_section_name]",
                 NULL);
    expect_error("[cache]\nblock_size = big\n", "t.ini:2", "not an integer");
    expect_error("[cache]\nblock_size = 0\n", "out of range", "1..1024");
    expect_error("[cache]\ngpu_memory_utilization = 1.5\n", "out of range", "0.05..0.99");
    expect_error("[runtime]\nbackend = gpu\n", "t.ini:2", "allowed: auto|cpu|cuda");
    expect_error("[scheduler]\nasync_scheduling = perhaps\n", "not a boolean", NULL);
    expect_error("x = 1\n", "t.ini:1", "outside any [section]");
    expect_error("[cache]\nthis line has no equals sign\n", "t.ini:2", "syntax error");
    expect_error("[cache\nblock_size = 8\n", "t.ini:1", "syntax error");
}
END_TEST

/* Ranges are whole 64-bit integers (or doubles), both ends enforced: "0..65535" read with
 * sscanf("%lf..%lf") stopped at "0." and left every upper bound open. */
START_TEST(test_integer_bounds_exact)
{
    expect_error("[server]\nport = 99999\n", "t.ini:2: server.port = 99999 is out of range",
                 "0..65535");
    expect_error("[cache]\nblock_size = 99999999999\n", "cache.block_size = 99999999999",
                 "out of range (allowed: 1..1024)");
    expect_error("[server]\ntimeout_s = 4294967297\n", "server.timeout_s = 4294967297",
                 "out of range (allowed: 1..86400)");
    expect_error("[server]\nport = 99999999999999999999\n", "out of range", "0..65535");
    expect_error("[server]\nport = -1\n", "out of range", "0..65535");
    expect_error("[server]\nport = 80.5\n", "not an integer", NULL);
    expect_error("[server]\nport = 0x50\n", "not an integer", NULL);
    expect_error("[cache]\ngpu_memory_utilization = 0.995\n", "out of range", "0.05..0.99");
    expect_error("[server]\nlog_interval_s = 3600.5\n", "out of range", "0..3600");
    expect_error("[server]\nlog_interval_s = nan\n", "not a number", NULL);
    llmrt_config *cfg = load_ok("[server]\nport = 65535\ntimeout_s = 86400\n[cache]\n"
                                "kv_tokens = 100000000\nblock_size = 1024\n");
    ck_assert_int_eq(llmrt_config_int(cfg, "server.port"), 65535);
    ck_assert_int_eq(llmrt_config_int(cfg, "server.timeout_s"), 86400);
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.kv_tokens"), 100000000);
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.block_size"), 1024);
    llmrt_config_free(cfg);
    cfg = load_ok("[server]\nport = 0\n");
    ck_assert_int_eq(llmrt_config_int(cfg, "server.port"), 0);
    llmrt_config_free(cfg);
}
END_TEST

/* Callers read core's integers into int / int32_t: every bound must fit, so a typed getter's
 * value never truncates. */
START_TEST(test_core_integers_fit_int32)
{
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        const llmrt_cfg_section *s = &llmrt_config_schema[i];
        llmrt_error err = {0};
        ck_assert_msg(llmrt_key_table_check(s->name, s->keys, s->n_keys, &err) == LLMRT_OK, "%s",
                      err.msg);
        for (uint32_t j = 0; j < s->n_keys; j++) {
            const llmrt_key *k = &s->keys[j];
            if (k->type != LLMRT_KEY_INT)
                continue;
            ck_assert_msg(k->allowed, "%s.%s has no range", s->name, k->name);
            long long lo, hi;
            ck_assert_int_eq(sscanf(k->allowed, "%lld..%lld", &lo, &hi), 2);
            ck_assert_msg(lo >= INT32_MIN && hi <= INT32_MAX, "%s.%s: %s does not fit int32",
                          s->name, k->name, k->allowed);
        }
    }
}
END_TEST

/* An unknown section is named at its header, also when it holds no key. */
START_TEST(test_unknown_section_at_header)
{
    expect_error("[cache]\nblock_size = 8\n\n[nonsense]\nx = 1\n", "t.ini:4: unknown section "
                                                                   "[nonsense]",
                 NULL);
    expect_error("[cache]\nblock_size = 8\n[bogus]\n", "t.ini:3: unknown section [bogus]", NULL);
    expect_error("[cache]\n[memroy]\n; nothing here\n[server]\nport = 1\n",
                 "t.ini:2: unknown section [memroy] (did you mean [memory]?)", NULL);
    /* a plugin-shaped section without keys is fine (its plugin may be absent: a warning) */
    llmrt_config *cfg = load_ok("[memory.pinned]\n");
    ck_assert_msg(strstr(llmrt_config_section_origin(cfg, "memory.pinned"), "t.ini:1"), "%s",
                  llmrt_config_section_origin(cfg, "memory.pinned"));
    llmrt_config_free(cfg);
}
END_TEST

/* inih reads lines of up to 199 characters; a longer one must be an error, never split into
 * a live setting (a 230-character comment ending in "block_size = 64" set it). */
START_TEST(test_long_line_is_an_error)
{
    char text[600], pad[300];
    memset(pad, 'x', sizeof pad);
    /* 199 characters, then 31 that inih read as a line of their own: "block_size = 64" */
    snprintf(text, sizeof text, "[cache]\n; %.*s%16sblock_size = 64\nkv_tokens = 0\n", 197, pad,
             "");
    ck_assert_uint_eq(strlen(strchr(text, ';')) - strlen(strstr(text, "\nkv_tokens")), 230);
    expect_error(text, "t.ini:2: line longer than 199 characters", NULL);
    snprintf(text, sizeof text, "[model]\npath = /%.*s\n", 250, pad);
    expect_error(text, "t.ini:2: line longer than", NULL);
    /* 199 characters exactly still fit */
    snprintf(text, sizeof text, "[cache]\n;%.*s\nblock_size = 64\n", 198, pad);
    llmrt_config *cfg = load_ok(text);
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.block_size"), 64);
    llmrt_config_free(cfg);
    /* a NUL byte would end inih's line early */
    char nul_path[4200];
    snprintf(nul_path, sizeof nul_path, "%s/nul.ini", dir);
    FILE *f = fopen(nul_path, "w");
    ck_assert_ptr_nonnull(f);
    static const char bytes[] = "[cache]\nkv_tokens = 8\0block_size = 64\n";
    fwrite(bytes, 1, sizeof bytes - 1, f);
    fclose(f);
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_config_build(nul_path, NULL, 0, &cfg, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "nul.ini:2: a NUL byte"), "%s", err.msg);
    unlink(nul_path);
}
END_TEST

START_TEST(test_duplicates_are_errors)
{
    expect_error("[cache]\nblock_size = 8\nblock_size = 16\n",
                 "t.ini:3: duplicate key 'block_size' in [cache] (first set at line 2", NULL);
    expect_error("[cache]\nblock_size = 8\n[memory]\nplugin = uva\n[cache]\nkv_tokens = 1\n",
                 "t.ini:5: duplicate section [cache] (first at line 1", NULL);
    expect_error("[memory.pinned]\ndouble_buffer = true\n[memory.pinned]\n",
                 "t.ini:3: duplicate section [memory.pinned]", NULL);
    expect_error("[backend.cpu]\nthreads = 1\nthreads = 2\n", "t.ini:3: duplicate key 'threads'",
                 NULL);
}
END_TEST

/* inih continues a value on an indented line (and, first in a section, reads it as a key):
 * llmrt accepts neither. */
START_TEST(test_indented_lines_are_errors)
{
    expect_error("[cache]\nblock_size = 8\n  16\n", "t.ini:3: the line starts with whitespace",
                 "continuation");
    expect_error("[cache]\nblock_size = 8\n\tkv_tokens = 64\n", "t.ini:3", "whitespace");
    expect_error("[cache]\n  block_size = 8\n", "t.ini:2", "whitespace");
    expect_error("[cache]\nblock_size = 8\n  [server]\n", "t.ini:3", "whitespace");
    /* indented comments and blank lines are fine */
    llmrt_config *cfg = load_ok("[cache]\n   ; a comment\n\t\n   \nblock_size = 8\n");
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.block_size"), 8);
    llmrt_config_free(cfg);
}
END_TEST

/* -c of a folder or a FIFO is an error and never blocks (a FIFO's open waited for a writer;
 * a folder read as an empty config). */
START_TEST(test_not_a_regular_file)
{
    llmrt_config *cfg = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_config_build(dir, NULL, 0, &cfg, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "is a folder"), "%s", err.msg);
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo.ini", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(llmrt_config_build(fifo, NULL, 0, &cfg, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
    unlink(fifo);
    ck_assert_int_eq(llmrt_config_build("/dev/zero", NULL, 0, &cfg, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "not a regular file"), "%s", err.msg);
    char big[4200];
    snprintf(big, sizeof big, "%s/big.ini", dir);
    FILE *f = fopen(big, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 40000; i++)
        fputs("; a comment line of some length\n", f);
    fclose(f);
    ck_assert_int_eq(llmrt_config_build(big, NULL, 0, &cfg, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "at most"), "%s", err.msg);
    unlink(big);
    ck_assert_int_eq(llmrt_config_build("/nonexistent/x.ini", NULL, 0, &cfg, &err), LLMRT_ERR_IO);
}
END_TEST

START_TEST(test_overrides_in_order)
{
    char *path =
        tu_write_file(dir, "o.ini", "[memory]\nplugin = pageable\n[cache]\nblock_size = 8\n");
    setenv("LLMRT_CACHE_BLOCK_SIZE", "64", 1);
    setenv("LLMRT_MEMORY", "pinned", 1);
    const char *sets[] = {"cache.block_size=128", "memory.pinned.double_buffer=false"};
    llmrt_config *cfg;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_config_build(path, sets, 1, &cfg, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.block_size"), 128);
    ck_assert_str_eq(llmrt_config_origin(cfg, "cache.block_size"), "--set");
    ck_assert_str_eq(llmrt_config_get(cfg, "memory.plugin"), "pinned");
    ck_assert_str_eq(llmrt_config_origin(cfg, "memory.plugin"), "env LLMRT_MEMORY");
    llmrt_config_free(cfg);

    ck_assert_int_eq(llmrt_config_build(path, sets, 2, &cfg, &err), LLMRT_OK);
    const llmrt_section *s = llmrt_config_plugin_section(cfg, "memory.pinned");
    ck_assert_uint_eq(s->n, 1);
    ck_assert_str_eq(s->keys[0], "double_buffer");
    ck_assert_str_eq(s->values[0], "false");
    ck_assert_str_eq(s->where[0], "--set");
    llmrt_config_free(cfg);

    setenv("LLMRT_CACHE_BLOCK_SIZE", "zero", 1);
    ck_assert_int_ne(llmrt_config_build(path, NULL, 0, &cfg, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "env LLMRT_CACHE_BLOCK_SIZE"), "%s", err.msg);
    unsetenv("LLMRT_CACHE_BLOCK_SIZE");
    unsetenv("LLMRT_MEMORY");

    const char *bad[] = {"cache.block_size"};
    ck_assert_int_ne(llmrt_config_build(path, bad, 1, &cfg, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "expected section.key=value"), "%s", err.msg);
    const char *typo[] = {"cache.blok_size=4"};
    ck_assert_int_ne(llmrt_config_build(path, typo, 1, &cfg, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "--set") && strstr(err.msg, "did you mean cache.block_size"),
                  "%s", err.msg);
    const char *big[] = {"server.port=99999"};
    ck_assert_int_ne(llmrt_config_build(NULL, big, 1, &cfg, &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "--set: server.port = 99999 is out of range"), "%s", err.msg);
    free(path);
}
END_TEST

START_TEST(test_plugin_sections_pass_through)
{
    llmrt_config *cfg = load_ok("[backend.cpu]\nthreads = 1\nwhatever = x\n[memory.pinned]\n"
                                "double_buffer = true\n");
    const llmrt_section *s = llmrt_config_plugin_section(cfg, "backend.cpu");
    ck_assert_uint_eq(s->n, 2);
    ck_assert_str_eq(llmrt_section_get(s, "threads"), "1");
    ck_assert_msg(strstr(s->where[1], "t.ini:3"), "%s", s->where[1]);
    ck_assert_str_eq(llmrt_config_get(cfg, "backend.cpu.threads"), "1");
    ck_assert_uint_eq(llmrt_config_plugin_section(cfg, "memory.uva")->n, 0);
    ck_assert_uint_eq(llmrt_config_plugin_section_count(cfg), 2);
    /* a plugin without a key table (ABI 1.0) keeps its section as written */
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_config_declare(cfg, "backend.cpu", NULL, 0, "old", &err), LLMRT_OK);
    s = llmrt_config_plugin_section(cfg, "backend.cpu");
    ck_assert_uint_eq(s->n, 2);
    ck_assert_str_eq(llmrt_section_get(s, "whatever"), "x");
    ck_assert_ptr_null(llmrt_config_decl(cfg, "backend.cpu.threads"));
    ck_assert(llmrt_config_section_declared(cfg, "backend.cpu"));
    ck_assert(!llmrt_config_section_declared(cfg, "memory.pinned"));
    llmrt_config_free(cfg);
}
END_TEST

/* A test plugin's table: every type, a range, choices, a path, a secret, a developer key. */
static const llmrt_key test_keys[] = {
    {"level", LLMRT_KEY_INT, "3", "1..9", "How much.", 0},
    {"mode", LLMRT_KEY_ENUM, "fast", "fast|slow", "Which way.", 0},
    {"dir", LLMRT_KEY_PATH, "", NULL, "A folder.", 0},
    {"token", LLMRT_KEY_STRING, "", NULL, "A secret.", LLMRT_KEY_SECRET},
    {"tune", LLMRT_KEY_BOOL, "false", NULL, "A kernel experiment.", LLMRT_KEY_DEVELOPER},
    {"ratio", LLMRT_KEY_FLOAT, "0.5", "0..1", "A fraction.", 0},
};
#define N_TEST_KEYS ((uint32_t)(sizeof test_keys / sizeof test_keys[0]))

static llmrt_status build_declared(const char *text, const char *const *sets, int n_sets,
                                   llmrt_config **cfg, llmrt_error *err)
{
    char *path = text ? tu_write_file(dir, "p.ini", text) : NULL;
    llmrt_status st = llmrt_config_build(path, sets, n_sets, cfg, err);
    free(path);
    if (st)
        return st;
    st = llmrt_config_declare(*cfg, "backend.test", test_keys, N_TEST_KEYS, "A test backend", err);
    if (st) {
        llmrt_config_free(*cfg);
        *cfg = NULL;
    }
    return st;
}

/* Declared keys: validated like core's, defaults filled in, environment applied after the
 * file and --set were read but below --set. */
START_TEST(test_declared_plugin_keys)
{
    ck_assert_int_eq(llmrt_key_table_check("backend.test", test_keys, N_TEST_KEYS, NULL), LLMRT_OK);
    setenv("LLMRT_BACKEND_TEST_LEVEL", "7", 1);
    setenv("LLMRT_BACKEND_TEST_MODE", "fast", 1);
    const char *sets[] = {"backend.test.mode=slow", "backend.test.token=hunter2"};
    llmrt_config *cfg = NULL;
    llmrt_error err = {0};
    ck_assert_msg(build_declared("[backend.test]\nlevel = 5\ndir = sub\n", sets, 2, &cfg, &err) ==
                      LLMRT_OK,
                  "%s", err.msg);
    ck_assert_int_eq(llmrt_config_int(cfg, "backend.test.level"), 7); /* env over the file */
    ck_assert_str_eq(llmrt_config_origin(cfg, "backend.test.level"),
                     "env LLMRT_BACKEND_TEST_LEVEL");
    ck_assert_str_eq(llmrt_config_get(cfg, "backend.test.mode"), "slow"); /* --set over env */
    ck_assert_str_eq(llmrt_config_origin(cfg, "backend.test.mode"), "--set");
    char want[4200];
    snprintf(want, sizeof want, "%s/sub", dir); /* relative to the file's folder */
    ck_assert_str_eq(llmrt_config_get(cfg, "backend.test.dir"), want);
    ck_assert_str_eq(llmrt_config_get(cfg, "backend.test.tune"), "false");
    ck_assert_str_eq(llmrt_config_origin(cfg, "backend.test.tune"), "default");
    ck_assert(llmrt_config_is_default(cfg, "backend.test.tune"));
    ck_assert(!llmrt_config_is_default(cfg, "backend.test.level"));
    ck_assert_str_eq(llmrt_config_get(cfg, "backend.test.token"), "hunter2");
    ck_assert_str_eq(llmrt_config_shown(cfg, "backend.test.token"), "(set)");
    ck_assert_ptr_eq(llmrt_config_decl(cfg, "backend.test.level"), &test_keys[0]);
    /* create() sees every declared key, in table order */
    const llmrt_section *s = llmrt_config_plugin_section(cfg, "backend.test");
    ck_assert_uint_eq(s->n, N_TEST_KEYS);
    for (uint32_t i = 0; i < N_TEST_KEYS; i++)
        ck_assert_str_eq(s->keys[i], test_keys[i].name);
    ck_assert_str_eq(llmrt_key_value(s, test_keys, N_TEST_KEYS, "ratio"), "0.5");
    char *text = shown_text(cfg, 0);
    ck_assert_msg(!strstr(text, "hunter2"), "the secret is shown:\n%s", text);
    ck_assert_msg(strstr(text, "token = (set)") && strstr(text, "(developer key)") &&
                      strstr(text, "[backend.test]    ; the keys of plugin 'test'"),
                  "%s", text);
    free(text);
    text = shown_text(cfg, 1);
    ck_assert_msg(strstr(text, "\n[backend.test]\n") &&
                      strstr(text, "; allowed: 1..9\nlevel = 3\n") &&
                      strstr(text, "; tune = false\n") && strstr(text, "; How much.\n") &&
                      strstr(text, "A test backend") && !strstr(text, "hunter2") &&
                      strstr(text, "\n[server]\n"),
                  "%s", text);
    free(text);
    llmrt_config_free(cfg);
    unsetenv("LLMRT_BACKEND_TEST_LEVEL");
    unsetenv("LLMRT_BACKEND_TEST_MODE");

    /* errors: in the file (file:line), in --set, in the environment */
    ck_assert_int_eq(build_declared("[backend.test]\nlevle = 5\n", NULL, 0, &cfg, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "p.ini:2: unknown key 'levle' in [backend.test] (did you mean "
                                  "backend.test.level?)"),
                  "%s", err.msg);
    ck_assert_int_eq(build_declared("[backend.test]\nlevel = 10\n", NULL, 0, &cfg, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "p.ini:2: backend.test.level = 10 is out of range (allowed: "
                                  "1..9)"),
                  "%s", err.msg);
    const char *bad_set[] = {"backend.test.mode=medium"};
    ck_assert_int_eq(build_declared(NULL, bad_set, 1, &cfg, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "--set: backend.test.mode = 'medium' is not allowed (allowed: "
                                  "fast|slow)"),
                  "%s", err.msg);
    setenv("LLMRT_BACKEND_TEST_RATIO", "2", 1);
    ck_assert_int_eq(build_declared(NULL, NULL, 0, &cfg, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "env LLMRT_BACKEND_TEST_RATIO: backend.test.ratio = 2 is out of "
                                  "range"),
                  "%s", err.msg);
    unsetenv("LLMRT_BACKEND_TEST_RATIO");

    /* once declared, later sets are checked at once */
    ck_assert_int_eq(build_declared(NULL, NULL, 0, &cfg, &err), LLMRT_OK);
    ck_assert_int_ne(llmrt_config_set(cfg, "backend.test.levl=2", "--set", &err), LLMRT_OK);
    ck_assert_msg(strstr(err.msg, "did you mean backend.test.level?"), "%s", err.msg);
    ck_assert_int_eq(llmrt_config_set(cfg, "backend.test.level=2", "--set", &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_config_int(cfg, "backend.test.level"), 2);
    llmrt_config_free(cfg);
}
END_TEST

START_TEST(test_secret_never_shown)
{
    llmrt_config *cfg = load_ok("[server]\napi_key = sekrit-value\n");
    ck_assert_str_eq(llmrt_config_get(cfg, "server.api_key"), "sekrit-value");
    ck_assert_str_eq(llmrt_config_shown(cfg, "server.api_key"), "(set)");
    char *text = shown_text(cfg, 0);
    ck_assert_msg(!strstr(text, "sekrit") && strstr(text, "api_key = (set)"), "%s", text);
    free(text);
    llmrt_config_entry e;
    for (size_t i = 0; llmrt_config_entry_at(cfg, i, &e); i++)
        ck_assert_msg(!strstr(e.shown, "sekrit"), "%s.%s shows the secret", e.section, e.key);
    llmrt_config_free(cfg);
    cfg = load_ok("[server]\nport = 1\n");
    ck_assert_str_eq(llmrt_config_shown(cfg, "server.api_key"), "(unset)");
    llmrt_config_free(cfg);
}
END_TEST

START_TEST(test_relative_paths_resolve_against_the_file)
{
    llmrt_config *cfg = load_ok("[model]\npath = models/tiny\n");
    char want[4200];
    snprintf(want, sizeof want, "%s/models/tiny", dir);
    ck_assert_str_eq(llmrt_config_get(cfg, "model.path"), want);
    llmrt_config_free(cfg);
}
END_TEST

START_TEST(test_edit_distance)
{
    ck_assert_int_eq(llmrt_edit_distance("block_size", "block_size"), 0);
    ck_assert_int_eq(llmrt_edit_distance("blok_size", "block_size"), 1);
    ck_assert_int_eq(llmrt_edit_distance("", "abc"), 3);
}
END_TEST

int main(void)
{
    dir = tu_mkdtemp();
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, test_defaults_and_values);
    tcase_add_test(tc, test_errors_name_the_place);
    tcase_add_test(tc, test_integer_bounds_exact);
    tcase_add_test(tc, test_core_integers_fit_int32);
    tcase_add_test(tc, test_unknown_section_at_header);
    tcase_add_test(tc, test_long_line_is_an_error);
    tcase_add_test(tc, test_duplicates_are_errors);
    tcase_add_test(tc, test_indented_lines_are_errors);
    tcase_add_test(tc, test_not_a_regular_file);
    tcase_add_test(tc, test_overrides_in_order);
    tcase_add_test(tc, test_plugin_sections_pass_through);
    tcase_add_test(tc, test_declared_plugin_keys);
    tcase_add_test(tc, test_secret_never_shown);
    tcase_add_test(tc, test_relative_paths_resolve_against_the_file);
    tcase_add_test(tc, test_edit_distance);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tu_rmtree(dir);
    return failed ? 1 : 0;
}
