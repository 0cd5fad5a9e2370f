# lib.sh — shared by tests/integration/test_serve*.sh (sourced): a tiny model that has the
# real Qwen3 tokenizer, starting and stopping `llmrt serve` on a free loopback port, and
# JSON checks through node (tests/serve/jv.cjs).
#
# The model: `llmrt mkmodel --preset tiny` has a 512-token vocabulary, too small for the
# real Qwen3 tokenizer (151,669 tokens, ids up to 151,668). So the tests build the model from
# scripts/tiny-qwen3.config.json — the tiny preset's config.json with vocab_size 151936
# (Qwen3's padded size) and Qwen3's special ids (bos/eos 151643/151645), the same demo
# checkpoint scripts/run.sh makes: 64 hidden × 151,936 rows is still only ~19 MB (embeddings
# tied to lm_head), and every id the tokenizer can produce is a valid model id. Weights are
# random, so generated text is gibberish but deterministic under greedy sampling; eos almost
# never comes, so requests run to max_tokens, which makes usage counts exact.
#
# Needs: $LLMRT, $LLMRT_SOURCE_DIR, and a `tmp` folder and `fail` function in the caller.

SERVE_JV="$LLMRT_SOURCE_DIR/tests/serve/jv.cjs"

# jv FILE EXPR: evaluate a JS expression over the JSON in FILE (the document is `j`).
jv() { node "$SERVE_JV" "$@"; }
# check FILE EXPR WHAT: fail unless EXPR is true for FILE.
check() {
  local out
  out=$(node "$SERVE_JV" "$1" "$2" 2>&1) || { echo "--- $1:"; head -c 2000 "$1"; echo; fail "$3 ($2 → $out)"; }
  [[ "$out" == true ]] || { echo "--- $1:"; head -c 2000 "$1"; echo; fail "$3 ($2 → $out)"; }
}

# serve_model DIR: write the tiny model with the real tokenizer into DIR; exit 77 (skip)
# when the tokenizer cannot be fetched.
serve_model() {
  local dir=$1 tok
  if ! tok=$("$LLMRT_SOURCE_DIR/tools/fetch-qwen3-tokenizer.sh" 2> "$tmp/fetch.err"); then
    echo "SKIP: the Qwen3 tokenizer could not be fetched (tools/fetch-qwen3-tokenizer.sh):"
    cat "$tmp/fetch.err"
    exit 77
  fi
  "$LLMRT" mkmodel --config "$LLMRT_SOURCE_DIR/scripts/tiny-qwen3.config.json" -q -o "$dir" > "$tmp/mk.log" 2>&1 ||
    { cat "$tmp/mk.log"; fail "mkmodel --config scripts/tiny-qwen3.config.json"; }
  cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$dir/" || fail "copying the tokenizer"
}

# serve_start NAME MODEL [llmrt serve options...]: start a server on a free port; sets
# SERVE_PID and SERVE_URL and waits until /health answers 200. Logs: $tmp/NAME.{out,err}.
serve_start() {
  local name=$1 model=$2 i code
  shift 2
  SERVE_LOG="$tmp/$name"
  "$LLMRT" serve --model "$model" --port 0 "$@" > "$SERVE_LOG.out" 2> "$SERVE_LOG.err" &
  SERVE_PID=$!
  for ((i = 0; i < 300; i++)); do
    grep -q '^listening on http://' "$SERVE_LOG.out" 2>/dev/null && break
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$SERVE_LOG.err"; fail "$name: llmrt serve exited before listening"; }
    sleep 0.1
  done
  SERVE_URL=$(sed -n 's/^listening on //p' "$SERVE_LOG.out")
  [[ -n "$SERVE_URL" ]] || { cat "$SERVE_LOG.err"; fail "$name: no 'listening on' line on stdout"; }
  for ((i = 0; i < 600; i++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$SERVE_URL/health")
    [[ "$code" == 200 ]] && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$SERVE_LOG.err"; fail "$name: llmrt serve exited while loading"; }
    sleep 0.1
  done
  cat "$SERVE_LOG.err"
  fail "$name: /health never answered 200 (last: $code)"
}

# serve_stop: SIGTERM, then the exit status must be 0 within 30 s.
serve_stop() {
  local i rc
  kill -TERM "$SERVE_PID" 2>/dev/null
  for ((i = 0; i < 300; i++)); do
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -KILL "$SERVE_PID"
    fail "llmrt serve did not exit within 30 s of SIGTERM"
  fi
  wait "$SERVE_PID"; rc=$?
  [[ $rc -eq 0 ]] || { tail -20 "$SERVE_LOG.err"; fail "llmrt serve exited $rc after SIGTERM, expected 0"; }
  SERVE_PID=
}

# post PATH BODY OUT [curl options...]: POST JSON; prints the HTTP status.
post() {
  local path=$1 body=$2 out=$3
  shift 3
  curl -s -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' "$@" \
    --data-binary "$body" "$SERVE_URL$path"
}

# metric NAME{LABELS}: the value of one sample line of /metrics (empty when absent). Every
# series carries model_name first; it is left out of the comparison (NAME alone matches
# NAME{model_name="..."}).
metric() {
  curl -s "$SERVE_URL/metrics" | awk -v k="$1" '{ n = $1; sub(/model_name="[^"]*",?/, "", n); sub(/\{\}$/, "", n); if (n == k) print $2 }'
}

# wait_metric NAME VALUE WHAT: wait (up to 20 s) until /metrics shows NAME = VALUE (the
# engine publishes its gauges at the end of a step, just after the final token events).
wait_metric() {
  local i v
  for ((i = 0; i < 200; i++)); do
    v=$(metric "$1")
    [[ "$v" == "$2" ]] && return 0
    sleep 0.1
  done
  fail "$3 ($1 is $v, expected $2)"
}

# sse_json FILE OUT: the data: payloads of an SSE stream as a JSON array (the final
# "[DONE]" kept as the string "[DONE]"); fails on any line that is not SSE.
sse_json() {
  node -e '
    const fs = require("fs");
    const text = fs.readFileSync(process.argv[1], "utf8");
    const events = text.split("\n\n");
    if (events.pop() !== "") throw new Error("stream does not end with a blank line");
    const out = events.map(e => {
      if (!e.startsWith("data: ") || e.includes("\n")) throw new Error("not an SSE data event: " + JSON.stringify(e));
      const d = e.slice(6);
      return d === "[DONE]" ? d : JSON.parse(d);
    });
    fs.writeFileSync(process.argv[2], JSON.stringify(out));
  ' "$1" "$2" || { head -c 2000 "$1"; fail "$1 is not a well-formed event stream"; }
}
