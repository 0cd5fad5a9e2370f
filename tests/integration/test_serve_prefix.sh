#!/usr/bin/env bash
# Prefix caching through `llmrt serve` (tiny model, real Qwen3 tokenizer, CPU backend): a
# chat that shares a long system prompt with earlier ones reports the cached prompt tokens
# in usage.prompt_tokens_details.cached_tokens (whole responses and the stream's usage
# chunk), n > 1 counts its prompt once, /metrics counts the queries and hits exactly and
# shows the cached blocks, the periodic log line gives the hit rate — and every text equals
# that of a server with cache.prefix_caching=off, which reports 0 cached tokens.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"

serve_model "$tmp/tiny"
sys=$(printf 'You are a careful assistant. Rule %d: answer briefly and politely. ' $(seq 1 30))
msgs() { echo "[{\"role\": \"system\", \"content\": \"$sys\"}, {\"role\": \"user\", \"content\": \"$1\"}]"; }

# run TAG SETS...: the same requests against a server; results in $tmp/TAG.*
run() {
  local tag=$1; shift
  serve_start "$tag" "$tmp/tiny" --set cache.max_model_len=2048 --set server.log_interval_s=0.2 "$@"
  post /v1/chat/completions "{\"messages\": $(msgs 'What is the capital of France?'), \"max_tokens\": 8, \"temperature\": 0, \"logprobs\": true, \"top_logprobs\": 3}" \
    "$tmp/$tag.1" > /dev/null
  post /v1/chat/completions "{\"messages\": $(msgs 'What is the capital of France?'), \"max_tokens\": 8, \"temperature\": 0, \"logprobs\": true, \"top_logprobs\": 3}" \
    "$tmp/$tag.2" > /dev/null
  post /v1/chat/completions "{\"messages\": $(msgs 'Name a large river.'), \"max_tokens\": 8, \"temperature\": 0, \"logprobs\": true, \"top_logprobs\": 3, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
    "$tmp/$tag.3.sse" > /dev/null
  sse_json "$tmp/$tag.3.sse" "$tmp/$tag.3"
  post /v1/chat/completions "{\"messages\": $(msgs 'Name a tall mountain.'), \"max_tokens\": 8, \"temperature\": 0, \"n\": 2, \"logprobs\": true, \"top_logprobs\": 3}" \
    "$tmp/$tag.4" > /dev/null
  post /tokenize "{\"messages\": $(msgs 'What is the capital of France?')}" "$tmp/$tag.t1" > /dev/null
  post /tokenize "{\"messages\": $(msgs 'Name a large river.')}" "$tmp/$tag.t3" > /dev/null
  post /tokenize "{\"messages\": $(msgs 'Name a tall mountain.')}" "$tmp/$tag.t4" > /dev/null
  sleep 0.6 # a log line after the last request
  curl -s "$SERVE_URL/metrics" > "$tmp/$tag.metrics"
  serve_stop
  cp "$SERVE_LOG.err" "$tmp/$tag.log"
}
run on
run off --set cache.prefix_caching=off

n1=$(jv "$tmp/on.t1" 'j.count'); n3=$(jv "$tmp/on.t3" 'j.count'); n4=$(jv "$tmp/on.t4" 'j.count')
(( n1 > 300 )) || fail "the shared system prompt is too short to test anything ($n1 tokens)"
# the system prompt and the chat template's start are shared: whole 16-token blocks of it
shared=$(node -e '
  const fs = require("fs");
  const a = JSON.parse(fs.readFileSync(process.argv[1])).tokens, b = JSON.parse(fs.readFileSync(process.argv[2])).tokens;
  let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++;
  console.log(i);' "$tmp/on.t1" "$tmp/on.t3")
blocks() { echo $(( $1 / 16 * 16 )); }
want2=$(blocks $((n1 - 1)))
want3=$(blocks "$shared"); (( want3 > $(blocks $((n3 - 1))) )) && want3=$(blocks $((n3 - 1)))
(( want3 > 256 )) || fail "requests 1 and 3 share only $shared tokens"

check "$tmp/on.1" "j.usage.prompt_tokens === $n1 && j.usage.prompt_tokens_details.cached_tokens === 0" "first request: nothing cached"
check "$tmp/on.2" "j.usage.prompt_tokens_details.cached_tokens === $want2" "the same chat again: all whole blocks before the last token cached"
check "$tmp/on.3" "const u = j[j.length - 2].usage; u.prompt_tokens === $n3 && u.prompt_tokens_details.cached_tokens === $want3" "stream usage chunk: the shared system prompt cached"
check "$tmp/on.4" "j.choices.length === 2 && j.usage.prompt_tokens === $n4 && j.usage.prompt_tokens_details.cached_tokens >= $want3 && j.usage.prompt_tokens_details.cached_tokens < $n4" "n = 2: the prompt's cached tokens counted once"
for k in 1 2 4; do
  check "$tmp/off.$k" "j.usage.prompt_tokens_details.cached_tokens === 0" "caching off: request $k reports 0 cached"
done
check "$tmp/off.3" "j[j.length - 2].usage.prompt_tokens_details.cached_tokens === 0" "caching off: stream usage 0 cached"

# the same tokens and log-probabilities either way (on the CPU backend the KV a request
# finds cached is bit for bit the KV it would have computed)
for k in 1 2 4; do
  a=$(jv "$tmp/on.$k" 'JSON.stringify(j.choices.map(c => [c.message.content, c.logprobs]))')
  b=$(jv "$tmp/off.$k" 'JSON.stringify(j.choices.map(c => [c.message.content, c.logprobs]))')
  [[ "$a" == "$b" ]] || fail "request $k: on $a, off $b"
done
# (chunks may group tokens differently: compare the text and the tokens, not the chunks)
stream_tokens='JSON.stringify([j.slice(1, -2).map(c => c.choices[0].delta.content || "").join(""),
                                j.slice(1, -2).flatMap(c => c.choices[0].logprobs ? c.choices[0].logprobs.content : [])])'
a=$(jv "$tmp/on.3" "$stream_tokens")
b=$(jv "$tmp/off.3" "$stream_tokens")
[[ "$a" == "$b" ]] || fail "stream: on $a, off $b"
a=$(jv "$tmp/on.1" 'JSON.stringify(j.choices[0].logprobs)'); b=$(jv "$tmp/on.2" 'JSON.stringify(j.choices[0].logprobs)')
[[ "$a" == "$b" ]] || fail "greedy: the cached repeat differs from the first: $b vs $a"
echo "ok: cached_tokens in usage (whole, stream, n = 2); the same tokens and logprobs with caching on and off"

# /metrics: queries are the prompt tokens of every admitted sequence (n = 2: two), hits the
# cached tokens of each
m() { awk -v k="$2" '$1 == k || index($1, k "{") == 1 { print $2 }' "$1"; }
cached4=$(jv "$tmp/on.4" 'j.usage.prompt_tokens_details.cached_tokens')
q=$(m "$tmp/on.metrics" llmrt_prefix_cache_queries_total); h=$(m "$tmp/on.metrics" llmrt_prefix_cache_hits_total)
[[ "$q" == $((n1 + n1 + n3 + 2 * n4)) ]] || fail "llmrt_prefix_cache_queries_total $q, expected $((n1 + n1 + n3 + 2 * n4))"
[[ "$h" == $((want2 + want3 + 2 * cached4)) ]] || fail "llmrt_prefix_cache_hits_total $h, expected $((want2 + want3 + 2 * cached4))"
b=$(m "$tmp/on.metrics" llmrt_prefix_cache_blocks)
[[ -n "$b" && "$b" -ge $((n1 / 16)) ]] || fail "llmrt_prefix_cache_blocks '$b'"
[[ $(m "$tmp/on.metrics" llmrt_prefix_caching_enabled) == 1 ]] || fail "llmrt_prefix_caching_enabled on"
[[ $(m "$tmp/on.metrics" llmrt_prefix_cache_evictions_total) == 0 ]] || fail "evictions in a roomy cache"
[[ $(m "$tmp/off.metrics" llmrt_prefix_caching_enabled) == 0 ]] || fail "llmrt_prefix_caching_enabled off"
[[ $(m "$tmp/off.metrics" llmrt_prefix_cache_hits_total) == 0 ]] || fail "hits with caching off"
grep -q "prefix cache hit rate [0-9.]*%" "$tmp/on.log" || { cat "$tmp/on.log"; fail "no hit rate in the log line"; }
grep -q "prefix cache hit rate" "$tmp/off.log" && fail "a hit rate in the log line with caching off"
echo "ok: /metrics counts prefix-cache queries and hits exactly; the log line gives the hit rate"
