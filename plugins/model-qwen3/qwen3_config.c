/* qwen3_config.c — config.json → qwen3_config for Qwen3ForCausalLM: the keys every Qwen3
 * decoder reads (plugins/qwen3-common/qwen3_config_common.c), with intermediate_size required
 * (the dense MLP's width). */
#include <string.h>

#include "qwen3.h"

int qwen3_config_matches(const char *config_json, int *is_json)
{
    return qwen3_config_lists_arch(config_json, QWEN3_ARCH, is_json);
}

llmrt_status qwen3_config_parse(const char *config_json, qwen3_config *out, llmrt_error *err)
{
    static const qwen3_config_spec spec = {.plugin = "qwen3", .intermediate_default = -1};
    json_t *root = NULL;
    llmrt_status st = qwen3_config_load(config_json, &root, err);
    if (st == LLMRT_OK)
        st = qwen3_config_read(root, &spec, out, err);
    else
        memset(out, 0, sizeof *out);
    json_decref(root);
    return st;
}
