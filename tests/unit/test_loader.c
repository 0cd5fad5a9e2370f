/* test_loader.c — the plugin loader against deliberately broken plugins (tests/plugins):
 * each failure gives its own specific message naming the file, a bad plugin never hides the
 * good ones, and built-in registration validates the same way. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llmrt/memory.h>

#include "registry.h"
#include "test_util.h"

static char broken_dir[4096];
static llmrt_host host;

static const char *reason_for(llmrt_registry *reg, const char *file)
{
    for (size_t i = 0; i < llmrt_registry_rejected_count(reg); i++) {
        const llmrt_rejection *r = llmrt_registry_rejected_at(reg, i);
        const char *base = strrchr(r->path, '/');
        if (base && strcmp(base + 1, file) == 0)
            return r->reason;
    }
    return NULL;
}

static void expect_reason(llmrt_registry *reg, const char *file, const char *a, const char *b)
{
    const char *r = reason_for(reg, file);
    ck_assert_msg(r != NULL, "%s was not rejected", file);
    ck_assert_msg(strstr(r, a) && (!b || strstr(r, b)), "%s: unexpected reason '%s' (want '%s'%s%s)",
                  file, r, a, b ? " and " : "", b ? b : "");
}

START_TEST(test_broken_plugins_each_rejected)
{
    llmrt_registry *reg;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_registry_new(&host, &reg, &err), LLMRT_OK);
    char *tmp = tu_mkdtemp();
    char *fake = tu_write_file(tmp, "not_elf.so", "this is not a shared object\n");
    llmrt_registry_scan_dir(reg, broken_dir);
    ck_assert_int_ne(llmrt_registry_load_file(reg, fake, &err), LLMRT_OK);

    expect_reason(reg, "not_elf.so", "not an ELF shared object", NULL);
    expect_reason(reg, "unresolved.so", "dlopen failed", "llmrt_test_symbol_that_does_not_exist");
    expect_reason(reg, "no_symbol.so", "missing symbol llmrt_plugin_get", NULL);
    expect_reason(reg, "null_desc.so", "returned NULL", NULL);
    expect_reason(reg, "abi_major.so", "ABI major version mismatch", "expected 1.x, found 2.0");
    char minor[64];
    snprintf(minor, sizeof minor, "expected minor <= %d", LLMRT_ABI_MINOR);
    expect_reason(reg, "abi_minor.so", "needs ABI 1.99", minor);
    expect_reason(reg, "bad_kind.so", "unknown plugin kind 9", NULL);
    expect_reason(reg, "null_vtable.so", "NULL vtable", NULL);
    expect_reason(reg, "null_member.so", "required vtable member 'to_device' is NULL", NULL);
    expect_reason(reg, "init_fails.so", "init failed", "simulated init failure: no widget attached");
    /* dup_a.so sorts first and wins; dup_b.so is rejected naming both files */
    expect_reason(reg, "dup_b.so", "duplicate plugin memory:dup", "dup_a.so");

    /* the good ones are all there */
    const llmrt_plugin_entry *good = llmrt_registry_find(reg, LLMRT_PLUGIN_MEMORY, "good");
    ck_assert_ptr_nonnull(good);
    ck_assert_msg(strstr(good->path, "good.so"), "%s", good->path);
    ck_assert_ptr_nonnull(llmrt_registry_find(reg, LLMRT_PLUGIN_MEMORY, "dup"));
    ck_assert_ptr_null(llmrt_registry_find(reg, LLMRT_PLUGIN_MEMORY, "initfails"));
    ck_assert_uint_eq(llmrt_registry_count(reg), 2);
    ck_assert_uint_eq(llmrt_registry_rejected_count(reg), 11);

    /* scanning the same folder again loads nothing twice and rejects nothing new */
    llmrt_registry_scan_dir(reg, broken_dir);
    ck_assert_uint_eq(llmrt_registry_count(reg), 2);
    ck_assert_uint_eq(llmrt_registry_rejected_count(reg), 11);

    char names[256];
    llmrt_registry_names(reg, LLMRT_PLUGIN_MEMORY, names, sizeof names);
    ck_assert_str_eq(names, "dup, good");
    llmrt_registry_names(reg, LLMRT_PLUGIN_MODEL, names, sizeof names);
    ck_assert_str_eq(names, "(none)");
    free(fake);
    tu_rmtree(tmp);
    free(tmp);
    llmrt_registry_free(reg);
}
END_TEST

/* A plugin folder's *.so must be regular files: a FIFO named x.so would block open (and
 * dlopen) forever, hanging every command; a link to /dev/zero reads as zeros. Both are
 * rejected by kind, without blocking, and the good plugins beside them still load. */
START_TEST(test_non_regular_files_rejected)
{
    llmrt_registry *reg;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_registry_new(&host, &reg, &err), LLMRT_OK);
    char *tmp = tu_mkdtemp();
    free(tu_mkfifo(tmp, "fifo.so"));
    free(tu_symlink(tmp, "zero.so", "/dev/zero"));
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/sub", tmp); /* not scanned: loaded by path below */
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    char *fifo = tu_mkfifo(sub, "named.so");
    char good[4200];
    snprintf(good, sizeof good, "%s/good.so", broken_dir);
    free(tu_symlink(tmp, "good.so", good));
    tu_guard(20);
    llmrt_registry_scan_dir(reg, tmp);
    ck_assert_int_eq(llmrt_registry_load_file(reg, fifo, &err), LLMRT_ERR_IO);
    tu_guard(0);
    ck_assert_msg(strcmp(err.msg, "not a regular file (a FIFO)") == 0, "%s", err.msg);
    expect_reason(reg, "fifo.so", "not a regular file (a FIFO)", NULL);
    expect_reason(reg, "named.so", "not a regular file (a FIFO)", NULL);
    expect_reason(reg, "zero.so", "not a regular file (a character device)", NULL);
    ck_assert_ptr_nonnull(llmrt_registry_find(reg, LLMRT_PLUGIN_MEMORY, "good"));
    free(fifo);
    tu_rmtree(tmp);
    free(tmp);
    llmrt_registry_free(reg);
}
END_TEST

/* Built-in registration goes through the same validation. */
static llmrt_status noop_create(const llmrt_host *h, const llmrt_section *c,
                                const llmrt_backend_ref *b, llmrt_memory **o, llmrt_error *e)
{
    return LLMRT_OK;
}

START_TEST(test_builtin_registration)
{
    llmrt_registry *reg;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_registry_new(&host, &reg, &err), LLMRT_OK);
    static llmrt_memory_vtable vt = {.struct_size = sizeof(llmrt_memory_vtable)};
    static llmrt_plugin_desc d = {sizeof(llmrt_plugin_desc), LLMRT_ABI_VERSION, LLMRT_PLUGIN_MEMORY,
                                  "builtin", "1", "test", "MIT", &vt, NULL, NULL, 0};
    ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin>", &err), LLMRT_ERR_ABI);
    ck_assert_msg(strstr(err.msg, "required vtable member 'create' is NULL"), "%s", err.msg);
    vt.create = noop_create;
    vt.destroy = (void (*)(llmrt_memory *))free;
    vt.buffer_alloc = (void *)1, vt.buffer_free = (void *)1, vt.to_device = (void *)1;
    vt.to_host = (void *)1, vt.caps = (void *)1, vt.stats = (void *)1;
    ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin>", &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin-again>", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "duplicate plugin memory:builtin") && strstr(err.msg, "<builtin>"),
                  "%s", err.msg);
    d.name = "Bad Name!";
    ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin>", &err), LLMRT_ERR_ABI);
    ck_assert_msg(strstr(err.msg, "invalid plugin name"), "%s", err.msg);
    d.name = "builtin";
    d.struct_size = 8;
    ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin>", &err), LLMRT_ERR_ABI);
    ck_assert_msg(strstr(err.msg, "struct_size"), "%s", err.msg);
    /* a vtable that claims to be smaller than its required members */
    d.struct_size = sizeof d;
    d.name = "small";
    vt.struct_size = 16;
    ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin>", &err), LLMRT_ERR_ABI);
    ck_assert_msg(strstr(err.msg, "too small"), "%s", err.msg);
    vt.struct_size = sizeof vt;
    llmrt_registry_free(reg);
}
END_TEST

/* A descriptor's key table is checked when the plugin is registered: a bad one rejects the
 * plugin, naming the key and what is wrong; a good one registers. */
START_TEST(test_key_table_checked)
{
    static llmrt_memory_vtable vt = {.struct_size = sizeof(llmrt_memory_vtable)};
    vt.create = noop_create;
    vt.destroy = (void (*)(llmrt_memory *))free;
    vt.buffer_alloc = (void *)1, vt.buffer_free = (void *)1, vt.to_device = (void *)1;
    vt.to_host = (void *)1, vt.caps = (void *)1, vt.stats = (void *)1;
    static const llmrt_key good[] = {
        {"level", LLMRT_KEY_INT, "3", "1..9", "How much.", 0},
        {"tune", LLMRT_KEY_ENUM, "auto", "auto|a|b", "Kernel choice.", LLMRT_KEY_DEVELOPER},
    };
    static const llmrt_key dup[] = {
        {"a-b", LLMRT_KEY_BOOL, "true", NULL, "One.", 0},
        {"a_b", LLMRT_KEY_BOOL, "true", NULL, "Two.", 0},
    };
    static const llmrt_key bad_default[] = {{"level", LLMRT_KEY_INT, "10", "1..9", "How much.", 0}};
    static const llmrt_key bad_range[] = {{"level", LLMRT_KEY_INT, "3", "1..x", "How much.", 0}};
    static const llmrt_key bad_type[] = {{"level", (llmrt_key_type)42, "3", NULL, "How much.", 0}};
    static const llmrt_key bad_name[] = {{"Level", LLMRT_KEY_INT, "3", NULL, "How much.", 0}};
    static const llmrt_key no_help[] = {{"level", LLMRT_KEY_INT, "3", NULL, NULL, 0}};
    static const llmrt_key bad_flags[] = {
        {"level", LLMRT_KEY_INT, "3", NULL, "How much.", 1u << 7}};
    static const llmrt_key no_choices[] = {{"mode", LLMRT_KEY_ENUM, "a", NULL, "Which.", 0}};
    static const llmrt_key empty_choice[] = {{"mode", LLMRT_KEY_ENUM, "a", "a||b", "Which.", 0}};
    static const struct {
        const llmrt_key *keys;
        uint32_t n;
        const char *want;
    } cases[] = {
        {dup, 2, "'a-b' and 'a_b' are the same key"},
        {bad_default, 1, "invalid default"},
        {bad_range, 1, "is not \"min..max\""},
        {bad_type, 1, "unknown type 42"},
        {bad_name, 1, "invalid name 'Level'"},
        {no_help, 1, "help is missing"},
        {bad_flags, 1, "unknown flags 0x80"},
        {no_choices, 1, "an enum key needs allowed"},
        {empty_choice, 1, "an enum key needs allowed"},
        {good, 1000, "at most 256"},
    };
    llmrt_registry *reg;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_registry_new(&host, &reg, &err), LLMRT_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llmrt_plugin_desc d = {sizeof(llmrt_plugin_desc), LLMRT_ABI_VERSION, LLMRT_PLUGIN_MEMORY,
                               "keyed", "1", "test", "MIT", &vt, NULL, cases[i].keys, cases[i].n};
        ck_assert_int_eq(llmrt_registry_add(reg, &d, "<builtin>", &err), LLMRT_ERR_ABI);
        ck_assert_msg(strstr(err.msg, "memory plugin 'keyed': bad key table: [memory.keyed]") &&
                          strstr(err.msg, cases[i].want),
                      "case %zu: %s", i, err.msg);
    }
    /* a descriptor built against a header whose struct ends inside the table fields */
    llmrt_plugin_desc cut = {offsetof(llmrt_plugin_desc, n_keys), LLMRT_ABI_VERSION,
                             LLMRT_PLUGIN_MEMORY, "cut", "1", "test", "MIT", &vt, NULL, good, 2};
    ck_assert_int_eq(llmrt_registry_add(reg, &cut, "<builtin>", &err), LLMRT_ERR_ABI);
    ck_assert_msg(strstr(err.msg, "holds keys but not n_keys"), "%s", err.msg);
    static llmrt_plugin_desc ok = {sizeof(llmrt_plugin_desc), LLMRT_ABI_VERSION,
                                   LLMRT_PLUGIN_MEMORY, "keyed", "1", "test", "MIT", &vt, NULL,
                                   good, 2};
    ck_assert_msg(llmrt_registry_add(reg, &ok, "<builtin>", &err) == LLMRT_OK, "%s", err.msg);
    llmrt_registry_free(reg);
}
END_TEST

int main(void)
{
    snprintf(broken_dir, sizeof broken_dir, "%s/tests/broken-plugins", tu_env("LLMRT_BUILD_DIR"));
    host.struct_size = sizeof host;
    host.abi_version = LLMRT_ABI_VERSION;
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, test_broken_plugins_each_rejected);
    tcase_add_test(tc, test_builtin_registration);
    tcase_add_test(tc, test_non_regular_files_rejected);
    tcase_add_test(tc, test_key_table_checked);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
