#!/usr/bin/env bash
# The headline metric of `llmrt serve` counts only time when work was waiting: a server left
# without requests for a few seconds must not report that pause as device idle time, neither
# in /metrics (llmrt_step_device_idle_seconds) nor in its periodic log line ("idle X ms per
# step"). Before the fix, 3 s between two requests showed up as ~3 s of idle in the first
# step of the second one (an idle server once reported 26 s without requests as "idle 497 ms
# per step").
set -uo pipefail
fail() { echo "FAIL: $*"; [[ -n "${SERVE_LOG:-}" ]] && tail -20 "$SERVE_LOG.err"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"
export LLMRT_RUNTIME_BACKEND=cpu

serve_model "$tmp/tiny"
serve_start idle "$tmp/tiny" --set cache.max_model_len=1024 --set server.log_interval_s=0.5
o=$tmp/o.json
req='{"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}'
[[ $(post /v1/completions "$req" $o) == 200 ]] || { cat $o; fail "first request"; }
sleep 3 # no requests: the engine has no work
[[ $(post /v1/completions "$req" $o) == 200 ]] || { cat $o; fail "second request"; }
sleep 1 # a log line for the interval of the second request

curl -s -o $tmp/m.txt "$SERVE_URL/metrics" || fail "/metrics"
sum=$(awk '$1 ~ /^llmrt_step_device_idle_seconds_sum([{]|$)/ {print $2}' $tmp/m.txt)
count=$(awk '$1 ~ /^llmrt_step_device_idle_seconds_count([{]|$)/ {print $2}' $tmp/m.txt)
[[ -n "$sum" && -n "$count" && "$count" -ge 16 ]] || fail "idle histogram: sum '$sum', count '$count' (16 steps expected)"
awk -v s="$sum" 'BEGIN { exit !(s < 1.0) }' ||
  fail "/metrics: $sum s of device idle time over $count steps, with a 3 s pause without requests"
echo "metrics: idle $sum s over $count steps"

# every log line's per-step idle: well below the pause
grep -o 'idle [0-9.]* ms per step' "$SERVE_LOG.err" > $tmp/idle.txt || fail "no log line with per-step idle time"
cat $tmp/idle.txt
awk '{ if ($2 >= 200) bad = 1 } END { exit bad }' $tmp/idle.txt ||
  fail "a log line reports the pause between requests as idle time"
serve_stop
echo "ok: serve idle time"
