/* test_safetensors.c — the safetensors reader and writer: every malformed header gets its own
 * specific message naming the file and the tensor; sharded folders (index and no index);
 * the checkpoint accessor; writer -> reader round trips; and no crash on any truncation or
 * byte flip of a valid file (run under ASan+UBSan in CI). Files are built here, byte by
 * byte, so each test shows exactly what is wrong with its input. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "test_util.h"

/* A safetensors image: 8-byte LE length, the header text as given, `data_bytes` of data
 * (byte i = i & 0xff). Exactly sized (malloc), so ASan sees any overread. */
static uint8_t *image(const char *header, size_t data_bytes, size_t *size)
{
    size_t h = strlen(header);
    *size = 8 + h + data_bytes;
    uint8_t *b = malloc(*size);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_bytes; i++)
        b[8 + h + i] = (uint8_t)i;
    return b;
}

static void write_bytes(const char *d, const char *name, const void *data, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", d, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void write_st(const char *d, const char *name, const char *header, size_t data_bytes)
{
    size_t n;
    uint8_t *b = image(header, data_bytes, &n);
    write_bytes(d, name, b, n);
    free(b);
}

static char *fresh_dir(void)
{
    char *d = tu_mkdtemp();
    free(tu_write_file(d, "config.json", "{\"architectures\": [\"Qwen3ForCausalLM\"]}"));
    return d;
}

/* Parse a header over `data_bytes` of data; expect failure with all of a, b, c (c may be NULL)
 * in the message. */
static void expect_parse_error(const char *header, size_t data_bytes, const char *a,
                               const char *b, const char *c)
{
    size_t n, count = 0;
    uint8_t *img = image(header, data_bytes, &n);
    llmrt_tensor_view *v = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_st_parse("bad.safetensors", img, n, &v, &count, &err);
    ck_assert_msg(st != LLMRT_OK, "header accepted: %s", header);
    ck_assert_ptr_null(v);
    ck_assert_msg(strstr(err.msg, "bad.safetensors") && strstr(err.msg, a) &&
                      (!b || strstr(err.msg, b)) && (!c || strstr(err.msg, c)),
                  "message '%s' lacks '%s' / '%s' / '%s'", err.msg, a, b ? b : "", c ? c : "");
    free(img);
}

START_TEST(test_parse_valid)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                      "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]},"
                      "\"z\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[40,40]}}";
    size_t n, count;
    uint8_t *img = image(hdr, 40, &n);
    llmrt_tensor_view *v;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_st_parse("ok.safetensors", img, n, &v, &count, &err), LLMRT_OK);
    ck_assert_uint_eq(count, 4);
    const uint8_t *data = img + 8 + strlen(hdr);
    for (size_t i = 0; i < count; i++) {
        ck_assert_str_eq(v[i].file, "ok.safetensors");
        if (!strcmp(v[i].name, "a")) {
            ck_assert_int_eq(v[i].dtype, LLMRT_DTYPE_F32);
            ck_assert_int_eq(v[i].ndim, 2);
            ck_assert_int_eq(v[i].shape[0], 2);
            ck_assert_int_eq(v[i].shape[1], 3);
            ck_assert_uint_eq(v[i].bytes, 24);
            ck_assert_ptr_eq(v[i].data, data);
        } else if (!strcmp(v[i].name, "b")) {
            ck_assert_int_eq(v[i].dtype, LLMRT_DTYPE_BF16);
            ck_assert_ptr_eq(v[i].data, data + 24);
            ck_assert_uint_eq(v[i].bytes, 8);
        } else if (!strcmp(v[i].name, "s")) {
            ck_assert_int_eq(v[i].ndim, 0);
            ck_assert_uint_eq(v[i].bytes, 8);
        } else {
            ck_assert_str_eq(v[i].name, "z");
            ck_assert_uint_eq(v[i].bytes, 0);
        }
    }
    llmrt_st_views_free(v, count);
    free(img);
}
END_TEST

/* The 8-bit floats FP8 checkpoints store (F8_E4M3 weights, F8_E5M2 for completeness): one byte
 * per element, and the usual size check. */
START_TEST(test_parse_f8)
{
    const char *hdr = "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,3],\"data_offsets\":[0,6]},"
                      "\"e\":{\"dtype\":\"F8_E5M2\",\"shape\":[2],\"data_offsets\":[6,8]}}";
    size_t n, count;
    uint8_t *img = image(hdr, 8, &n);
    llmrt_tensor_view *v;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_st_parse("f8.safetensors", img, n, &v, &count, &err) == LLMRT_OK, "%s",
                  err.msg);
    ck_assert_uint_eq(count, 2);
    for (size_t i = 0; i < count; i++) {
        const int w = strcmp(v[i].name, "w") == 0;
        ck_assert_int_eq(v[i].dtype, w ? LLMRT_DTYPE_F8_E4M3 : LLMRT_DTYPE_F8_E5M2);
        ck_assert_uint_eq(v[i].bytes, w ? 6 : 2);
    }
    llmrt_st_views_free(v, count);
    free(img);
    expect_parse_error("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,3],\"data_offsets\":[0,12]}}",
                       12, "tensor 'w'", "shape [2, 3] x F8_E4M3 is 6 bytes", "span 12 bytes");
}
END_TEST

START_TEST(test_parse_header_errors)
{
    /* header length past EOF: says how many bytes there are */
    size_t n, count;
    uint8_t *img = image("{}", 0, &n);
    img[0] = 100;
    llmrt_tensor_view *v;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_st_parse("x.safetensors", img, n, &v, &count, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "x.safetensors: header length 100 runs past the end of the file"),
                  "%s", err.msg);
    /* absurdly large: named as such, before anything is read */
    img[7] = 0x40;
    ck_assert_int_eq(llmrt_st_parse("x.safetensors", img, n, &v, &count, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "larger than the 100000000-byte limit"), "%s", err.msg);
    free(img);
    /* shorter than the length field */
    const uint8_t five[5] = {1, 2, 3, 4, 5};
    ck_assert_int_eq(llmrt_st_parse("x.safetensors", five, 5, &v, &count, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "truncated: the file is 5 bytes"), "%s", err.msg);

    expect_parse_error("{\"a\": {\"dtype\": ", 0, "bad JSON header", "line 1", NULL);
    expect_parse_error("", 0, "bad JSON header", NULL, NULL);
    expect_parse_error("[1, 2]", 0, "header is an array, expected a JSON object", NULL, NULL);
    expect_parse_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                       8, "bad JSON header", "duplicate", NULL);
    expect_parse_error("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__['format']",
                       "expected a string", NULL);
    expect_parse_error("{\"__metadata__\":[]}", 0, "__metadata__ is an array", NULL, NULL);
    expect_parse_error("{\"w\": 3}", 0, "tensor 'w'", "expected an object", NULL);
}
END_TEST

START_TEST(test_parse_tensor_errors)
{
    expect_parse_error("{\"w\":{\"dtype\":\"F8_E8M0\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                       "tensor 'w'", "unknown dtype 'F8_E8M0'", "supported: F64 F32");
    expect_parse_error("{\"w\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                       "tensor 'w'", "dtype is an integer", NULL);
    expect_parse_error("{\"w\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "tensor 'w'",
                       "lacks \"dtype\"", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[2]}}", 2, "tensor 'w'",
                       "lacks \"data_offsets\"", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[2,-3],\"data_offsets\":[0,0]}}", 0,
                       "tensor 'w'", "shape[1] is -3", "non-negative");
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[2.5],\"data_offsets\":[0,2]}}", 2,
                       "tensor 'w'", "shape[0] is a real number", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[\"2\"],\"data_offsets\":[0,2]}}", 2,
                       "tensor 'w'", "shape[0] is a string", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":5,\"data_offsets\":[0,5]}}", 5,
                       "tensor 'w'", "shape is an integer", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,2]}}",
                       2, "tensor 'w'", "5 dimensions", "at most 4");
    expect_parse_error("{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],"
                       "\"data_offsets\":[0,8]}}",
                       8, "tensor 'w'", "overflows", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,1000]}}", 16,
                       "tensor 'w'", "[0, 1000] out of range", "data area is 16 bytes");
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,4]}}", 16,
                       "tensor 'w'", "[8, 4] are reversed", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-4,0]}}", 16,
                       "tensor 'w'", "data_offsets[0] must be a non-negative integer", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0]}}", 16,
                       "tensor 'w'", "[begin, end]", NULL);
    expect_parse_error("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 16,
                       "tensor 'w'", "shape [3] x F32 is 12 bytes", "span 8 bytes");
    expect_parse_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                       16, "'a' [0, 8)", "'b' [4, 12)", "overlap");
    /* order in the header does not matter: sorted by start before the check */
    expect_parse_error("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[9,11]},"
                       "\"c\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[12,16]},"
                       "\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[2,10]}}",
                       16, "'a' [2, 10)", "'b' [9, 11)", "overlap");
}
END_TEST

START_TEST(test_file_errors_name_the_path)
{
    char *d = tu_mkdtemp();
    llmrt_st_file *f = NULL;
    llmrt_error err = {0};
    char path[4096];

    write_bytes(d, "short.safetensors", "abc", 3);
    snprintf(path, sizeof path, "%s/short.safetensors", d);
    ck_assert_int_eq(llmrt_st_file_open(path, &f, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "truncated"), "%s", err.msg);

    write_bytes(d, "empty.safetensors", "", 0);
    snprintf(path, sizeof path, "%s/empty.safetensors", d);
    ck_assert_int_eq(llmrt_st_file_open(path, &f, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "file is 0 bytes"), "%s", err.msg);

    /* a valid file cut short: the last tensor's span runs out of the data area */
    write_st(d, "cut.safetensors",
             "{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
             "\"tail\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[8,24]}}",
             20);
    snprintf(path, sizeof path, "%s/cut.safetensors", d);
    ck_assert_int_eq(llmrt_st_file_open(path, &f, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "tensor 'tail'") &&
                      strstr(err.msg, "out of range") && strstr(err.msg, "truncated"),
                  "%s", err.msg);

    snprintf(path, sizeof path, "%s/missing.safetensors", d);
    ck_assert_int_eq(llmrt_st_file_open(path, &f, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "cannot open"), "%s", err.msg);
    ck_assert_ptr_null(f);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* Every prefix of a valid file and every single-byte change of its header: no crash, and a
 * message whenever it is rejected. */
START_TEST(test_no_crash_on_damage)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}";
    size_t n, count;
    uint8_t *img = image(hdr, 32, &n);
    llmrt_tensor_view *v;
    llmrt_error err;
    for (size_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, img, len);
        err.msg[0] = 0;
        ck_assert_int_ne(llmrt_st_parse("cut", cut, len, &v, &count, &err), LLMRT_OK);
        ck_assert_msg(strstr(err.msg, "cut: "), "prefix %zu: '%s'", len, err.msg);
        free(cut);
    }
    const uint8_t subst[] = {0, '"', '}', ']', '-', '9', 0xff, ' ', ','};
    for (size_t i = 0; i < 8 + strlen(hdr); i++) {
        for (size_t k = 0; k < sizeof subst; k++) {
            uint8_t keep = img[i];
            img[i] = subst[k];
            err.msg[0] = 0;
            if (llmrt_st_parse("flip", img, n, &v, &count, &err) == LLMRT_OK)
                llmrt_st_views_free(v, count);
            else
                ck_assert_msg(strstr(err.msg, "flip: "), "byte %zu: '%s'", i, err.msg);
            img[i] = keep;
        }
    }
    free(img);
}
END_TEST

START_TEST(test_model_folder_without_index)
{
    char *d = fresh_dir();
    write_st(d, "b.safetensors", "{\"y\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    write_st(d, "a.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
    free(tu_write_file(d, "notes.txt", "not a tensor file"));
    llmrt_st_model *m;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_OK);
    ck_assert_uint_eq(llmrt_st_model_file_count(m), 2);
    ck_assert_uint_eq(llmrt_st_model_total_bytes(m), 11);
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(m);
    ck_assert_str_eq(ck->dir, d);
    ck_assert_msg(strstr(ck->config_json, "Qwen3ForCausalLM"), "%s", ck->config_json);
    llmrt_tensor_view v;
    ck_assert_int_eq(ck->find(ck->ctx, "y", &v, &err), LLMRT_OK);
    ck_assert_int_eq(v.dtype, LLMRT_DTYPE_I32);
    /* the header here is not padded to 8 bytes, so "y" is misaligned in the file; the
     * accessor hands out an aligned copy */
    const llmrt_st_file *fb = llmrt_st_model_file(m, 1);
    ck_assert_uint_ne((uintptr_t)llmrt_st_file_find(fb, "y")->data % 4, 0);
    ck_assert_uint_eq((uintptr_t)v.data % 4, 0);
    ck_assert_int_eq(((const int32_t *)v.data)[1], 0x07060504);
    const void *first = v.data;
    ck_assert_int_eq(ck->find(ck->ctx, "y", &v, &err), LLMRT_OK);
    ck_assert_ptr_eq(v.data, first); /* copied once */
    ck_assert_msg(strstr(v.file, "b.safetensors"), "%s", v.file);
    ck_assert_int_eq(ck->has(ck->ctx, "x"), 1);
    ck_assert_int_eq(ck->has(ck->ctx, "nope"), 0);
    ck_assert_int_eq(ck->find(ck->ctx, "model.norm.weight", &v, &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "'model.norm.weight' not found") && strstr(err.msg, d) &&
                      strstr(err.msg, "2 tensors in 2 files"),
                  "%s", err.msg);
    llmrt_st_model_close(m);

    /* the same tensor in two files */
    write_st(d, "c.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "tensor 'x' is in both") && strstr(err.msg, "a.safetensors") &&
                      strstr(err.msg, "c.safetensors"),
                  "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_model_folder_errors)
{
    llmrt_st_model *m = NULL;
    llmrt_error err = {0};
    char *d = tu_mkdtemp();
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "config.json: cannot open"), "%s", err.msg);
    free(tu_write_file(d, "config.json", "{}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "no *.safetensors files"), "%s", err.msg);
    ck_assert_ptr_null(m);
    /* a broken shard is named in the model error */
    write_st(d, "model.safetensors", "{\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,4]}}", 4);
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "model.safetensors: tensor 'x'"), "%s", err.msg);
    char path[4096];
    snprintf(path, sizeof path, "%s/nonexistent", d);
    ck_assert_int_eq(llmrt_st_model_open(path, 0, &m, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "nonexistent"), "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_model_sharded_index)
{
    char *d = fresh_dir();
    llmrt_st_model *m;
    llmrt_error err = {0};
    write_st(d, "model-00001-of-00002.safetensors",
             "{\"e\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", 8);
    write_st(d, "model-00002-of-00002.safetensors",
             "{\"n\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
             12);
    /* a stray file is ignored when an index exists */
    write_st(d, "stray.safetensors", "{\"e\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
    free(tu_write_file(d, "model.safetensors.index.json",
                       "{\"metadata\":{\"total_size\":20},\"weight_map\":{"
                       "\"e\":\"model-00001-of-00002.safetensors\","
                       "\"n\":\"model-00002-of-00002.safetensors\","
                       "\"h\":\"model-00002-of-00002.safetensors\"}}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 1, &m, &err), LLMRT_OK);
    ck_assert_uint_eq(llmrt_st_model_file_count(m), 2);
    const llmrt_checkpoint *ck = llmrt_st_model_checkpoint(m);
    llmrt_tensor_view v;
    ck_assert_int_eq(ck->find(ck->ctx, "e", &v, &err), LLMRT_OK);
    ck_assert_int_eq(v.dtype, LLMRT_DTYPE_F16);
    ck_assert_msg(strstr(v.file, "model-00001-of-00002"), "%s", v.file);
    ck_assert_int_eq(ck->find(ck->ctx, "h", &v, &err), LLMRT_OK);
    ck_assert_int_eq(ck->find(ck->ctx, "h", &v, &err), LLMRT_OK); /* counted once */
    llmrt_st_model_progress_done(m);
    llmrt_st_model_close(m);

    /* index naming a file that does not exist */
    free(tu_write_file(d, "model.safetensors.index.json",
                       "{\"weight_map\":{\"e\":\"model-00001-of-00002.safetensors\","
                       "\"q\":\"model-00009-of-00009.safetensors\"}}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "model.safetensors.index.json names shard "
                                  "'model-00009-of-00009.safetensors' (for tensor 'q')") &&
                      strstr(err.msg, "cannot open"),
                  "%s", err.msg);

    /* index naming a tensor its shard lacks */
    free(tu_write_file(d, "model.safetensors.index.json",
                       "{\"weight_map\":{\"e\":\"model-00001-of-00002.safetensors\","
                       "\"lm_head.weight\":\"model-00002-of-00002.safetensors\"}}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "tensor 'lm_head.weight'") &&
                      strstr(err.msg, "model-00002-of-00002.safetensors") &&
                      strstr(err.msg, "has no such tensor"),
                  "%s", err.msg);

    /* the same tensor in two shards of the index */
    write_st(d, "model-00003-of-00003.safetensors",
             "{\"e\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
             "\"n2\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[8,9]}}",
             9);
    free(tu_write_file(d, "model.safetensors.index.json",
                       "{\"weight_map\":{\"e\":\"model-00001-of-00002.safetensors\","
                       "\"n2\":\"model-00003-of-00003.safetensors\"}}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "tensor 'e' is in both"), "%s", err.msg);

    /* malformed indexes */
    free(tu_write_file(d, "model.safetensors.index.json", "{\"weight_map\": [1]}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "index.json: \"weight_map\" is missing or not an object"), "%s",
                  err.msg);
    free(tu_write_file(d, "model.safetensors.index.json", "{\"weight_map\": {\"e\": "));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "index.json: bad JSON"), "%s", err.msg);
    free(tu_write_file(d, "model.safetensors.index.json",
                       "{\"weight_map\":{\"e\":\"../model-00001-of-00002.safetensors\"}}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "weight_map['e']") && strstr(err.msg, "plain file name"), "%s",
                  err.msg);
    free(tu_write_file(d, "model.safetensors.index.json", "{\"weight_map\":{\"e\":3}}"));
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "weight_map['e'] is an integer"), "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* Every file of a model folder must be a regular file within its kind's limit: a FIFO is
 * refused without blocking (tu_guard fails the test if it blocks), /dev/zero by kind, an
 * oversized config.json or index by size. Each message names the file. */
static void expect_open_error(const char *d, llmrt_status code, const char *a, const char *b)
{
    llmrt_st_model *m = NULL;
    llmrt_error err = {0};
    tu_guard(20);
    ck_assert_int_eq(llmrt_st_model_open(d, 0, &m, &err), code);
    tu_guard(0);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.msg, a) && (!b || strstr(err.msg, b)), "\"%s\" lacks \"%s\"%s%s",
                  err.msg, a, b ? " or " : "", b ? b : "");
}

START_TEST(test_model_folder_files_bounded)
{
    const char *ok_hdr = "{\"x\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}";
    /* a FIFO (or a link to /dev/zero) as the only shard */
    char *d = fresh_dir();
    free(tu_mkfifo(d, "model.safetensors"));
    expect_open_error(d, LLMRT_ERR_IO, "model.safetensors: not a regular file (a FIFO)", NULL);
    tu_rmtree(d);
    free(d);
    d = fresh_dir();
    free(tu_symlink(d, "model.safetensors", "/dev/zero"));
    expect_open_error(d, LLMRT_ERR_IO, "model.safetensors: not a regular file (a character device)",
                      NULL);
    tu_rmtree(d);
    free(d);

    /* the index: a FIFO, too large, or naming a FIFO shard */
    d = fresh_dir();
    write_st(d, "a.safetensors", ok_hdr, 8);
    char *idx = tu_mkfifo(d, "model.safetensors.index.json");
    expect_open_error(d, LLMRT_ERR_IO, "model.safetensors.index.json: not a regular file (a FIFO)",
                      NULL);
    remove(idx);
    free(tu_sized_file(d, "model.safetensors.index.json", 65ll << 20));
    expect_open_error(d, LLMRT_ERR_LIMIT, "model.safetensors.index.json: 65.0 MiB is larger than "
                      "the 64 MiB a model.safetensors.index.json may be", NULL);
    free(tu_mkfifo(d, "b.safetensors"));
    free(tu_write_file(d, "model.safetensors.index.json",
                       "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\"}}"));
    expect_open_error(d, LLMRT_ERR_IO, "names shard 'b.safetensors' (for tensor 'y')",
                      "b.safetensors: not a regular file (a FIFO)");
    free(idx);
    tu_rmtree(d);
    free(d);

    /* config.json: /dev/zero, a FIFO, 17 MiB */
    d = tu_mkdtemp();
    write_st(d, "a.safetensors", ok_hdr, 8);
    char *cfg = tu_symlink(d, "config.json", "/dev/zero");
    expect_open_error(d, LLMRT_ERR_IO, "config.json: not a regular file (a character device)", NULL);
    remove(cfg);
    free(cfg);
    cfg = tu_mkfifo(d, "config.json");
    expect_open_error(d, LLMRT_ERR_IO, "config.json: not a regular file (a FIFO)", NULL);
    remove(cfg);
    free(cfg);
    free(tu_sized_file(d, "config.json", 17ll << 20));
    expect_open_error(d, LLMRT_ERR_LIMIT,
                      "config.json: 17.0 MiB is larger than the 16 MiB a config.json may be", NULL);
    tu_rmtree(d);
    free(d);
}
END_TEST

/* Writer -> reader: every dtype, 0..4 dims, data written in uneven pieces. */
START_TEST(test_writer_round_trip)
{
    char *d = fresh_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", d);
    struct {
        const char *name;
        llmrt_dtype dtype;
        int32_t ndim;
        int64_t shape[4];
    } t[] = {{"f64", LLMRT_DTYPE_F64, 1, {3}},          {"f32", LLMRT_DTYPE_F32, 2, {2, 3}},
             {"f16", LLMRT_DTYPE_F16, 3, {1, 2, 3}},    {"bf16", LLMRT_DTYPE_BF16, 4, {1, 2, 1, 5}},
             {"i64", LLMRT_DTYPE_I64, 0, {0}},          {"i32", LLMRT_DTYPE_I32, 1, {7}},
             {"i16", LLMRT_DTYPE_I16, 1, {3}},          {"i8", LLMRT_DTYPE_I8, 1, {5}},
             {"u64", LLMRT_DTYPE_U64, 1, {1}},          {"u32", LLMRT_DTYPE_U32, 1, {2}},
             {"u16", LLMRT_DTYPE_U16, 1, {3}},          {"u8", LLMRT_DTYPE_U8, 2, {3, 3}},
             {"bool", LLMRT_DTYPE_BOOL, 1, {4}},        {"empty", LLMRT_DTYPE_F32, 2, {0, 8}}};
    size_t nt = sizeof t / sizeof *t, total = 0;
    llmrt_st_writer *w;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_st_writer_open(path, &w, &err), LLMRT_OK);
    for (size_t i = 0; i < nt; i++) {
        ck_assert_int_eq(llmrt_st_writer_add(w, t[i].name, t[i].dtype, t[i].ndim, t[i].shape, &err),
                         LLMRT_OK);
        size_t b = llmrt_dtype_size(t[i].dtype);
        for (int32_t k = 0; k < t[i].ndim; k++)
            b *= (size_t)t[i].shape[k];
        total += b;
    }
    ck_assert_int_eq(llmrt_st_writer_add(w, "f32", LLMRT_DTYPE_F32, 0, NULL, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "'f32' declared twice"), "%s", err.msg);
    ck_assert_int_eq(llmrt_st_writer_begin_data(w, &err), LLMRT_OK);
    uint8_t *data = malloc(total);
    for (size_t i = 0; i < total; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    size_t off = 0, step = 1;
    while (off < total) { /* pieces of 1, 2, 3, ... bytes, across tensor boundaries */
        size_t k = step < total - off ? step : total - off;
        ck_assert_int_eq(llmrt_st_writer_write(w, data + off, k, &err), LLMRT_OK);
        off += k;
        step++;
    }
    ck_assert_int_eq(llmrt_st_writer_write(w, data, 1, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(llmrt_st_writer_close(w, &err), LLMRT_OK);

    llmrt_st_file *f;
    ck_assert_int_eq(llmrt_st_file_open(path, &f, &err), LLMRT_OK);
    ck_assert_uint_eq(llmrt_st_file_count(f), nt);
    off = 0;
    for (size_t i = 0; i < nt; i++) {
        const llmrt_tensor_view *v = llmrt_st_file_find(f, t[i].name);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(v->dtype, t[i].dtype);
        ck_assert_int_eq(v->ndim, t[i].ndim);
        for (int32_t k = 0; k < t[i].ndim; k++)
            ck_assert_int_eq(v->shape[k], t[i].shape[k]);
        ck_assert_int_eq(memcmp(v->data, data + off, v->bytes), 0);
        off += v->bytes;
    }
    ck_assert_ptr_null(llmrt_st_file_find(f, "__metadata__"));
    llmrt_st_file_close(f);

    /* the header as the reference writes it: length a multiple of 8, padded with spaces,
     * "__metadata__": {"format": "pt"} */
    FILE *fp = fopen(path, "rb");
    uint8_t len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, fp), 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | len8[i];
    ck_assert_uint_eq(hlen % 8, 0);
    char *hdr = calloc(1, hlen + 1);
    ck_assert_uint_eq(fread(hdr, 1, hlen, fp), hlen);
    fclose(fp);
    ck_assert_msg(strstr(hdr, "\"__metadata__\":{\"format\":\"pt\"}"), "%s", hdr);
    size_t tl = strlen(hdr);
    while (tl && hdr[tl - 1] == ' ')
        tl--;
    ck_assert_int_eq(hdr[tl - 1], '}');
    ck_assert_uint_lt(hlen - tl, 8);
    free(hdr);
    free(data);
    tu_rmtree(d);
    free(d);
}
END_TEST

START_TEST(test_writer_misuse)
{
    char *d = tu_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/w.safetensors", d);
    llmrt_st_writer *w;
    llmrt_error err = {0};
    int64_t shape[2] = {4, 4};
    ck_assert_int_eq(llmrt_st_writer_open(path, &w, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_add(w, "a", LLMRT_DTYPE_F32, 2, shape, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_add(w, "b", LLMRT_DTYPE_F16, 2, shape, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_write(w, shape, 8, &err), LLMRT_ERR_STATE);
    ck_assert_int_eq(llmrt_st_writer_add(w, "c", LLMRT_DTYPE_INVALID, 2, shape, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(llmrt_st_writer_add(w, "c", LLMRT_DTYPE_F32, 5, shape, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(llmrt_st_writer_begin_data(w, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_st_writer_add(w, "late", LLMRT_DTYPE_F32, 2, shape, &err),
                     LLMRT_ERR_STATE);
    uint8_t zeros[80] = {0};
    ck_assert_int_eq(llmrt_st_writer_write(w, zeros, 70, &err), LLMRT_OK);
    /* closed short: names the tensor left incomplete */
    ck_assert_int_eq(llmrt_st_writer_close(w, &err), LLMRT_ERR_STATE);
    ck_assert_msg(strstr(err.msg, "70 of 96") && strstr(err.msg, "tensor 'b' incomplete"), "%s",
                  err.msg);
    snprintf(path, sizeof path, "%s/no/such/dir/w.safetensors", d);
    ck_assert_int_eq(llmrt_st_writer_open(path, &w, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "cannot create"), "%s", err.msg);
    tu_rmtree(d);
    free(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_test(tc, test_parse_valid);
    tcase_add_test(tc, test_parse_f8);
    tcase_add_test(tc, test_parse_header_errors);
    tcase_add_test(tc, test_parse_tensor_errors);
    tcase_add_test(tc, test_file_errors_name_the_path);
    tcase_add_test(tc, test_no_crash_on_damage);
    tcase_add_test(tc, test_model_folder_without_index);
    tcase_add_test(tc, test_model_folder_errors);
    tcase_add_test(tc, test_model_sharded_index);
    tcase_add_test(tc, test_model_folder_files_bounded);
    tcase_add_test(tc, test_writer_round_trip);
    tcase_add_test(tc, test_writer_misuse);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
