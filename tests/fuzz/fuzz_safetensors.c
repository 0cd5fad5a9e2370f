/* fuzz_safetensors.c — libFuzzer target for the safetensors header parser (llmrt_st_parse).
 *
 * Why: a checkpoint is untrusted input and the parser is the only thing between its bytes
 * and plugins that index into them. Properties checked beyond "no crash, no sanitizer
 * report": a rejection always carries a message, and every accepted tensor's bytes lie
 * inside the input (touched at both ends, so ASan sees any escape) with bytes equal to
 * shape x dtype size. */
#include <stdint.h>
#include <stdlib.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmrt_tensor_view *v = NULL;
    size_t n = 0;
    llmrt_error err = {0};
    if (llmrt_st_parse("fuzz.safetensors", data, size, &v, &n, &err) != LLMRT_OK) {
        if (!err.msg[0])
            abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t numel = 1;
        for (int32_t d = 0; d < v[i].ndim; d++)
            numel *= (uint64_t)v[i].shape[d];
        if (numel * llmrt_dtype_size(v[i].dtype) != v[i].bytes)
            abort();
        const uint8_t *p = v[i].data;
        if (v[i].bytes) {
            sink ^= p[0];
            sink ^= p[v[i].bytes - 1];
        }
    }
    (void)sink;
    llmrt_st_views_free(v, n);
    return 0;
}
