/* config_schema.c — core's keys of runtime.ini: per section, an llmrt_key table (the same
 * struct plugins declare theirs with: type, default, allowed values, help, flags). These
 * tables are the single source for validation, `llmrt config --show`, and the comments in
 * conf/runtime.ini (`llmrt config --template` writes that file; a test keeps them equal). */
#include "config.h"

static const llmrt_key runtime_keys[] = {
    {"backend", LLMRT_KEY_ENUM, "auto", "auto|cpu|cuda",
     "Compute backend. auto: cuda when a CUDA device is visible, else cpu.",
     0},
    {"plugin_dir", LLMRT_KEY_PATH, "", NULL,
     "Extra folder searched first for plugin .so files (then LLMRT_PLUGIN_PATH, "
     "<exe>/../lib/llmrt/plugins, the install folder).",
     0},
    {"log_level", LLMRT_KEY_ENUM, "info", "error|warn|info|debug",
     "Least severe log level printed to stderr.",
     0},
    {"tensor_parallel", LLMRT_KEY_INT, "1", "1..8",
     "Ranks the model is split across (Megatron-style: attention heads and MLP columns per "
     "rank, an all-reduce after o_proj and down_proj). cuda: one GPU per rank from "
     "backend.cuda.device on, joined through NCCL; cpu: ranks run as threads of this process "
     "(checks the sharding). Heads, KV heads and MLP widths must split evenly.",
     0},
};

static const llmrt_key model_keys[] = {
    {"path", LLMRT_KEY_PATH, "", NULL,
     "Model folder in Hugging Face layout (config.json, *.safetensors, tokenizer.json). "
     "--model DIR is its short form.",
     0},
    {"plugin", LLMRT_KEY_STRING, "auto", NULL,
     "Model plugin name; auto picks the one that recognises config.json's architectures.",
     0},
    {"quant", LLMRT_KEY_STRING, "auto", NULL,
     "Quantization plugin name, or none; auto follows config.json's quantization_config.",
     0},
};

static const llmrt_key memory_keys[] = {
    {"plugin", LLMRT_KEY_STRING, "pinned", NULL,
     "Host-memory strategy for per-step buffers: pageable, pinned or uva (or a third-party "
     "memory plugin). LLMRT_MEMORY=<name> overrides it.",
     0},
    {"fallback", LLMRT_KEY_ENUM, "pageable", "pageable|error",
     "What to do when host memory cannot be pinned or mapped: fall back to pageable memory "
     "(logged once, and reported as the path in use) or fail.",
     0},
    {"cpu_offload_gb", LLMRT_KEY_FLOAT, "0", "0..100000",
     "GB of the decoder layers' weights kept in host memory, for models that do not fit the "
     "GPU (vLLM's --cpu-offload-gb): the last layers, as few as hold this much (all when it "
     "is more), carried out by the memory plugin (pinned: async prefetch into device staging "
     "slots; uva: kernels read them in place; pageable: synchronous copies). Ignored, with a "
     "warning, where device memory is host memory (the cpu backend).",
     0},
};

static const llmrt_key cache_keys[] = {
    {"block_size", LLMRT_KEY_INT, "16", "1..1024",
     "Tokens per KV-cache block.",
     0},
    {"kv_tokens", LLMRT_KEY_INT, "0", "0..100000000",
     "KV-cache capacity in tokens (rounded up to whole blocks). 0: on CUDA, the whole blocks "
     "that gpu_memory_utilization leaves after loading; on CPU, max(8192, max_model_len) "
     "tokens.",
     0},
    {"gpu_memory_utilization", LLMRT_KEY_FLOAT, "0.80", "0.05..0.99",
     "On CUDA with kv_tokens = 0: the fraction of device memory that weights plus KV cache "
     "may use, measured after loading. Conservative by default: on WSL2 the Windows desktop "
     "shares the GPU's memory.",
     0},
    {"max_model_len", LLMRT_KEY_INT, "0", "0..10000000",
     "Longest sequence (prompt + output) in tokens. 0: the model's max_position_embeddings, "
     "capped by the KV-cache capacity. Longer prompts are rejected, never truncated.",
     0},
    {"dtype", LLMRT_KEY_ENUM, "auto", "auto|f32|f16|bf16",
     "KV-cache element type. auto: f32 on cpu, the model's dtype (f16/bf16) on cuda.",
     0},
    {"prefix_caching", LLMRT_KEY_BOOL, "on", NULL,
     "Automatic prefix caching: full KV blocks are kept, indexed by their tokens and the "
     "prefix before them, and shared with later requests that start the same way (a chat's "
     "next turn, a shared system prompt), which then prefill only what is new. Blocks nobody "
     "uses stay cached until their memory is needed (least recently used first). off "
     "computes every prompt from scratch, for A/B.",
     0},
};

static const llmrt_key scheduler_keys[] = {
    {"max_num_seqs", LLMRT_KEY_INT, "0", "0..4096",
     "Most sequences running at once (continuous batching). 0: by backend, 256 on a GPU "
     "(a decode step reads the weights once for all of them), 32 on CPU.",
     0},
    {"max_num_batched_tokens", LLMRT_KEY_INT, "0", "0..1048576",
     "Most tokens in one step; longer prompts are prefilled in chunks, beside the decode "
     "rows. 0: by backend, 8192 on a GPU, 2048 on CPU.",
     0},
    {"async_scheduling", LLMRT_KEY_BOOL, "true", NULL,
     "Launch step N+1 before the host has read step N's tokens (decode inputs gathered on "
     "the device). off exposes the raw host-device path cost for A/B.",
     0},
    {"cuda_graphs", LLMRT_KEY_BOOL, "true", NULL,
     "Capture decode steps as CUDA graphs per batch-size bucket (when the backend can).",
     0},
};

static const llmrt_key server_keys[] = {
    {"host", LLMRT_KEY_STRING, "127.0.0.1", NULL,
     "Address `llmrt serve` binds (--host). Loopback by default; 0.0.0.0 exposes it to the "
     "network (without api_key that logs a warning).",
     0},
    {"port", LLMRT_KEY_INT, "8000", "0..65535",
     "TCP port of `llmrt serve` (--port is its short form; 0 picks a free port).",
     0},
    {"api_key", LLMRT_KEY_STRING, "", NULL,
     "When set, requests need `Authorization: Bearer <api_key>` (--api-key).",
     LLMRT_KEY_SECRET},
    {"served_model_name", LLMRT_KEY_STRING, "", NULL,
     "Model id reported by /v1/models and accepted in requests (default: the model folder's "
     "name; --served-model-name).",
     0},
    {"max_body_bytes", LLMRT_KEY_INT, "1048576", "1024..1073741824",
     "Largest accepted request body; larger ones get 413.",
     0},
    {"max_connections", LLMRT_KEY_INT, "256", "1..65536",
     "Most simultaneous HTTP connections. Connections still sending their request are closed, "
     "oldest first, rather than leave fewer than an eighth of them free for new clients.",
     0},
    {"max_connections_per_ip", LLMRT_KEY_INT, "64", "0..65536",
     "Most simultaneous connections from one client address (0: no limit; behind a reverse "
     "proxy every client has the proxy's address).",
     0},
    {"request_timeout_s", LLMRT_KEY_INT, "30", "1..3600",
     "Seconds a connection may take to send a request's headers and body, counted from its "
     "start or from the end of its previous response; a slower one is closed.",
     0},
    {"max_queue", LLMRT_KEY_INT, "512", "1..1000000",
     "Most requests waiting or running; beyond it new requests get 503 (one that needs more "
     "choices than this, n x prompts, gets 400).",
     0},
    {"timeout_s", LLMRT_KEY_INT, "600", "1..86400",
     "Idle connection timeout in seconds.",
     0},
    {"log_interval_s", LLMRT_KEY_FLOAT, "5", "0..3600",
     "Seconds between throughput log lines while busy (0: off).",
     0},
    {"log_format", LLMRT_KEY_ENUM, "text", "text|json",
     "Log lines on stderr: text (a UTC timestamp, the level, the message) or json (one object "
     "per line: time, level, logger, message and the access fields).",
     0},
    {"access_log", LLMRT_KEY_BOOL, "true", NULL,
     "One log line per HTTP request: method, path, route, status, duration, prompt and "
     "completion tokens, client address and request id (X-Request-Id, echoed back).",
     0},
    {"cors_origins", LLMRT_KEY_STRING, "", NULL,
     "Origins that browsers may call the API from (CORS): a comma-separated list such as "
     "https://a.example,https://b.example, or * for any. Empty: no CORS headers.",
     0},
    {"metrics_prefix", LLMRT_KEY_ENUM, "llmrt", "llmrt|vllm",
     "Names of the /metrics series: llmrt_*, or vLLM's (vllm:num_requests_waiting, "
     "vllm:time_to_first_token_seconds, ...) so dashboards and routers made for vLLM work "
     "unchanged.",
     0},
    {"allow_special_tokens_in_content", LLMRT_KEY_BOOL, "false", NULL,
     "Let the text of special tokens inside chat message contents become those tokens. "
     "false: it is tokenized as plain text, so a client cannot forge chat structure (a "
     "system turn of its own); true only for trusted clients.",
     0},
    {"reasoning", LLMRT_KEY_ENUM, "on", "on|off",
     "Chat replies: on splits the model's reasoning (a <think> block, as the family marks it) into "
     "message.reasoning_content / delta.reasoning_content, for families whose chat format "
     "marks it; off leaves it in content.",
     0},
};

#define SECTION(s) {#s, s##_keys, (uint32_t)(sizeof s##_keys / sizeof s##_keys[0])}
const llmrt_cfg_section llmrt_config_schema[] = {
    SECTION(runtime), SECTION(model),     SECTION(memory),
    SECTION(cache),   SECTION(scheduler), SECTION(server),
};
#undef SECTION

const size_t llmrt_config_schema_len = sizeof llmrt_config_schema / sizeof llmrt_config_schema[0];
