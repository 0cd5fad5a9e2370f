/* test_config.c — runtime.ini parsing and validation: every rejection names file:line (or
 * the env variable / --set) and what would be right; overrides apply in order; plugin
 * sections pass through untouched. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

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

START_TEST(test_defaults_and_values)
{
    llmrt_config *cfg;
    llmrt_error err = {0};
    ck_assert_int_eq(load("; comment\n[cache]\nblock_size = 32\n\n[memory]\nplugin = uva\n"
                          "fallback = error\n[scheduler]\nasync_scheduling = off\n",
                          &cfg, &err),
                     LLMRT_OK);
    ck_assert_int_eq(llmrt_config_int(cfg, "cache.block_size"), 32);
    ck_assert_str_eq(llmrt_config_get(cfg, "memory.plugin"), "uva");
    ck_assert_int_eq(llmrt_config_bool(cfg, "scheduler.async_scheduling"), 0);
    ck_assert_str_eq(llmrt_config_get(cfg, "runtime.backend"), "auto"); /* default */
    ck_assert_str_eq(llmrt_config_origin(cfg, "runtime.backend"), "default");
    ck_assert_msg(strstr(llmrt_config_origin(cfg, "cache.block_size"), "t.ini:3"), "%s",
                  llmrt_config_origin(cfg, "cache.block_size"));
    ck_assert_ptr_null(llmrt_config_get(cfg, "cache.nonexistent"));
    llmrt_config_free(cfg);
}
END_TEST

START_TEST(test_errors_name_the_place)
{
    expect_error("[cache]\nblock_sise = 8\n", "t.ini:2", "did you mean cache.block_size?");
    expect_error("[cahce]\nblock_size = 8\n", "t.ini:2", "did you mean [cache]?");
    expect_error("[nonsense_section_name]\nx = 1\n", "unknown section [nonsense_section_name]", NULL);
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

START_TEST(test_overrides_in_order)
{
    char *path = tu_write_file(dir, "o.ini", "[memory]\nplugin = pageable\n[cache]\nblock_size = 8\n");
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
    free(path);
}
END_TEST

START_TEST(test_plugin_sections_pass_through)
{
    llmrt_config *cfg;
    llmrt_error err = {0};
    ck_assert_int_eq(load("[backend.cpu]\nthreads = 1\nwhatever = x\n[memory.pinned]\n"
                          "double_buffer = true\n",
                          &cfg, &err),
                     LLMRT_OK);
    const llmrt_section *s = llmrt_config_plugin_section(cfg, "backend.cpu");
    ck_assert_uint_eq(s->n, 2);
    ck_assert_str_eq(llmrt_section_get(s, "threads"), "1");
    ck_assert_msg(strstr(s->where[1], "t.ini:3"), "%s", s->where[1]);
    ck_assert_str_eq(llmrt_config_get(cfg, "backend.cpu.threads"), "1");
    ck_assert_uint_eq(llmrt_config_plugin_section(cfg, "memory.uva")->n, 0);
    ck_assert_uint_eq(llmrt_config_plugin_section_count(cfg), 2);
    llmrt_config_free(cfg);
}
END_TEST

START_TEST(test_relative_paths_resolve_against_the_file)
{
    llmrt_config *cfg;
    llmrt_error err = {0};
    ck_assert_int_eq(load("[model]\npath = models/tiny\n", &cfg, &err), LLMRT_OK);
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
    tcase_add_test(tc, test_overrides_in_order);
    tcase_add_test(tc, test_plugin_sections_pass_through);
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
