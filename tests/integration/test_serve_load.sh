#!/usr/bin/env bash
# `llmrt serve` under concurrency, on the tiny model (CPU backend, free loopback port):
#  - 32 concurrent streaming clients all complete, each with its own exact usage counts,
#    and they share engine steps (continuous batching: far fewer steps than tokens);
#  - a streaming client killed mid-stream, and a non-streaming client that hangs up, are
#    cancelled: no KV-cache blocks stay held (checked on /metrics);
#  - SIGTERM during load: no new connections, every in-flight request completes, exit 0;
#  - a second signal cancels what is still running: the streams end with an error event
#    and [DONE], and the server exits 0.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"

# stream_req I PROMPT MAX_TOKENS: start one streaming completion in the background,
# output in $tmp/c$I.txt; its pid in CLIENT_PID.
stream_req() {
  curl -sN -H 'Content-Type: application/json' -o "$tmp/c$1.txt" --data-binary \
    "{\"prompt\": \"$2\", \"max_tokens\": $3, \"ignore_eos\": true, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
    "$SERVE_URL/v1/completions" &
  CLIENT_PID=$!
}
# wait_chunks FILE N: wait (up to 60 s) until FILE holds at least N data: lines.
wait_chunks() {
  local i
  for ((i = 0; i < 600; i++)); do
    [[ $(grep -c '^data: ' "$1" 2>/dev/null) -ge $2 ]] && return 0
    sleep 0.1
  done
  fail "$1: fewer than $2 chunks after 60 s"
}
# wait_idle WHAT: wait (up to 20 s) until no request runs and no KV block is held.
wait_idle() {
  local i
  for ((i = 0; i < 200; i++)); do
    [[ $(metric llmrt_kv_cache_blocks_used) == 0 && $(metric llmrt_num_requests_running) == 0 &&
       $(metric llmrt_num_requests_waiting) == 0 ]] && return 0
    sleep 0.1
  done
  curl -s "$SERVE_URL/metrics" | grep -E '^llmrt_(kv_cache_blocks_used|num_requests)'
  fail "$1: KV blocks still held or requests still running 20 s later"
}

serve_model "$tmp/tiny"
serve_start load "$tmp/tiny" --set scheduler.max_num_seqs=32 --set server.log_interval_s=1

# ---- 32 concurrent streaming clients ----
N=32
for ((i = 0; i < N; i++)); do
  prompt=$(printf 'word %.0s' $(seq 0 $i))
  post /tokenize "{\"prompt\": \"$prompt\"}" "$tmp/t$i.json" > /dev/null
done
steps0=$(metric llmrt_engine_steps_total)
pids=()
for ((i = 0; i < N; i++)); do
  prompt=$(printf 'word %.0s' $(seq 0 $i))
  stream_req $i "$prompt" $((8 + i % 9))
  pids+=("$CLIENT_PID")
done
for ((i = 0; i < N; i++)); do
  wait "${pids[$i]}" || fail "client $i: curl exited $?"
done
for ((i = 0; i < N; i++)); do
  sse_json "$tmp/c$i.txt" "$tmp/c$i.json"
  n_prompt=$(jv "$tmp/t$i.json" 'j.count')
  check "$tmp/c$i.json" "const u = j[j.length - 2].usage; j[j.length - 1] === '[DONE]' && u.prompt_tokens === $n_prompt && u.completion_tokens === $((8 + i % 9)) && u.total_tokens === $n_prompt + $((8 + i % 9))" "client $i: usage"
  check "$tmp/c$i.json" "j[j.length - 3].choices[0].finish_reason === 'length' && new Set(j.slice(0, -1).map(c => c.id)).size === 1" "client $i: finish and one id"
done
steps=$(( $(metric llmrt_engine_steps_total) - steps0 ))
tokens=0
for ((i = 0; i < N; i++)); do tokens=$((tokens + 8 + i % 9)); done
echo "32 clients: $tokens tokens in $steps steps"
(( steps < tokens / 2 )) || fail "32 concurrent clients took $steps steps for $tokens tokens: they did not share steps"
wait_idle "after 32 clients"

# ---- a streaming client killed mid-stream is cancelled ----
c0=$(metric 'llmrt_requests_finished_total{finish_reason="cancelled"}')
stream_req k "A long story" 3000
kpid=$CLIENT_PID
wait_chunks "$tmp/ck.txt" 3
[[ $(metric llmrt_num_requests_running) == 1 ]] || fail "the long request is not running"
(( $(metric llmrt_kv_cache_blocks_used) > 0 )) || fail "a running request holds no KV blocks"
kill -KILL $kpid
wait $kpid 2>/dev/null
wait_idle "after killing a streaming client"
[[ $(metric 'llmrt_requests_finished_total{finish_reason="cancelled"}') == $((c0 + 1)) ]] || fail "the killed stream was not counted as cancelled"

# ---- a non-streaming client that hangs up is cancelled ----
# (it hangs up once the engine runs the request: a fixed curl -m could give up on a loaded
# machine before the server had read it)
curl -s -o /dev/null -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "A long story", "max_tokens": 3000, "ignore_eos": true}' "$SERVE_URL/v1/completions" &
hpid=$!
wait_metric llmrt_num_requests_running 1 "the non-streaming request did not start"
kill $hpid; wait $hpid 2>/dev/null
wait_idle "after a non-streaming client hung up"
[[ $(metric 'llmrt_requests_finished_total{finish_reason="cancelled"}') == $((c0 + 2)) ]] || fail "the abandoned request was not counted as cancelled"

# ---- SIGTERM during load: in-flight requests complete, new connections are refused ----
pids=()
for ((i = 0; i < 8; i++)); do
  stream_req d$i "Drain test $i" 300
  pids+=("$CLIENT_PID")
done
for ((i = 0; i < 8; i++)); do wait_chunks "$tmp/cd$i.txt" 2; done
kill -TERM "$SERVE_PID"
for ((i = 0; i < 50; i++)); do
  grep -q 'draining' "$SERVE_LOG.err" && break
  sleep 0.1
done
grep -q 'draining [1-8] HTTP request' "$SERVE_LOG.err" || { tail -5 "$SERVE_LOG.err"; fail "no drain message for the requests in flight"; }
curl -s -o /dev/null -m 5 "$SERVE_URL/health"; rc=$?
[[ $rc -eq 7 ]] || fail "a new connection while draining must be refused (curl exit 7), got curl exit $rc"
for ((i = 0; i < 8; i++)); do
  wait "${pids[$i]}" || fail "drain client $i: curl exited $?"
  sse_json "$tmp/cd$i.txt" "$tmp/cd$i.json"
  check "$tmp/cd$i.json" "j[j.length - 1] === '[DONE]' && j[j.length - 2].usage.completion_tokens === 300" "drain client $i completed"
done
for ((i = 0; i < 100; i++)); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SERVE_PID" 2>/dev/null && fail "the server did not exit after draining"
wait "$SERVE_PID"; rc=$?
SERVE_PID=
[[ $rc -eq 0 ]] || fail "exit status $rc after SIGTERM, expected 0"

# ---- a second signal cancels what is still running ----
serve_start abort "$tmp/tiny"
stream_req a0 "Never ending" 3000; a0=$CLIENT_PID
stream_req a1 "Never ending either" 3000; a1=$CLIENT_PID
wait_chunks "$tmp/ca0.txt" 2
wait_chunks "$tmp/ca1.txt" 2
kill -TERM "$SERVE_PID"
sleep 0.5
kill -INT "$SERVE_PID"
for ((i = 0; i < 150; i++)); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SERVE_PID" 2>/dev/null && fail "the server did not exit within 15 s of a second signal"
wait "$SERVE_PID"; rc=$?
SERVE_PID=
[[ $rc -eq 0 ]] || fail "exit status $rc after two signals, expected 0"
wait $a0 $a1
for f in ca0 ca1; do
  sse_json "$tmp/$f.txt" "$tmp/$f.json"
  check "$tmp/$f.json" "j[j.length - 1] === '[DONE]' && j.some(e => e.error && e.error.code === 'cancelled')" "$f: cancelled stream ends with an error event and [DONE]"
done
echo "ok: serve load"
