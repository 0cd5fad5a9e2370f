#!/usr/bin/env bash
# What operators meet in `llmrt serve`, on the tiny model with the real Qwen3 tokenizer:
#  - `llmrt serve MODEL_DIR` and the short flags of the [server] keys (an explicit --set
#    wins over them); a model folder that does not exist fails before "listening";
#  - log lines carry timestamps; one access-log line per request (method, path, status,
#    duration, tokens, client, request id); X-Request-Id honoured and returned;
#    server.log_format = json writes one JSON object per line; the load progress shows in a
#    log file too, as plain lines without control codes;
#  - binding a non-loopback address without server.api_key warns;
#  - CORS (server.cors_origins): preflights answered, allowed origins echoed, others not;
#  - server.metrics_prefix = vllm: every series that vLLM's Grafana dashboard queries is
#    there under vLLM's name with the model_name label (the dashboard's model selector reads
#    model_name from {__name__=~"vllm:.*"}), and the gauges routers read.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"
o=$tmp/o.json
serve_model "$tmp/tiny"

# ---- a model folder that does not exist: an error before anything listens ----
timeout 20 "$LLMRT" serve "$tmp/nope" --port 0 > "$tmp/nope.out" 2> "$tmp/nope.err"; rc=$?
[[ $rc -eq 1 ]] || fail "serve of a missing folder: exit $rc, expected 1"
! grep -q listening "$tmp/nope.out" || fail "serve of a missing folder printed 'listening'"
grep -q "model.path = $tmp/nope" "$tmp/nope.err" || { cat "$tmp/nope.err"; fail "the missing folder is not named"; }
mkdir "$tmp/empty"
timeout 20 "$LLMRT" serve --model "$tmp/empty" --port 0 > "$tmp/nope.out" 2> "$tmp/nope.err"; rc=$?
[[ $rc -eq 1 ]] && ! grep -q listening "$tmp/nope.out" && grep -q "has no readable config.json" "$tmp/nope.err" ||
  { cat "$tmp/nope.err"; fail "serve of a folder without config.json: exit $rc"; }

# ---- serve MODEL_DIR, short flags; logs, access log, request ids, progress ----
# (started by hand: lib.sh's serve_start passes --model)
"$LLMRT" serve "$tmp/tiny" --port 0 --served-model-name ops --api-key k3y \
  --set server.served_model_name=ops-set > "$tmp/a.out" 2> "$tmp/a.err" &
SERVE_PID=$!
SERVE_LOG=$tmp/a
for ((i = 0; i < 300; i++)); do grep -q '^listening on http://' "$tmp/a.out" && break; sleep 0.1; done
SERVE_URL=$(sed -n 's/^listening on //p' "$tmp/a.out")
[[ -n "$SERVE_URL" ]] || { cat "$tmp/a.err"; fail "serve MODEL_DIR did not listen"; }
for ((i = 0; i < 300; i++)); do [[ $(curl -s -o /dev/null -w '%{http_code}' "$SERVE_URL/health") == 200 ]] && break; sleep 0.1; done
A=(-H 'Authorization: Bearer k3y')
[[ $(curl -s -o $o -w '%{http_code}' "$SERVE_URL/v1/models") == 401 ]] || fail "--api-key is not required"
curl -s "${A[@]}" -o $o "$SERVE_URL/v1/models"
check $o 'j.data[0].id === "ops-set"' "an explicit --set must win over --served-model-name"
grep -q "^[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]\{3\}Z llmrt: \[info\] serve: ready" "$tmp/a.err" ||
  { head -5 "$tmp/a.err"; fail "log lines carry no timestamp"; }
grep -q "^loading.*tensors" "$tmp/a.err" || { head -5 "$tmp/a.err"; fail "no load progress when stderr is a file"; }
! grep -q $'\r\|\033' "$tmp/a.err" || fail "control codes in a log file"
code=$(curl -s -D "$tmp/h" -o $o -w '%{http_code}' "${A[@]}" -H 'X-Request-Id: my-req-42' -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "Hello", "max_tokens": 3}' "$SERVE_URL/v1/completions")
[[ $code == 200 ]] || fail "completion: $code"
grep -qi '^x-request-id: my-req-42' "$tmp/h" || fail "X-Request-Id is not returned"
curl -s -D "$tmp/h" -o /dev/null "$SERVE_URL/health"
grep -qi '^x-request-id: req-[0-9a-f]\{16\}' "$tmp/h" || fail "no request id is made up when the client sends none"
curl -s -o /dev/null -H 'X-Request-Id: bad id"' "$SERVE_URL/health"
sleep 0.3
grep -q 'access: POST /v1/completions 200 [0-9.]* ms method=POST path=/v1/completions route=/v1/completions status=200 duration_ms=[0-9.]* prompt_tokens=1 completion_tokens=3 client=127.0.0.1 request_id=my-req-42 outcome=completed' "$tmp/a.err" ||
  { grep access "$tmp/a.err"; fail "the access-log line of a completion"; }
grep -q 'access: GET /v1/models 401 .*request_id=req-' "$tmp/a.err" || fail "a 401 has no access-log line"
! grep -q 'bad id' "$tmp/a.err" || fail "an unsafe X-Request-Id reached the log"
curl -sN "${A[@]}" -o /dev/null -H 'Content-Type: application/json' --data-binary \
  '{"prompt": "Hello", "max_tokens": 4, "stream": true}' "$SERVE_URL/v1/completions"
sleep 0.3
grep -q 'access: POST /v1/completions 200 .*completion_tokens=4 .*outcome=completed' "$tmp/a.err" || fail "a stream's access-log line"
! grep -q "without server.api_key" "$tmp/a.err" || fail "warned about a missing api key on loopback"
serve_stop

# ---- JSON logs; a non-loopback address without an API key; CORS ----
serve_start json "$tmp/tiny" --host 0.0.0.0 --set server.log_format=json --set server.cors_origins='https://a.example, https://b.example'
SERVE_URL=${SERVE_URL/0.0.0.0/127.0.0.1}
post /v1/completions '{"prompt": "Hi", "max_tokens": 2}' $o > /dev/null
curl -s -D "$tmp/h" -o /dev/null -X OPTIONS -H 'Origin: https://b.example' -H 'Access-Control-Request-Method: POST' \
  -H 'Access-Control-Request-Headers: authorization, content-type' "$SERVE_URL/v1/chat/completions"
head -1 "$tmp/h" | grep -q ' 204 ' || { cat "$tmp/h"; fail "a CORS preflight is not answered 204"; }
grep -qi '^access-control-allow-origin: https://b.example' "$tmp/h" && grep -qi '^access-control-allow-methods: POST' "$tmp/h" &&
  grep -qi '^access-control-allow-headers: authorization, content-type' "$tmp/h" && grep -qi '^vary: Origin' "$tmp/h" ||
  { cat "$tmp/h"; fail "the preflight's CORS headers"; }
curl -s -D "$tmp/h" -o /dev/null -H 'Origin: https://a.example' -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "Hi", "max_tokens": 1}' "$SERVE_URL/v1/completions"
grep -qi '^access-control-allow-origin: https://a.example' "$tmp/h" || { cat "$tmp/h"; fail "an allowed origin is not echoed"; }
curl -s -D "$tmp/h" -o /dev/null -H 'Origin: https://evil.example' "$SERVE_URL/v1/models"
! grep -qi '^access-control-allow-origin' "$tmp/h" || fail "an origin outside cors_origins was allowed"
curl -s -D "$tmp/h" -o /dev/null -X OPTIONS -H 'Origin: https://evil.example' "$SERVE_URL/v1/models"
head -1 "$tmp/h" | grep -q ' 204 ' && ! grep -qi '^access-control-allow-origin' "$tmp/h" || fail "a preflight from another origin"
sleep 0.3
node -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").split("\n").filter(l => l.length);
  let access = 0, warned = false, progress = false;
  for (const l of lines) {
    const j = JSON.parse(l); // the load progress too
    if (j.logger === "progress" && /^loading: done/.test(j.message)) progress = true;
    for (const k of ["time", "level", "logger", "message"]) if (typeof j[k] !== "string") throw new Error("no " + k + ": " + l);
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(j.time)) throw new Error("bad time: " + l);
    if (j.logger === "access" && j.path === "/v1/completions" && j.status === 200 && j.method === "POST" &&
        typeof j.duration_ms === "number" && j.prompt_tokens === 1 && /^req-/.test(j.request_id)) access++;
    if (j.level === "warn" && /without server.api_key/.test(j.message)) warned = true;
  }
  if (access < 2) throw new Error("access lines as JSON: " + access);
  if (!warned) throw new Error("no warning for 0.0.0.0 without an api key");
  if (!progress) throw new Error("no load progress line");
' "$SERVE_LOG.err" || { head -20 "$SERVE_LOG.err"; fail "JSON log lines"; }
serve_stop

# ---- server.metrics_prefix = vllm: vLLM's dashboard and routers read their series ----
serve_start vllm "$tmp/tiny" --set server.metrics_prefix=vllm
post /v1/completions '{"prompt": "Hello", "max_tokens": 8}' $o > /dev/null
post /v1/chat/completions '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}' $o > /dev/null
curl -s "$SERVE_URL/metrics" > "$tmp/m.txt"
# the series vLLM's Grafana dashboard (examples/online_serving/prometheus_grafana) queries,
# each filtered by {model_name="$model_name"}, and the gauges load-aware routers poll
for s in vllm:e2e_request_latency_seconds_bucket vllm:e2e_request_latency_seconds_sum vllm:e2e_request_latency_seconds_count \
         vllm:prompt_tokens_total vllm:generation_tokens_total \
         vllm:time_per_output_token_seconds_bucket vllm:time_per_output_token_seconds_sum vllm:time_per_output_token_seconds_count \
         vllm:inter_token_latency_seconds_bucket vllm:num_requests_running vllm:num_requests_waiting \
         vllm:time_to_first_token_seconds_bucket vllm:time_to_first_token_seconds_sum vllm:time_to_first_token_seconds_count \
         vllm:gpu_cache_usage_perc vllm:kv_cache_usage_perc vllm:request_prompt_tokens_bucket vllm:request_generation_tokens_bucket \
         vllm:request_success_total vllm:request_queue_time_seconds_sum vllm:request_prefill_time_seconds_sum \
         vllm:request_decode_time_seconds_sum vllm:request_max_num_generation_tokens_sum vllm:iteration_tokens_total_bucket \
         vllm:request_inference_time_seconds_sum vllm:num_preemptions_total vllm:request_params_n_sum vllm:request_params_max_tokens_sum; do
  grep -q "^$s{model_name=\"tiny\"[,}]" "$tmp/m.txt" || { grep "^${s%%_bucket}" "$tmp/m.txt" | head -3; fail "/metrics (vllm) has no $s{model_name=\"tiny\"}"; }
done
grep -q '^vllm:request_success_total{model_name="tiny",finished_reason="length"} 2$' "$tmp/m.txt" || { grep success "$tmp/m.txt"; fail "vllm:request_success_total by finished_reason"; }
[[ $(awk '$1 == "vllm:generation_tokens_total{model_name=\"tiny\"}" {print $2}' "$tmp/m.txt") == 12 ]] || fail "vllm:generation_tokens_total"
[[ $(awk '$1 == "vllm:request_queue_time_seconds_count{model_name=\"tiny\"}" {print $2}' "$tmp/m.txt") == 2 ]] || fail "queue time observed per request"
! grep -q '^llmrt_num_requests_waiting\|^llmrt_time_to_first_token' "$tmp/m.txt" || fail "series vLLM has also under llmrt_ names"
! grep -v '^#' "$tmp/m.txt" | grep -v '{model_name="tiny"' | grep -q . || fail "a series without model_name"
grep -q '^process_start_time_seconds{model_name="tiny"} [0-9]' "$tmp/m.txt" || fail "process_start_time_seconds"
serve_stop
echo "ok: serve ops"
