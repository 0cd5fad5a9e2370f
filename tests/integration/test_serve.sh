#!/usr/bin/env bash
# `llmrt serve` through curl, on the tiny model with the real Qwen3 tokenizer (CPU backend,
# a free loopback port): every endpoint, streaming and not, response shapes as OpenAI's,
# usage and finish reasons, n > 1, batches, stop strings and stop ids, logprobs, the chat
# template, /tokenize round trips, /metrics; then malformed inputs — each must get the
# right status and an OpenAI error object, and the server must keep serving — the API key,
# the queue limit, and a clean exit 0 on SIGTERM.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"

serve_model "$tmp/tiny"
serve_start main "$tmp/tiny" --set cache.max_model_len=1024 --set server.log_interval_s=1
echo "server at $SERVE_URL"
o=$tmp/o.json

# ---- /health, /v1/models, /version ----
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/health") == 200 ]] || fail "/health"
check $o 'j.status === "ok"' "/health body"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/v1/models") == 200 ]] || fail "/v1/models"
check $o 'j.object === "list" && j.data.length === 1 && j.data[0].id === "tiny" && j.data[0].object === "model" && j.data[0].max_model_len === 1024 && Number.isInteger(j.data[0].created)' "/v1/models shape"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/v1/models/tiny") == 200 ]] || fail "/v1/models/tiny"
check $o 'j.id === "tiny"' "/v1/models/tiny"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/v1/models/gpt-4") == 404 ]] || fail "/v1/models/gpt-4 must be 404"
check $o 'j.error.code === "model_not_found"' "/v1/models/gpt-4 error"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/version") == 200 ]] || fail "/version"
check $o 'typeof j.version === "string"' "/version body"

# ---- /tokenize and /detokenize ----
[[ $(post /tokenize '{"prompt": "Hello world"}' $o) == 200 ]] || fail "/tokenize"
check $o 'j.count === 2 && j.tokens.length === 2 && j.max_model_len === 1024 && j.token_strs === null' "/tokenize of 'Hello world' (two Qwen3 tokens)"
ids=$(jv $o 'JSON.stringify(j.tokens)')
[[ $(post /detokenize "{\"tokens\": $ids}" $o) == 200 ]] || fail "/detokenize"
check $o 'j.prompt === "Hello world"' "detokenize(tokenize(x)) == x"
[[ $(post /tokenize '{"prompt": "héllo 世界 <|im_end|>", "return_token_strs": true}' $o) == 200 ]] || fail "/tokenize utf-8"
check $o 'j.token_strs.length === j.count && j.tokens.includes(151645)' "special tokens are recognised in /tokenize"
ids=$(jv $o 'JSON.stringify(j.tokens)')
post /detokenize "{\"tokens\": $ids}" $o > /dev/null
check $o 'j.prompt === "héllo 世界 <|im_end|>"' "utf-8 round trip"
msgs='[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]'
[[ $(post /tokenize "{\"messages\": $msgs}" $o) == 200 ]] || fail "/tokenize messages"
chat_prompt_tokens=$(jv $o 'j.count')
check $o 'j.tokens[0] === 151644' "chat /tokenize starts with <|im_start|>"
post /tokenize "{\"messages\": $msgs, \"chat_template_kwargs\": {\"enable_thinking\": false}}" $o > /dev/null
check $o "j.count > $chat_prompt_tokens" "enable_thinking=false adds the empty think block"

# ---- /v1/completions, not streaming ----
req='{"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}'
[[ $(post /v1/completions "$req" $o) == 200 ]] || { cat $o; fail "/v1/completions"; }
check $o 'j.object === "text_completion" && j.id.startsWith("cmpl-") && j.model === "tiny" && Number.isInteger(j.created)' "completion head"
check $o 'j.choices.length === 1 && j.choices[0].index === 0 && typeof j.choices[0].text === "string" && j.choices[0].logprobs === null && j.choices[0].finish_reason === "length"' "completion choice"
post /tokenize '{"prompt": "The capital of France is"}' $tmp/t.json > /dev/null
n_prompt=$(jv $tmp/t.json 'j.count')
check $o "j.usage.prompt_tokens === $n_prompt && j.usage.completion_tokens === 8 && j.usage.total_tokens === $n_prompt + 8" "completion usage"
greedy_text=$(jv $o 'JSON.stringify(j.choices[0].text)')
post /v1/completions "$req" $tmp/again.json > /dev/null
check $tmp/again.json "j.choices[0].text === $greedy_text && j.id !== $(jv $o 'JSON.stringify(j.id)')" "greedy is deterministic; ids are unique"
# the same prompt as ids, and as a list holding one prompt
pids=$(jv $tmp/t.json 'JSON.stringify(j.tokens)')
post /v1/completions "{\"prompt\": $pids, \"max_tokens\": 8, \"temperature\": 0}" $o > /dev/null
check $o "j.choices[0].text === $greedy_text && j.usage.prompt_tokens === $n_prompt" "prompt as token ids"
post /v1/completions "{\"prompt\": [$pids], \"max_tokens\": 8, \"temperature\": 0}" $o > /dev/null
check $o "j.choices.length === 1 && j.choices[0].text === $greedy_text" "prompt as a list of one id list"
post /v1/completions "{\"prompt\": [\"The capital of France is\", \"Once upon a time\"], \"max_tokens\": 4, \"temperature\": 0}" $o > /dev/null
check $o "j.choices.length === 2 && j.choices[0].index === 0 && j.choices[1].index === 1 && j.usage.completion_tokens === 8 && j.choices[0].text === $greedy_text.slice(0, j.choices[0].text.length)" "a batch of two prompts"
# seeded sampling is reproducible; n choices are indexed and counted
sreq='{"prompt": "Hello", "max_tokens": 6, "temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": 1234, "n": 3}'
post /v1/completions "$sreq" $o > /dev/null
post /v1/completions "$sreq" $tmp/again.json > /dev/null
check $o 'j.choices.length === 3 && j.choices.map(c => c.index).join() === "0,1,2" && j.usage.completion_tokens === 18 && j.usage.prompt_tokens === 1' "n = 3"
check $tmp/again.json "JSON.stringify(j.choices.map(c => c.text)) === $(jv $o 'JSON.stringify(JSON.stringify(j.choices.map(c => c.text)))')" "same seed, same samples"
# ignore_eos and the penalties are accepted
post /v1/completions '{"prompt": "Hello", "max_tokens": 3, "ignore_eos": true, "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.1, "min_p": 0.05}' $o > /dev/null
check $o 'j.usage.completion_tokens === 3' "ignore_eos + penalties"

# logprobs, completions style: token strings, logprobs, alternatives, offsets
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 2}' $o > /dev/null
check $o "j.choices[0].text === $greedy_text" "logprobs do not change the text"
check $o 'const l = j.choices[0].logprobs; l.tokens.length === 8 && l.token_logprobs.length === 8 && l.top_logprobs.length === 8 && l.text_offset.length === 8 && l.token_logprobs.every(x => x <= 0) && l.top_logprobs.every(t => Object.keys(t).length >= 1 && Object.keys(t).length <= 3) && l.text_offset.every((x, i) => i === 0 || x >= l.text_offset[i - 1])' "completion logprobs"
# greedy picks the most likely token: its logprob is the largest alternative
check $o 'const l = j.choices[0].logprobs; l.top_logprobs.every((t, i) => Math.max(...Object.values(t)) <= l.token_logprobs[i] + 1e-4)' "greedy token is the top alternative"

# stop strings: cut at the first occurrence, not included; stop_reason names it
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 0}' $tmp/lp.json > /dev/null
stop=$(jv $tmp/lp.json 'JSON.stringify(j.choices[0].logprobs.tokens.slice(2).find(t => t.trim().length > 0 && !t.includes("\ufffd")) || "")')
if [[ "$stop" != '""' ]]; then
  post /v1/completions "{\"prompt\": \"The capital of France is\", \"max_tokens\": 8, \"temperature\": 0, \"stop\": [\"zzzzzz\", $stop]}" $o > /dev/null
  check $o "j.choices[0].finish_reason === 'stop' && j.choices[0].stop_reason === $stop && j.choices[0].text === $greedy_text.slice(0, $greedy_text.indexOf($stop))" "stop string"
fi
# stop token ids: the text before it, the token counted, stop_reason names the id
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 0, "return_tokens_as_token_ids": true}' $tmp/ids.json > /dev/null
check $tmp/ids.json 'j.choices[0].logprobs.tokens.every(t => /^token_id:[0-9]+$/.test(t))' "return_tokens_as_token_ids"
gen_ids=$(jv $tmp/ids.json 'JSON.stringify(j.choices[0].logprobs.tokens.map(t => +t.slice(9)))')
stop_id=$(jv $tmp/ids.json 'j.choices[0].logprobs.tokens[3].slice(9)')
post /v1/completions "{\"prompt\": \"The capital of France is\", \"max_tokens\": 8, \"temperature\": 0, \"stop_token_ids\": [$stop_id]}" $o > /dev/null
check $o "const k = $gen_ids.indexOf($stop_id); j.choices[0].finish_reason === 'stop' && j.choices[0].stop_reason === $stop_id && j.usage.completion_tokens === k + 1" "stop_token_ids"

# ---- /v1/completions, streaming ----
curl -sN -H 'Content-Type: application/json' -D $tmp/h.txt -o $tmp/s.txt \
  --data-binary '{"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}' \
  "$SERVE_URL/v1/completions" || fail "streaming completion"
grep -qi '^content-type: text/event-stream' $tmp/h.txt || fail "stream content type"
sse_json $tmp/s.txt $o
check $o 'j[j.length - 1] === "[DONE]" && j.slice(0, -1).every(c => c.object === "text_completion" && c.id === j[0].id)' "stream framing"
check $o "j.slice(0, -2).map(c => c.choices[0].text).join('') === $greedy_text" "streamed text equals the whole response"
check $o 'const f = j[j.length - 3].choices[0]; f.finish_reason === "length" && j.slice(0, -3).every(c => c.choices[0].finish_reason === null)' "finish reason on the last chunk only"
check $o "const u = j[j.length - 2]; u.choices.length === 0 && u.usage.prompt_tokens === $n_prompt && u.usage.completion_tokens === 8 && u.usage.total_tokens === $n_prompt + 8" "usage chunk"
check $o 'j.slice(0, -2).every(c => c.usage === null)' "other chunks carry usage: null"
curl -sN -H 'Content-Type: application/json' -o $tmp/s.txt \
  --data-binary '{"prompt": "Hi", "max_tokens": 3, "stream": true, "n": 2}' "$SERVE_URL/v1/completions"
sse_json $tmp/s.txt $o
check $o 'j[j.length - 1] === "[DONE]" && j.filter(c => c !== "[DONE]" && c.choices[0].finish_reason === "length").map(c => c.choices[0].index).sort().join() === "0,1" && !j.some(c => c.usage)' "streaming n = 2 without usage"

# ---- /v1/chat/completions ----
creq="{\"model\": \"tiny\", \"messages\": $msgs, \"max_tokens\": 6, \"temperature\": 0}"
[[ $(post /v1/chat/completions "$creq" $o) == 200 ]] || { cat $o; fail "/v1/chat/completions"; }
check $o 'j.object === "chat.completion" && j.id.startsWith("chatcmpl-") && j.choices[0].message.role === "assistant" && typeof j.choices[0].message.content === "string" && j.choices[0].finish_reason === "length"' "chat shape"
check $o "j.usage.prompt_tokens === $chat_prompt_tokens && j.usage.completion_tokens === 6" "chat usage matches /tokenize of the messages"
chat_text=$(jv $o 'JSON.stringify(j.choices[0].message.content)')
post /v1/chat/completions "{\"messages\": $msgs, \"max_completion_tokens\": 3}" $o > /dev/null
check $o 'j.usage.completion_tokens === 3' "max_completion_tokens"
post /v1/chat/completions "{\"messages\": $msgs, \"max_tokens\": 2, \"chat_template_kwargs\": {\"enable_thinking\": false}}" $o > /dev/null
check $o "j.usage.prompt_tokens > $chat_prompt_tokens" "chat_template_kwargs.enable_thinking"
post /v1/chat/completions "{\"messages\": $msgs, \"max_tokens\": 4, \"temperature\": 0, \"logprobs\": true, \"top_logprobs\": 3}" $o > /dev/null
check $o 'const c = j.choices[0].logprobs.content; c.length === 4 && c.every(t => typeof t.token === "string" && t.logprob <= 0 && Array.isArray(t.bytes) && t.top_logprobs.length === 3 && t.top_logprobs.every(a => typeof a.token === "string" && Array.isArray(a.bytes)))' "chat logprobs"
post /v1/chat/completions "{\"messages\": $msgs, \"max_tokens\": 2, \"n\": 2}" $o > /dev/null
check $o 'j.choices.length === 2 && j.choices[1].index === 1 && j.usage.completion_tokens === 4' "chat n = 2"
curl -sN -H 'Content-Type: application/json' -o $tmp/s.txt --data-binary \
  "{\"messages\": $msgs, \"max_tokens\": 6, \"temperature\": 0, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
  "$SERVE_URL/v1/chat/completions" || fail "streaming chat"
sse_json $tmp/s.txt $o
check $o 'j[0].object === "chat.completion.chunk" && j[0].choices[0].delta.role === "assistant" && j[j.length - 1] === "[DONE]"' "chat stream opens with the role"
check $o "j.slice(0, -2).map(c => c.choices[0].delta.content || '').join('') === $chat_text" "streamed chat equals the whole response"
check $o "j[j.length - 3].choices[0].finish_reason === 'length' && j[j.length - 2].usage.completion_tokens === 6 && j[j.length - 2].usage.prompt_tokens === $chat_prompt_tokens" "chat stream end and usage"

# ---- /metrics ----
curl -s -D $tmp/h.txt -o $tmp/m.txt "$SERVE_URL/metrics" || fail "/metrics"
grep -qi '^content-type: text/plain; version=0.0.4' $tmp/h.txt || fail "/metrics content type"
for name in llmrt_time_to_first_token_seconds llmrt_inter_token_latency_seconds llmrt_e2e_request_latency_seconds \
            llmrt_step_device_busy_seconds llmrt_step_device_idle_seconds; do
  grep -q "^# TYPE $name histogram" $tmp/m.txt || fail "/metrics has no histogram $name"
  grep -q "^${name}_bucket{model_name=\"tiny\",le=\"+Inf\"} [1-9]" $tmp/m.txt || fail "/metrics: $name observed nothing"
  [[ $(awk -v k="${name}_count{model_name=\"tiny\"}" '$1 == k {print $2}' $tmp/m.txt) == $(awk -v k="${name}_bucket{model_name=\"tiny\",le=\"+Inf\"}" '$1 == k {print $2}' $tmp/m.txt) ]] || fail "$name: +Inf bucket != count"
done
for name in llmrt_num_requests_running llmrt_num_requests_waiting llmrt_kv_cache_usage_perc llmrt_kv_cache_blocks_used; do
  grep -q "^# TYPE $name gauge" $tmp/m.txt || fail "/metrics has no gauge $name"
done
grep -q '^llmrt_memory_path_info{model_name="tiny",plugin="pinned",path="[a-z]*",fallback="\(true\|false\)"} 1$' $tmp/m.txt || { grep memory_path $tmp/m.txt; fail "memory path info metric"; }
grep -q '^llmrt_http_requests_total{model_name="tiny",route="/v1/completions",status="200"} [1-9]' $tmp/m.txt || fail "http request counter"
grep -q '^llmrt_requests_finished_total{model_name="tiny",finish_reason="length"} [1-9]' $tmp/m.txt || fail "finish reason counter"
! grep -v '^#' $tmp/m.txt | grep -v '{model_name="tiny"' | grep -q . || { grep -v '^#' $tmp/m.txt | grep -v '{model_name="tiny"' | head; fail "a series without the model_name label"; }
for name in llmrt_request_queue_time_seconds llmrt_request_prefill_time_seconds llmrt_request_decode_time_seconds \
            llmrt_request_inference_time_seconds llmrt_iteration_tokens_total; do
  grep -q "^# TYPE $name histogram" $tmp/m.txt || fail "/metrics has no histogram $name"
  [[ $(awk -v k="${name}_count{model_name=\"tiny\"}" '$1 == k {print $2}' $tmp/m.txt) -gt 0 ]] || fail "/metrics: $name observed nothing"
done
for name in process_resident_memory_bytes process_virtual_memory_bytes process_cpu_seconds_total process_start_time_seconds process_open_fds; do
  grep -q "^$name{model_name=\"tiny\"} [0-9]" $tmp/m.txt || fail "/metrics has no $name"
done
# bytes over the bus: the step records' inputs and outputs (no offload on the cpu backend)
for name in llmrt_bus_bytes_total llmrt_offload_bytes_total; do
  grep -q "^# TYPE $name counter" $tmp/m.txt || fail "/metrics has no counter $name"
done
for name in llmrt_step_bus_bytes llmrt_step_offload_bytes llmrt_bus_gbps llmrt_offload_layers llmrt_offload_weight_bytes; do
  grep -q "^# TYPE $name gauge" $tmp/m.txt || fail "/metrics has no gauge $name"
  grep -q "^$name{model_name=\"tiny\"} [0-9]" $tmp/m.txt || fail "/metrics has no value of $name"
done
for name in llmrt_offload_bytes_total llmrt_step_offload_bytes llmrt_offload_layers llmrt_offload_weight_bytes; do
  [[ $(awk -v k="$name{model_name=\"tiny\"}" '$1 == k {print $2}' $tmp/m.txt) == 0 ]] || fail "$name not 0 without offload"
done
wait_metric llmrt_kv_cache_blocks_used 0 "KV blocks still held after every request finished"
g0=$(metric llmrt_generation_tokens_total)
post /v1/completions '{"prompt": "Hello", "max_tokens": 5}' $o > /dev/null
[[ $(metric llmrt_generation_tokens_total) == $((g0 + 5)) ]] || fail "generation token counter did not grow by 5"

# ---- malformed requests: the right status and an OpenAI error object, and still serving ----
bad() { # STATUS PATH BODY WHAT [EXPR]
  local code
  code=$(post "$2" "$3" $o)
  [[ "$code" == "$1" ]] || { cat $o; echo; fail "$4: status $code, expected $1"; }
  check $o 'typeof j.error === "object" && typeof j.error.message === "string" && j.error.message.length > 0 && typeof j.error.type === "string" && "param" in j.error && "code" in j.error' "$4: error object"
  [[ -z "${5:-}" ]] || check $o "$5" "$4"
}
bad 400 /v1/completions '{"prompt": "Hi", ' "truncated JSON" 'j.error.code === "invalid_json" && j.error.type === "invalid_request_error"'
bad 400 /v1/completions '[1, 2]' "body not an object"
bad 400 /v1/completions '' "empty body"
bad 400 /v1/completions '{"max_tokens": 3}' "missing prompt" 'j.error.param === "prompt"'
bad 400 /v1/completions '{"prompt": 5}' "prompt of the wrong type" 'j.error.param === "prompt"'
bad 400 /v1/completions '{"prompt": ""}' "empty prompt" 'j.error.param === "prompt"'
bad 400 /v1/completions '{"prompt": "Hi", "max_tokens": "8"}' "max_tokens as a string" 'j.error.param === "max_tokens" && j.error.message.includes("integer")'
bad 400 /v1/completions '{"prompt": "Hi", "max_tokens": -5}' "negative max_tokens" 'j.error.param === "max_tokens" && j.error.message.includes("-5")'
bad 400 /v1/completions '{"prompt": "Hi", "max_tokens": 0}' "zero max_tokens" 'j.error.param === "max_tokens"'
bad 400 /v1/completions '{"prompt": "Hi", "temperature": "hot"}' "temperature as a string" 'j.error.param === "temperature"'
bad 400 /v1/completions '{"prompt": "Hi", "temperature": -1}' "negative temperature" 'j.error.param === "temperature"'
bad 400 /v1/completions '{"prompt": "Hi", "top_p": 1.5}' "top_p > 1" 'j.error.param === "top_p"'
bad 400 /v1/completions '{"prompt": "Hi", "n": 0}' "n = 0" 'j.error.param === "n"'
bad 400 /v1/completions '{"prompt": "Hi", "stream": "yes"}' "stream as a string" 'j.error.param === "stream"'
bad 400 /v1/completions '{"prompt": "Hi", "stop": [1]}' "stop of the wrong type" 'j.error.param === "stop"'
bad 400 /v1/completions '{"prompt": "Hi", "logprobs": 21}' "logprobs > 20" 'j.error.param === "logprobs"'
bad 400 /v1/completions '{"prompt": "Hi", "echo": true}' "echo" 'j.error.param === "echo"'
bad 400 /v1/completions '{"prompt": "Hi", "stream_options": {"include_usage": true}}' "stream_options without stream" 'j.error.param === "stream_options"'
bad 400 /v1/completions '{"prompt": [999999]}' "token id out of range" 'j.error.param === "prompt" && j.error.message.includes("999999")'
bad 404 /v1/completions '{"model": "gpt-4", "prompt": "Hi"}' "unknown model" 'j.error.code === "model_not_found" && j.error.param === "model" && j.error.message.includes("gpt-4")'
long=$(node -e 'console.log(JSON.stringify(Array(1100).fill(9707)))')
bad 400 /v1/completions "{\"prompt\": $long}" "prompt longer than max_model_len" 'j.error.message.includes("1024") && j.error.message.includes("1100")'
long=$(node -e 'console.log(JSON.stringify(Array(1000).fill(9707)))')
bad 400 /v1/completions "{\"prompt\": $long, \"max_tokens\": 100}" "prompt + max_tokens beyond max_model_len" 'j.error.param === "max_tokens" && j.error.message.includes("1100") && j.error.message.includes("1024")'
bad 400 /v1/chat/completions '{"messages": "hi"}' "messages of the wrong type" 'j.error.param === "messages"'
bad 400 /v1/chat/completions '{"messages": []}' "no messages" 'j.error.param === "messages"'
bad 400 /v1/chat/completions '{"messages": [{"role": 5, "content": "x"}]}' "role of the wrong type" 'j.error.param.startsWith("messages")'
bad 400 /v1/chat/completions '{"messages": [{"role": "wizard", "content": "x"}]}' "unknown role" 'j.error.param === "messages"'
bad 400 /v1/chat/completions "{\"messages\": $msgs, \"top_logprobs\": 2}" "top_logprobs without logprobs" 'j.error.param === "top_logprobs"'
bad 400 /v1/chat/completions "{\"messages\": $msgs, \"chat_template_kwargs\": {\"enable_thinking\": \"no\"}}" "enable_thinking of the wrong type"
bad 400 /detokenize '{"tokens": [1, "a"]}' "detokenize with a string id" 'j.error.param === "tokens"'
bad 400 /tokenize '{}' "tokenize with nothing"
# routes and methods
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/v1/nope") == 404 ]] || fail "unknown route must be 404"
check $o 'j.error.code === "not_found"' "404 error object"
[[ $(curl -s -o $o -D $tmp/h.txt -w '%{http_code}' "$SERVE_URL/v1/completions") == 405 ]] || fail "GET /v1/completions must be 405"
grep -qi '^allow: POST' $tmp/h.txt || fail "405 without an Allow header"
check $o 'typeof j.error.message === "string"' "405 error object"
[[ $(post /health '{}' $o) == 405 ]] || fail "POST /health must be 405"
# a body over server.max_body_bytes (1 MiB): with Content-Length, and chunked
head -c 2000000 /dev/zero | tr '\0' 'a' > $tmp/big.txt
[[ $(curl -s -o $o -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @$tmp/big.txt "$SERVE_URL/v1/completions") == 413 ]] || fail "huge body must be 413"
check $o 'j.error.code === "request_too_large" && j.error.message.includes("1048576")' "413 error object"
[[ $(curl -s -o $o -w '%{http_code}' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @$tmp/big.txt "$SERVE_URL/v1/completions") == 413 ]] || fail "huge chunked body must be 413"
check $o 'j.error.code === "request_too_large"' "chunked 413 error object"
# still serving, with the same greedy answer
[[ $(post /v1/completions "$req" $o) == 200 ]] || fail "server stopped serving after bad requests"
check $o "j.choices[0].text === $greedy_text" "same answer after bad requests"
grep -q 'serve: prompt [0-9.]* tok/s, generation [0-9.]* tok/s, running [0-9]*, waiting [0-9]*, KV cache [0-9.]*% ([0-9]*/[0-9]* blocks).*memory path' "$SERVE_LOG.err" ||
  { tail "$SERVE_LOG.err"; fail "no periodic throughput log line"; }
serve_stop

# ---- API key; queue limit ----
serve_start auth "$tmp/tiny" --set server.api_key=sekrit --set server.max_queue=2 --set server.served_model_name=tiny-chat
[[ $(post /v1/completions '{"prompt": "Hi", "max_tokens": 1}' $o) == 401 ]] || fail "no API key must be 401"
check $o 'j.error.code === "invalid_api_key" && j.error.message.includes("Authorization")' "401 error object"
[[ $(post /v1/completions '{"prompt": "Hi", "max_tokens": 1}' $o -H 'Authorization: Bearer wrong') == 401 ]] || fail "wrong API key must be 401"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/v1/models") == 401 ]] || fail "/v1/models without the key must be 401"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/health") == 200 ]] || fail "/health needs no key"
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/metrics") == 200 ]] || fail "/metrics needs no key"
[[ $(post /v1/completions '{"model": "tiny-chat", "prompt": "Hi", "max_tokens": 1}' $o -H 'Authorization: Bearer sekrit') == 200 ]] || { cat $o; fail "right API key and served_model_name"; }
check $o 'j.model === "tiny-chat"' "served_model_name in responses"
[[ $(post /v1/completions '{"prompt": "Hi", "max_tokens": 1, "n": 3}' $o -H 'Authorization: Bearer sekrit') == 400 ]] || fail "n over server.max_queue can never fit: 400, not 503"
check $o 'j.error.param === "n" && j.error.message.includes("max_queue") && j.error.message.includes("3")' "n over max_queue: 400 error object"
[[ $(post /v1/completions '{"prompt": "Hi", "max_tokens": 1, "n": 2}' $o -H 'Authorization: Bearer sekrit') == 200 ]] || fail "n within server.max_queue"
serve_stop
! grep -q "sekrit" "$SERVE_LOG.out" "$SERVE_LOG.err" || fail "the API key is in the server's log"
echo "ok: serve"
