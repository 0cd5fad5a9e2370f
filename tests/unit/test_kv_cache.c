/* test_kv_cache.c — the paged KV cache: geometry and byte counts, block 0 reserved and zeroed,
 * reserve is all-or-nothing, release returns every block, slots follow the block table. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "mock_backend.h"
#include "test_util.h"

START_TEST(test_geometry_and_zero_block)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_kv kv;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_init(&kv, &be, 3, 2, 8, 16, 10, LLMRT_DTYPE_F16, &err), LLMRT_OK);
    ck_assert_uint_eq(llmrt_kv_bytes_per_token(3, 2, 8, LLMRT_DTYPE_F16), 2u * 3 * 2 * 8 * 2);
    ck_assert_uint_eq(kv.block_bytes, 16u * 2 * 8 * 2);
    ck_assert_uint_eq(kv.bytes, 11u * kv.block_bytes * 2 * 3); /* 10 usable + reserved */
    ck_assert_int_eq(llmrt_kv_usable_blocks(&kv), 10);
    ck_assert_int_eq(llmrt_kv_used_blocks(&kv), 0);
    ck_assert_int_eq(kv.view.n_blocks, 11);
    ck_assert_ptr_eq(kv.view.k, kv.k);
    /* layers do not overlap and block 0 of each is zero */
    for (int l = 0; l < 3; l++) {
        ck_assert((char *)kv.v[l] - (char *)kv.k[l] == (ptrdiff_t)(11 * kv.block_bytes));
        const unsigned char *k0 = kv.k[l], *v0 = kv.v[l];
        for (size_t i = 0; i < kv.block_bytes; i++)
            ck_assert(k0[i] == 0 && v0[i] == 0);
    }
    llmrt_kv_free(&kv);
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0);
    mock_backend_free(&be);
}
END_TEST

START_TEST(test_reserve_release)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_kv kv;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_init(&kv, &be, 1, 1, 4, 4, 6, LLMRT_DTYPE_F32, &err), LLMRT_OK);
    llmrt_block_table a = {0}, b = {0};
    ck_assert_int_eq(llmrt_kv_blocks_needed(&kv, &a, 9), 3);
    ck_assert_int_eq(llmrt_kv_table_reserve(&kv, &a, 9, &err), LLMRT_OK);
    ck_assert_int_eq(a.n, 3);
    ck_assert_int_eq(llmrt_kv_blocks_needed(&kv, &a, 12), 0);
    ck_assert_int_eq(llmrt_kv_table_reserve(&kv, &a, 12, &err), LLMRT_OK);
    ck_assert_int_eq(a.n, 3);
    /* ids are distinct and never the reserved block 0 */
    for (int i = 0; i < a.n; i++) {
        ck_assert_int_gt(a.ids[i], 0);
        for (int j = 0; j < i; j++)
            ck_assert_int_ne(a.ids[i], a.ids[j]);
    }
    /* slot of a position follows the table */
    ck_assert_int_eq(llmrt_kv_slot(&kv, &a, 0), a.ids[0] * 4);
    ck_assert_int_eq(llmrt_kv_slot(&kv, &a, 6), a.ids[1] * 4 + 2);
    /* all-or-nothing: 4 more blocks do not fit in the 3 free */
    ck_assert_int_eq(llmrt_kv_table_reserve(&kv, &b, 16, &err), LLMRT_ERR_LIMIT);
    ck_assert_ptr_nonnull(strstr(err.msg, "4 more blocks needed, 3 free of 6"));
    ck_assert_int_eq(b.n, 0);
    ck_assert_int_eq(kv.n_free, 3);
    ck_assert_int_eq(llmrt_kv_table_reserve(&kv, &b, 12, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_kv_used_blocks(&kv), 6);
    llmrt_kv_table_release(&kv, &a);
    ck_assert_int_eq(a.n, 0);
    ck_assert_int_eq(kv.n_free, 3);
    llmrt_kv_table_release(&kv, &b);
    ck_assert_int_eq(kv.n_free, 6);
    /* a stack: the first block of the table released last is handed out first */
    ck_assert_int_eq(llmrt_kv_table_reserve(&kv, &a, 1, &err), LLMRT_OK);
    ck_assert_int_eq(a.ids[0], b.ids[0]);
    llmrt_kv_table_release(&kv, &a);
    llmrt_kv_table_free(&a);
    llmrt_kv_table_free(&b);
    llmrt_kv_free(&kv);
    mock_backend_free(&be);
}
END_TEST

START_TEST(test_bad_geometry)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_kv kv;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_init(&kv, &be, 1, 0, 4, 4, 6, LLMRT_DTYPE_F32, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "kv heads 0"));
    ck_assert_int_eq(mock_backend_get_stats(&be).live_dev, 0);
    mock_backend_free(&be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv_cache");
    TCase *tc = tcase_create("kv_cache");
    tcase_add_test(tc, test_geometry_and_zero_block);
    tcase_add_test(tc, test_reserve_release);
    tcase_add_test(tc, test_bad_geometry);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
