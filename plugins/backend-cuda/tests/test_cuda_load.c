/* test_cuda_load.c — what backend-cuda.so must do on every machine, GPU or not: load, describe
 * itself (its vtable, the extension entry, its declared [backend.cuda] keys), answer probe()
 * without failing (0 devices comes with CUDA's reason), and reject unknown or malformed
 * [backend.cuda] keys with where they came from. Runs everywhere. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_common.h"

static const llmrt_plugin_desc *desc;

START_TEST(test_descriptor)
{
    ck_assert_ptr_nonnull(desc);
    ck_assert_int_eq(desc->kind, LLMRT_PLUGIN_BACKEND);
    ck_assert_str_eq(desc->name, "cuda");
    ck_assert_uint_eq(LLMRT_ABI_MAJOR_OF(desc->abi_version), LLMRT_ABI_MAJOR);
    const llmrt_backend_vtable *vt = desc->vtable;
    ck_assert_uint_ge(vt->struct_size, sizeof(llmrt_backend_vtable));
    /* every member is implemented except parallel_for (a CPU-backend service), native_handle
     * and the deprecated fused / argmax_head slots (the extensions replace them) */
    ck_assert_ptr_nonnull(vt->graph_begin);
    ck_assert_ptr_nonnull(vt->sample);
    ck_assert_ptr_nonnull(vt->mem_info);
    ck_assert_ptr_nonnull(vt->extension);
    ck_assert_ptr_null(vt->native_handle);
    ck_assert_ptr_null(vt->parallel_for);
    ck_assert_ptr_null(vt->add_rmsnorm);
    ck_assert_ptr_null(vt->qk_norm_rope_store);
    ck_assert_ptr_null(vt->swiglu);
    ck_assert_ptr_null(vt->argmax_head_create);
    ck_assert_ptr_null(vt->argmax_head_forward);
    ck_assert_ptr_null(vt->argmax_head_destroy);
    /* the declared keys: device (INT), pdl (ENUM auto|on|off), tune (a developer's STRING) */
    ck_assert_uint_ge(desc->struct_size, offsetof(llmrt_plugin_desc, n_keys) + sizeof desc->n_keys);
    ck_assert_uint_eq(desc->n_keys, 3);
    ck_assert_str_eq(desc->keys[0].name, "device");
    ck_assert_int_eq(desc->keys[0].type, LLMRT_KEY_INT);
    ck_assert_str_eq(desc->keys[0].def, "0");
    ck_assert_str_eq(desc->keys[1].name, "pdl");
    ck_assert_int_eq(desc->keys[1].type, LLMRT_KEY_ENUM);
    ck_assert_str_eq(desc->keys[1].def, "auto");
    ck_assert_str_eq(desc->keys[1].allowed, "auto|on|off");
    ck_assert_str_eq(desc->keys[2].name, "tune");
    ck_assert_int_eq(desc->keys[2].type, LLMRT_KEY_STRING);
    ck_assert_str_eq(desc->keys[2].def, "");
    ck_assert(desc->keys[2].flags & LLMRT_KEY_DEVELOPER);
    for (uint32_t i = 0; i < desc->n_keys; i++)
        ck_assert_msg(desc->keys[i].help && desc->keys[i].help[0], "key %s has no help",
                      desc->keys[i].name);
    if (desc->init) {
        llmrt_error err = {0};
        llmrt_host h = {sizeof(llmrt_host), LLMRT_ABI_VERSION, NULL, NULL, NULL};
        ck_assert_int_eq(desc->init(&h, &err), LLMRT_OK);
    }
}
END_TEST

START_TEST(test_probe_never_fails)
{
    const llmrt_backend_vtable *vt = desc->vtable;
    llmrt_device_info info[4];
    int32_t count = -1;
    llmrt_error err = {0};
    ck_assert_int_eq(vt->probe(info, 4, &count, &err), LLMRT_OK);
    ck_assert_int_ge(count, 0);
    if (count == 0) {
        printf("probe: 0 devices (%s)\n", err.msg);
        ck_assert_msg(err.msg[0] != 0, "probe found no device but gave no reason");
    } else {
        printf("probe: %d device(s), first %s\n", count, info[0].name);
        ck_assert(info[0].is_gpu);
        ck_assert(info[0].name[0] != 0);
    }
    /* max = 0 only counts */
    int32_t c2 = -1;
    ck_assert_int_eq(vt->probe(NULL, 0, &c2, &err), LLMRT_OK);
    ck_assert_int_eq(c2, count);
}
END_TEST

static llmrt_status create_with(const char *key, const char *value, llmrt_error *err)
{
    const char *keys[1] = {key}, *values[1] = {value}, *where[1] = {"conf/test.ini:7"};
    llmrt_section sec = {"backend.cuda", 1, keys, values, where};
    const llmrt_backend_vtable *vt = desc->vtable;
    llmrt_backend *b = NULL;
    llmrt_status st = vt->create(NULL, &sec, &b, err);
    if (b)
        vt->destroy(b);
    return st;
}

START_TEST(test_section_keys)
{
    llmrt_error err = {0};
    ck_assert_int_eq(create_with("devcie", "0", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "devcie") && strstr(err.msg, "conf/test.ini:7") &&
                      strstr(err.msg, "device"),
                  "message should name the key, where it is and the valid keys: %s", err.msg);
    ck_assert_int_eq(create_with("device", "first", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "first") && strstr(err.msg, "conf/test.ini:7"), "%s", err.msg);
    ck_assert_int_eq(create_with("device", "-1", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(create_with("device", "1024", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "1024") && strstr(err.msg, "1023"), "%s", err.msg);
    ck_assert_int_eq(create_with("pdl", "sometimes", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "sometimes") && strstr(err.msg, "conf/test.ini:7") &&
                      strstr(err.msg, "auto, on or off"),
                  "%s", err.msg);
    ck_assert_int_eq(create_with("tuen", "att_cmin=8", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "tuen") && strstr(err.msg, "tune"), "%s", err.msg);
    /* valid values get as far as looking for a device */
    const char *ok[][2] = {{"pdl", "off"}, {"pdl", "on"}, {"pdl", "auto"}, {"tune", "att_cmin=8,x=1"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        llmrt_status st = create_with(ok[i][0], ok[i][1], &err);
        ck_assert_msg(st == LLMRT_OK || st == LLMRT_ERR_DEVICE, "%s = %s: %s", ok[i][0], ok[i][1],
                      err.msg);
    }
    /* a device index past the last one: invalid where GPUs exist, no device otherwise */
    llmrt_status st = create_with("device", "999", &err);
    ck_assert_msg(st == LLMRT_ERR_INVALID_ARG || st == LLMRT_ERR_DEVICE, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, st == LLMRT_ERR_INVALID_ARG ? "999" : "no CUDA device"), "%s",
                  err.msg);
}
END_TEST

int main(void)
{
    desc = ct_plugin("backend-cuda.so");
    if (!desc)
        return 1;
    Suite *s = suite_create("backend-cuda.load");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, test_descriptor);
    tcase_add_test(tc, test_probe_never_fails);
    tcase_add_test(tc, test_section_keys);
    suite_add_tcase(s, tc);
    return ct_run(s);
}
