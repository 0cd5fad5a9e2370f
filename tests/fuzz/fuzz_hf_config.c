/* fuzz_hf_config.c — libFuzzer target for the config.json parser (llmrt_hf_config_parse).
 *
 * Why: config.json arrives with every downloaded model; whatever it holds must end in a
 * parsed config or an error message, never a crash, a leak or an out-of-range value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    llmrt_hf_config c;
    llmrt_error err = {0};
    if (llmrt_hf_config_parse(text, "fuzz/config.json", &c, &err) == LLMRT_OK) {
        if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.head_dim <= 0 ||
            c.num_key_value_heads <= 0 || c.n_eos < 0 || c.n_eos > LLMRT_MAX_EOS ||
            !(c.rope_theta > 0) || !(c.rms_norm_eps > 0))
            abort();
        llmrt_hf_config_free(&c);
    } else if (!err.msg[0]) {
        abort();
    }
    free(text);
    return 0;
}
