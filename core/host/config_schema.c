/* config_schema.c — every key of runtime.ini: type, default, allowed values, help.
 * This table is the single source for validation, `llmrt config --show`, and the comments
 * in conf/runtime.ini (`llmrt config --template` writes that file; a test keeps them equal). */
#include "config.h"

const llmrt_cfg_key llmrt_config_schema[] = {
    /* [runtime] */
    {"runtime", "backend", LLMRT_CFG_ENUM, "auto", "auto|cpu|cuda",
     "Compute backend. auto: cuda when a CUDA device is visible, else cpu."},
    {"runtime", "plugin_dir", LLMRT_CFG_PATH, "", NULL,
     "Extra folder searched first for plugin .so files (then LLMRT_PLUGIN_PATH, "
     "<exe>/../lib/llmrt/plugins, the install folder)."},
    {"runtime", "log_level", LLMRT_CFG_ENUM, "info", "error|warn|info|debug",
     "Least severe log level printed to stderr."},

    /* [model] */
    {"model", "path", LLMRT_CFG_PATH, "", NULL,
     "Model folder in Hugging Face layout (config.json, *.safetensors, tokenizer.json). "
     "--model DIR is its short form."},
    {"model", "plugin", LLMRT_CFG_STRING, "auto", NULL,
     "Model plugin name; auto picks the one that recognises config.json's architectures."},
    {"model", "quant", LLMRT_CFG_STRING, "auto", NULL,
     "Quantization plugin name, or none; auto follows config.json's quantization_config."},

    /* [memory] */
    {"memory", "plugin", LLMRT_CFG_STRING, "pinned", NULL,
     "Host-memory strategy for per-step buffers: pageable, pinned or uva (or a third-party "
     "memory plugin). LLMRT_MEMORY=<name> overrides it."},
    {"memory", "fallback", LLMRT_CFG_ENUM, "pageable", "pageable|error",
     "What to do when host memory cannot be pinned or mapped: fall back to pageable memory "
     "(logged once, and reported as the path in use) or fail."},

    /* [cache] */
    {"cache", "block_size", LLMRT_CFG_INT, "16", "1..1024",
     "Tokens per KV-cache block."},
    {"cache", "kv_tokens", LLMRT_CFG_INT, "0", "0..100000000",
     "KV-cache capacity in tokens (rounded up to whole blocks). 0: on CUDA, the whole blocks "
     "that gpu_memory_utilization leaves after loading; on CPU, max(8192, max_model_len) "
     "tokens."},
    {"cache", "gpu_memory_utilization", LLMRT_CFG_FLOAT, "0.80", "0.05..0.99",
     "On CUDA with kv_tokens = 0: the fraction of device memory that weights plus KV cache "
     "may use, measured after loading. Conservative by default: on WSL2 the Windows desktop "
     "shares the GPU's memory."},
    {"cache", "max_model_len", LLMRT_CFG_INT, "0", "0..10000000",
     "Longest sequence (prompt + output) in tokens. 0: the model's max_position_embeddings, "
     "capped by the KV-cache capacity. Longer prompts are rejected, never truncated."},
    {"cache", "dtype", LLMRT_CFG_ENUM, "auto", "auto|f32|f16|bf16",
     "KV-cache element type. auto: f32 on cpu, the model's dtype (f16/bf16) on cuda."},

    /* [scheduler] */
    {"scheduler", "max_num_seqs", LLMRT_CFG_INT, "32", "1..4096",
     "Most sequences running at once (continuous batching)."},
    {"scheduler", "max_num_batched_tokens", LLMRT_CFG_INT, "2048", "16..1048576",
     "Most tokens in one step; longer prompts are prefilled in chunks."},
    {"scheduler", "async_scheduling", LLMRT_CFG_BOOL, "true", NULL,
     "Launch step N+1 before the host has read step N's tokens (decode inputs gathered on "
     "the device). off exposes the raw host-device path cost for A/B."},
    {"scheduler", "cuda_graphs", LLMRT_CFG_BOOL, "true", NULL,
     "Capture decode steps as CUDA graphs per batch-size bucket (when the backend can)."},

    /* [server] */
    {"server", "host", LLMRT_CFG_STRING, "127.0.0.1", NULL,
     "Address `llmrt serve` binds. Loopback by default; 0.0.0.0 exposes it to the network."},
    {"server", "port", LLMRT_CFG_INT, "8000", "0..65535",
     "TCP port of `llmrt serve` (--port is its short form; 0 picks a free port)."},
    {"server", "api_key", LLMRT_CFG_STRING, "", NULL,
     "When set, requests need `Authorization: Bearer <api_key>`."},
    {"server", "served_model_name", LLMRT_CFG_STRING, "", NULL,
     "Model id reported by /v1/models and accepted in requests (default: the model folder's "
     "name)."},
    {"server", "max_body_bytes", LLMRT_CFG_INT, "1048576", "1024..1073741824",
     "Largest accepted request body; larger ones get 413."},
    {"server", "max_connections", LLMRT_CFG_INT, "256", "1..65536",
     "Most simultaneous HTTP connections."},
    {"server", "max_queue", LLMRT_CFG_INT, "512", "1..1000000",
     "Most requests waiting or running; beyond it new requests get 503."},
    {"server", "timeout_s", LLMRT_CFG_INT, "600", "1..86400",
     "Idle connection timeout in seconds."},
    {"server", "log_interval_s", LLMRT_CFG_FLOAT, "5", "0..3600",
     "Seconds between throughput log lines while busy (0: off)."},
    {"server", "reasoning", LLMRT_CFG_ENUM, "on", "on|off",
     "Chat replies: on splits the model's reasoning (Qwen3's <think> block) into "
     "message.reasoning_content / delta.reasoning_content, for families whose chat format "
     "marks it; off leaves it in content."},
};

const size_t llmrt_config_schema_len = sizeof llmrt_config_schema / sizeof llmrt_config_schema[0];
